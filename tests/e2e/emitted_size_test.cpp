// End-to-end tests of what one node may emit: bias-only phases that do not read x (checked by --verify in
// both modes).
#include <catch2/catch.hpp>

#include "tests/e2e/cli_runner.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv::test;

TEST_CASE("verify passes on k < s models in both modes for float, float16 and double", "[e2e][verify][bias_only]") {
  const int32_t dtype = GENERATE(onnx::TensorProto::FLOAT, onnx::TensorProto::FLOAT16, onnx::TensorProto::DOUBLE);
  const bool per_node = GENERATE(false, true);
  const std::string t = dtype == onnx::TensorProto::FLOAT ? "float" : dtype == onnx::TensorProto::FLOAT16 ? "float16" : "double";
  CAPTURE(t, per_node);
  TempDir dir;
  // k1 s2 with a bias, then k2 s3 without: bias-only phases of both kinds. A Softmax (not in the executor's
  // set) between them makes --verify fall back to per-node mode.
  auto m = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\nbias_only (" + t + "[1,3,4,5] X) => (" + t +
                       "[1,3,24,30] Y) {\n  A = ConvTranspose <group=3, strides=[2,2], output_padding=[1,1]> (X, W1, B1)\n" +
                       (per_node ? "  S = Softmax <axis=1> (A)\n" : "  S = Identity (A)\n") +
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
  const std::string json = read_file(report);
  CHECK_THAT(json, Catch::Contains(per_node ? "\"mode\": \"per-node\"" : "\"mode\": \"whole-model\""));
  CHECK_THAT(json, Catch::Contains("\"passed\": true"));
  CHECK_THAT(json, !Catch::Contains("\"passed\": false"));
}
