// End-to-end: a U-Net decoder written as nearest Resize -> Concat(skip) -> reflect Pad -> Conv (Monodepth2's stages,
// the last one a one-input Concat) is rewritten for the xnnpack target, verified whole-model on the executor, and
// reported with forms nearest_concat_conv and nearest_conv; the default target keeps the split, saying why.
#include <catch2/catch.hpp>

#include "onnx_io/tensor.h"
#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"

using namespace dwdeconv::test;

TEST_CASE("U-Net skip stages are split for the xnnpack target and verify whole-model", "[e2e][concat]") {
  auto model = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    decoder (float[1,8,5,6] X, float[1,4,10,12] S) => (float[1,3,20,24] Y) {
      u1 = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (X, , s2)
      c1 = Concat <axis = 1> (u1, S)
      p1 = Pad <mode = "reflect"> (c1, pads)
      d1 = Conv <kernel_shape = [3, 3]> (p1, W1, B1)
      r1 = Relu (d1)
      u2 = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (r1, , s2)
      c2 = Concat <axis = 1> (u2)
      p2 = Pad <mode = "reflect"> (c2, pads)
      Y = Conv <kernel_shape = [3, 3]> (p2, W2, B2)
    })");
  auto& g = *model.mutable_graph();
  *g.add_initializer() = dwdeconv::onnx_io::make_tensor("s2", onnx::TensorProto::FLOAT, {4}, {1, 1, 2, 2}, true);
  *g.add_initializer() = dwdeconv::onnx_io::make_int64_tensor("pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  set_random_initializer(g, "W1", onnx::TensorProto::FLOAT, {6, 12, 3, 3}, 61);
  set_random_initializer(g, "B1", onnx::TensorProto::FLOAT, {6}, 62);
  set_random_initializer(g, "W2", onnx::TensorProto::FLOAT, {3, 6, 3, 3}, 63);
  set_random_initializer(g, "B2", onnx::TensorProto::FLOAT, {3}, 64);
  TempDir dir;
  const fs::path input = dir.path / "decoder.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(model, input);
  const auto r = run_cli(input.string() + " -o " + out.string() + " --target xnnpack --verify --report " + report.string(), dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("verify (whole-model)"));
  CHECK_THAT(r.err, Catch::Contains("rewrote 2 of 2 upsamplers (kept 0)"));
  const auto rewritten = load(out);
  CHECK(count_ops(rewritten, "Resize") == 0);
  CHECK(count_ops(rewritten, "DepthToSpace") == 2);
  CHECK(count_ops(rewritten, "Add") == 1);           // the split's sum
  CHECK(count_ops(rewritten, "Conv") == 4 + 1 + 4);  // the phases of each stage and the skip's Conv
  for (const auto& init : rewritten.graph().initializer()) {
    for (const char* gone : {"s2", "W1", "W2"}) CHECK(init.name() != gone);
  }
  const Report json = read_report(report);
  CHECK(any_row_with(json.at("nodes"), R"({"form": "nearest_concat_conv", "name": "d1"})"));
  CHECK(any_row_with(json.at("nodes"), R"({"form": "nearest_conv"})"));
  CHECK(json.at("verify").at("mode") == "whole-model");
  CHECK(json.at("verify").at("passed") == true);

  // Idempotent and deterministic.
  const fs::path again = dir.path / "again.onnx", twice = dir.path / "twice.onnx";
  REQUIRE(run_cli(out.string() + " -o " + again.string() + " --target xnnpack", dir).exit_code == 0);
  CHECK(read_file(again) == read_file(out));
  REQUIRE(run_cli(input.string() + " -o " + twice.string() + " --target xnnpack", dir).exit_code == 0);
  CHECK(read_file(twice) == read_file(out));
  // The default target joins no phases in 2-D: the split is kept, with its reason in the plan.
  const auto kept = run_cli(input.string() + " --dry-run --target default", dir);
  REQUIRE(kept.exit_code == 0);
  CHECK_THAT(kept.out, Catch::Contains("nearest_concat_conv"));
  CHECK_THAT(kept.out, Catch::Contains("no join both converts"));
}
