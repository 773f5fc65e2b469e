#include "core/cleanup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace dwdeconv::core::cleanup {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

struct State {
  std::mutex lock;
  std::set<std::string> files;
  std::set<std::string> dirs;
  std::set<std::string> empty_dirs;
  std::map<std::string, std::string> restores;  // backup -> target
  std::map<pid_t, bool> processes;              // pid -> leads its own group
};

State& state() {
  static State* s = new State;  // never destroyed: the cleanup thread may use it while exit() runs
  return *s;
}

sigset_t handled_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kSignals) sigaddset(&set, sig);
  return set;
}

// Ends the registered processes, puts back what was being replaced, removes what is registered and exits 128 + `sig`,
// holding the lock throughout so that nothing new is created or started meanwhile.
[[noreturn]] void clean_up_and_exit(int sig) {
  State& s = state();
  s.lock.lock();  // never unlocked: the process ends here
  for (const auto& [pid, group] : s.processes) ::kill(group ? -pid : pid, group ? SIGTERM : SIGKILL);
  // A process group gets two seconds to end on SIGTERM (a Python child ends its converters), then SIGKILL.
  std::set<pid_t> running;
  for (const auto& [pid, group] : s.processes) running.insert(pid);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!running.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto it = running.begin(); it != running.end();) {
      it = ::waitpid(*it, nullptr, WNOHANG) != 0 ? running.erase(it) : std::next(it);
    }
    if (!running.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& [pid, group] : s.processes) {
    ::kill(group ? -pid : pid, SIGKILL);  // the group's other members too, even once its leader has ended
    ::waitpid(pid, nullptr, WNOHANG);
  }
  for (const auto& [backup, target] : s.restores) {
    ::rename(backup.c_str(), target.c_str());
    ::unlink(backup.c_str());  // still there when both were already one file (rename then does nothing)
  }
  for (const auto& f : s.files) ::unlink(f.c_str());
  for (const auto& d : s.dirs) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
  // Innermost first: a path sorts after its parent.
  for (auto it = s.empty_dirs.rbegin(); it != s.empty_dirs.rend(); ++it) ::rmdir(it->c_str());
  // One line says how the run ended (write(2): a logging thread may hold stderr's stdio lock).
  const char* name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
  const std::string line = std::string("dwdeconv-rewrite: interrupted by ") + name + " (exit " + std::to_string(128 + sig) +
                           "): what this run had staged is removed, and any child process ended\n";
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, line.data(), line.size());
  std::_Exit(128 + sig);
}

}  // namespace

void Registration::file(const std::string& path) { state().files.insert(path); }
void Registration::dir(const std::string& path) { state().dirs.insert(path); }
void Registration::empty_dir(const std::string& path) { state().empty_dirs.insert(path); }
void Registration::restore(const std::string& backup, const std::string& target) { state().restores[backup] = target; }
void Registration::process(pid_t pid, bool own_group) { state().processes[pid] = own_group; }
void Registration::forget(const std::string& path) {
  state().files.erase(path);
  state().dirs.erase(path);
  state().empty_dirs.erase(path);
  state().restores.erase(path);
}
void Registration::forget_process(pid_t pid) { state().processes.erase(pid); }

void handle_signals() {
  const sigset_t set = handled_set();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int sig = 0;
    while (::sigwait(&set, &sig) != 0) {
    }
    clean_up_and_exit(sig);
  }).detach();
}

void atomically(const std::function<void(Registration&)>& step) {
  std::lock_guard<std::mutex> hold(state().lock);
  Registration r;
  step(r);
}

int open_registered(const std::string& path, int flags, mode_t mode) {
  int fd = -1;
  atomically([&](Registration& r) {
    fd = ::open(path.c_str(), flags, mode);
    if (fd >= 0) r.file(path);
  });
  return fd;
}

bool make_registered_dir(std::string& path_template) {
  bool made = false;
  atomically([&](Registration& r) {
    made = ::mkdtemp(path_template.data()) != nullptr;
    if (made) r.dir(path_template);
  });
  return made;
}

void forget(const std::string& path) {
  atomically([&](Registration& r) { r.forget(path); });
}

void prepare_spawn(posix_spawnattr_t& attr, bool own_group) {
  sigset_t empty;
  sigemptyset(&empty);
  const sigset_t defaults = handled_set();
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (own_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
}

}  // namespace dwdeconv::core::cleanup
