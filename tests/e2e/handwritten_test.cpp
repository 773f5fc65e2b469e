// End-to-end: the examples' MI-GAN-like form (b), whose upsamplers are written by hand (nearest Resize x mask,
// Pad, depthwise Conv), is rewritten into the polyphase form, verified whole-model on XNNPACK, and reported.
#include <catch2/catch.hpp>

#include "onnx_io/external_data.h"
#include "onnx_io/tensor.h"
#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"

using namespace dwdeconv::test;

TEST_CASE("the hand-written MI-GAN-like model is rewritten and verifies whole-model", "[e2e][handwritten]") {
  TempDir dir;
  const fs::path input = dir.copy_example("migan_tiny_handwritten.onnx");
  const std::string before = read_file(input);
  const auto original = load(input);
  const int upsamplers = count_ops(original, "Resize");
  REQUIRE(upsamplers == 8);
  const fs::path out = dir.path / "out.onnx", report = dir.path / "r.json";
  const auto r = run_cli(input.string() + " -o " + out.string() + " --verify --report " + report.string(), dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("verify (whole-model)"));
  CHECK_THAT(r.err, Catch::Contains("rewrote 8 of 8 upsamplers (kept 0)"));
  CHECK(read_file(input) == before);
  const auto rewritten = load(out);
  CHECK(count_ops(rewritten, "Resize") == 0);
  CHECK(count_ops(rewritten, "Pad") == 0);
  CHECK(count_ops(rewritten, "DepthToSpace") == upsamplers);
  // Every Mul left is an activation gain, none a mask: the masks are gone.
  CHECK(count_ops(rewritten, "Mul") == count_ops(original, "Mul") - upsamplers);
  for (const auto& init : rewritten.graph().initializer()) {
    CHECK(init.name().find("up.mask") == std::string::npos);
    CHECK(init.name() != "up.scales");
    CHECK(init.name() != "up.pads");
  }
  const Report json = read_report(report);
  CHECK(any_row_with(json.at("nodes"), R"({"decision": "rewritten", "reason": "", "channels": 64})"));
  CHECK(any_row_with(json.at("nodes"), R"({"output_padding": [0, 0], "dilations": null, "depthwise_in_value": false,
                                           "form": "nearest_mask", "layout": "dcr", "note": null})"));
  CHECK(json.at("verify").at("mode") == "whole-model");
  CHECK(json.at("verify").at("passed") == true);

  // Idempotent: the output has nothing left to rewrite, so --check passes and a second run writes the same bytes.
  const fs::path again = dir.path / "again.onnx";
  CHECK(run_cli(out.string() + " --check", dir).exit_code == 0);
  REQUIRE(run_cli(out.string() + " -o " + again.string(), dir).exit_code == 0);
  CHECK(read_file(again) == read_file(out));
  // Deterministic: the same input gives the same bytes.
  const fs::path twice = dir.path / "twice.onnx";
  REQUIRE(run_cli(input.string() + " -o " + twice.string(), dir).exit_code == 0);
  CHECK(read_file(twice) == read_file(out));
}

TEST_CASE("the --forms option picks the forms to rewrite, and an unknown form is a usage error", "[e2e][handwritten][forms]") {
  TempDir dir;
  const fs::path input = dir.copy_example("migan_tiny_handwritten.onnx");
  const auto kept = run_cli(input.string() + " --dry-run --forms conv_transpose", dir);
  REQUIRE(kept.exit_code == 0);
  CHECK_THAT(kept.out, Catch::Contains("plan: rewrite 0 of 8 upsamplers, keep 8"));
  CHECK_THAT(kept.out, Catch::Contains("form nearest_mask not selected by --forms"));
  CHECK(run_cli(input.string() + " --check --forms conv_transpose,nearest_mask", dir).exit_code == 1);
  const auto bad = run_cli(input.string() + " --dry-run --forms nearest", dir);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("unknown form 'nearest'"));
  // --only names a hand-written upsampler by its Conv's name, as the plan shows it.
  const auto only = run_cli(input.string() + " --dry-run --only syn.8.img_up.conv", dir);
  REQUIRE(only.exit_code == 0);
  CHECK_THAT(only.out, Catch::Contains("plan: rewrite 1 of 8 upsamplers"));
}

namespace {

const onnx::NodeProto* producer_of(const onnx::GraphProto& g, const std::string& output) {
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) {
      if (o == output) return &n;
    }
  }
  return nullptr;
}

const onnx::TensorProto* initializer_of(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

// The phase weights of the rewritten upsampler whose DepthToSpace is named `name`.
std::vector<const onnx::TensorProto*> phase_weights(const onnx::GraphProto& g, const std::string& name) {
  std::vector<const onnx::TensorProto*> weights;
  for (const auto& n : g.node()) {
    if (n.op_type() != "DepthToSpace" || n.name() != name) continue;
    const auto* concat = producer_of(g, n.input(0));
    REQUIRE(concat != nullptr);
    if (concat->op_type() == "Gather") concat = producer_of(g, concat->input(0));  // a Gather + CRD join (executorch)
    REQUIRE(concat != nullptr);
    for (const auto& in : concat->input()) {
      const auto* conv = producer_of(g, in);
      REQUIRE(conv != nullptr);
      REQUIRE(conv->op_type() == "Conv");
      const auto* w = initializer_of(g, conv->input(1));
      REQUIRE(w != nullptr);
      weights.push_back(w);
    }
  }
  return weights;
}

}  // namespace

TEST_CASE("a hand-written upsampler's phase weights are stored where its Conv weight was", "[e2e][handwritten][external]") {
  TempDir dir;
  auto model = load(dir.copy_example("migan_tiny_handwritten.onnx"));
  // Tensors of 1024 bytes or more go outside: the 64-channel 4x4 filters do, the 3-channel ones stay inline.
  const fs::path input = dir.path / "ext.onnx";
  dwdeconv::onnx_io::ExternalSaveOptions ext;
  ext.data_name = "ext.onnx.data";
  ext.threshold_bytes = 1024;
  REQUIRE(dwdeconv::onnx_io::save_model_with_external_data(model, input.string(), ext).ok());
  const fs::path out = dir.path / "out.onnx";
  const auto r = run_cli(input.string() + " -o " + out.string() + " --verify", dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("verify (whole-model)"));
  CHECK(fs::exists(dir.path / "out.onnx.data"));
  onnx::ModelProto rewritten;  // the model file alone, parsed as it is: external tensors keep their references
  REQUIRE(rewritten.ParseFromString(read_file(out)));
  const auto wide = phase_weights(rewritten.graph(), "syn.8.conv1.up.conv");
  const auto narrow = phase_weights(rewritten.graph(), "syn.8.img_up.conv");
  REQUIRE(wide.size() == 4);
  REQUIRE(narrow.size() == 4);
  for (const auto* w : wide) {
    CAPTURE(w->name());
    CHECK(w->data_location() == onnx::TensorProto::EXTERNAL);
  }
  for (const auto* w : narrow) CHECK(w->data_location() != onnx::TensorProto::EXTERNAL);
}

TEST_CASE("a nearest x mask whose mask PyTorch computes by slice assignment (a ScatterND on zeros) is rewritten",
          "[e2e][handwritten][scatternd]") {
  // tests/fixtures/nearest_mask_scatternd_opset13.onnx: examples/export_nearest_mask.py --opset 13 --mask computed
  // --channels 4 --size 6. The mask is `zeros(...); mask[:, :, ::2, ::2] = 4` in forward(): ScatterND, Where, Equal,
  // Expand and ConstantOfShape, which the constant folder now evaluates through the op library.
  TempDir dir;
  const fs::path input = fs::path(DWDECONV_SOURCE_DIR) / "tests/fixtures/nearest_mask_scatternd_opset13.onnx";
  const fs::path out = dir.path / "out.onnx";
  const auto original = load(input);
  REQUIRE(count_ops(original.graph(), "ScatterND") == 2);
  const auto r = run_cli(input.string() + " -o " + out.string() + " --verify", dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("rewrote 2 of 2 upsamplers (kept 0)"));
  CHECK_THAT(r.err, Catch::Contains("verify (whole-model)"));
  const auto rewritten = load(out);
  // The mask and everything that computed it are gone with the Resize and the Mul.
  for (const char* op : {"ScatterND", "Where", "Equal", "Resize", "Mul"}) {
    CAPTURE(op);
    CHECK(count_ops(rewritten.graph(), op) == 0);
  }
  CHECK(count_ops(rewritten.graph(), "DepthToSpace") == 2);
  CHECK(count_ops(rewritten.graph(), "Conv") == 2 + 2 * 4);  // head and tail, and four phases per upsampler
}

TEST_CASE("rosinality's upfirdn2d_native upsamples get a kept row that says what they are", "[e2e][handwritten][upstream]") {
  // tests/fixtures/upstream/rosinality_stylegan2_32_c16_opset13.onnx: three ToRGB Upsamples that fold the channels into
  // the batch axis (Reshape to [N*C,H,W,1] and [N*C,H,1,W,1,1], zeros after axes 2 and 4, Reshape to [N*C,2H,2W,1], Pad,
  // Slices, Transpose (0,3,1,2), Reshape to [N*C,1,H',W'], a 1-in 1-out 4x4 Conv), and three pad-only Blurs (no zeros
  // inserted: no row). Before, none of them had a row at all.
  TempDir dir;
  const fs::path input = fs::path(DWDECONV_SOURCE_DIR) / "tests/fixtures/upstream/rosinality_stylegan2_32_c16_opset13.onnx";
  const fs::path report = dir.path / "r.json";
  const auto r = run_cli(input.string() + " --dry-run --report " + report.string(), dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("plan: rewrite 0 of 6 upsamplers, keep 6"));
  const Report json = read_report(report);
  for (const char* name : {"/to_rgbs.0/upsample/Conv", "/to_rgbs.1/upsample/Conv", "/to_rgbs.2/upsample/Conv"}) {
    CAPTURE(name);
    const Report& row = row_named(json.at("nodes"), name);
    CHECK(row.at("form") == "reshape_zero_insertion");
    CHECK(row.at("decision") == "kept");
    CHECK(row.at("strides") == Report::array({2, 2}));
    CHECK_THAT(row.at("reason").get<std::string>(), Catch::Contains("upfirdn2d_native's layout") && Catch::Contains("zeros inserted x2"));
  }
  for (const auto& row : json.at("nodes")) CHECK_THAT(row.at("name").get<std::string>(), !Catch::Contains("blur"));

  // Another Transpose between the crop and the Conv is not that layout: no row for it.
  auto model = load(input);
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.name() != "/to_rgbs.1/upsample/Transpose_2") continue;
    for (auto& a : *node.mutable_attribute()) {
      if (a.name() == "perm") a.set_ints(3, 1);  // (0,3,2,1)
    }
  }
  const fs::path changed = dir.path / "perm.onnx";
  save(model, changed);
  const auto r2 = run_cli(changed.string() + " --dry-run", dir);
  CAPTURE(r2.err);
  CHECK_THAT(r2.out, Catch::Contains("plan: rewrite 0 of 5 upsamplers, keep 5"));
  CHECK_THAT(r2.out, !Catch::Contains("/to_rgbs.1/upsample/Conv"));

  // A Conv with two output channels at the end of the same chain is no one-channel Conv: no row for it either.
  auto two = load(input);
  auto* weight = two.mutable_graph()->add_initializer();
  *weight = dwdeconv::onnx_io::make_tensor("two_out", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, std::vector<double>(32, 1.0), true);
  for (auto& node : *two.mutable_graph()->mutable_node()) {
    if (node.name() == "/to_rgbs.2/upsample/Conv") node.set_input(1, "two_out");
  }
  const fs::path two_path = dir.path / "two.onnx";
  save(two, two_path);
  const auto r3 = run_cli(two_path.string() + " --dry-run", dir);
  CAPTURE(r3.err);
  CHECK_THAT(r3.out, Catch::Contains("plan: rewrite 0 of 5 upsamplers, keep 5"));
  CHECK_THAT(r3.out, !Catch::Contains("/to_rgbs.2/upsample/Conv"));
}
