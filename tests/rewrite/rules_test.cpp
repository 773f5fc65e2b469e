// Each rewrite rule: the geometry and attribute forms a clean xs depthwise ConvTranspose can take, and the
// polyphase form it becomes. Every test checks the structure and the numbers (naive executor, seeded inputs).
#include <catch2/catch.hpp>

#include "rewrite_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;
using onnx::TensorProto;

TEST_CASE("k4 s2 p1 becomes four 2x2 phase Convs then a Concat and a DCR DepthToSpace", "[rewrite][rule]") {
  DeconvSpec spec;  // C=3, k4, s2, pads 1, H=5, W=4
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();

  REQUIRE(out.result.rewritten == 1);
  REQUIRE(out.result.kept == 0);
  CHECK(out.result.nodes[0].summary.pads == std::array<int64_t, 4>{1, 1, 1, 1});
  CHECK(out.result.nodes[0].emitted_nodes.size() == 6);
  CHECK(count_ops(g, "ConvTranspose") == 0);
  CHECK(op_types(g) == std::vector<std::string>{"Conv", "Conv", "Conv", "Conv", "Concat", "DepthToSpace"});
  const auto convs = require_polyphase(g, "Y", 2, 3, 13, "up1");
  // Phase (ay, ax): begin pad M-1-c, end pad c per axis, so the row-major order is pinned down.
  CHECK(attr_ints(*convs[0], "pads") == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(attr_ints(*convs[1], "pads") == std::vector<int64_t>{1, 0, 0, 1});
  CHECK(attr_ints(*convs[2], "pads") == std::vector<int64_t>{0, 1, 1, 0});
  CHECK(attr_ints(*convs[3], "pads") == std::vector<int64_t>{0, 0, 1, 1});
  for (const auto* conv : convs) {
    CHECK(conv->input(0) == "X");
    CHECK(conv->input_size() == 2);
    CHECK(conv_weight_dims(g, *conv) == std::vector<int64_t>{3, 1, 2, 2});
    CHECK(attr_ints(*conv, "kernel_shape") == std::vector<int64_t>{2, 2});
  }
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(g.initializer_size() == 4);
  CHECK(g.output(0).name() == "Y");
  // New tensors get value_info where shapes are known.
  for (const auto* conv : convs) {
    const auto* vi = find_value_info(g, conv->output(0));
    REQUIRE(vi != nullptr);
    REQUIRE(vi->type().tensor_type().shape().dim_size() == 4);
    CHECK(vi->type().tensor_type().shape().dim(1).dim_value() == 3);
    CHECK(vi->type().tensor_type().shape().dim(2).dim_value() == 5);
    CHECK(vi->type().tensor_type().shape().dim(3).dim_value() == 4);
  }
  const auto* concat_vi = find_value_info(g, find_producer(g, "Y")->input(0));
  REQUIRE(concat_vi != nullptr);
  CHECK(concat_vi->type().tensor_type().shape().dim(1).dim_value() == 12);
  CHECK(checker_error(out.model).empty());

  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 10, 8}) < kTolerance);
}

TEST_CASE("each clean geometry is rewritten and matches the original", "[rewrite][rule]") {
  struct Case {
    const char* what;
    int64_t kh, kw, stride;
    const char* attrs;
    bool bias;
  };
  const Case c = GENERATE(values<Case>({
      {"3x3 s2 output_padding 1", 3, 3, 2, "strides=[2,2], pads=[1,1,1,1], output_padding=[1,1]", false},
      {"2x2 s2 p0", 2, 2, 2, "strides=[2,2]", false},
      {"2x2 s2 p0 explicit zero pads", 2, 2, 2, "strides=[2,2], pads=[0,0,0,0], dilations=[1,1]", true},
      {"k5 s3 p1", 5, 5, 3, "strides=[3,3], pads=[1,1,1,1]", false},
      {"k3 s3 p0", 3, 3, 3, "strides=[3,3]", true},
      {"k8 s4 p2", 8, 8, 4, "strides=[4,4], pads=[2,2,2,2]", false},
      {"k4 s4 p0", 4, 4, 4, "strides=[4,4]", true},
      {"rectangular 4x3", 4, 3, 2, "strides=[2,2], pads=[1,0,1,1]", false},
      {"rectangular 2x5", 2, 5, 2, "strides=[2,2], pads=[0,1,0,2]", true},
      {"asymmetric pads 2/0 and 0/2", 4, 4, 2, "strides=[2,2], pads=[2,0,0,2]", false},
      {"asymmetric k5 s2 op1", 5, 5, 2, "strides=[2,2], pads=[3,1,1,3], output_padding=[1,1]", true},
      {"kernel_shape given", 4, 4, 2, "strides=[2,2], pads=[1,1,1,1], kernel_shape=[4,4]", false},
      {"k4 s2 p1 with bias", 4, 4, 2, "strides=[2,2], pads=[1,1,1,1]", true},
  }));
  CAPTURE(c.what);
  DeconvSpec spec;
  spec.kh = c.kh;
  spec.kw = c.kw;
  spec.attrs = c.attrs;
  spec.bias = c.bias;
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();

  REQUIRE(out.result.rewritten == 1);
  CHECK(count_ops(g, "ConvTranspose") == 0);
  CHECK(count_ops(g, "Pad") == 0);
  CHECK(count_ops(g, "Conv") == c.stride * c.stride);
  const auto convs = require_polyphase(g, "Y", c.stride, 3, 13, "up1");
  for (const auto* conv : convs) CHECK(conv->input_size() == (c.bias ? 3 : 2));
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK((find_initializer(g, "B") != nullptr) == c.bias);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 5 * c.stride, 4 * c.stride}) < kTolerance);
}

TEST_CASE("every clean configuration with k <= 7 and s <= 4 matches the original", "[rewrite][rule][sweep]") {
  int checked = 0;
  for (int64_t s = 1; s <= 4; ++s) {
    for (int64_t k = 1; k <= 7; ++k) {
      for (int64_t op = 0; op < s; ++op) {
        const int64_t total = k + op - s;  // Pb + Pe of a clean upscale
        if (total < 0) continue;
        // Split the total both ways, so begin != end on each axis, and pair with a different x kernel.
        const int64_t pb = total / 2, pe = total - pb;
        const int64_t kx = k == 1 ? k : k - 1;
        const int64_t total_x = kx + op - s;
        if (total_x < 0) continue;
        DeconvSpec spec;
        spec.channels = 2;
        spec.kh = k;
        spec.kw = kx;
        spec.h = 3;
        spec.w = 2;
        spec.bias = (k + s) % 2 == 0;
        spec.seed = static_cast<uint32_t>(100 * s + 10 * k + op);
        spec.attrs = "strides=[" + std::to_string(s) + "," + std::to_string(s) + "], pads=[" + std::to_string(pb) + "," +
                     std::to_string(total_x - total_x / 2) + "," + std::to_string(pe) + "," + std::to_string(total_x / 2) +
                     "], output_padding=[" + std::to_string(op) + "," + std::to_string(op) + "]";
        CAPTURE(spec.attrs, k, kx);
        const auto original = deconv_model(spec);
        const auto out = rewrite_copy(original);
        REQUIRE(out.result.rewritten == 1);
        const auto& g = out.model.graph();
        CHECK(count_ops(g, "ConvTranspose") == 0);
        // min(k, s) phases per axis have taps; the others share one bias Conv over zeros (none without a bias).
        const bool bias_only = k < s || kx < s;
        CHECK(count_ops(g, "Conv") == std::min(k, s) * std::min(kx, s) + (bias_only && spec.bias ? 1 : 0));
        CHECK(count_ops(g, "ConstantOfShape") == (bias_only ? 1 : 0));
        CHECK(count_ops(g, "DepthToSpace") == (s > 1 ? 1 : 0));
        CHECK(find_initializer(g, "W") == nullptr);
        CHECK(checker_error(out.model).empty());
        CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 2, 3 * s, 2 * s}) < kTolerance);
        ++checked;
      }
    }
  }
  CHECK(checked == 54);  // every (s, k, op) whose y and x kernels both allow a clean upscale
}

TEST_CASE("stride 1 becomes a single depthwise Conv with the kernel flipped", "[rewrite][rule]") {
  DeconvSpec spec;
  spec.kh = 3;
  spec.kw = 3;
  spec.bias = true;
  spec.attrs = "strides=[1,1], pads=[1,0,1,2]";
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();

  REQUIRE(out.result.rewritten == 1);
  REQUIRE(g.node_size() == 1);
  const auto& conv = g.node(0);
  CHECK(conv.op_type() == "Conv");
  CHECK(conv.name() == "up1");
  CHECK(conv.output(0) == "Y");
  CHECK(count_ops(g, "Concat") == 0);
  CHECK(count_ops(g, "DepthToSpace") == 0);
  CHECK(find_attr(conv, "group")->i() == 3);
  CHECK(attr_ints(conv, "pads") == std::vector<int64_t>{1, 2, 1, 0});  // k-1-Pb, k-1-Pe per axis
  // The kernel is flipped on both axes: phase[c, 0, i, j] == W[c, 0, 2-i, 2-j].
  const auto* w = find_initializer(original.graph(), "W");
  const auto* flipped = find_initializer(g, conv.input(1));
  REQUIRE(flipped != nullptr);
  const auto wv = values_of(*w);
  const auto fv = values_of(*flipped);
  REQUIRE(fv.size() == wv.size());
  for (size_t c = 0; c < 3; ++c) {
    for (size_t i = 0; i < 3; ++i) {
      for (size_t j = 0; j < 3; ++j) CHECK(fv[c * 9 + i * 3 + j] == wv[c * 9 + (2 - i) * 3 + (2 - j)]);
    }
  }
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 5, 4}) < kTolerance);
}

TEST_CASE("stride 1 with explicit_pad is a Pad and a Conv with zero pads", "[rewrite][rule][explicit_pad]") {
  DeconvSpec spec;
  spec.kh = spec.kw = 3;
  spec.opset = 11;
  spec.attrs = "strides=[1,1], pads=[1,0,1,2]";
  const auto original = deconv_model(spec);
  rewrite::RewriteOptions options;
  options.emit.explicit_pad = true;
  const auto out = rewrite_copy(original, options);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  REQUIRE(op_types(g) == std::vector<std::string>{"Pad", "Conv"});
  CHECK(g.node(1).output(0) == "Y");
  CHECK(g.node(1).name() == "up1");
  CHECK(g.node(1).input(0) == g.node(0).output(0));
  CHECK(attr_ints(g.node(1), "pads") == std::vector<int64_t>{0, 0, 0, 0});
  CHECK(int_values_of(*find_initializer(g, g.node(0).input(1))) == std::vector<int64_t>{0, 0, 1, 2, 0, 0, 1, 0});
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 5, 4}) < kTolerance);
}

TEST_CASE("auto_pad SAME_UPPER and SAME_LOWER and VALID resolve by the spec formula", "[rewrite][rule][auto_pad]") {
  struct Case {
    const char* attrs;
    int64_t k;
    std::array<int64_t, 4> pads;
  };
  // SAME_*: total = op + k - s; SAME_UPPER puts total/2 at the begin, SAME_LOWER the rest.
  const Case c = GENERATE(values<Case>({
      {"strides=[2,2], auto_pad=\"SAME_UPPER\", output_padding=[1,1]", 4, {1, 1, 2, 2}},
      {"strides=[2,2], auto_pad=\"SAME_LOWER\", output_padding=[1,1]", 4, {2, 2, 1, 1}},
      {"strides=[2,2], auto_pad=\"SAME_UPPER\"", 4, {1, 1, 1, 1}},
      {"strides=[3,3], auto_pad=\"SAME_LOWER\"", 6, {2, 2, 1, 1}},
      {"strides=[2,2], auto_pad=\"VALID\"", 2, {0, 0, 0, 0}},
      {"strides=[2,2], auto_pad=\"VALID\", pads=[1,1,1,1]", 2, {0, 0, 0, 0}},
  }));
  CAPTURE(c.attrs);
  for (bool symbolic : {false, true}) {
    CAPTURE(symbolic);
    DeconvSpec spec;
    spec.kh = spec.kw = c.k;
    spec.attrs = c.attrs;
    if (symbolic) spec.h = spec.w = 0;  // SAME_* alone needs no H or W
    const auto original = deconv_model(spec);
    const auto out = rewrite_copy(original);
    REQUIRE(out.result.rewritten == 1);
    CHECK(out.result.nodes[0].summary.pads == c.pads);
    CHECK(count_ops(out.model.graph(), "ConvTranspose") == 0);
    const int64_t s = out.result.nodes[0].summary.stride;
    require_polyphase(out.model.graph(), "Y", s, 3, 13, "up1");
    CHECK(checker_error(out.model).empty());
    const auto x = input_for(spec);
    CHECK(output_diff(original, out.model, {{"X", x}}, "Y", {1, 3, x.h * s, x.w * s}) < kTolerance);
  }
}

TEST_CASE("output_shape spatial or full-rank resolves the pads from the known input size", "[rewrite][rule][output_shape]") {
  struct Case {
    const char* attrs;
    std::array<int64_t, 4> pads;
  };
  // k4 s2 op1 on 5x4 to 10x8: total = s*(H-1) + op + k - out = 3 per axis.
  const Case c = GENERATE(values<Case>({
      {"strides=[2,2], output_padding=[1,1], output_shape=[10,8]", {2, 2, 1, 1}},
      {"strides=[2,2], output_padding=[1,1], output_shape=[1,3,10,8]", {2, 2, 1, 1}},
      {"strides=[2,2], output_padding=[1,1], output_shape=[10,8], auto_pad=\"SAME_UPPER\"", {1, 1, 2, 2}},
      {"strides=[2,2], output_padding=[1,1], output_shape=[10,8], auto_pad=\"SAME_LOWER\"", {2, 2, 1, 1}},
      {"strides=[2,2], output_shape=[10,8], pads=[0,0,0,0]", {1, 1, 1, 1}},  // output_shape overrides pads
  }));
  CAPTURE(c.attrs);
  DeconvSpec spec;
  spec.attrs = c.attrs;
  spec.bias = true;
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  REQUIRE(out.result.rewritten == 1);
  CHECK(out.result.nodes[0].summary.pads == c.pads);
  CHECK(count_ops(out.model.graph(), "ConvTranspose") == 0);
  require_polyphase(out.model.graph(), "Y", 2, 3, 13, "up1");
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 10, 8}) < kTolerance);
}

TEST_CASE("explicit_pad emits Pad nodes in the opset's form and leaves Conv pads at zero", "[rewrite][rule][explicit_pad]") {
  const int64_t opset = GENERATE(9, 11, 13, 18);
  CAPTURE(opset);
  DeconvSpec spec;
  spec.opset = opset;
  spec.bias = true;
  const auto original = deconv_model(spec);
  rewrite::RewriteOptions options;
  options.emit.explicit_pad = true;
  const auto out = rewrite_copy(original, options);
  const auto& g = out.model.graph();

  REQUIRE(out.result.rewritten == 1);
  const auto convs = require_polyphase(g, "Y", 2, 3, opset, "up1");
  // Every phase of k4 s2 p1 has its own non-zero pads, so there are four distinct Pad nodes.
  REQUIRE(count_ops(g, "Pad") == 4);
  std::set<std::vector<int64_t>> pad_values;
  for (const auto* conv : convs) {
    CHECK(attr_ints(*conv, "pads") == std::vector<int64_t>{0, 0, 0, 0});
    const auto* pad = find_producer(g, conv->input(0));
    REQUIRE(pad != nullptr);
    REQUIRE(pad->op_type() == "Pad");
    CHECK(pad->input(0) == "X");
    std::vector<int64_t> pads;
    if (opset < 11) {
      CHECK(pad->input_size() == 1);
      pads = attr_ints(*pad, "pads");
    } else {
      CHECK(find_attr(*pad, "pads") == nullptr);
      REQUIRE(pad->input_size() == 2);
      const auto* t = find_initializer(g, pad->input(1));
      REQUIRE(t != nullptr);
      CHECK(t->data_type() == TensorProto::INT64);
      pads = int_values_of(*t);
    }
    REQUIRE(pads.size() == 8);
    CHECK(pads[0] == 0);
    CHECK(pads[1] == 0);
    CHECK(pads[4] == 0);
    CHECK(pads[5] == 0);
    pad_values.insert(pads);
    const auto* vi = find_value_info(g, pad->output(0));
    REQUIRE(vi != nullptr);
    CHECK(vi->type().tensor_type().shape().dim(2).dim_value() == 6);  // H + 1
  }
  CHECK(pad_values.size() == 4);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 10, 8}) < kTolerance);
}

TEST_CASE("opsets 9 and 11 and 13 and 18 get DepthToSpace in their own form", "[rewrite][rule][opset]") {
  const int64_t opset = GENERATE(9, 11, 13, 18);
  CAPTURE(opset);
  DeconvSpec spec;
  spec.opset = opset;
  spec.ir_version = opset >= 13 ? 8 : 5;
  spec.bias = true;
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  REQUIRE(out.result.rewritten == 1);
  CHECK(count_ops(out.model.graph(), "ConvTranspose") == 0);
  require_polyphase(out.model.graph(), "Y", 2, 3, opset, "up1");  // mode="DCR" only at opset >= 11
  CHECK(out.model.opset_import_size() == 1);
  CHECK(out.model.opset_import(0).version() == opset);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 10, 8}) < kTolerance);
}

TEST_CASE("crop phases read a Pad with a negative begin", "[rewrite][rule][crop]") {
  const int64_t opset = GENERATE(9, 13);
  CAPTURE(opset);
  // k3 s3 pads 1/1 op 2: phase a=2 has c=1, M=1, so begin = M-1-c = -1 (it starts one element into x).
  DeconvSpec spec;
  spec.kh = spec.kw = 3;
  spec.bias = true;
  spec.attrs = "strides=[3,3], pads=[1,1,1,1], output_padding=[2,2]";
  spec.opset = opset;
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();

  REQUIRE(out.result.rewritten == 1);
  const auto convs = require_polyphase(g, "Y", 3, 3, opset, "up1");
  // Crops: y only (phases (2,0), (2,1)), x only ((0,2), (1,2)) and both ((2,2)), one Pad each.
  REQUIRE(count_ops(g, "Pad") == 3);
  for (const auto* pad : nodes_of(g, "Pad")) {
    const auto pads = opset < 11 ? attr_ints(*pad, "pads") : int_values_of(*find_initializer(g, pad->input(1)));
    REQUIRE(pads.size() == 8);
    CHECK(*std::min_element(pads.begin(), pads.end()) == -1);
    CHECK(*std::max_element(pads.begin(), pads.end()) == 0);
  }
  int cropped = 0;
  for (const auto* conv : convs) cropped += find_producer(g, conv->input(0)) != nullptr ? 1 : 0;
  CHECK(cropped == 5);
  CHECK(find_producer(g, convs[8]->input(0))->op_type() == "Pad");
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 15, 12}) < kTolerance);
}

TEST_CASE("crop phases with explicit_pad use one Pad per phase holding both signs", "[rewrite][rule][crop][explicit_pad]") {
  const int64_t opset = GENERATE(9, 13);
  CAPTURE(opset);
  DeconvSpec spec;
  spec.kh = spec.kw = 3;
  spec.opset = opset;
  spec.attrs = "strides=[3,3], pads=[1,1,1,1], output_padding=[2,2]";
  const auto original = deconv_model(spec);
  rewrite::RewriteOptions options;
  options.emit.explicit_pad = true;
  const auto out = rewrite_copy(original, options);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  const auto convs = require_polyphase(g, "Y", 3, 3, opset, "up1");
  // Per axis, phases 0 and 1 pad (0, 0) and phase 2 pads (-1, 1): the four phases without a 2 need no Pad,
  // and the five others read three distinct Pads (y crop, x crop, both).
  CHECK(count_ops(g, "Pad") == 3);
  bool saw_negative = false;
  for (const auto* conv : convs) {
    CHECK(attr_ints(*conv, "pads") == std::vector<int64_t>{0, 0, 0, 0});
    const auto* pad = find_producer(g, conv->input(0));
    if (pad == nullptr) continue;
    const auto pads = opset < 11 ? attr_ints(*pad, "pads") : int_values_of(*find_initializer(g, pad->input(1)));
    saw_negative = saw_negative || *std::min_element(pads.begin(), pads.end()) < 0;
  }
  CHECK(saw_negative);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 15, 12}) < kTolerance);
}

TEST_CASE("bias-only phases share one tensor made from x's shape", "[rewrite][rule][bias_only]") {
  struct Case {
    const char* what;
    int64_t k, s;
    const char* attrs;
    bool bias;
    int zero_phases;
  };
  const Case c = GENERATE(values<Case>({
      {"k1 s3 op2 with bias", 1, 3, "strides=[3,3], output_padding=[2,2]", true, 8},
      {"k1 s3 op2 without bias", 1, 3, "strides=[3,3], output_padding=[2,2]", false, 8},
      {"k2 s4 op2", 2, 4, "strides=[4,4], output_padding=[2,2]", true, 12},
      {"k2 s4 op3 pads 1/0", 2, 4, "strides=[4,4], pads=[1,1,0,0], output_padding=[3,3]", true, 12},
  }));
  CAPTURE(c.what);
  DeconvSpec spec;
  spec.kh = spec.kw = c.k;
  spec.bias = c.bias;
  spec.attrs = c.attrs;
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();

  REQUIRE(out.result.rewritten == 1);
  REQUIRE(count_ops(g, "ConstantOfShape") == 1);
  const std::string zeros = nodes_of(g, "ConstantOfShape")[0]->output(0);
  const auto* concat = find_producer(g, find_producer(g, "Y")->input(0));
  REQUIRE(concat->input_size() == c.s * c.s);
  int zero_phases = 0;
  for (const auto& in : concat->input()) {
    const auto* producer = find_producer(g, in);
    REQUIRE(producer != nullptr);
    if (in != zeros && producer->input(0) != zeros) {  // a phase with taps: reads X or a crop of X
      CHECK(producer->op_type() == "Conv");
      CHECK(producer->input_size() == (c.bias ? 3 : 2));
      continue;
    }
    ++zero_phases;
    if (!c.bias) {
      CHECK(in == zeros);
      continue;
    }
    // The bias Conv: a 1x1 zero kernel over the zeros, adding the original bias.
    CHECK(producer->op_type() == "Conv");
    CHECK(producer->input(0) == zeros);
    CHECK(producer->input(2) == "B");
    const auto* w = find_initializer(g, producer->input(1));
    REQUIRE(w != nullptr);
    CHECK(onnx_io::dims_of(*w) == std::vector<int64_t>{3, 1, 1, 1});
    const auto values = values_of(*w);
    CHECK(std::all_of(values.begin(), values.end(), [](double v) { return v == 0.0; }));
    CHECK(attr_ints(*producer, "pads") == std::vector<int64_t>{0, 0, 0, 0});
  }
  CHECK(zero_phases == c.zero_phases);
  CHECK(checker_error(out.model).empty());

  const auto x = input_for(spec);
  const auto y = run_naive(out.model, {{"X", x}}).at("Y");
  if (c.k == 1) {
    // Only phase (0, 0) sees a tap; output (1, 1) of every block is the bias alone (or zero).
    const auto bias = c.bias ? values_of(*find_initializer(g, "B")) : std::vector<double>(3, 0.0);
    const auto y4 = y.as_tensor4();
    for (int64_t ch = 0; ch < 3; ++ch) CHECK(y4.at(0, ch, 1, 1) == bias[static_cast<size_t>(ch)]);
  }
  if (c.bias) {
    CHECK(output_diff(original, out.model, {{"X", x}}, "Y", {1, 3, 5 * c.s, 4 * c.s}) < kTolerance);
  } else {
    CHECK(max_abs_diff(run_naive(original, {{"X", x}}).at("Y"), y) < kTolerance);
  }
}

TEST_CASE("symbolic H and W are rewritten and value_info keeps the symbols", "[rewrite][rule][symbolic]") {
  DeconvSpec spec;
  spec.h = spec.w = 0;
  spec.bias = true;
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();

  REQUIRE(out.result.rewritten == 1);
  CHECK(count_ops(g, "ConvTranspose") == 0);
  const auto convs = require_polyphase(g, "Y", 2, 3, 13, "up1");
  std::vector<std::string> with_value_info;
  for (const auto* conv : convs) with_value_info.push_back(conv->output(0));
  with_value_info.push_back(find_producer(g, "Y")->input(0));
  for (const auto& name : with_value_info) {
    CAPTURE(name);
    const auto* vi = find_value_info(g, name);
    REQUIRE(vi != nullptr);
    const auto& shape = vi->type().tensor_type().shape();
    REQUIRE(shape.dim_size() == 4);
    CHECK(shape.dim(2).dim_param() == "H");
    CHECK(shape.dim(3).dim_param() == "W");
  }
  CHECK(g.input(0).type().tensor_type().shape().dim(2).dim_param() == "H");
  CHECK(checker_error(out.model).empty());
  for (auto [h, w] : {std::pair<int64_t, int64_t>{5, 3}, {2, 6}, {1, 1}}) {
    CHECK(output_diff(original, out.model, {{"X", input_for(spec, h, w)}}, "Y", {1, 3, 2 * h, 2 * w}) < kTolerance);
  }
}

TEST_CASE("phase weights keep the weight's element type and storage form", "[rewrite][rule][dtype]") {
  const int32_t dtype = GENERATE(TensorProto::FLOAT16, TensorProto::DOUBLE, TensorProto::BFLOAT16, TensorProto::FLOAT);
  const bool raw = GENERATE(true, false);
  CAPTURE(type_name(dtype), raw);
  DeconvSpec spec;
  spec.dtype = dtype;
  spec.raw = raw;
  spec.bias = true;
  // k4 s2 p1 gathers taps for every phase; k1 s2 op1 adds bias-only phases with zero kernels.
  const int64_t k = GENERATE(4, 1);
  spec.kh = spec.kw = k;
  spec.attrs = k == 4 ? "strides=[2,2], pads=[1,1,1,1]" : "strides=[2,2], output_padding=[1,1]";
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();

  REQUIRE(out.result.rewritten == 1);
  const auto convs = require_polyphase(g, "Y", 2, 3, 13, "up1");
  for (const auto* conv : convs) {
    const auto* w = find_initializer(g, conv->input(1));
    REQUIRE(w != nullptr);
    CHECK(w->data_type() == dtype);
    CHECK(w->has_raw_data() == raw);
    const int64_t count = *onnx_io::element_count(*w);
    if (!raw) {
      const int64_t typed = dtype == TensorProto::FLOAT    ? w->float_data_size()
                            : dtype == TensorProto::DOUBLE ? w->double_data_size()
                                                           : w->int32_data_size();
      CHECK(typed == count);
    }
    CHECK(onnx_io::validate_tensor_data(*w, "phase weight").ok());
  }
  if (dtype == TensorProto::BFLOAT16) {
    // Neither ConvTranspose nor Conv admits bfloat16 in ONNX 1.12's schemas: the rewrite keeps the model's
    // types, so strict type checking rejects the original and the rewritten model alike.
    CHECK_THAT(checker_error(original), Catch::Contains("ConvTranspose"));
    CHECK_THAT(checker_error(out.model), Catch::Contains("Conv"));
  } else {
    CHECK(checker_error(out.model).empty());
  }
  // Phase weights are bit copies, so even float16 agrees to double rounding in the naive executor.
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 10, 8}) < kTolerance);
}
