// End-to-end tests of the inputs --verify, --compare and --bench run on: files, --input-shape, sizes too large.
#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/verify_fixtures.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv::test;

namespace {

// One depthwise x2 ConvTranspose without bias: X [1,2,3,3] -> Y [1,2,6,6].
onnx::ModelProto single_deconv_model() {
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    single (float[1,2,3,3] X) => (float[1,2,6,6] Y) {
      Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, 31);
  return m;
}

}  // namespace

TEST_CASE("an input file is fed instead of random values", "[e2e][verify]") {
  // With no bias, an all-zero input makes every output zero whatever the weights, so a planted weight error
  // is invisible with the file and visible with random inputs: the file really is what runs.
  TempDir dir;
  const auto m = single_deconv_model();
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", bad = dir.path / "bad.onnx";
  save(m, in);
  REQUIRE(run_cli(in.string() + " -o " + out.string(), dir).exit_code == 0);
  auto rewritten = load(out);
  plant_error(rewritten, "W_s2", 0.5f);
  save(rewritten, bad);

  write_npy(dir.path / "zeros.npy", "(1, 2, 3, 3)", std::string(18 * 4, '\0'));  // 18 float zeros

  const auto with_file = run_cli(in.string() + " --compare " + bad.string() + " --input X=" + (dir.path / "zeros.npy").string(), dir);
  INFO(with_file.err);
  CHECK(with_file.exit_code == 0);
  CHECK(run_cli(in.string() + " --compare " + bad.string(), dir).exit_code == 1);
}

// Sizes the executor cannot allocate or index are refused with a message naming the value: exit 2 when the
// command line gave them, 3 when the model or an input file did, never a crash, and no output is written.
TEST_CASE("a model input too large to hold is refused by --verify and --compare, naming the input", "[e2e][verify][sizes]") {
  // [1,4,2^31,2^31] has 2^64 elements, which overflows; [1,1024,2^20,2^20] does not, but needs 4 PiB.
  for (const auto& [channels, h] : {std::pair<int64_t, std::string>{4, "2147483648"}, {1024, "1048576"}}) {
    const std::string dims = "1x" + std::to_string(channels) + "x" + h + "x" + h;
    INFO(dims);
    TempDir dir;
    auto m = parse_model(R"(
      <ir_version: 8, opset_import: ["" : 13]>
      huge (float[1,)" + std::to_string(channels) +
                         "," + h + "," + h + R"(] X) => (float[n,c,h,w] Y) {
        Y = ConvTranspose <group=)" +
                         std::to_string(channels) + R"(, strides=[2,2], pads=[1,1,1,1]> (X, W)
      })");
    set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {channels, 1, 4, 4}, 41);
    const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", plain = dir.path / "plain.onnx";
    save(m, in);
    REQUIRE(run_cli(in.string() + " -o " + plain.string(), dir).exit_code == 0);  // rewriting alone needs no values

    const auto verified = run_cli(in.string() + " -o " + out.string() + " --verify", dir);
    CHECK(verified.exit_code == 4);
    CHECK_THAT(verified.err, Catch::Contains("graph input 'X'"));
    CHECK_THAT(verified.err, Catch::Contains(dims));
    CHECK_FALSE(fs::exists(out));

    const auto compared = run_cli(in.string() + " --compare " + plain.string(), dir);
    CHECK(compared.exit_code == 4);
    CHECK_THAT(compared.err, Catch::Contains("graph input 'X'"));
    CHECK_THAT(compared.err, Catch::Contains(dims));
  }
}

TEST_CASE("an --input-shape dim or element count out of range is a usage error naming the value", "[e2e][verify][sizes]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto out = dir.path / "out.onnx";
  for (const std::string shape : {"image=99999999999999999999x4x5x6", "image=4294967296x4294967296x4x1"}) {
    INFO(shape);
    const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --input-shape " + shape, dir);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(shape));
    CHECK_FALSE(fs::exists(out));
  }
  const auto huge = run_cli(in.string() + " --compare " + in.string() + " --input-shape image=99999999999999999999x4x5x6", dir);
  CHECK(huge.exit_code == 2);
  CHECK_THAT(huge.err, Catch::Contains("99999999999999999999"));
}

TEST_CASE("an .npy input with a negative dim, or dims that overflow to 0 elements, is refused naming the file", "[e2e][verify][sizes]") {
  TempDir dir;
  const auto m = single_deconv_model();
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  save(m, in);
  write_npy(dir.path / "neg.npy", "(1, -2, 3, 3)", std::string(18 * 4, '\0'));
  write_npy(dir.path / "wraps.npy", "(4294967296, 4294967296, 3, 3)", "");  // 2^64 * 9 elements wrap to 0 bytes
  for (const auto& [file, problem] : {std::pair<std::string, std::string>{"neg.npy", "-2"}, {"wraps.npy", "overflow"}}) {
    INFO(file);
    const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --input X=" + (dir.path / file).string(), dir);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains(file));
    CHECK_THAT(r.err, Catch::Contains(problem));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("bench refuses --input and --input-shape names that are no graph input, and writes nothing", "[e2e][verify]") {
  // Ignored names would time the model on random data of the declared shape, or fail later on a symbolic dim
  // the user thought they had fixed.
  TempDir dir;
  const auto in = dir.copy_example();
  const auto out = dir.path / "o.onnx";
  const std::string bench = in.string() + " -o " + out.string() + " --bench --runs 1 --input-shape image=1x8x4x4";
  const auto shape = run_cli(bench + " --input-shape nosuch=1x2x3x4", dir);
  CHECK(shape.exit_code == 2);
  // A name that is no tensor of the model at all is refused right after load.
  CHECK_THAT(shape.err, Catch::Contains("--input-shape 'nosuch=1x2x3x4': ") &&
                            Catch::Contains("has no graph input or tensor 'nosuch' in its main graph (graph inputs: 'image')"));
  // A tensor inside the graph passes that check (per-node verification may take one), and --bench refuses it.
  const auto inner = run_cli(bench + " --input-shape f0=1x8x4x4", dir);
  CHECK(inner.exit_code == 2);
  CHECK_THAT(inner.err, Catch::Contains("--input-shape 'f0' names no graph input of the model (its inputs: image)"));
  CHECK_FALSE(fs::exists(out));
  write_npy(dir.path / "x.npy", "(1, 8, 4, 4)", std::string(128 * 4, '\0'));
  const auto file = run_cli(bench + " --input nosuch=" + (dir.path / "x.npy").string(), dir);
  CHECK(file.exit_code == 2);
  CHECK_THAT(file.err, Catch::Contains("--input 'nosuch' names no graph input"));
  CHECK_FALSE(std::filesystem::exists(out));
  const auto ok = run_cli(bench, dir);
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(std::filesystem::exists(out));
}

TEST_CASE("an input file whose rank, static dims or element kind do not fit its input is a usage error", "[e2e][verify][input]") {
  // Hardmax keeps the model from running whole, so a misfit file used to be dropped in favour of per-node checks on
  // random inputs, which passed: the user's data was never used, and nothing said so.
  TempDir dir;
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    with_hardmax (float[1,6,5,7] X) => (float[1,6,10,14] Y) {
      A = Hardmax <axis=1> (X)
      Y = ConvTranspose <group=6, strides=[2,2], pads=[1,1,1,1]> (A, W)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {6, 1, 4, 4}, 21);
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  save(m, in);
  write_npy(dir.path / "scalar.npy", "()", std::string(4, '\0'));
  write_npy(dir.path / "rank3.npy", "(6, 5, 7)", std::string(210 * 4, '\0'));
  write_npy(dir.path / "wide.npy", "(1, 6, 5, 8)", std::string(240 * 4, '\0'));
  write_npy(dir.path / "ints.npy", "(1, 6, 5, 7)", std::string(210 * 8, '\0'), "<i8");
  using Case = std::pair<std::string, std::string>;
  for (const auto& [file, problem] : {Case{"scalar.npy", "the file holds FLOAT[scalar], but input 'X' is declared with 4 dims, not 0"},
                                      Case{"rank3.npy", "holds FLOAT[6x5x7], but input 'X' is declared with 4 dims, not 3"},
                                      Case{"wide.npy", "holds FLOAT[1x6x5x8], but axis 3 of input 'X' is declared 7, not 8"},
                                      Case{"ints.npy", "holds INT64[1x6x5x7], but input 'X' is declared FLOAT"}}) {
    CAPTURE(file);
    for (const std::string& mode :
         {" -o " + out.string() + " --verify", " --compare " + in.string(), " -o " + out.string() + " --bench --runs 1"}) {
      CAPTURE(mode);
      const auto r = run_cli(in.string() + mode + " --input X=" + (dir.path / file).string(), dir);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.err, Catch::Contains("--input X: ") && Catch::Contains(problem));
      CHECK_FALSE(fs::exists(out));
    }
  }
  // A file that fits is used, and the run still goes per node (Hardmax), checking the ConvTranspose.
  write_npy(dir.path / "fits.npy", "(1, 6, 5, 7)", std::string(210 * 4, '\0'));
  const auto ok = run_cli(in.string() + " -o " + out.string() + " --verify --input X=" + (dir.path / "fits.npy").string(), dir);
  CAPTURE(ok.err);
  CHECK(ok.exit_code == 0);
}
