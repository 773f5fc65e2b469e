// The bad-input corpus (tests/bad_inputs/expected.tsv): every file gets its documented exit code and a message
// naming the file and the problem, never a crash, never an output, and the input is never touched. Fuzzer
// finds are added there as regressions. Also: outputs that cannot be written.
#include <catch2/catch.hpp>

#include <sys/mount.h>

#include <fstream>
#include <sstream>

#include "tests/e2e/cli_runner.h"

using namespace dwdeconv::test;

TEST_CASE("every file of the bad-input corpus is refused as documented", "[e2e][bad_input]") {
  const fs::path corpus = fs::path(DWDECONV_SOURCE_DIR) / "tests" / "bad_inputs";
  std::ifstream manifest(corpus / "expected.tsv");
  REQUIRE(manifest);
  size_t cases = 0;
  for (std::string line; std::getline(manifest, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string file, code, fragment;
    std::getline(fields, file, '\t');
    std::getline(fields, code, '\t');
    std::getline(fields, fragment);
    INFO(file);
    TempDir dir;
    const auto in = dir.path / file, out = dir.path / "out.onnx";
    fs::copy_file(corpus / file, in);
    const std::string before = read_file(in);
    const auto r = run_cli(in.string() + " -o " + out.string(), dir);
    INFO(r.err);
    CHECK(r.exit_code == std::stoi(code));
    CHECK_THAT(r.err, Catch::Contains(fragment));
    if (code != "0") CHECK_THAT(r.err, Catch::Contains(file));  // a refusal names the file
    CHECK(read_file(in) == before);
    CHECK(fs::exists(out) == (code == "0"));
    CHECK(dir.file_count() == (code == "0" ? 2u : 1u));  // no temporary files either
    ++cases;
  }
  CHECK(cases >= 15);
}

TEST_CASE("a Git LFS pointer is named as one, from a file, from stdin and as --compare's model", "[e2e][bad_input]") {
  TempDir dir;
  const auto pointer = dir.path / "pointer.onnx";
  fs::copy_file(fs::path(DWDECONV_SOURCE_DIR) / "tests" / "bad_inputs" / "lfs_pointer.onnx", pointer);
  const std::string advice = "is a Git LFS pointer, not an ONNX model; check out with lfs: true";
  const auto from_file = run_cli(pointer.string() + " -o " + (dir.path / "out.onnx").string(), dir);
  CHECK(from_file.exit_code == 3);
  CHECK_THAT(from_file.err, Catch::Contains(pointer.string() + " " + advice));
  const auto from_stdin = run_cli("- -o " + (dir.path / "out.onnx").string() + " < " + pointer.string(), dir);
  CHECK(from_stdin.exit_code == 3);
  CHECK_THAT(from_stdin.err, Catch::Contains("<stdin> " + advice));
  const auto example = dir.copy_example("migan_tiny_deconv.onnx");
  const auto compared = run_cli(example.string() + " --compare " + pointer.string(), dir);
  CHECK(compared.exit_code == 3);
  CHECK_THAT(compared.err, Catch::Contains(pointer.string() + " " + advice));
  CHECK_FALSE(fs::exists(dir.path / "out.onnx"));
  // Text that is no pointer is still called no model.
  std::ofstream(dir.path / "text.onnx") << "version 1\n";
  const auto text = run_cli((dir.path / "text.onnx").string() + " --check", dir);
  CHECK(text.exit_code == 3);
  CHECK_THAT(text.err, Catch::Contains("not a valid ONNX ModelProto"));
}

TEST_CASE("an output path that cannot be written is exit 3 and leaves nothing", "[e2e][bad_input]") {
  TempDir dir;
  const auto in = dir.copy_example();
  std::ofstream(dir.path / "a_file") << "x";
  const auto r = run_cli(in.string() + " -o " + (dir.path / "a_file" / "out.onnx").string(), dir);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("a_file/out.onnx"));
  CHECK(dir.file_count() == 2);
}

TEST_CASE("a full disk is exit 3 and leaves no partial output", "[e2e][bad_input]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto small = dir.path / "small";
  fs::create_directories(small);
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=64k") != 0) {
    WARN("skipped: mounting a 64 KiB tmpfs is not allowed here (" << std::strerror(errno) << "), so a full disk cannot be made");
    return;
  }
  const auto r = run_cli(in.string() + " -o " + (small / "out.onnx").string(), dir);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("No space left on device"));
  CHECK_THAT(r.err, Catch::Contains("small/out.onnx"));
  CHECK(fs::is_empty(small));  // neither the output nor a temporary file
  ::umount(small.c_str());
}
