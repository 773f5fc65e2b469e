// End-to-end tests of MODEL.input-shapes, the side file that gives one model of a batch its own --input-shape: a
// batch of models at different sizes verifies, each with its own file; the command line wins over a file; a bad file
// is a usage error naming it (and the line); a FIFO does not block the run; the file is never written over.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <string>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv::test;

namespace {

// One depthwise x2 ConvTranspose with symbolic N, H and W and C channels: --verify cannot run it without a shape.
onnx::ModelProto symbolic_model(int64_t c, uint32_t seed) {
  const std::string cs = std::to_string(c);
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    single (float[N,)" +
                       cs + R"(,H,W] X) => (float[N,)" + cs + R"(,H2,W2] Y) {
      Y = ConvTranspose <group=)" +
                       cs + R"(, strides=[2,2], pads=[1,1,1,1]> (X, W)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {c, 1, 4, 4}, seed);
  return m;
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The tool with `args` (shell words, paths relative to `dir`) run in `dir`, with --target xnnpack, which rewrites the
// models here: the log then shows the relative paths as a user types them.
RunResult run_in(const TempDir& dir, const std::string& args) {
  return run_shell("cd '" + dir.path.string() + "' && timeout 60 " + std::string(DWDECONV_CLI) + " " + args + " --target xnnpack", dir);
}

}  // namespace

TEST_CASE("a batch gives each model its own shapes from MODEL.input-shapes beside it", "[e2e][input-shapes]") {
  TempDir dir;
  fs::create_directories(dir.path / "ms");
  save(symbolic_model(2, 61), dir.path / "ms/a.onnx");
  save(symbolic_model(3, 62), dir.path / "ms/b.onnx");
  // Two channel counts, so no one --input-shape fits both: each model's file gives its own, in two spellings.
  write_text(dir.path / "ms/a.input-shapes", "# a at 8x8\nX=1x2x8x8\n");
  write_text(dir.path / "ms/b.input-shapes", "\n  [2,3,5,7]  \r\n");
  const fs::path report = dir.path / "r.json";
  auto r = run_in(dir, "ms --out-dir out --verify --report " + report.string());
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(lines_with(r.err, "ms/a.onnx: input shapes from ms/a.input-shapes: X=1x2x8x8").size() == 1);
  CHECK(lines_with(r.err, "ms/b.onnx: input shapes from ms/b.input-shapes: [2,3,5,7]").size() == 1);
  CHECK(lines_with(r.err, "verification passed").size() == 2);
  CHECK(fs::exists(dir.path / "out/a.onnx"));
  CHECK(fs::exists(dir.path / "out/b.onnx"));
  const Report json = read_report(report);
  REQUIRE(json.is_array());  // a batch: one object per model
  CHECK(has_value(json, "input_shapes_file", "ms/a.input-shapes"));
  CHECK(has_value(json, "input_shapes_file", "ms/b.input-shapes"));

  // The dims are read, not ignored: b's file with a channel dim its model does not have is refused naming axis 1.
  write_text(dir.path / "ms/b.input-shapes", "X=2x5x5x7\n");
  r = run_in(dir, "ms --out-dir out2 --verify");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("axis 1 of input 'X'"));
  CHECK_FALSE(fs::exists(dir.path / "out2/b.onnx"));

  // Without its file, b cannot be verified (exit 4, could not verify); a still passes with its own.
  fs::remove(dir.path / "ms/b.input-shapes");
  r = run_in(dir, "ms --out-dir out3 --verify");
  CHECK(r.exit_code == 4);
  CHECK(fs::exists(dir.path / "out3/a.onnx"));
  CHECK_FALSE(fs::exists(dir.path / "out3/b.onnx"));
  CHECK_THAT(r.err, Catch::Contains("ms/b.onnx (exit 4)"));
}

TEST_CASE("the command line's --input-shape wins over the side file and --compare and --bench read it too", "[e2e][input-shapes]") {
  TempDir dir;
  save(symbolic_model(2, 63), dir.path / "m.onnx");
  // A line that would be refused (channel 5) if it were used.
  write_text(dir.path / "m.input-shapes", "X=1x5x4x4\n");
  auto r = run_in(dir, "m.onnx -o out.onnx --verify --input-shape X=1x2x4x4");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(lines_with(r.err, "m.input-shapes gives 'X=1x5x4x4', which --input-shape overrides").size() == 1);
  CHECK(lines_with(r.err, "input shapes from").empty());

  write_text(dir.path / "m.input-shapes", "X=1x2x4x4\n");
  r = run_in(dir, "m.onnx --compare out.onnx --bench --runs 3");
  CHECK(r.exit_code == 0);
  CHECK(lines_with(r.err, "input shapes from m.input-shapes: X=1x2x4x4").size() == 1);
  CHECK_THAT(r.err, Catch::Contains("verification passed"));

  // A run that runs nothing does not read it: a broken file does not fail a plain rewrite.
  write_text(dir.path / "m.input-shapes", "X=1x,x4\n");
  r = run_in(dir, "m.onnx -o plain.onnx");
  CHECK(r.exit_code == 0);
  CHECK(lines_with(r.err, "input-shapes").empty());
}

TEST_CASE("a bad input-shapes file is a usage error naming the file and the line and is never written over",
          "[e2e][input-shapes][safety]") {
  TempDir dir;
  save(symbolic_model(2, 64), dir.path / "m.onnx");
  const fs::path side = dir.path / "m.input-shapes";
  struct Case {
    std::string text;
    std::string said;
  };
  for (const Case& c : {Case{"X=1x2x4x4\nX=1,2,,4\n", "m.input-shapes line 2: --input-shape 'X=1,2,,4': an empty dim"},
                        Case{"Z=1x2x4x4\n", "m.input-shapes: --input-shape 'Z=1x2x4x4': m.onnx has no graph input or tensor 'Z'"},
                        Case{"X=1x2x4x4\nX=1x2x4x4\n", "m.input-shapes: --input-shape gives the shape of 'X' twice"},
                        Case{std::string(70000, '#'), "the input-shapes file holds 70000 bytes, more than the 65536"}}) {
    INFO(c.said);
    write_text(side, c.text);
    const auto r = run_in(dir, "m.onnx -o out.onnx --verify");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.said));
    CHECK_FALSE(fs::exists(dir.path / "out.onnx"));
  }
  // A report or output onto the side file is refused, also when the file is not a shape list, and it stays as it was.
  write_text(side, "X=1x2x,4\n");
  for (const std::string& args :
       {std::string("m.onnx -o out.onnx --verify --report m.input-shapes"), std::string("m.onnx -o m.input-shapes --verify"),
        std::string("m.onnx --compare m.onnx --report m.input-shapes")}) {
    INFO(args);
    const auto r = run_in(dir, args);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("the input-shapes file of m.onnx"));
    CHECK(read_file(side) == "X=1x2x,4\n");
  }
  // A directory, and a FIFO that nobody writes: refused at once, not waited on.
  fs::remove(side);
  fs::create_directory(side);
  auto r = run_in(dir, "m.onnx -o out.onnx --verify");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("m.input-shapes: the input-shapes file is not a regular file"));
  fs::remove(side);
  REQUIRE(::mkfifo(side.c_str(), 0600) == 0);
  r = run_in(dir, "m.onnx -o out.onnx --verify");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("not a regular file"));
}

TEST_CASE("an input-shapes file of a hostile model name is read and its name and lines are escaped in the log",
          "[e2e][input-shapes][hostile]") {
  TempDir dir;
  const std::string stem = "evil\n::error::x\x1b[31m";
  save(symbolic_model(2, 65), dir.path / (stem + ".onnx"));
  write_text(dir.path / (stem + ".input-shapes"), "X=1x2x4x4\n");
  const auto r = run_in(dir, "\"$(printf 'evil\\n::error::x\\033[31m.onnx')\" -o out.onnx --verify");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err,
             Catch::Contains("evil\\x0a::error::x\\x1b[31m.onnx: input shapes from evil\\x0a::error::x\\x1b[31m.input-shapes: X=1x2x4x4"));
  CHECK_THAT(r.err, !Catch::Contains("\n::error::"));
}
