#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <utility>

#include <spdlog/spdlog.h>

namespace dwdeconv::cli {
namespace {

using Clock = std::chrono::steady_clock;

// "17:40:01.234", local wall-clock time, which is what a CI log's own timestamps are compared with.
std::string clock_text() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03lld", local.tm_hour, local.tm_min, local.tm_sec, static_cast<long long>(ms));
  return buf;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A step counted as "TEXT K/N": TEXT and N, or false.
bool counted_step(const std::string& phase, std::string& text, std::string& count, bool& first) {
  const size_t space = phase.rfind(' ');
  const size_t slash = phase.rfind('/');
  if (space == std::string::npos || slash == std::string::npos || slash < space + 2 || slash + 1 == phase.size()) return false;
  for (size_t k = space + 1; k < phase.size(); ++k) {
    if (k != slash && (phase[k] < '0' || phase[k] > '9')) return false;
  }
  text = phase.substr(0, space);
  count = phase.substr(slash + 1);
  first = phase.compare(space + 1, slash - space - 1, "1") == 0;
  return true;
}

}  // namespace

bool phase_lines_wanted(int verbosity) { return verbosity >= 0 && isatty(STDERR_FILENO) == 0; }

PhaseLog::PhaseLog(std::string subject, bool enabled, std::chrono::milliseconds heartbeat, std::chrono::milliseconds quiet)
    : subject_(std::move(subject)), enabled_(enabled), heartbeat_(heartbeat), quiet_(quiet) {
  if (enabled_) heartbeat_thread_ = std::thread([this] { beat(); });
}

PhaseLog::~PhaseLog() {
  end();
  if (!heartbeat_thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  heartbeat_thread_.join();
}

void PhaseLog::start(const std::string& phase) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text, count;
  bool first = false;
  if (counted_step(phase, text, count, first) && !first && !open_.empty() && text == counted_) {
    spdlog::debug("{} {}: {}", clock_text(), subject_, phase);  // the same counted phase goes on
    return;
  }
  close("done in");
  const bool counted = counted_step(phase, text, count, first);
  counted_ = counted ? text : "";
  open_ = counted ? text + " 1.." + count : phase;  // "bench: run 1..10"
  started_ = last_line_ = Clock::now();
  said_ = quiet_.count() <= 0;
  spdlog::log(said_ ? spdlog::level::info : spdlog::level::debug, "{} {}: {}: started", clock_text(), subject_, open_);
  if (counted) spdlog::debug("{} {}: {}", clock_text(), subject_, phase);
  wake_.notify_all();  // the heartbeat may be asleep for a whole heartbeat: this phase is due sooner
}

void PhaseLog::close(const char* how) {
  if (open_.empty()) return;
  const bool failed = std::string(how) != "done in";
  spdlog::log(said_ || failed ? spdlog::level::info : spdlog::level::debug, "{} {}: {}: {} {:.2f} s", clock_text(), subject_, open_, how,
              seconds_since(started_));
  open_.clear();
  counted_.clear();
  said_ = false;
}

void PhaseLog::end() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  close("done in");
}

void PhaseLog::fail() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  close("failed after");
}

void PhaseLog::beat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // The first line of a phase is due when it has run `quiet_`, each next one a heartbeat after the last.
    const auto due = said_ ? last_line_ + heartbeat_ : started_ + quiet_;
    if (!open_.empty() && Clock::now() >= due) {
      spdlog::info("{} {}: {}: running for {:.0f} s", clock_text(), subject_, open_, seconds_since(started_));
      last_line_ = Clock::now();
      said_ = true;
      continue;
    }
    if (open_.empty()) {
      wake_.wait_for(lock, heartbeat_);
    } else {
      wake_.wait_until(lock, due);
    }
  }
}

std::function<void(const std::string&)> PhaseLog::callback() {
  if (!enabled_) return {};
  return [this](const std::string& line) { start(line); };
}

StatusLine::StatusLine() : ticker_([this] { tick(); }) {}

StatusLine::~StatusLine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  ticker_.join();
}

void StatusLine::set(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  line_ = line;
  since_ = Clock::now();
  draw();
}

void StatusLine::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (line_.empty()) return;
  line_.clear();
  std::fprintf(stderr, "\r\033[K");
}

void StatusLine::draw() {
  const double seconds = seconds_since(since_);
  if (seconds >= 1) {
    std::fprintf(stderr, "\r\033[K%s (%.0f s)", line_.c_str(), seconds);
  } else {
    std::fprintf(stderr, "\r\033[K%s", line_.c_str());
  }
}

void StatusLine::tick() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::seconds(1));
    if (!stopping_ && !line_.empty()) draw();
  }
}

}  // namespace dwdeconv::cli
