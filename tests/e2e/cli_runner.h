// Helpers of the end-to-end tests: a scratch directory, running the dwdeconv-rewrite binary, reading results.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>

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

// Runs a shell command, capturing its stdout and stderr (in files under `dir`, removed afterwards).
inline RunResult run_shell(const std::string& command, const TempDir& dir) {
  const fs::path out = dir.path / ".stdout", err = dir.path / ".stderr";
  const std::string cmd = "{ " + command + "; } >" + out.string() + " 2>" + err.string();
  const int status = std::system(cmd.c_str());
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

inline RunResult run_cli(const std::string& args, const TempDir& dir) { return run_shell(std::string(DWDECONV_CLI) + " " + args, dir); }

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
