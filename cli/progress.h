// Where the time of a run goes. For a log that is not a terminal (CI): a phase that runs a second says so with a
// timestamped line, again at least every 10 s while it runs, and once when it ends; a shorter one is not logged (-v
// shows every phase's start and end). On a terminal a one-line status, rewritten in place, serves instead, with the
// time the step has taken so far; -q silences both.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace dwdeconv::cli {

// True when phase lines should be logged: stderr is not a terminal and the run is not -q.
bool phase_lines_wanted(int verbosity);

// How often a phase that is still running says so.
inline constexpr std::chrono::seconds kHeartbeat{10};
// How long a phase runs before it is logged: the quick start's nine phases each take milliseconds, and eighteen
// lines about them would bury the lines that matter (a non-terminal --verify --bench run logs at most 20 lines).
inline constexpr std::chrono::seconds kQuietBelow{1};

// The phases of one model's run. A phase still running after `quiet` says so at info level,
//   "dwdeconv-rewrite: info: 17:40:01.234 model.onnx: verify: running the original model: running for 1 s",
// again every `heartbeat`, and "...: done in 3.27 s" when it ends; a phase that ends sooner logs its "started" and
// "done in" lines at debug level (-v) only. A phase that fails says "failed after" at info level, however short.
// With `quiet` 0 every phase logs "started" and "done in" at info level.
// Each start ends the phase before it. A counted step ("bench: run 3/10") continues the phase its first count started
// ("bench: run 1..10"): one phase from the first start to the last end; each count is a debug line (-v).
// Does nothing when constructed disabled. Its calls come from one thread; the heartbeat is its own.
class PhaseLog {
 public:
  PhaseLog(std::string subject, bool enabled, std::chrono::milliseconds heartbeat = kHeartbeat,
           std::chrono::milliseconds quiet = kQuietBelow);
  ~PhaseLog();
  PhaseLog(const PhaseLog&) = delete;
  PhaseLog& operator=(const PhaseLog&) = delete;

  void start(const std::string& phase);  // ends the open phase first
  void end();                            // ends the open phase, if any
  void fail();                           // ends the open phase, if any, as failed (before the error is logged)

  // A progress callback for runtime_check (verify, bench): each status line it gives starts a phase.
  std::function<void(const std::string&)> callback();

 private:
  void close(const char* how);  // with mutex_ held
  void beat();

  std::string subject_;
  bool enabled_;
  std::chrono::milliseconds heartbeat_;
  std::chrono::milliseconds quiet_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::string open_;     // the phase started and not yet ended; empty when none
  std::string counted_;  // the open phase's step text before its count ("bench: run"), when it is counted
  std::chrono::steady_clock::time_point started_;
  bool said_ = false;  // the open phase has an info line: its end gets one too
  std::chrono::steady_clock::time_point last_line_;
  std::thread heartbeat_thread_;
};

// The terminal's status line: each set() replaces it, and while a step lasts over a second its elapsed time is added,
// every second. Shared by the runs of a batch.
class StatusLine {
 public:
  StatusLine();
  ~StatusLine();
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  void set(const std::string& line);
  void clear();

 private:
  void tick();
  void draw();  // with mutex_ held

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::string line_;
  std::chrono::steady_clock::time_point since_;
  std::thread ticker_;
};

}  // namespace dwdeconv::cli
