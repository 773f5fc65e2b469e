#include "runtime_check/python_bridge.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/cleanup.h"
#include "core/text.h"
#include "onnx_io/external_data.h"
#include "python_answer.h"
#include "runtime_check/tensor_io.h"
#include "runtime_registry.h"

extern char** environ;

namespace dwdeconv::runtime_check {
namespace {

namespace fs = std::filesystem;

struct Registry {
  std::string python_minimum;
  std::vector<PythonRuntime> runtimes;
};

// python/dwdeconv_rewrite/runtimes/registry.json, embedded at build time (runtime_check/CMakeLists.txt).
const Registry& registry() {
  static const Registry parsed = [] {
    Registry r;
    const auto j = nlohmann::json::parse(kRuntimeRegistryJson);
    r.python_minimum = j.at("python_minimum").get<std::string>();
    for (const auto& row : j.at("runtimes")) {
      PythonRuntime runtime;
      runtime.name = row.at("name").get<std::string>();
      runtime.aliases = row.at("aliases").get<std::vector<std::string>>();
      runtime.display_name = row.at("display_name").get<std::string>();
      runtime.summary = row.at("summary").get<std::string>();
      if (row.at("pinned_requirements").is_string()) runtime.pinned_requirements = row.at("pinned_requirements").get<std::string>();
      runtime.precisions = {"fp32"};
      if (row.contains("precisions")) runtime.precisions = row.at("precisions").get<std::vector<std::string>>();
      if (row.contains("node_values") && row.at("node_values") == "onnx") runtime.node_values = NodeValues::kOnnx;
      r.runtimes.push_back(std::move(runtime));
    }
    return r;
  }();
  return parsed;
}

// A scratch directory, removed with everything in it when this goes out of scope, and by the signal cleanup
// (core/cleanup.h) should the run be interrupted.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::error_code ec;
    fs::path base = fs::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string tmpl = (fs::absolute(base, ec) / "dwdeconv-runtime-XXXXXX").string();  // the child runs in it
    if (core::cleanup::make_registered_dir(tmpl)) path = tmpl;
  }
  ~ScratchDir() {
    if (path.empty()) return;
    core::cleanup::atomically([this](core::cleanup::Registration& r) {
      std::error_code ec;
      fs::remove_all(path, ec);
      r.forget(path.string());
    });
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// `said`, or "it printed nothing" when it is empty.
std::string or_nothing(const std::string& said) { return said.empty() ? "it printed nothing" : said; }

// The last `n` non-empty lines of `text`, joined by `glue`.
std::string last_lines(const std::string& text, size_t n, const char* glue = " / ") {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  std::string out;
  for (size_t k = lines.size() > n ? lines.size() - n : 0; k < lines.size(); ++k) out += (out.empty() ? "" : glue) + lines[k];
  return out;
}

// `program` as an absolute path, resolved where the tool was started: the child runs in another directory, where a
// relative --python (or a relative folder on PATH) would name something else. A name without '/' is looked up on
// PATH; one found nowhere is returned as given (the spawn then says it cannot run it).
std::string resolve_program(const std::string& program) {
  std::error_code ec;
  if (program.find('/') != std::string::npos) return fs::absolute(program, ec).lexically_normal().string();
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path candidate = fs::absolute(fs::path(dir.empty() ? "." : dir) / program, ec);
    if (!ec && ::access(candidate.c_str(), X_OK) == 0 && fs::is_regular_file(candidate, ec)) return candidate.lexically_normal().string();
  }
  return program;
}

// Runs `argv` (argv[0] looked up on PATH where the tool was started) in the directory `cwd` with `pythonpath` in front of $PYTHONPATH,
// stdout and stderr to files. `cwd` is a scratch directory of this run: `python -m` puts its working directory first on sys.path, and the
// user's (a shared /tmp, say) may hold anyone's modules. Returns the exit status (128 + signal when killed), or an error (kUsage) when it
// cannot be started.
core::Result<int> run_process(const std::vector<std::string>& argv, const std::string& pythonpath, const fs::path& cwd, const fs::path& out,
                              const fs::path& err) {
  std::vector<std::string> env_text;
  const char* old = std::getenv("PYTHONPATH");
  env_text.push_back("PYTHONPATH=" + pythonpath + (old != nullptr && *old != '\0' ? ":" + std::string(old) : ""));
  env_text.push_back("PYTHONDONTWRITEBYTECODE=1");  // an installed module's folder may not be writable
  // The temporary files the child and its converters make (TensorFlow's autograph sources, tempfile's folders) go
  // into this run's scratch directory, and with it, however the run ends.
  const fs::path tmp = cwd / "tmp";
  std::error_code ec;
  fs::create_directory(tmp, ec);
  env_text.push_back("TMPDIR=" + tmp.string());
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0 && std::strncmp(*e, "PYTHONDONTWRITEBYTECODE=", 24) != 0 &&
        std::strncmp(*e, "TMPDIR=", 7) != 0) {
      env_text.push_back(*e);
    }
  }
  std::vector<char*> envp, args;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  argv_copy[0] = resolve_program(argv[0]);
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  // In a process group of its own, registered: a signal to this run ends the child and the converters it starts.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  core::cleanup::prepare_spawn(attr, /*own_group=*/true);
  pid_t pid = 0;
  int rc = 0;
  core::cleanup::atomically([&](core::cleanup::Registration& r) {
    rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp.data());
    if (rc == 0) r.process(pid, /*own_group=*/true);
  });
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return core::Error{core::ErrorKind::kUsage, "cannot run the Python interpreter '" + argv[0] + "': " + std::strerror(rc) +
                                                    "; give --python PATH or set DWDECONV_PYTHON"};
  }
  int status = 0;
  int waited = 0;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  const int wait_error = errno;
  // What the child started and left running in its group (a converter it did not wait for) ends with it.
  ::kill(-pid, SIGKILL);
  core::cleanup::atomically([&](core::cleanup::Registration& r) { r.forget_process(pid); });
  if (waited < 0) return core::io_error(std::string("waitpid: ") + std::strerror(wait_error));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// `message` with each "(log: PATH)" a converter named replaced by a pointer to -v, after logging the last lines of
// that log and of the child's stderr at debug level: the scratch directory that holds them is removed.
std::string converter_logs_to_debug(std::string message, const fs::path& scratch) {
  for (size_t at = message.find("(log: "); at != std::string::npos; at = message.find("(log: ", at)) {
    const size_t end = message.find(')', at);
    if (end == std::string::npos) break;
    const fs::path log = message.substr(at + 6, end - at - 6);
    spdlog::debug("the converter's log {}:\n{}", log.filename().string(), last_lines(read_text(log), 40, "\n"));
    const std::string pointer = "(its log is shown with -v)";
    message.replace(at, end + 1 - at, pointer);
    at += pointer.size();
  }
  spdlog::debug("the Python side's stderr:\n{}", last_lines(read_text(scratch / "python.err"), 40, "\n"));
  return message + (message.find("shown with -v") == std::string::npos ? "; -v shows what the converter said" : "");
}

// Why `st` (of `path`) lets someone other than this user or root change it, or "": owned by another user, or writable by
// its group or by others (a directory with the sticky bit excepted when `sticky_ok`: others cannot rename what is in it).
std::string foreign(const fs::path& path, const struct stat& st, bool sticky_ok) {
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return path.string() + " is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  const bool sticky = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(sticky_ok && sticky)) return path.string() + " is writable by its group or by others";
  return "";
}

// A folder of this run's scratch directory that holds only `package` (as dwdeconv_rewrite, a symlink): the PYTHONPATH
// the interpreter gets. Never the package's parent, which for the wheel is a whole site-packages: an interpreter given
// with --python would import another environment's onnxruntime from it, and report that version as its own.
core::Result<std::string> private_pythonpath(const fs::path& scratch, const std::string& package) {
  const fs::path dir = scratch / "pythonpath";
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (!ec) fs::create_directory_symlink(package, dir / "dwdeconv_rewrite", ec);
  if (ec) return core::io_error("--runtime: cannot prepare " + dir.string() + ": " + ec.message());
  return dir.string();
}

// The usage error of a package the runtime needs that is installed but fails to import (the answer's import_error).
core::Error import_error(const std::string& runtime, const std::string& python, const ImportFailure& failure) {
  return core::Error{core::ErrorKind::kUsage, "--runtime " + runtime + ": the Python interpreter '" + python + "' has " + failure.module +
                                                  " but cannot import it (" + failure.message + "); reinstall with: " + python +
                                                  " -m pip install --force-reinstall " + failure.pip +
                                                  ", or give --python PATH / DWDECONV_PYTHON naming one where it imports"};
}

// `model` with each graph input's dims set to those of its input tensor, so that every converter sees static shapes
// (onnx2tf and torch.export need them), written to `path` (with external data when it is too large for one file).
core::Status write_static_model(const onnx::ModelProto& model, const std::vector<NamedTensor>& inputs, const fs::path& path) {
  onnx::ModelProto copy = model;
  for (auto& in : *copy.mutable_graph()->mutable_input()) {
    for (const auto& t : inputs) {
      if (t.name != in.name() || !in.type().has_tensor_type()) continue;
      auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->clear_dim();
      for (int64_t d : t.tensor.dims) shape->add_dim()->set_dim_value(d);
    }
  }
  onnx_io::ExternalSaveOptions ext;
  if (copy.ByteSizeLong() > (size_t{1} << 31) - (size_t{1} << 24)) {
    ext.data_name = path.filename().string() + ".data";
    ext.threshold_bytes = 1024;
  }
  return onnx_io::save_model_with_external_data(copy, path.string(), ext);
}

// `python -m dwdeconv_rewrite.runtimes check ...` on the files run_python_check staged in `scratch` (check.py's
// arguments: the models, the input set, the calibration samples, where to answer).
std::vector<std::string> check_command(const PythonSide& side, const fs::path& scratch, size_t threads, size_t runs, size_t profile_runs,
                                       const Precision& precision) {
  std::vector<std::string> argv = {side.python, "-m", "dwdeconv_rewrite.runtimes", "check", "--runtime", side.runtime};
  const std::pair<const char*, fs::path> files[] = {{"--work", scratch / "work"},
                                                    {"--original", scratch / "original.onnx"},
                                                    {"--rewritten", scratch / "rewritten.onnx"},
                                                    {"--inputs", scratch / "inputs"},
                                                    {"--out", scratch / "outputs"}};
  for (const auto& [option, path] : files) argv.insert(argv.end(), {option, path.string()});
  argv.insert(argv.end(), {"--threads", std::to_string(threads), "--runs", std::to_string(runs), "--profile-runs",
                           std::to_string(profile_runs), "--precision", precision.name});
  if (!precision.calibration.empty()) argv.insert(argv.end(), {"--calibration", (scratch / "calibration").string()});
  return argv;
}

}  // namespace

const std::vector<PythonRuntime>& python_runtimes() { return registry().runtimes; }

const PythonRuntime* find_python_runtime(const std::string& name) {
  for (const auto& r : registry().runtimes) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

const std::string& python_minimum() { return registry().python_minimum; }

std::string display_name(const std::string& runtime) {
  const PythonRuntime* known = find_python_runtime(runtime);
  return known != nullptr ? known->display_name : "XNNPACK";
}

// Why `package` cannot be the dwdeconv_rewrite package the runtimes are imported from, or "". It must hold
// runtimes/__main__.py, and nobody but this user or root may change what Python imports from it, now or between this
// check and the import: no file or folder in it (compiled __pycache__ files included) and no folder above it may be
// another user's or writable by others (a folder above it may be sticky, as /tmp is), and it holds no symbolic link.
std::string package_problem(const std::string& package_dir) {
  const fs::path package = package_dir;
  std::error_code ec;
  if (!fs::is_regular_file(package / "runtimes" / "__main__.py", ec)) return "no dwdeconv_rewrite/runtimes/__main__.py";
  const fs::path real = fs::canonical(package, ec);
  if (ec) return package.string() + ": " + ec.message();
  struct stat st {};
  for (fs::path dir = real.parent_path();; dir = dir.parent_path()) {
    if (::stat(dir.c_str(), &st) != 0) return dir.string() + ": " + std::strerror(errno);
    if (auto why = foreign(dir, st, /*sticky_ok=*/true); !why.empty()) return why;
    if (dir == dir.parent_path()) break;
  }
  if (::stat(real.c_str(), &st) != 0) return real.string() + ": " + std::strerror(errno);
  if (auto why = foreign(real, st, /*sticky_ok=*/false); !why.empty()) return why;
  for (auto it = fs::recursive_directory_iterator(real, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& entry = it->path();
    if (::lstat(entry.c_str(), &st) != 0) return entry.string() + ": " + std::strerror(errno);
    if (S_ISLNK(st.st_mode)) return entry.string() + " is a symbolic link";
    if (auto why = foreign(entry, st, /*sticky_ok=*/false); !why.empty()) return why;
  }
  if (ec) return real.string() + ": " + ec.message();
  return "";
}

core::Status probe_python_runtime(const PythonSide& side) {
  const std::string& python = side.python;
  ScratchDir scratch;
  if (scratch.path.empty()) return core::io_error("cannot create a temporary directory for --runtime");
  auto pythonpath = private_pythonpath(scratch.path, side.package);
  if (!pythonpath) return pythonpath.error();
  auto status = run_process({python, "-m", "dwdeconv_rewrite.runtimes", "probe", side.runtime}, *pythonpath, scratch.path,
                            scratch.path / "out", scratch.path / "err");
  if (!status) return core::Error{core::ErrorKind::kUsage, "--runtime " + side.runtime + ": " + status.error().message};
  const std::string said = read_text(scratch.path / "out");
  const auto answer = parse_probe_answer(said);
  if (answer && answer->import_failure) return import_error(side.runtime, python, *answer->import_failure);
  if (*status != 0) {
    return core::Error{core::ErrorKind::kUsage,
                       "--runtime " + side.runtime + ": the Python interpreter '" + python + "' failed to run the module (exit " +
                           std::to_string(*status) + "): " + or_nothing(last_lines(read_text(scratch.path / "err") + said, 3)) +
                           "; give --python PATH or set DWDECONV_PYTHON to a Python " + python_minimum() + " or newer"};
  }
  if (!answer) {
    return core::Error{core::ErrorKind::kUsage,
                       "--runtime " + side.runtime + ": the Python interpreter '" + python +
                           "' answered the probe with a line that is not JSON of its protocol: " + answer.error().message};
  }
  const std::string exe = answer->executable.empty() ? python : answer->executable;
  const std::string& version = answer->version;
  std::string missing, pip;
  for (const auto& name : answer->missing_pip) {
    missing += (missing.empty() ? "" : ", ") + name;
    pip += " " + name;
  }
  if (version.empty()) {
    return core::Error{core::ErrorKind::kUsage,
                       "--runtime " + side.runtime + ": the Python interpreter '" + python +
                           "' did not answer the probe (no 'python' line on its output); give --python PATH or set "
                           "DWDECONV_PYTHON to a Python " +
                           python_minimum() + " or newer"};
  }
  if (missing.empty()) return core::Ok{};
  std::string pinned;
  if (const PythonRuntime* known = find_python_runtime(side.runtime); known != nullptr && !known->pinned_requirements.empty()) {
    pinned = " (or a venv of the versions the project measured with, from its source repository: python3 bench/runtimes/make_venv.py " +
             side.runtime + " DIR, then --python DIR/bin/python)";
  }
  const std::string named = exe == python ? exe : "'" + python + "' (" + exe + ",";
  return core::Error{core::ErrorKind::kUsage, "--runtime " + side.runtime + ": the Python interpreter " + named +
                                                  (exe == python ? " (" : " ") + "Python " + version + ") lacks " + missing +
                                                  "; install with: " + exe + " -m pip install" + pip + pinned +
                                                  ", or give --python PATH / DWDECONV_PYTHON naming one that has them"};
}

core::Result<PythonRun> run_python_check(const PythonSide& side, const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                         const std::vector<NamedTensor>& inputs, size_t threads, size_t runs, size_t profile_runs,
                                         const Precision& precision) {
  ScratchDir scratch;
  if (scratch.path.empty()) return core::io_error("cannot create a temporary directory for --runtime");
  auto pythonpath = private_pythonpath(scratch.path, side.package);
  if (!pythonpath) return pythonpath.error();
  const fs::path in_dir = scratch.path / "inputs", out_dir = scratch.path / "outputs";
  fs::create_directories(in_dir);
  fs::create_directories(out_dir);
  for (const auto& [model, file] :
       {std::pair<const onnx::ModelProto&, const char*>{original, "original.onnx"}, {rewritten, "rewritten.onnx"}}) {
    if (auto saved = write_static_model(model, inputs, scratch.path / file); !saved) return saved.error();
  }
  if (auto written = write_tensor_list(in_dir, inputs); !written) return written.error();
  const fs::path calibration_dir = scratch.path / "calibration";
  for (size_t k = 0; k < precision.calibration.size(); ++k) {
    if (auto written = write_tensor_list(calibration_dir / std::to_string(k), precision.calibration[k]); !written) return written.error();
  }
  const std::string& python = side.python;
  const auto argv = check_command(side, scratch.path, threads, runs, profile_runs, precision);
  auto status = run_process(argv, *pythonpath, scratch.path, scratch.path / "python.out", scratch.path / "python.err");
  if (!status) return status.error();
  const std::string answer = read_text(out_dir / "result.jsonl");
  auto parsed = parse_check_answer(answer);
  if (!parsed) {
    return core::Error{core::ErrorKind::kCannotVerify, "--runtime " + side.runtime + ": " + python +
                                                           " -m dwdeconv_rewrite.runtimes "
                                                           "check answered a line that is not JSON of its protocol: " +
                                                           parsed.error().message};
  }
  PythonRun run = std::move(parsed->run);
  run.runtime.name = side.runtime;
  if (run.runtime.label.empty()) run.runtime.label = display_name(side.runtime);
  run.runtime.python = python;
  if (const auto* row = find_python_runtime(side.runtime)) run.node_values = row->node_values;
  // Installed but broken: the interpreter's fault, not the model's. Arguments refused (a precision its runtime does
  // not convert to): the command line's fault.
  if (parsed->import_failure) return import_error(side.runtime, python, *parsed->import_failure);
  if (parsed->usage_error) return core::Error{core::ErrorKind::kUsage, "--runtime " + side.runtime + ": " + *parsed->usage_error};
  for (const auto& [which, converted] : parsed->precisions) {
    if (converted != precision.name) {
      return core::Error{core::ErrorKind::kCannotVerify, "--runtime " + side.runtime + ": the " + which + " model was converted to " +
                                                             converted + ", not the --precision " + precision.name + " asked for"};
    }
  }
  std::string error;
  if (const auto& f = parsed->failure) {
    error = f->stage == "run" ? "the " + f->side + " model, converted, failed to run on " + run.runtime.label + ": " + f->message
                              : "cannot convert the " + f->side + " model for " + run.runtime.label + ": " + f->stage + ": " + f->message;
  }
  for (const auto& out : parsed->outputs) {
    auto tensor = load_tensor_file(out.file);
    if (!tensor) {
      return core::Error{core::ErrorKind::kCannotVerify, "reading the " + out.side + " model's output '" + out.name + "' from " +
                                                             run.runtime.label + ": " + tensor.error().message};
    }
    tensor->name = out.name;
    (out.side == "original" ? run.original_outputs : run.rewritten_outputs).push_back(std::move(*tensor));
  }
  if (error.empty() && *status == 0 && !answer.empty() && run.precision != precision.name) {
    // A module that did not say it converted to the precision asked for would be judged under the wrong rule.
    return core::Error{
        core::ErrorKind::kCannotVerify,
        "--runtime " + side.runtime + ": " + python + " -m dwdeconv_rewrite.runtimes check did not say it converted to " + precision.name};
  }
  if (!error.empty()) {
    // Nothing of the run stays behind, the scratch directory included: what the converter said goes to the log
    // instead (-v), and its message names no file that is about to be removed.
    return core::Error{core::ErrorKind::kCannotVerify, converter_logs_to_debug(error, scratch.path)};
  }
  if (*status != 0 || answer.empty()) {
    return core::Error{core::ErrorKind::kCannotVerify, "--runtime " + side.runtime + ": " + python +
                                                           " -m dwdeconv_rewrite.runtimes "
                                                           "check failed (exit " +
                                                           std::to_string(*status) +
                                                           "): " + or_nothing(last_lines(read_text(scratch.path / "python.err"), 3))};
  }
  return run;
}

}  // namespace dwdeconv::runtime_check
