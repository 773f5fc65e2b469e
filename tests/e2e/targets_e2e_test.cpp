// End-to-end: --target as a user runs it. The default (no --target) rewrites only what needs no join (a nearest + 1x1
// Conv, as its Conv and then the Resize), keeps the rest saying why, in the plan and the report, and verifies
// whole-model; each named target gets its own structure; an unknown name is a usage error that lists the names.
#include <catch2/catch.hpp>

#include "onnx_io/tensor.h"
#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"

using namespace dwdeconv::test;

namespace {

// A ConvTranspose x2 ("up_ct"), a depthwise nearest + 3x3 Conv ("up_dw"), a nearest + 1x1 Conv 64 -> 64 ("up_1x1")
// and a dense nearest + 3x3 Conv with 64 channels in ("up_dense", 64 -> 4). No upsampler's output is the graph's but
// the last.
onnx::ModelProto four_upsamplers() {
  auto model = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,64,2,3] X) => (float[1,4,32,48] Y) {
      a = ConvTranspose <group = 64, strides = [2, 2], pads = [1, 1, 1, 1]> (X, Wct)
      u = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (a, , s2)
      b = Conv <group = 64, kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (u, Wdw)
      w = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (b, , s2)
      c = Conv <kernel_shape = [1, 1]> (w, W1x1)
      v = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (c, , s2)
      Y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (v, Wdense)
    })");
  auto& g = *model.mutable_graph();
  *g.add_initializer() = dwdeconv::onnx_io::make_tensor("s2", onnx::TensorProto::FLOAT, {4}, {1, 1, 2, 2}, true);
  set_random_initializer(g, "Wct", onnx::TensorProto::FLOAT, {64, 1, 4, 4}, 71);
  set_random_initializer(g, "Wdw", onnx::TensorProto::FLOAT, {64, 1, 3, 3}, 72);
  set_random_initializer(g, "W1x1", onnx::TensorProto::FLOAT, {64, 64, 1, 1}, 74);
  set_random_initializer(g, "Wdense", onnx::TensorProto::FLOAT, {4, 64, 3, 3}, 73);
  name_node(model, "a", "up_ct");
  name_node(model, "b", "up_dw");
  name_node(model, "c", "up_1x1");
  name_node(model, "Y", "up_dense");
  return model;
}

}  // namespace

TEST_CASE("without --target the default profile decides, says so, and its output verifies whole-model", "[e2e][targets]") {
  TempDir dir;
  const fs::path input = dir.path / "m.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(four_upsamplers(), input);
  const auto plan = run_default_cli(input.string() + " --dry-run", dir);
  CAPTURE(plan.out, plan.err);
  REQUIRE(plan.exit_code == 0);
  CHECK_THAT(plan.out, Catch::StartsWith("target: default (any of the runtimes below; rules from BENCHMARKS.md"));
  for (const char* kept : {"keep    \"up_ct\"", "keep    \"up_dw\" (nearest_conv)", "keep    \"up_dense\" (nearest_conv)"})
    CHECK_THAT(plan.out, Catch::Contains(kept));
  CHECK_THAT(plan.out, Catch::Contains("no join both converts and measured at least 0.95x on all six runtimes") &&
                           Catch::Contains("kept by default"));
  CHECK_THAT(plan.out, Catch::Contains("rewrite \"up_1x1\" (nearest_conv)"));
  CHECK_THAT(plan.out, Catch::Contains("plan: rewrite 1 of 4 upsamplers, keep 3"));

  const auto r = run_default_cli(input.string() + " -o " + out.string() + " --verify --report " + report.string(), dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("verify (whole-model)") && Catch::Contains("verification passed"));
  const auto rewritten = load(out);
  CHECK(count_ops(rewritten, "ConvTranspose") == 1);
  CHECK(count_ops(rewritten, "Resize") == 3);  // up_1x1's after its Conv now
  for (const char* op : {"Gather", "DepthToSpace", "Concat"}) CHECK(count_ops(rewritten, op) == 0);
  const Report json = read_report(report);
  CHECK(json.at("target") == "default");
  CHECK(any_row_with(json.at("nodes"), R"({"form": "nearest_conv", "layout": "nearest", "note": null})"));
  const Report& up_dw = row_named(json.at("nodes"), "up_dw");
  CHECK(up_dw.at("graph") == "main");
  CHECK(up_dw.at("decision") == "kept");
  CHECK(json.at("outside_delegate") == Report::array());
  // Idempotent: the default finds nothing more to rewrite in its own output.
  const fs::path again = dir.path / "again.onnx";
  REQUIRE(run_default_cli(out.string() + " -o " + again.string(), dir).exit_code == 0);
  CHECK(read_file(again) == read_file(out));
}

TEST_CASE("each named target writes its own structure", "[e2e][targets]") {
  TempDir dir;
  const fs::path input = dir.path / "m.onnx";
  save(four_upsamplers(), input);
  struct Expect {
    const char* target;
    int resizes, convtransposes, gathers, transposes;
  };
  // A nearest + 1x1 Conv rewritten keeps a Resize (after its Conv); each kept nearest + Conv keeps its own. mnn keeps
  // up_dense: it timed a dense nearest + 3x3 Conv at 3-16 channels only, up_dense has 64.
  const auto e =
      GENERATE(Expect{"xnnpack", 1, 0, 0, 0}, Expect{"litert", 2, 0, 0, 0}, Expect{"ort", 2, 1, 0, 0}, Expect{"executorch", 1, 0, 3, 0},
               Expect{"openvino", 2, 0, 0, 0}, Expect{"mnn", 2, 1, 0, 0}, Expect{"ncnn", 3, 1, 0, 0});
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
  // No target but executorch writes a Gather; MNN and ncnn none ever (GatherV2 is slow on MNN, pnnx miscompiles it).
  if (std::string(e.target) != "executorch") CHECK(count_ops(m, "Gather") == 0);
}

TEST_CASE("an unknown --target is a usage error that lists the targets, and writes nothing", "[e2e][targets]") {
  TempDir dir;
  const fs::path input = dir.path / "m.onnx", out = dir.path / "out.onnx";
  save(four_upsamplers(), input);
  const auto r = run_cli(input.string() + " -o " + out.string() + " --target tflight", dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Catch::Contains(
                 "--target: unknown target 'tflight' (known: default, xnnpack, litert (also tflite), ort (also onnxruntime), executorch, "
                 "openvino (also ov), mnn, ncnn)"));
  CHECK_FALSE(fs::exists(out));
}
