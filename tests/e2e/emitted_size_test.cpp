// End-to-end tests of what one node may emit: bias-only phases that do not read x (checked by --verify in
// both modes), and --max-phases, which keeps a node whose stride would emit too many phases.
#include <catch2/catch.hpp>

#include <chrono>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv::test;

namespace {

// k1 stride s with output_padding s-1, C=1, 2x2 input: the smallest model of stride s.
onnx::ModelProto k1_model(int64_t s) {
  const std::string ss = std::to_string(s), op = std::to_string(s - 1), out = std::to_string(2 * s);
  auto m = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1,1,2,2] X) => (float[1,1," + out + "," + out +
                       "] Y) {\n  Y = ConvTranspose <group=1, strides=[" + ss + "," + ss + "], output_padding=[" + op + "," + op +
                       "]> (X, W)\n}\n");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {1, 1, 1, 1}, 3);
  name_node(m, "Y", "up");
  return m;
}

}  // namespace

TEST_CASE("verify passes on k < s models in both modes for float and float16, and cannot check double", "[e2e][verify][bias_only]") {
  const int32_t dtype = GENERATE(onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT16, onnx::TensorProto::DOUBLE);
  const bool per_node = GENERATE(false, true);
  const std::string t = dtype == onnx::TensorProto::FLOAT ? "float" : dtype == onnx::TensorProto::FLOAT16 ? "float16" : "double";
  CAPTURE(t, per_node);
  TempDir dir;
  // k1 s2 with a bias, then k2 s3 without: bias-only phases of both kinds. A Hardmax (not in the executor's
  // set) between them makes --verify fall back to per-node mode.
  auto m = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\nbias_only (" + t + "[1,3,4,5] X) => (" + t +
                       "[1,3,24,30] Y) {\n  A = ConvTranspose <group=3, strides=[2,2], output_padding=[1,1]> (X, W1, B1)\n" +
                       (per_node ? "  S = Hardmax <axis=1> (A)\n" : "  S = Identity (A)\n") +
                       "  Y = ConvTranspose <group=3, strides=[3,3], output_padding=[1,1]> (S, W2)\n}\n");
  set_random_initializer(*m.mutable_graph(), "W1", dtype, {3, 1, 1, 1}, 41);
  set_random_initializer(*m.mutable_graph(), "B1", dtype, {3}, 42);
  set_random_initializer(*m.mutable_graph(), "W2", dtype, {3, 1, 2, 2}, 43);
  name_node(m, "A", "up1");
  name_node(m, "Y", "up2");
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --report " + report.string(), dir);
  INFO(r.err);
  if (dtype == onnx::TensorProto::DOUBLE) {
    // Inputs are held in float32, and the executor computes in float32: a float64 model is not
    // verified, and it is refused before anything runs, so nothing is verified and nothing is written.
    CHECK(r.exit_code == 4);
    CHECK_THAT(r.err, Catch::Contains("cannot verify the rewrite, nothing written: graph input 'X' is DOUBLE: inputs are held "
                                      "in float32 here"));
    CHECK_FALSE(fs::exists(out));
    const Report json = read_report(report);
    CHECK(json.at("exit_code") == 4);
    CHECK_THAT(report_error(json), Catch::Contains("is DOUBLE: inputs are held in float32"));
    CHECK(json.at("output").is_null());
    CHECK_FALSE(has_value(json, "passed", true));
    return;
  }
  REQUIRE(r.exit_code == 0);
  const auto rewritten = load(out);
  CHECK(count_ops(rewritten, "ConvTranspose") == 0);
  CHECK(count_ops(rewritten, "Shape") == 2);  // one per node
  CHECK(count_ops(rewritten, "ConstantOfShape") == 2);
  // Convs that read a deconv's input: phase (0, 0) of up1, and the four tapped phases of up2.
  int reading_input = 0;
  for (const auto& node : rewritten.graph().node()) {
    if (node.op_type() == "Conv" && (node.input(0) == "X" || node.input(0) == "S")) ++reading_input;
  }
  CHECK(reading_input == 1 + 4);
  const Report json = read_report(report);
  CHECK(json.at("verify").at("mode") == (per_node ? "per-node" : "whole-model"));
  CHECK(verify_passed_everywhere(json));
  CHECK_FALSE(has_value(json, "passed", false));
}

TEST_CASE("k1 s512 op511 is kept at once and the output stays tiny", "[e2e][max_phases]") {
  TempDir dir;
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(k1_model(512), in);
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_cli(in.string() + " -o " + out.string() + " --report " + report.string(), dir);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string reason = "stride 512 would emit 262144 phases, over --max-phases 64";
  CHECK_THAT(r.err, Catch::Contains("kept ConvTranspose 'up': " + reason));
  CHECK(count_ops(load(out), "ConvTranspose") == 1);
  CHECK(fs::file_size(out) < 1024);  // was 72 MB
  CHECK(seconds < 10.0);             // was 29 s
  const Report json = read_report(report);
  const Report& up = row_named(json.at("nodes"), "up");
  CHECK(up.at("decision") == "kept");
  CHECK(up.at("reason") == reason);

  const auto plan = run_cli(in.string() + " --dry-run", dir);
  CHECK(plan.exit_code == 0);
  CHECK_THAT(plan.out, Catch::Contains(reason));
  CHECK(run_cli(in.string() + " --check", dir).exit_code == 0);  // a kept node is nothing left to rewrite
}

TEST_CASE("the max-phases option sets the limit exactly and bad values are usage errors", "[e2e][max_phases]") {
  TempDir dir;
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  save(k1_model(9), in);  // 81 phases
  const auto kept = run_cli(in.string() + " -o " + out.string(), dir);
  REQUIRE(kept.exit_code == 0);
  CHECK_THAT(kept.err, Catch::Contains("stride 9 would emit 81 phases, over --max-phases 64"));
  CHECK(count_ops(load(out), "ConvTranspose") == 1);

  const auto at_80 = run_cli(in.string() + " -o " + out.string() + " --max-phases 80", dir);
  REQUIRE(at_80.exit_code == 0);
  CHECK_THAT(at_80.err, Catch::Contains("stride 9 would emit 81 phases, over --max-phases 80"));
  CHECK(count_ops(load(out), "ConvTranspose") == 1);

  const auto at_81 = run_cli(in.string() + " -o " + out.string() + " --max-phases 81 --verify", dir);
  INFO(at_81.err);
  REQUIRE(at_81.exit_code == 0);
  const auto rewritten = load(out);
  CHECK(count_ops(rewritten, "ConvTranspose") == 0);
  CHECK(count_ops(rewritten, "DepthToSpace") == 1);
  CHECK_THAT(at_81.err, Catch::Contains("rewrote 1 of 1"));
  CHECK(run_cli(in.string() + " --check --max-phases 81", dir).exit_code == 1);

  for (const std::string bad : {"0", "-1", "abc", "1.5", ""}) {
    CAPTURE(bad);
    const auto r = run_cli(in.string() + " --dry-run --max-phases '" + bad + "'", dir);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("max-phases"));
  }
}
