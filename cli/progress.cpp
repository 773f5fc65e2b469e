#include "cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <utility>

#include <spdlog/spdlog.h>

namespace dwdeconv::cli {
namespace {

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

}  // namespace

bool phase_lines_wanted(int verbosity) { return verbosity >= 0 && isatty(STDERR_FILENO) == 0; }

PhaseLog::PhaseLog(std::string subject, bool enabled) : subject_(std::move(subject)), enabled_(enabled) {}

PhaseLog::~PhaseLog() { end(); }

void PhaseLog::start(const std::string& phase) {
  if (!enabled_) return;
  end();
  open_ = phase;
  started_ = std::chrono::steady_clock::now();
  spdlog::info("{} {}: {}: started", clock_text(), subject_, open_);
}

void PhaseLog::end() {
  if (!enabled_ || open_.empty()) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  spdlog::info("{} {}: {}: done in {:.2f} s", clock_text(), subject_, open_, seconds);
  open_.clear();
}

void PhaseLog::fail() {
  if (!enabled_ || open_.empty()) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  spdlog::info("{} {}: {}: failed after {:.2f} s", clock_text(), subject_, open_, seconds);
  open_.clear();
}

std::function<void(const std::string&)> PhaseLog::callback() {
  if (!enabled_) return {};
  return [this](const std::string& line) { start(line); };
}

}  // namespace dwdeconv::cli
