// Depthwise ConvTransposes that are not clean xs upscales on both axes but that a polyphase rewrite still computes
// exactly: a stride-1 one, dilated or not (GTCRN's decoder), an output a whole number of strides longer than s*H (FCN's
// uncropped 2H+2 and 8H+8), and a group-1 one whose weight is zero off the channel diagonal (FCN's bilinear upsamplers).
// Each test asserts the emitted structure, what was removed, and the numbers through the naive executor.
#include <catch2/catch.hpp>

#include "onnx_io/attributes.h"
#include "rewrite_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;
using onnx::TensorProto;

namespace {

// The one Conv that replaces a stride-1 ConvTranspose: named after the node, writing Y, reading X (or a crop of it).
const onnx::NodeProto& require_single_conv(const onnx::GraphProto& g) {
  REQUIRE(count_ops(g, "ConvTranspose") == 0);
  REQUIRE(count_ops(g, "Conv") == 1);
  CHECK(count_ops(g, "DepthToSpace") == 0);
  CHECK(count_ops(g, "Concat") == 0);
  const onnx::NodeProto* conv = find_producer(g, "Y");
  REQUIRE(conv != nullptr);
  REQUIRE(conv->op_type() == "Conv");
  CHECK(conv->name() == "up1");
  return *conv;
}

// A group-1 ConvTranspose C -> C whose weight is `diagonal` on [c, c] and zero elsewhere, plus `off` at [0, 1, 0, 0].
onnx::ModelProto dense_diagonal_model(int64_t channels, int64_t k, int64_t s, int64_t h, double off, const std::string& pads = "") {
  const std::string c = std::to_string(channels);
  const std::string attrs = "strides=[" + std::to_string(s) + "," + std::to_string(s) + "]" + (pads.empty() ? "" : ", pads=" + pads);
  auto model =
      parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1," + c + "," + std::to_string(h) + "," + std::to_string(h) +
                  "] X) => (float[1," + c + ",OH,OW] Y) {\n  Y = ConvTranspose <" + attrs + "> (X, W, B)\n}\n");
  std::vector<double> w(static_cast<size_t>(channels * channels * k * k), 0.0);
  const auto diagonal = random_tensor4(channels, 1, k, k, 11);
  for (int64_t ci = 0; ci < channels; ++ci) {
    for (int64_t t = 0; t < k * k; ++t)
      w[static_cast<size_t>((ci * channels + ci) * k * k + t)] = diagonal.data[static_cast<size_t>(ci * k * k + t)];
  }
  w[static_cast<size_t>(1 * k * k)] = off;  // [c_in 0, c_out 1, 0, 0]
  auto& g = *model.mutable_graph();
  *g.add_initializer() = onnx_io::make_tensor("W", TensorProto::FLOAT, {channels, channels, k, k}, w, true);
  set_random_initializer(g, "B", TensorProto::FLOAT, {channels}, 12);
  name_node(model, "Y", "up1");
  return model;
}

// --target litert's emission (its join, its edge form) without its rules, so that every node here is rewritten: these
// tests are of what the rewrite writes, not of which nodes a runtime's measurements cover (target_rules_test.cpp).
rewrite::RewriteOptions litert() {
  static const rewrite::Target unrestricted = [] {
    rewrite::Target t = *rewrite::find_target("litert");
    t.rules.clear();
    return t;
  }();
  rewrite::RewriteOptions options;
  options.target = &unrestricted;
  return options;
}

}  // namespace

TEST_CASE("a dilated stride-1 depthwise ConvTranspose becomes one dilated Conv with the kernel flipped (GTCRN)", "[rewrite][stride1]") {
  // GTCRN's decoder: kernel (3,3), stride 1, dilation (5,1), padding (2*5, 1): T - 10 x F, after a causal pad upstream.
  DeconvSpec spec;
  spec.channels = 4;
  spec.kh = spec.kw = 3;
  spec.h = 14;
  spec.w = 6;
  spec.bias = true;
  spec.attrs = "strides=[1,1], pads=[10,1,10,1], dilations=[5,1]";
  const auto model = deconv_model(spec);
  const auto out = rewrite_copy(model);
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  const auto& conv = require_single_conv(g);
  CHECK(attr_ints(conv, "dilations") == std::vector<int64_t>{5, 1});
  CHECK(attr_ints(conv, "pads") == std::vector<int64_t>{0, 1, 0, 1});  // (k-1)*d - Pb = 0 in time, 1 in frequency
  CHECK(find_attr(conv, "group")->i() == 4);
  CHECK(conv.input(0) == "X");
  CHECK(conv.input(2) == "B");
  CHECK(count_ops(g, "Pad") == 0);
  CHECK(find_initializer(g, "W") == nullptr);  // only the flipped kernel is left
  CHECK(conv_weight_dims(g, conv) == std::vector<int64_t>{4, 1, 3, 3});
  const auto& row = out.result.nodes[0].summary;
  REQUIRE(row.dilations);
  CHECK(*row.dilations == std::array<int64_t, 2>{5, 1});
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(model, out.model, {{"X", input_for(spec)}}, "Y", {1, 4, 4, 6}) < kTolerance);
}

TEST_CASE("a stride-1 depthwise ConvTranspose of any output length is rewritten, cropping where its pads exceed the kernel",
          "[rewrite][stride1]") {
  struct Case {
    const char* attrs;
    std::vector<int64_t> dims;       // of Y for a 7x6 input
    std::vector<int64_t> conv_pads;  // the Conv's own pads
    bool crop;                       // a Pad with a negative pad before the Conv
  };
  const Case c = GENERATE(values<Case>({
      {"strides=[1,1], pads=[2,1,2,1]", {1, 3, 5, 6}, {0, 1, 0, 1}, false},                   // 1*H-2, GTCRN's last block
      {"strides=[1,1], pads=[0,0,0,0]", {1, 3, 9, 8}, {2, 2, 2, 2}, false},                   // H+2: a full correlation
      {"strides=[1,1], pads=[3,0,1,1]", {1, 3, 5, 7}, {0, 2, 1, 1}, true},                    // begin 2-3 = -1: a crop
      {"strides=[1,1], pads=[1,1,1,1], dilations=[2,2]", {1, 3, 9, 8}, {3, 3, 3, 3}, false},  // dilated, H+2
      {"strides=[1,1], pads=[1,1,5,1], dilations=[2,1]", {1, 3, 5, 6}, {3, 1, 0, 1}, true},   // end 4-5 = -1: a crop
  }));
  CAPTURE(c.attrs);
  DeconvSpec spec;
  spec.kh = spec.kw = 3;
  spec.h = 7;
  spec.w = 6;
  spec.attrs = c.attrs;
  const auto model = deconv_model(spec);
  const auto out = rewrite_copy(model);
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  const auto& conv = require_single_conv(g);
  CHECK(attr_ints(conv, "pads") == c.conv_pads);
  CHECK(count_ops(g, "Pad") == (c.crop ? 1 : 0));
  if (c.crop) {
    const auto* pad = find_producer(g, conv.input(0));
    REQUIRE(pad != nullptr);
    CHECK(pad->op_type() == "Pad");
  }
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(model, out.model, {{"X", input_for(spec)}}, "Y", c.dims) < kTolerance);
}

TEST_CASE("an output a whole number of strides longer is rewritten with every phase as long (FCN's uncropped 2H+2)", "[rewrite][growth]") {
  DeconvSpec spec;  // k4 s2 p0: 2H+2 x 2W+2
  spec.channels = 3;
  spec.attrs = "strides=[2,2]";
  spec.bias = true;
  const auto model = deconv_model(spec);
  const auto out = rewrite_copy(model);
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  const auto convs = require_polyphase(g, "Y", 2, 3, 13, "up1");
  // Each phase yields H+1 x W+1: two taps per axis, padded by one on each side.
  for (const auto* conv : convs) CHECK(attr_ints(*conv, "pads") == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(count_ops(g, "ConvTranspose") == 0);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(model, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 12, 10}) < kTolerance);
  // Shorter by a whole stride: k2 s2 pads 1/1 gives 2H-2; and not a whole stride (2H+1) stays kept.
  spec.kh = spec.kw = 2;
  spec.attrs = "strides=[2,2], pads=[1,1,1,1]";
  const auto shorter = deconv_model(spec);
  const auto cropped = rewrite_copy(shorter);
  REQUIRE(cropped.result.rewritten == 1);
  CHECK(output_diff(shorter, cropped.model, {{"X", input_for(spec)}}, "Y", {1, 3, 8, 6}) < kTolerance);
}

TEST_CASE("FCN's k16 s8 uncropped upsampler is 64 phases, within the default --max-phases", "[rewrite][growth]") {
  DeconvSpec spec;
  spec.channels = 2;
  spec.kh = spec.kw = 16;
  spec.h = 3;
  spec.w = 2;
  spec.attrs = "strides=[8,8]";
  const auto model = deconv_model(spec);
  const auto out = rewrite_copy(model);
  REQUIRE(out.result.rewritten == 1);
  const auto convs = require_polyphase(out.model.graph(), "Y", 8, 2, 13, "up1");
  for (const auto* conv : convs) CHECK(attr_ints(*conv, "kernel_shape") == std::vector<int64_t>{2, 2});
  CHECK(output_diff(model, out.model, {{"X", input_for(spec)}}, "Y", {1, 2, 32, 24}) < kTolerance);
}

TEST_CASE("a group-1 ConvTranspose that is zero off the channel diagonal is rewritten as the depthwise one it computes (FCN)",
          "[rewrite][depthwise_in_value]") {
  const auto model = dense_diagonal_model(5, 4, 2, 4, 0.0);
  const auto out = rewrite_copy(model);
  REQUIRE(out.result.rewritten == 1);
  const auto& row = out.result.nodes[0];
  CHECK(row.summary.depthwise_in_value);
  const auto& g = out.model.graph();
  const auto convs = require_polyphase(g, "Y", 2, 5, 13, "up1");
  for (const auto* conv : convs) CHECK(conv_weight_dims(g, *conv) == std::vector<int64_t>{5, 1, 2, 2});
  CHECK(find_initializer(g, "W") == nullptr);  // the dense [5, 5, 4, 4] weight is gone
  CHECK(find_initializer(g, "B") != nullptr);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(model, out.model, {{"X", random_tensor4(1, 5, 4, 4, 3)}}, "Y", {1, 5, 10, 10}) < kTolerance);
}

TEST_CASE("a group-1 ConvTranspose with one non-zero (or NaN) off the diagonal stays dense", "[rewrite][depthwise_in_value]") {
  for (double off : {1e-30, std::nan("")}) {
    CAPTURE(off);
    const auto model = dense_diagonal_model(3, 4, 2, 4, off, "[1,1,1,1]");
    const auto out = rewrite_copy(model);
    REQUIRE(out.result.nodes.size() == 1);
    CHECK_FALSE(out.result.nodes[0].rewritten);
    CHECK_FALSE(out.result.nodes[0].summary.depthwise_in_value);
    CHECK_THAT(out.result.nodes[0].reason, Catch::Contains("dense (group 1)"));
    CHECK(serialized(out.model) == serialized(model));
  }
}

TEST_CASE("strides that differ per axis are interleaved per axis: DeepFilterNet's (1,2) and MobileStyleGAN's (2,1) and (1,2)",
          "[rewrite][anisotropic]") {
  struct Case {
    const char* attrs;
    int64_t kh, kw;
    std::vector<int64_t> dims;  // of Y for a 5x4 input
    int64_t unsqueezes, reshapes;
  };
  const Case c = GENERATE(values<Case>({
      {"strides=[1,2], pads=[0,1,0,1], output_padding=[0,1]", 1, 3, {1, 3, 5, 8}, 2, 1},  // DeepFilterNet3's convkxf, fstride 2
      {"strides=[2,1], kernel_shape=[2,1]", 2, 1, {1, 3, 10, 4}, 0, 1},                   // MobileStyleGAN's IDWT, along H
      {"strides=[1,2], kernel_shape=[1,2]", 1, 2, {1, 3, 5, 8}, 2, 1},                    // and along W
      {"strides=[2,3], pads=[1,1,1,1]", 4, 5, {1, 3, 10, 12}, 6, 3},                      // both > 1 and unequal
      {"strides=[2,1], pads=[1,1,1,1]", 4, 3, {1, 3, 10, 4}, 0, 1},                       // H only, with a 3-tap W axis
      // Both > 1 with W a whole number of strides longer (2W+2) or shorter (2W-2): each row's value_info must carry it.
      {"strides=[4,2], pads=[1,0,0,0], output_padding=[1,0]", 4, 4, {1, 3, 20, 10}, 8, 5},
      {"strides=[2,3], pads=[1,3,1,2], output_padding=[0,1]", 4, 4, {1, 3, 10, 9}, 6, 3},
  }));
  CAPTURE(c.attrs);
  DeconvSpec spec;
  spec.kh = c.kh;
  spec.kw = c.kw;
  spec.bias = true;
  spec.attrs = c.attrs;
  const auto model = deconv_model(spec);
  const auto out = rewrite_copy(model, litert());
  REQUIRE(out.result.rewritten == 1);
  CHECK(out.result.nodes[0].layout == rewrite::PhaseLayout::kInterleave);
  const auto& g = out.model.graph();
  CHECK(count_ops(g, "ConvTranspose") == 0);
  CHECK(count_ops(g, "DepthToSpace") == 0);
  CHECK(count_ops(g, "Unsqueeze") == c.unsqueezes);
  CHECK(count_ops(g, "Reshape") == c.reshapes);
  const auto* last = find_producer(g, "Y");
  REQUIRE(last != nullptr);
  CHECK(last->op_type() == "Reshape");
  CHECK(last->name() == "up1");
  const auto strides = attr_ints(model.graph().node(0), "strides");
  CHECK(count_ops(g, "Conv") == strides[0] * strides[1]);
  for (const auto* conv : nodes_of(g, "Conv")) {
    CHECK(find_attr(*conv, "group")->i() == 3);
    CHECK(attr_ints(*conv, "strides") == std::vector<int64_t>{1, 1});
  }
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(model, out.model, {{"X", input_for(spec)}}, "Y", c.dims) < kTolerance);
}

TEST_CASE("an H-only stride on an input of unknown width is kept, saying why, and a W-only one needs no extent", "[rewrite][anisotropic]") {
  DeconvSpec spec;
  spec.w = 0;  // symbolic W
  spec.kh = 2;
  spec.kw = 1;
  spec.attrs = "strides=[2,1]";
  const auto model = deconv_model(spec);
  const auto out = rewrite_copy(model, litert());
  REQUIRE(out.result.nodes.size() == 1);
  CHECK_FALSE(out.result.nodes[0].rewritten);
  CHECK_THAT(out.result.nodes[0].reason, Catch::Contains("needs the width") && Catch::Contains("--input-shape"));
  CHECK(serialized(out.model) == serialized(model));
  spec.kh = 1;
  spec.kw = 4;
  spec.h = 0;
  spec.attrs = "strides=[1,2], pads=[0,1,0,1]";
  const auto w_only = deconv_model(spec);
  const auto rewritten = rewrite_copy(w_only, litert());
  REQUIRE(rewritten.result.rewritten == 1);
  CHECK(count_ops(rewritten.model.graph(), "Reshape") == 1);
  CHECK(output_diff(w_only, rewritten.model, {{"X", input_for(spec, 3, 5)}}, "Y", {1, 3, 3, 10}) < kTolerance);
}

TEST_CASE("equal phases of strides that differ per axis are one Conv and a nearest Resize by (s_h, s_w)", "[rewrite][anisotropic]") {
  // MobileStyleGAN's IDWT low band: a (2,1) kernel of equal taps, stride (2,1): each output row repeats its input row.
  auto model = parse_model(
      "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1,2,3,4] X) => (float[1,2,6,4] Y) {\n"
      "  Y = ConvTranspose <group=2, strides=[2,1]> (X, W)\n}\n");
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("W", TensorProto::FLOAT, {2, 1, 2, 1}, {0.5, 0.5, -2, -2}, true);
  name_node(model, "Y", "up1");
  const auto out = rewrite_copy(model, litert());
  REQUIRE(out.result.rewritten == 1);
  CHECK(out.result.nodes[0].layout == rewrite::PhaseLayout::kNearest);
  const auto& g = out.model.graph();
  const auto* resize = find_producer(g, "Y");
  REQUIRE(resize != nullptr);
  REQUIRE(resize->op_type() == "Resize");
  CHECK(values_of(*find_initializer(g, resize->input(resize->input_size() - 1))) == std::vector<double>{1, 1, 2, 1});
  CHECK(count_ops(g, "Conv") == 1);
  CHECK(output_diff(model, out.model, {{"X", random_tensor4(1, 2, 3, 4, 9)}}, "Y", {1, 2, 6, 4}) < kTolerance);
}

TEST_CASE("a 1-D depthwise ConvTranspose is rewritten in 1-D: Conv1d phases stacked on a new last axis, reshaped to [N, C, L*s]",
          "[rewrite][one_d]") {
  struct Case {
    const char* attrs;
    const char* attrs_2d;  // the same node on [N, C, 1, L]: an independent reference for the 1-D one
    int64_t k, opset;
    std::vector<int64_t> dims;  // of Y for an input of length 6
    const char* layout;
    std::vector<int64_t> conv_pads;  // every phase Conv's pads, 1-D: [begin, end]
    int64_t s;
  };
  const Case c = GENERATE(values<Case>({
      {"strides=[2], pads=[1,1]", "strides=[1,2], pads=[0,1,0,1]", 4, 13, {1, 3, 12}, "interleave", {}, 2},  // x2, clean
      // x4, Unsqueeze with an axes attribute
      {"strides=[4], pads=[2,2]", "strides=[1,4], pads=[0,2,0,2]", 8, 11, {1, 3, 24}, "interleave", {}, 4},
      {"strides=[1], pads=[2,2], dilations=[3]", "strides=[1,1], pads=[0,2,0,2], dilations=[1,3]", 3, 13, {1, 3, 8}, "single", {4, 4}, 1},
      // BigVGAN's UpSample1d ConvTranspose (k 12, s 2, no pads): each phase 6 taps with 5 zeros each side
      {"strides=[2]", "strides=[1,2]", 12, 17, {1, 3, 22}, "interleave", {5, 5}, 2},
  }));
  CAPTURE(c.attrs, c.opset);
  auto model = parse_model("<ir_version: 8, opset_import: [\"\" : " + std::to_string(c.opset) +
                           "]>\ng (float[1,3,6] X) => (float[1,3,L] Y) {\n  Y = ConvTranspose <group=3, " + c.attrs + "> (X, W, B)\n}\n");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, c.k}, 21);
  set_random_initializer(*model.mutable_graph(), "B", TensorProto::FLOAT, {3}, 22);
  name_node(model, "Y", "up1");
  const auto out = rewrite_copy(model, litert());
  REQUIRE(out.result.rewritten == 1);
  CHECK(rewrite::phase_layout_name(out.result.nodes[0].layout) == std::string(c.layout));
  const auto& g = out.model.graph();
  CHECK(count_ops(g, "ConvTranspose") == 0);
  CHECK(count_ops(g, "Squeeze") == 0);  // no detour through 2-D
  const auto* last = find_producer(g, "Y");
  REQUIRE(last != nullptr);
  CHECK(last->name() == "up1");
  const std::string layout = c.layout;
  if (layout == "interleave") {
    // s Unsqueezes of the phases to [N, C, L, 1], one Concat on axis 3, a Reshape to literal [1, 3, L*s].
    const int64_t s = c.s;
    CHECK(last->op_type() == "Reshape");
    CHECK(values_of(*find_initializer(g, last->input(1))) == std::vector<double>{1, 3, static_cast<double>(c.dims[2])});
    const auto* concat = find_producer(g, last->input(0));
    REQUIRE(concat != nullptr);
    CHECK(concat->op_type() == "Concat");
    CHECK(onnx_io::get_int(*concat, "axis", -1).value() == 3);
    CHECK(concat->input_size() == s);
    CHECK(count_ops(g, "Unsqueeze") == s);
    CHECK(count_ops(g, "Conv") == s);
  } else {
    CHECK(last->op_type() == "Conv");
  }
  for (const auto* conv : nodes_of(g, "Conv")) {
    CHECK(conv_weight_dims(g, *conv).size() == 3);  // [C, 1, M]
    CHECK(onnx_io::get_ints(*conv, "strides", {}).value() == std::vector<int64_t>{1});
    CHECK(conv->input(0) == "X");
    if (!c.conv_pads.empty()) CHECK(onnx_io::get_ints(*conv, "pads", {}).value() == c.conv_pads);
  }
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(checker_error(out.model).empty());
  auto planar =
      parse_model("<ir_version: 8, opset_import: [\"\" : " + std::to_string(c.opset) +
                  "]>\ng (float[1,3,1,6] X) => (float[1,3,1,L] Y) {\n  Y = ConvTranspose <group=3, " + c.attrs_2d + "> (X, W, B)\n}\n");
  set_random_initializer(*planar.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 1, c.k}, 21);
  set_random_initializer(*planar.mutable_graph(), "B", TensorProto::FLOAT, {3}, 22);
  const auto x = random_tensor4(1, 3, 1, 6, 23);
  const NaiveTensor expected = run_naive(planar, {{"X", x}}).at("Y");
  const NaiveTensor actual = run_naive(out.model, {{"X", NaiveTensor({1, 3, 6}, x.data)}}).at("Y");
  REQUIRE(actual.dims == c.dims);
  REQUIRE(expected.data.size() == actual.data.size());
  double worst = 0, largest = 0;
  for (size_t i = 0; i < actual.data.size(); ++i) {
    worst = std::max(worst, std::abs(expected.data[i] - actual.data[i]));
    largest = std::max(largest, std::abs(expected.data[i]));
  }
  CHECK(largest > 1e-3);
  CHECK(worst < kTolerance);
}

TEST_CASE("a 1-D upsampler of unknown length reshapes to [0, C, -1]", "[rewrite][one_d]") {
  auto model = parse_model(
      "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[N,3,L] X) => (float[N,3,M] Y) {\n"
      "  Y = ConvTranspose <group=3, strides=[2], pads=[1,1]> (X, W, B)\n}\n");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4}, 31);
  set_random_initializer(*model.mutable_graph(), "B", TensorProto::FLOAT, {3}, 32);
  const auto out = rewrite_copy(model, litert());
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  const auto* last = find_producer(g, "Y");
  REQUIRE(last != nullptr);
  REQUIRE(last->op_type() == "Reshape");
  CHECK(values_of(*find_initializer(g, last->input(1))) == std::vector<double>{0, 3, -1});
  const auto x = random_tensor4(2, 3, 1, 5, 33);
  const NaiveTensor y = run_naive(out.model, {{"X", NaiveTensor({2, 3, 5}, x.data)}}).at("Y");
  const NaiveTensor ref = run_naive(model, {{"X", NaiveTensor({2, 3, 5}, x.data)}}).at("Y");
  REQUIRE(y.dims == std::vector<int64_t>{2, 3, 10});
  REQUIRE(ref.dims == y.dims);
  double worst = 0;
  for (size_t i = 0; i < y.data.size(); ++i) worst = std::max(worst, std::abs(y.data[i] - ref.data[i]));
  CHECK(worst < kTolerance);
}

TEST_CASE("the xnnpack target keeps strides that differ per axis below 64 channels and rewrites them from 64", "[rewrite][anisotropic]") {
  DeconvSpec spec;
  spec.kh = 1;
  spec.kw = 2;
  spec.attrs = "strides=[1,2]";
  for (const int64_t c : {16, 64}) {
    spec.channels = c;
    const auto model = deconv_model(spec);
    const auto out = rewrite_copy(model);  // the library's default target: xnnpack
    REQUIRE(out.result.nodes.size() == 1);
    CHECK(out.result.nodes[0].rewritten == (c >= 64));
    if (c < 64) {
      CHECK_THAT(out.result.nodes[0].reason, Catch::Contains("16 input channels (< 64)") && Catch::Contains("the executor"));
      CHECK(serialized(out.model) == serialized(model));
    }
  }
}

TEST_CASE("ExecuTorch's 1-D join is Flatten and Unsqueeze at batch 1, and a batch not known to be 1 keeps the node",
          "[rewrite][one_d][executorch]") {
  // onnx2torch makes a Reshape a module that reads its shape as a tensor, which torch.export refuses
  // (GuardOnDataDependentSymNode): [1, C, L, s] -> Flatten(axis 2) -> [C, L*s] -> Unsqueeze(0) reads none.
  rewrite::Target unrestricted = *rewrite::find_target("executorch");
  unrestricted.rules.clear();
  rewrite::RewriteOptions options;
  options.target = &unrestricted;
  auto model = parse_model(
      "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1,3,6] X) => (float[1,3,12] Y) {\n"
      "  Y = ConvTranspose <group=3, strides=[2], pads=[1,1]> (X, W, B)\n}\n");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4}, 41);
  set_random_initializer(*model.mutable_graph(), "B", TensorProto::FLOAT, {3}, 42);
  name_node(model, "Y", "up1");
  const auto out = rewrite_copy(model, options);
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  CHECK(count_ops(g, "Reshape") == 0);
  CHECK(count_ops(g, "ConvTranspose") == 0);
  const auto* last = find_producer(g, "Y");
  REQUIRE(last != nullptr);
  CHECK(last->op_type() == "Unsqueeze");
  CHECK(last->name() == "up1");
  CHECK(values_of(*find_initializer(g, last->input(1))) == std::vector<double>{0});
  const auto* flatten = find_producer(g, last->input(0));
  REQUIRE(flatten != nullptr);
  CHECK(flatten->op_type() == "Flatten");
  CHECK(onnx_io::get_int(*flatten, "axis", -1).value() == 2);
  CHECK(checker_error(out.model).empty());
  const auto x = random_tensor4(1, 3, 1, 6, 43);
  CHECK(output_diff(model, out.model, {{"X", NaiveTensor({1, 3, 6}, x.data)}}, "Y", {1, 3, 12}) < kTolerance);

  // Batch N: Flatten would fold N into the channels; the node is kept, saying why.
  auto batched = parse_model(
      "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[N,3,6] X) => (float[N,3,12] Y) {\n"
      "  Y = ConvTranspose <group=3, strides=[2], pads=[1,1]> (X, W, B)\n}\n");
  set_random_initializer(*batched.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4}, 41);
  set_random_initializer(*batched.mutable_graph(), "B", TensorProto::FLOAT, {3}, 42);
  const auto kept = rewrite_copy(batched, options);
  CHECK(kept.result.rewritten == 0);
  REQUIRE(kept.result.nodes.size() == 1);
  CHECK_THAT(kept.result.nodes[0].reason, Catch::Contains("needs an input of batch 1"));
}
