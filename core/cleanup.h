// What a run has on disk or running that must not outlive it: temporary files, scratch directories, backups of files
// being replaced, directories it made, and child processes. Each is registered for as long as it exists. On SIGINT,
// SIGTERM or SIGHUP (once handle_signals() runs), a thread of this process, not a signal handler, ends the child
// processes (with their process groups), puts back what was being replaced, removes what is registered and exits
// with 128 + the signal's number. A run that ends any other way cleans up after itself, as it always did: the
// registry only covers what an interruption would leave behind.
//
// A step that creates something and registers it runs under the registry's lock (atomically()), and the cleanup takes
// that lock and never gives it back: what a step creates is registered before the cleanup sees the registry, or never
// created.
#pragma once

#include <spawn.h>
#include <sys/types.h>

#include <functional>
#include <string>

namespace dwdeconv::core::cleanup {

// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread it starts later, and starts the thread that waits
// for them. Call once, first thing in main, before any other thread exists. Without it nothing changes: the
// registry is kept, and a signal ends the process as it always did.
void handle_signals();

// What a step registers or forgets. Valid only inside atomically().
class Registration {
 public:
  void file(const std::string& path);       // removed by the cleanup
  void dir(const std::string& path);        // removed with everything in it
  void empty_dir(const std::string& path);  // removed if empty (a directory the run made for its outputs)
  // `target` is being replaced, and `backup` is a hard link to what it held: the cleanup moves `backup` back over
  // `target` (or removes it when they are already one file).
  void restore(const std::string& backup, const std::string& target);
  // A child process: with `own_group`, one that leads its own process group (ended with SIGTERM, the group with it,
  // then SIGKILL after two seconds); without, a single process (SIGKILL).
  void process(pid_t pid, bool own_group);
  void forget(const std::string& path);  // whatever is registered under `path` (a file, a directory, a backup)
  void forget_process(pid_t pid);

 private:
  Registration() = default;
  friend void atomically(const std::function<void(Registration&)>& step);
};

// Runs `step` under the registry's lock, so that what it creates and what it registers are one step to the cleanup.
// Keep steps short: open, mkdtemp, link, rename, spawn.
void atomically(const std::function<void(Registration&)>& step);

// open(2) and, when it succeeds, the file registered: for a new temporary file (O_CREAT | O_EXCL in `flags`).
int open_registered(const std::string& path, int flags, mode_t mode);

// mkdtemp(3) of `path_template` (ending in XXXXXX, changed in place), registered as a directory. false with errno set.
bool make_registered_dir(std::string& path_template);

// Forgets `path` (atomically): it was renamed into place, or removed.
void forget(const std::string& path);

// Sets on `attr` what a child started with posix_spawn must get: an empty signal mask and the default action for the
// signals handle_signals() blocks (it would otherwise inherit them blocked), and, with `own_group`, a process group of
// its own, so that the cleanup can end it and everything it starts.
void prepare_spawn(posix_spawnattr_t& attr, bool own_group);

}  // namespace dwdeconv::core::cleanup
