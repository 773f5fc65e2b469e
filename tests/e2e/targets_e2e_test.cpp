// End-to-end: --target as a user runs it. The default (no --target) keeps a depthwise nearest + Conv, joins the
// rest with Gather + CRD, says so in the plan and the report, and verifies whole-model; each named target gets its
// own structure; an unknown name is a usage error that lists the names.
#include <catch2/catch.hpp>

#include "onnx_io/tensor.h"
#include "tests/e2e/cli_runner.h"

using namespace dwdeconv::test;

namespace {

// A ConvTranspose x2 ("up_ct"), a depthwise nearest + 3x3 Conv ("up_dw") and a dense one with 64 channels in
// ("up_dense", 64 -> 4).
onnx::ModelProto three_upsamplers() {
  auto model = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,64,2,3] X) => (float[1,4,16,24] Y) {
      a = ConvTranspose <group = 64, strides = [2, 2], pads = [1, 1, 1, 1]> (X, Wct)
      u = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (a, , s2)
      b = Conv <group = 64, kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (u, Wdw)
      v = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (b, , s2)
      Y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (v, Wdense)
    })");
  auto& g = *model.mutable_graph();
  *g.add_initializer() = dwdeconv::onnx_io::make_tensor("s2", onnx::TensorProto::FLOAT, {4}, {1, 1, 2, 2}, true);
  set_random_initializer(g, "Wct", onnx::TensorProto::FLOAT, {64, 1, 4, 4}, 71);
  set_random_initializer(g, "Wdw", onnx::TensorProto::FLOAT, {64, 1, 3, 3}, 72);
  set_random_initializer(g, "Wdense", onnx::TensorProto::FLOAT, {4, 64, 3, 3}, 73);
  name_node(model, "a", "up_ct");
  name_node(model, "b", "up_dw");
  name_node(model, "Y", "up_dense");
  return model;
}

}  // namespace

TEST_CASE("without --target the default profile decides, says so, and its output verifies whole-model", "[e2e][targets]") {
  TempDir dir;
  const fs::path input = dir.path / "m.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(three_upsamplers(), input);
  const auto plan = run_cli(input.string() + " --dry-run", dir);
  CAPTURE(plan.out, plan.err);
  REQUIRE(plan.exit_code == 0);
  CHECK_THAT(plan.out, Catch::StartsWith("target: default (any of the runtimes below; rules from BENCHMARKS.md"));
  CHECK_THAT(plan.out, Catch::Contains("keep    \"up_dw\" (nearest_conv)") &&
                           Catch::Contains("measured 0.63x-0.97x on LiteRT after rewriting") && Catch::Contains("kept by default"));
  CHECK_THAT(plan.out, Catch::Contains("rewrite \"up_ct\"") && Catch::Contains("rewrite \"up_dense\" (nearest_conv)"));
  CHECK_THAT(plan.out, Catch::Contains("plan: rewrite 2 of 3 upsamplers, keep 1"));

  const auto r = run_cli(input.string() + " -o " + out.string() + " --verify --report " + report.string(), dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("verify (whole-model)") && Catch::Contains("verification passed"));
  const auto rewritten = load(out);
  CHECK(count_ops(rewritten, "ConvTranspose") == 0);
  CHECK(count_ops(rewritten, "Resize") == 1);  // up_dw's, kept
  CHECK(count_ops(rewritten, "Gather") == 2);
  CHECK(count_ops(rewritten, "DepthToSpace") == 2);
  for (const auto& node : rewritten.graph().node()) {
    if (node.op_type() != "DepthToSpace") continue;
    for (const auto& a : node.attribute()) {
      if (a.name() == "mode") CHECK(a.s() == "CRD");
    }
  }
  const std::string json = read_file(report);
  CHECK_THAT(json, Catch::Contains("\"target\": \"default\""));
  CHECK_THAT(json, Catch::Contains("\"form\": \"conv_transpose\", \"layout\": \"gather_crd\", \"note\": null}"));
  CHECK_THAT(json, Catch::Contains("\"name\": \"up_dw\", \"graph\": \"main\", \"decision\": \"kept\""));
  // Idempotent: the default finds nothing more to rewrite in its own output.
  const fs::path again = dir.path / "again.onnx";
  REQUIRE(run_cli(out.string() + " -o " + again.string(), dir).exit_code == 0);
  CHECK(read_file(again) == read_file(out));
}

TEST_CASE("each named target writes its own structure", "[e2e][targets]") {
  TempDir dir;
  const fs::path input = dir.path / "m.onnx";
  save(three_upsamplers(), input);
  struct Expect {
    const char* target;
    int resizes, convtransposes, gathers, transposes;
  };
  const auto e =
      GENERATE(Expect{"xnnpack", 0, 0, 0, 0}, Expect{"litert", 1, 0, 0, 0}, Expect{"ort", 1, 1, 0, 0}, Expect{"executorch", 0, 0, 3, 0});
  CAPTURE(e.target);
  const fs::path out = dir.path / (std::string(e.target) + ".onnx");
  const auto r = run_cli(input.string() + " -o " + out.string() + " --target " + e.target + " --verify", dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  const auto m = load(out);
  CHECK(count_ops(m, "Resize") == e.resizes);
  CHECK(count_ops(m, "ConvTranspose") == e.convtransposes);
  CHECK(count_ops(m, "Gather") == e.gathers);
  CHECK(count_ops(m, "Transpose") == e.transposes);
}

TEST_CASE("an unknown --target is a usage error that lists the targets, and writes nothing", "[e2e][targets]") {
  TempDir dir;
  const fs::path input = dir.path / "m.onnx", out = dir.path / "out.onnx";
  save(three_upsamplers(), input);
  const auto r = run_cli(input.string() + " -o " + out.string() + " --target tflight", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Catch::Contains(
                 "--target: unknown target 'tflight' (known: default, xnnpack, litert (also tflite), ort (also onnxruntime), executorch)"));
  CHECK_FALSE(fs::exists(out));
}
