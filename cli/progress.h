// Where the time of a run goes, for a log that is not a terminal (CI): one timestamped line when a long phase
// starts and one when it ends. On a terminal the verifier's and bench's one-line status (rewritten in place)
// serves instead, and -q silences both.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace dwdeconv::cli {

// True when phase lines should be logged: stderr is not a terminal and the run is not -q.
bool phase_lines_wanted(int verbosity);

// The phases of one model's run, logged at info level as
//   "dwdeconv-rewrite: info: 17:40:01.234 model.onnx: load: started" and "...: load: done in 0.27 s".
// Each start ends the phase before it. Does nothing when constructed disabled. Not shared between threads.
class PhaseLog {
 public:
  PhaseLog(std::string subject, bool enabled);
  ~PhaseLog();
  PhaseLog(const PhaseLog&) = delete;
  PhaseLog& operator=(const PhaseLog&) = delete;

  void start(const std::string& phase);  // ends the open phase first
  void end();                            // ends the open phase, if any
  void fail();                           // ends the open phase, if any, as failed (before the error is logged)

  // A progress callback for runtime_check (verify, bench): each status line it gives starts a phase.
  std::function<void(const std::string&)> callback();

 private:
  std::string subject_;
  bool enabled_;
  std::string open_;  // the phase started and not yet ended; empty when none
  std::chrono::steady_clock::time_point started_;
};

}  // namespace dwdeconv::cli
