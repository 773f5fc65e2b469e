// Helpers of the end-to-end tests: a scratch directory, running the dwdeconv-rewrite binary, reading results.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "onnx_io/model_io.h"
#include "tests/support/model_builder.h"

namespace dwdeconv::test {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory per test, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dwdeconv-e2e-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Copies a model shipped in examples/ into the directory as model.onnx.
  fs::path copy_example(const std::string& name = "upsampler_small.onnx") const {
    const fs::path dst = path / "model.onnx";
    fs::copy_file(fs::path(DWDECONV_EXAMPLES_DIR) / name, dst, fs::copy_options::overwrite_existing);
    return dst;
  }
  size_t file_count() const { return static_cast<size_t>(std::distance(fs::directory_iterator(path), fs::directory_iterator())); }
};

// The words of a shell command line as the shell reads them: split at blanks outside quotes, '...', "..." and \x
// unquoted. Enough for the command lines these tests build (no expansions are read).
inline std::vector<std::string> shell_words(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == ';') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t end = command.find('\'', i + 1);
      word += command.substr(i + 1, end - i - 1);
      i = end == std::string::npos ? command.size() : end;
    } else if (c == '"') {
      for (++i; i < command.size() && command[i] != '"'; ++i) {
        if (command[i] == '\\' && i + 1 < command.size()) ++i;
        word += command[i];
      }
    } else if (c == '\\' && i + 1 < command.size()) {
      word += command[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// The report archive of the suite (tests/CMakeLists.txt): the schema check reads every report copied there. The
// binary knows nothing of it: the harness copies each report a command asked for, once the command has run.
struct ReportArchive {
  struct Watched {
    fs::path path;
    bool existed = false;
    fs::file_time_type time;
    std::string bytes;
  };
  std::string command;
  std::vector<Watched> watched;

  // Notes each --report PATH of `command` (relative to the directory of a `cd DIR` before it, else to ours) as it is
  // before the run, so that a report the run did not write (refused, or a file the run reads) is not archived.
  explicit ReportArchive(const std::string& shell_command) : command(shell_command) {
    const char* archive = std::getenv("DWDECONV_REPORT_ARCHIVE");
    if (archive == nullptr || *archive == '\0') return;
    const auto words = shell_words(command);
    fs::path cwd = fs::current_path();
    for (size_t i = 0; i < words.size(); ++i) {
      std::string path;
      if (words[i] == "cd" && i + 1 < words.size()) cwd = cwd / words[i + 1];
      if (words[i] == "--report" && i + 1 < words.size()) path = words[i + 1];
      if (words[i].rfind("--report=", 0) == 0) path = words[i].substr(9);
      if (path.empty() || path == "-") continue;
      Watched w;
      w.path = cwd / path;
      std::error_code ec;
      w.existed = fs::is_regular_file(w.path, ec);
      if (w.existed) {
        w.time = fs::last_write_time(w.path, ec);
        w.bytes = read_file(w.path);
      }
      watched.push_back(std::move(w));
    }
  }

  // Copies each watched report the run wrote (new, or changed) into the archive as NAME.json, with NAME.args holding
  // the command, so that a report that fails the schema names what wrote it.
  void copy_written() const {
    const char* archive = std::getenv("DWDECONV_REPORT_ARCHIVE");
    if (archive == nullptr || *archive == '\0') return;
    static int copied = 0;
    for (const auto& w : watched) {
      std::error_code ec;
      if (fs::is_symlink(w.path, ec) || !fs::is_regular_file(w.path, ec)) continue;
      const std::string bytes = read_file(w.path);
      if (w.existed && fs::last_write_time(w.path, ec) == w.time && bytes == w.bytes) continue;
      fs::create_directories(archive, ec);
      const std::string stem = (fs::path(archive) / ("e2e-" + std::to_string(::getpid()) + "-" + std::to_string(copied++))).string();
      std::ofstream(stem + ".args", std::ios::binary) << command << "\n";
      std::ofstream(stem + ".json.tmp", std::ios::binary) << bytes;
      fs::rename(stem + ".json.tmp", stem + ".json", ec);  // whole or not at all: the check reads every NAME.json
    }
  }
};

// Runs a shell command, capturing its stdout and stderr (in files under `dir`, removed afterwards). A report it
// writes with --report goes to the suite's archive too (ReportArchive).
inline RunResult run_shell(const std::string& command, const TempDir& dir) {
  const fs::path out = dir.path / ".stdout", err = dir.path / ".stderr";
  const std::string cmd = "{ " + command + "; } >" + out.string() + " 2>" + err.string();
  const ReportArchive reports(command);
  const int status = std::system(cmd.c_str());
  reports.copy_written();
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

// Runs the binary with `args` (shell words), capturing stdout and stderr.
// The lines of `text` that hold `part`.
inline std::vector<std::string> lines_with(const std::string& text, const std::string& part) {
  std::vector<std::string> found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(part) != std::string::npos) found.push_back(line);
  }
  return found;
}

// The tool with `args`. The end-to-end tests exercise what the tool does to a model that it rewrites, so a command that
// names no --target runs with --target xnnpack (this tool's executor's own form, which rewrites every family the
// fixtures hold); the default target rewrites only a nearest + 1x1 Conv (docs/targets.md). A test of the default, or
// of a run without --target, says --target default or calls run_default_cli.
inline RunResult run_cli(const std::string& args, const TempDir& dir) {
  const bool names_target = args.find("--target") != std::string::npos;
  return run_shell(std::string(DWDECONV_CLI) + " " + args + (names_target ? "" : " --target xnnpack"), dir);
}

// The tool with `args` as given: no --target unless they name one.
inline RunResult run_default_cli(const std::string& args, const TempDir& dir) {
  return run_shell(std::string(DWDECONV_CLI) + " " + args, dir);
}

// A clean k4 s2 p1 depthwise deconv Y = ConvTranspose(X[1,3,5,4], W[3,1,4,4], B[3]) with seeded inline weights.
inline onnx::ModelProto small_deconv_model(uint32_t seed = 41) {
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    small (float[1,3,5,4] X) => (float[1,3,10,8] Y) {
      Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W, B)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {3, 1, 4, 4}, seed);
  set_random_initializer(*m.mutable_graph(), "B", onnx::TensorProto::FLOAT, {3}, seed + 1);
  return m;
}

inline int count_ops(const onnx::ModelProto& m, const std::string& op) {
  int n = 0;
  for (const auto& node : m.graph().node()) n += node.op_type() == op;
  return n;
}

inline onnx::ModelProto load(const fs::path& p) {
  auto m = onnx_io::load_model(p.string());
  REQUIRE(m.ok());
  return *m;
}

inline void save(const onnx::ModelProto& model, const fs::path& p) {
  auto bytes = onnx_io::serialize_model(model);
  REQUIRE(bytes.ok());
  std::ofstream(p, std::ios::binary) << *bytes;
}

// Writes a .npy file (version 1.0, element type `descr`, float32 by default) with the header's `shape` text as given and
// `data` as its bytes.
inline void write_npy(const fs::path& path, const std::string& shape, const std::string& data, const std::string& descr = "<f4") {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');  // magic+version+length is 10 bytes; align to 64
  header += '\n';
  std::string npy = std::string("\x93NUMPY\x01\x00", 8);
  npy += static_cast<char>(header.size() & 0xff);
  npy += static_cast<char>(header.size() >> 8);
  npy += header + data;
  std::ofstream(path, std::ios::binary) << npy;
}

}  // namespace dwdeconv::test
