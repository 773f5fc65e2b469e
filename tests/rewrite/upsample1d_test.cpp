// Form upsample1d: BigVGAN's anti-aliased UpSample1d (replicate Pad 5 + 5, depthwise ConvTranspose1d k 12 s 2, x2,
// crop [15:-15]) and Mimi's causal crop after a ConvTranspose1d, as torch exports them: the crop, the gain and the edge
// padding fold into phases that compute only the samples kept. The expected structure is worked out by hand in each
// case (docs/design.md's phase formula); the numbers are checked against the original on the naive executor.
#include <functional>
#include <limits>

#include <catch2/catch.hpp>

#include "onnx_io/attributes.h"
#include "rewrite_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;
using onnx::TensorProto;

namespace {

rewrite::RewriteOptions target(const char* name) {
  rewrite::RewriteOptions options;
  options.target = rewrite::find_target(name);
  return options;
}

// UpSample1d on [1, 24, 8] (24 channels: BigVGAN's last stage, inside the measured range) at opset 17: `pad` samples of `mode` each side,
// ConvTranspose k 12 s 2, times `gain`, the Slice [begin:end] of the last axis.
onnx::ModelProto upsample1d(const std::string& mode = "edge", int64_t pad = 5, const std::string& slice = "starts = {15}, ends = {-15}",
                            const std::string& axes = "{2}", double gain = 2.0) {
  const std::string text =
      "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1,24,8] X) => (float[1,24,M] Y) {\n"
      "  pads = Constant <value = int64[6] {0, 0, " +
      std::to_string(pad) + ", 0, 0, " + std::to_string(pad) +
      "}> ()\n"
      "  XP = Pad <mode = \"" +
      mode +
      "\"> (X, pads)\n"
      "  U = ConvTranspose <group = 24, kernel_shape = [12], strides = [2]> (XP, W)\n"
      "  two = Constant <value = float {" +
      std::to_string(gain) +
      "}> ()\n"
      "  G = Mul (U, two)\n"
      "  starts = Constant <value = int64[1] " +
      slice.substr(slice.find('{'), slice.find('}') - slice.find('{') + 1) +
      "> ()\n"
      "  ends = Constant <value = int64[1] " +
      slice.substr(slice.rfind('{'), slice.rfind('}') - slice.rfind('{') + 1) +
      "> ()\n"
      "  axes = Constant <value = int64[1] " +
      axes +
      "> ()\n"
      "  Y = Slice (G, starts, ends, axes)\n}\n";
  auto model = parse_model(text);
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {24, 1, 12}, 41);
  name_node(model, "U", "up");
  name_node(model, "Y", "crop");
  return model;
}

// upsample1d() with its gain constant's tensor changed by `change` (the ONNX text format spells no inf, and its
// constants take the dims their values give).
template <typename Change>
onnx::ModelProto with_gain(Change change) {
  auto model = upsample1d();
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.output(0) == "two") change(*node.mutable_attribute(0)->mutable_t());
  }
  return model;
}

onnx::ModelProto infinite_gain() {
  return with_gain([](onnx::TensorProto& value) {
    value.clear_float_data();
    value.clear_raw_data();
    value.add_float_data(std::numeric_limits<float>::infinity());
  });
}

onnx::ModelProto rank4_gain() {
  return with_gain([](onnx::TensorProto& value) {
    value.clear_dims();
    for (int k = 0; k < 4; ++k) value.add_dims(1);
  });
}

NaiveTensor input_x() {
  const auto x = random_tensor4(1, 24, 1, 8, 42);
  return NaiveTensor({1, 24, 8}, x.data);
}

std::vector<std::vector<double>> pads_of_pads(const onnx::GraphProto& g) {
  std::vector<std::vector<double>> out;
  for (const auto* pad : nodes_of(g, "Pad")) out.push_back(values_of(*find_initializer(g, pad->input(1))));
  return out;
}

}  // namespace

TEST_CASE("BigVGAN's UpSample1d is one upsample1d: each phase edge-pads x by its own reach and computes only the samples kept",
          "[rewrite][upsample1d]") {
  const auto model = upsample1d();
  const auto out = rewrite_copy(model, target("ort"));
  REQUIRE(out.result.nodes.size() == 1);  // the ConvTranspose it absorbs has no row of its own
  const auto& row = out.result.nodes[0];
  CHECK(row.summary.form == "upsample1d");
  CHECK(row.summary.name == "up");
  CHECK(row.rewritten);
  const auto& g = out.model.graph();
  CHECK(count_ops(g, "ConvTranspose") == 0);
  CHECK(count_ops(g, "Mul") == 0);    // the x2 is in the weights
  CHECK(count_ops(g, "Slice") == 0);  // the crop is in the phases' pads
  // On x the ConvTranspose has pads 15 - 2*5 = 5 each end; phase 0 takes the odd taps w[11], w[9], ..., w[1] and pads
  // x by 3 and 2, phase 1 the even taps w[10], ..., w[0] by 2 and 3: both within the Pad's 5, so edge Pads.
  const auto pads = pads_of_pads(g);
  REQUIRE(pads.size() == 2);
  CHECK(pads[0] == std::vector<double>{0, 0, 3, 0, 0, 2});
  CHECK(pads[1] == std::vector<double>{0, 0, 2, 0, 0, 3});
  for (const auto* pad : nodes_of(g, "Pad")) {
    CHECK(pad->input(0) == "X");
    CHECK(onnx_io::get_string(*pad, "mode", "").value() == "edge");
  }
  const auto convs = nodes_of(g, "Conv");
  REQUIRE(convs.size() == 2);
  const auto w = values_of(*find_initializer(model.graph(), "W"));
  for (size_t p = 0; p < 2; ++p) {
    CHECK(conv_weight_dims(g, *convs[p]) == std::vector<int64_t>{24, 1, 6});
    CHECK(onnx_io::get_ints(*convs[p], "pads", {}).value() == std::vector<int64_t>{0, 0});
    const auto phase = values_of(*find_initializer(g, convs[p]->input(1)));
    // Channel 1, first tap: 2 * w[1][0][11 - p].
    CHECK(phase[6] == 2.0 * w[12 + 11 - p]);
  }
  const auto* last = find_producer(g, "Y");
  REQUIRE(last != nullptr);
  CHECK(last->op_type() == "Reshape");
  CHECK(last->name() == "crop");
  CHECK(values_of(*find_initializer(g, last->input(1))) == std::vector<double>{1, 24, 16});
  INFO(checker_error(out.model));
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(model, out.model, {{"X", input_x()}}, "Y", {1, 24, 16}) < kTolerance);
}

TEST_CASE("for litert and xnnpack the edge samples are a Concat of x's first and last samples, not an edge Pad", "[rewrite][upsample1d]") {
  const char* name = GENERATE("litert", "xnnpack");
  CAPTURE(name);
  const auto model = upsample1d();
  const auto out = rewrite_copy(model, target(name));
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  CHECK(count_ops(g, "Pad") == 0);
  const auto slices = nodes_of(g, "Slice");
  REQUIRE(slices.size() == 2);  // the first and the last sample, shared by both phases
  for (const auto* slice : slices) CHECK(slice->input(0) == "X");
  // Samples a tensor of the edge holds: 1 per Slice, the sum over a Concat's inputs.
  const std::function<int(const std::string&)> samples = [&](const std::string& name) {
    const auto* producer = find_producer(g, name);
    REQUIRE(producer != nullptr);
    if (producer->op_type() == "Slice") return 1;
    REQUIRE(producer->op_type() == "Concat");
    int sum = 0;
    for (const auto& input : producer->input()) sum += samples(input);
    return sum;
  };
  // Per phase: the first sample 3 (2) times, x, the last sample 2 (3) times, as one Concat of three.
  std::vector<std::array<int, 2>> edges;
  for (const auto* concat : nodes_of(g, "Concat")) {
    // LiteRT's XNNPACK delegate takes a CONCATENATION of 2 to 4 inputs: none wider.
    CHECK(concat->input_size() >= 2);
    CHECK(concat->input_size() <= 4);
    if (concat->input_size() == 3 && concat->input(1) == "X") edges.push_back({samples(concat->input(0)), samples(concat->input(2))});
  }
  CHECK(edges == std::vector<std::array<int, 2>>{{3, 2}, {2, 3}});
  CHECK(count_ops(g, "Concat") == 2 + 4 + 1);  // per phase, x2 and x3 of each edge sample (x3 = x2 and one), the join
  INFO(checker_error(out.model));
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(model, out.model, {{"X", input_x()}}, "Y", {1, 24, 16}) < kTolerance);
}

TEST_CASE("a causal crop after a 1-D ConvTranspose (Mimi) folds into zero-padded phases", "[rewrite][upsample1d]") {
  // No Pad before: 0 samples of constant padding, which the matcher reads as no Pad at all. k 12 s 2 crops 10 at the end.
  const auto model = upsample1d("constant", 0, "starts = {0}, ends = {-10}", "{-1}", 1.0);
  const auto out = rewrite_copy(model, target("ort"));
  REQUIRE(out.result.nodes.size() == 1);
  CHECK(out.result.nodes[0].summary.form == "upsample1d");
  CHECK(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  CHECK(count_ops(g, "Slice") == 0);
  CHECK(count_ops(g, "Mul") == 0);  // a gain of 1 goes with the region: the weights are the ConvTranspose's own
  CHECK(count_ops(g, "Pad") == 0);  // zero padding is each phase Conv's own
  CHECK(output_diff(model, out.model, {{"X", input_x()}}, "Y", {1, 24, 16}) < kTolerance);
}

TEST_CASE("upsample1d keeps what it cannot fold, saying why", "[rewrite][upsample1d][refusal]") {
  struct Case {
    onnx::ModelProto model;
    const char* reason;
    bool compare = true;  // false: the model's own output is empty (the rank-4 product's Slice)
  };
  const Case c = GENERATE(values<Case>({
      // The Pad's padded samples survive the crop: the output would hold x's edge where phases pad with it.
      {upsample1d("edge", 5, "starts = {0}, ends = {-15}"), "reaches past the crop"},
      // A crop of another axis is no crop of the length.
      {upsample1d("edge", 5, "starts = {0}, ends = {2}", "{1}"), "not of the last axis alone"},
      // Reflect padding is not x's edge.
      {upsample1d("reflect", 5), "Pad mode reflect"},
      // An edge Pad of 2: phase 0 would pad x by 3 samples, past the Pad's reach (the ConvTranspose read zeros there).
      {upsample1d("edge", 2, "starts = {9}, ends = {-9}"), "past the edge Pad's"},
      // inf x 0 is NaN after the ConvTranspose, not in a phase weight: only a finite gain folds.
      {infinite_gain(), "is not finite"},
      // A [1, 1, 1, 1] factor broadcasts the product to rank 4.
      {rank4_gain(), "more than the signal's 3", false},
      // A crop of 11 at the end leaves 2L-1 samples: no whole number of strides, which phases cannot interleave into
      // (it was planned anyway, its phase Convs padded wrongly and its join failing at run time).
      {upsample1d("constant", 0, "starts = {0}, ends = {-11}", "{-1}", 1.0), "not a whole number of strides"},
  }));
  const auto out = rewrite_copy(c.model, target("ort"));
  const auto it = std::find_if(out.result.nodes.begin(), out.result.nodes.end(),
                               [](const rewrite::NodeReport& n) { return n.summary.form == "upsample1d"; });
  REQUIRE(it != out.result.nodes.end());
  CAPTURE(it->reason);
  CHECK_FALSE(it->rewritten);
  CHECK_THAT(it->reason, Catch::Contains(c.reason));
  // The ConvTranspose is then matched on its own, and whatever happens to it computes what the original does.
  if (c.compare) CHECK(output_diff(c.model, out.model, {{"X", input_x()}}, "Y") < kTolerance);
}

TEST_CASE("a target that keeps upsample1d gives it one row, naming the ConvTranspose and saying what was measured",
          "[rewrite][upsample1d]") {
  // ncnn measured UpSample1d at 0.95x-1.01x ("Audio: 1-D upsamplers"), and keeps the ConvTranspose alone too (0.67x-0.72x).
  const auto model = upsample1d();
  const auto out = rewrite_copy(model, target("ncnn"));
  REQUIRE(out.result.nodes.size() == 1);
  const auto& row = out.result.nodes[0];
  CHECK(row.summary.form == "upsample1d");
  CHECK(row.summary.name == "up");
  CHECK_FALSE(row.rewritten);
  CHECK_THAT(row.reason, Catch::Contains("measured 0.95x-1.01x on ncnn"));
  CHECK(serialized(out.model) == serialized(model));
  // Without the form, the ConvTranspose is matched on its own again and has its own row.
  auto options = target("xnnpack");
  options.forms = {rewrite::Form::kConvTranspose};
  const auto alone = rewrite_copy(model, options);
  std::vector<std::string> forms;
  for (const auto& n : alone.result.nodes)
    forms.push_back(std::string(rewrite::form_name(n.summary.form)) + (n.rewritten ? " rewritten" : " kept"));
  // --forms leaves upsample1d out, which its row says; the ConvTranspose alone is xnnpack's to rewrite (2.27x-2.37x).
  CHECK(forms == std::vector<std::string>{"conv_transpose rewritten", "upsample1d kept"});
  CHECK(count_ops(alone.model.graph(), "Slice") == 1);  // the crop stays where the fold is not made
}

TEST_CASE("the default rewrites UpSample1d with an edge Pad, and keeps a depthwise ConvTranspose1d alone", "[rewrite][upsample1d]") {
  // "Audio: 1-D upsamplers": with an edge Pad UpSample1d measured 0.96x-1.01x on ncnn and faster on every other runtime
  // that converts it (ExecuTorch converts neither); the ConvTranspose1d alone measured 0.67x-0.72x on ncnn.
  const auto model = upsample1d();
  const auto out = rewrite_copy(model, target("default"));
  REQUIRE(out.result.rewritten == 1);
  CHECK(out.result.nodes[0].summary.form == "upsample1d");
  CHECK(count_ops(out.model.graph(), "Pad") == 2);  // an edge Pad per phase, as ncnn and MNN measured it
  CHECK(count_ops(out.model.graph(), "ConvTranspose") == 0);
  CHECK(output_diff(model, out.model, {{"X", input_x()}}, "Y", {1, 24, 16}) < kTolerance);
  auto options = target("default");
  options.forms = {rewrite::Form::kConvTranspose};
  const auto alone = rewrite_copy(model, options);
  REQUIRE_FALSE(alone.result.nodes.empty());
  CHECK(alone.result.rewritten == 0);
}

TEST_CASE("an end past any length (INT64_MAX, as exporters write 'to the end') crops nothing, the length unknown",
          "[rewrite][upsample1d]") {
  auto model = parse_model(
      "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1,24,L] X) => (float[1,24,M] Y) {\n"
      "  U = ConvTranspose <group = 24, kernel_shape = [12], strides = [2]> (X, W)\n"
      "  starts = Constant <value = int64[1] {10}> ()\n"
      "  ends = Constant <value = int64[1] {9223372036854775807}> ()\n"
      "  axes = Constant <value = int64[1] {-1}> ()\n"
      "  Y = Slice (U, starts, ends, axes)\n}\n");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {24, 1, 12}, 43);
  name_node(model, "U", "up");
  const auto out = rewrite_copy(model, target("ort"));
  REQUIRE(out.result.nodes.size() == 1);
  CAPTURE(out.result.nodes[0].reason);
  CHECK(out.result.nodes[0].summary.form == "upsample1d");
  CHECK(out.result.nodes[0].rewritten);
  // k 12 s 2 from 8 samples is 26; the crop of 10 at the front leaves 16: the phases' pads on x are 10 and 0 (the
  // ConvTranspose's 0 + 10 begin, 0 end), 2L + 10 - 10 = 2L samples.
  CHECK(count_ops(out.model.graph(), "Slice") == 0);
  CHECK(output_diff(model, out.model, {{"X", input_x()}}, "Y", {1, 24, 16}) < kTolerance);
}

namespace {

// Kokoro's decoder upsampling: nearest x2 of [1, C_in, L], then a Conv1d with kernel k ("same" pads).
onnx::ModelProto nearest_conv1d(int64_t c_in, int64_t c_out, int64_t k) {
  const std::string pad = std::to_string((k - 1) / 2);
  auto model = parse_model("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1," + std::to_string(c_in) + ",6] X) => (float[1," +
                           std::to_string(c_out) +
                           ",12] Y) {\n"
                           "  scales = Constant <value = float[3] {1.0, 1.0, 2.0}> ()\n"
                           "  U = Resize <mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"> "
                           "(X, , scales)\n"
                           "  Y = Conv <kernel_shape = [" +
                           std::to_string(k) + "], pads = [" + pad + ", " + pad + "]> (U, W, B)\n}\n");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {c_out, c_in, k}, 51);
  set_random_initializer(*model.mutable_graph(), "B", TensorProto::FLOAT, {c_out}, 52);
  name_node(model, "Y", "conv");
  return model;
}

}  // namespace

TEST_CASE("a nearest x2 then a 1x1 Conv1d (Kokoro) is the Conv1d first, then the nearest Resize by [1, 1, 2]",
          "[rewrite][nearest_conv][one_d]") {
  const auto model = nearest_conv1d(64, 32, 1);
  const auto out = rewrite_copy(model, target("ort"));
  REQUIRE(out.result.nodes.size() == 1);
  CAPTURE(out.result.nodes[0].reason);
  CHECK(out.result.nodes[0].summary.form == "nearest_conv");
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  const auto* resize = find_producer(g, "Y");
  REQUIRE(resize != nullptr);
  REQUIRE(resize->op_type() == "Resize");
  CHECK(values_of(*find_initializer(g, resize->input(resize->input_size() - 1))) == std::vector<double>{1, 1, 2});
  const auto* conv = find_producer(g, resize->input(0));
  REQUIRE(conv != nullptr);
  CHECK(conv->op_type() == "Conv");
  CHECK(conv->input(0) == "X");
  CHECK(conv_weight_dims(g, *conv) == std::vector<int64_t>{32, 64, 1});
  CHECK(checker_error(out.model).empty());
  const auto x = random_tensor4(1, 64, 1, 6, 53);
  CHECK(output_diff(model, out.model, {{"X", NaiveTensor({1, 64, 6}, x.data)}}, "Y", {1, 32, 12}) < kTolerance);
  // The default keeps it: its nearest + 1x1 rule was measured in 2-D only.
  const auto kept = rewrite_copy(model, target("default"));
  REQUIRE(kept.result.nodes.size() == 1);
  CHECK_FALSE(kept.result.nodes[0].rewritten);
  CHECK_THAT(kept.result.nodes[0].reason, Catch::Contains("1-D (measured 2-D)"));
}

TEST_CASE("a nearest x2 then a 3-tap Conv1d is rewritten as the 1-D ConvTranspose it computes", "[rewrite][nearest_conv][one_d]") {
  const auto model = nearest_conv1d(64, 64, 3);
  const auto out = rewrite_copy(model, target("xnnpack"));
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  CHECK(count_ops(g, "Resize") == 0);
  for (const auto* conv : nodes_of(g, "Conv")) CHECK(conv_weight_dims(g, *conv).size() == 3);
  const auto x = random_tensor4(1, 64, 1, 6, 54);
  // The phase weights are box sums of the Conv's taps, stored as float: off by their rounding, over 64 inputs.
  CHECK(output_diff(model, out.model, {{"X", NaiveTensor({1, 64, 6}, x.data)}}, "Y", {1, 64, 12}) < 1e-5);
}

TEST_CASE("a 1-D edge padding is a Concat of edge slices up to 16 samples a side, an edge Pad beyond",
          "[rewrite][nearest_conv][one_d][edge]") {
  // nearest x2, an edge Pad of (K-1)/2 each side, a depthwise Conv1d of K taps: each phase pads x with its edge by
  // about K/4 samples; xnnpack spells that as Slices and a Concat where it fits, an edge Pad where it would not.
  struct Case {
    int64_t k;
    bool slices;
  };
  const Case c = GENERATE(values<Case>({{3, true}, {71, false}}));
  CAPTURE(c.k);
  const std::string pad = std::to_string((c.k - 1) / 2);
  auto model = parse_model(
      "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1,64,40] X) => (float[1,64,80] Y) {\n"
      "  scales = Constant <value = float[3] {1.0, 1.0, 2.0}> ()\n"
      "  U = Resize <mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"> "
      "(X, , scales)\n"
      "  pads = Constant <value = int64[6] {0, 0, " +
      pad + ", 0, 0, " + pad +
      "}> ()\n"
      "  P = Pad <mode = \"edge\"> (U, pads)\n"
      "  Y = Conv <group = 64, kernel_shape = [" +
      std::to_string(c.k) + "]> (P, W)\n}\n");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {64, 1, c.k}, 55);
  name_node(model, "Y", "conv");
  const auto out = rewrite_copy(model, target("xnnpack"));
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  int axis2_concats = 0;
  for (const auto* concat : nodes_of(g, "Concat")) axis2_concats += onnx_io::get_int(*concat, "axis", -1).value() == 2 ? 1 : 0;
  if (c.slices) {
    CHECK(count_ops(g, "Pad") == 0);
    CHECK(count_ops(g, "Slice") == 2);
    CHECK(axis2_concats >= 1);
  } else {
    CHECK(count_ops(g, "Slice") == 0);
    CHECK(axis2_concats == 0);
    REQUIRE(count_ops(g, "Pad") >= 1);
    for (const auto* p : nodes_of(g, "Pad")) CHECK(onnx_io::get_string(*p, "mode", "").value() == "edge");
  }
  CHECK(checker_error(out.model).empty());
  const auto x = random_tensor4(1, 64, 1, 40, 56);
  // Box sums of the taps stored as float: off by their rounding.
  CHECK(output_diff(model, out.model, {{"X", NaiveTensor({1, 64, 40}, x.data)}}, "Y", {1, 64, 80}) < 1e-5);
}

TEST_CASE("Mimi's upsampler (k 4, a causal crop of 2) folds where its runtime measured it faster, and only there",
          "[rewrite][upsample1d][targets]") {
  // "Audio: 1-D upsamplers", Mimi's upsampler (C 128-512, T 125-1000): executor 1.92x-2.12x, LiteRT 7.95x-18.9x, ONNX
  // Runtime 1.43x-1.64x; OpenVINO 0.57x-0.89x, MNN 0.92x-1.02x, ncnn 0.98x-1.14x; ExecuTorch converts it only
  // rewritten (the crop's Slice does not pass torch.export through onnx2torch). The default follows the slowest.
  auto model = parse_model(
      "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1,128,10] X) => (float[1,128,20] Y) {\n"
      "  U = ConvTranspose <group = 128, kernel_shape = [4], strides = [2]> (X, W)\n"
      "  starts = Constant <value = int64[1] {0}> ()\n"
      "  ends = Constant <value = int64[1] {-2}> ()\n"
      "  axes = Constant <value = int64[1] {2}> ()\n"
      "  Y = Slice (U, starts, ends, axes)\n}\n");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {128, 1, 4}, 51);
  name_node(model, "U", "upsample");
  const std::map<std::string, bool> folds{{"xnnpack", true},   {"litert", true}, {"ort", true},   {"default", false},
                                          {"openvino", false}, {"mnn", false},   {"ncnn", false}, {"executorch", true}};
  for (const auto& [name, fold] : folds) {
    CAPTURE(name);
    const auto out = rewrite_copy(model, target(name.c_str()));
    const auto row = std::find_if(out.result.nodes.begin(), out.result.nodes.end(),
                                  [](const rewrite::NodeReport& n) { return n.summary.form == "upsample1d"; });
    REQUIRE(row != out.result.nodes.end());
    CAPTURE(row->reason);
    CHECK(row->rewritten == fold);
    if (fold) {
      CHECK(count_ops(out.model.graph(), "Slice") == 0);
      CHECK(count_ops(out.model.graph(), "Pad") == 0);  // no edge padding: zero padding is each phase Conv's own
      CHECK(count_ops(out.model.graph(), "Conv") == 2);
      const auto x = random_tensor4(1, 128, 1, 10, 52);
      CHECK(output_diff(model, out.model, {{"X", NaiveTensor({1, 128, 10}, x.data)}}, "Y", {1, 128, 20}) < kTolerance);
    } else if (name == "openvino" || name == "mnn" || name == "default") {
      CHECK_THAT(row->reason, Catch::StartsWith("not measured for this node: k 4 (measured 12)"));
    }
  }
}
