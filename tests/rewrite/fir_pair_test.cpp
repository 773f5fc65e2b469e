// Form fir_pair (StyleGAN3's reference upfirdn2d with a separable filter, as filtered_lrelu's up path calls it):
// zero insertion by Reshape / Pad / Reshape, a Pad by the positive pads, Slices by the negative ones, a depthwise 1xK
// Conv and a depthwise Kx1 Conv. Structure (two one-axis polyphase stages, the first on x), numbers against the
// original through the naive executor, the near-misses kept, idempotence and determinism.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "upsampler_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

// Y = Conv(Conv(Slice(Slice(Pad(Reshape(Pad(Reshape(X)))))), F1), F2, B): the 1xK Conv named "up1", the Kx1 "up2".
struct PairSpec {
  int64_t s = 2;
  int64_t k = 12;                      // 1xK, then Kx1
  int64_t pad_begin = 9, pad_end = 8;  // upfirdn2d's padding on both axes; below 0 a crop by Slice
  int64_t channels = 64, h = 6, w = 5;
  // Near-miss switches.
  bool conv1_bias = false;          // the 1xK Conv has a non-zero bias
  int64_t conv2_pad_w = 0;          // the Kx1 Conv pads W by this on both sides
  bool conv1_extra_reader = false;  // the 1xK Conv's output is also a graph output
};

// StyleGAN3's x4 layers: K 24, pads -6 and -9 (a crop), output 4n-38, on a 12x11 x.
PairSpec stylegan3_x4() {
  PairSpec spec;
  spec.s = 4;
  spec.k = 24;
  spec.pad_begin = -6;
  spec.pad_end = -9;
  spec.h = 12;
  spec.w = 11;
  return spec;
}

onnx::ModelProto pair_model(const PairSpec& m) {
  const std::string c = std::to_string(m.channels), s = std::to_string(m.s);
  const int64_t hp = m.s * m.h + std::max<int64_t>(m.pad_begin, 0) + std::max<int64_t>(m.pad_end, 0);
  const int64_t wp = m.s * m.w + std::max<int64_t>(m.pad_begin, 0) + std::max<int64_t>(m.pad_end, 0);
  std::string body;
  body += "  split_shape = Constant <value = int64[6] {1, " + c + ", " + std::to_string(m.h) + ", 1, " + std::to_string(m.w) + ", 1}> ()\n";
  body += "  merge_shape = Constant <value = int64[4] {1, " + c + ", " + std::to_string(m.s * m.h) + ", " + std::to_string(m.s * m.w) +
          "}> ()\n";
  body += "  r = Reshape (X, split_shape)\n";
  body += pads_chain("ipads", "i_", {0, m.s - 1, 0, 0, 0, m.s - 1}, 6);
  body += "  z = Pad <mode = \"constant\"> (r, ipads)\n  u = Reshape (z, merge_shape)\n";
  const int64_t pb = std::max<int64_t>(m.pad_begin, 0), pe = std::max<int64_t>(m.pad_end, 0);
  body += pads_chain("pads", "p_", pb, pe, pb, pe);
  body += "  p = Pad <mode = \"constant\"> (u, pads)\n";
  // x[:, :, max(-pad0, 0) : x.shape[2] - max(-pad1, 0), ...]: starts and ends as constants (the dims are known).
  const int64_t cb = std::max<int64_t>(-m.pad_begin, 0), ce = std::max<int64_t>(-m.pad_end, 0);
  body += "  st = Constant <value = int64[1] {" + std::to_string(cb) + "}> ()\n  one = Constant <value = int64[1] {1}> ()\n";
  body += "  en2 = Constant <value = int64[1] {" + std::to_string(hp - ce) + "}> ()\n  ax2 = Constant <value = int64[1] {2}> ()\n";
  body += "  en3 = Constant <value = int64[1] {" + std::to_string(wp - ce) + "}> ()\n  ax3 = Constant <value = int64[1] {3}> ()\n";
  body += "  q2 = Slice (p, st, en2, ax2, one)\n  q = Slice (q2, st, en3, ax3, one)\n";
  const std::string k = std::to_string(m.k), pw = std::to_string(m.conv2_pad_w);
  body += "  V = Conv <group = " + c + ", kernel_shape = [1, " + k + "]> (q, F1" + (m.conv1_bias ? ", B1" : "") + ")\n";
  body += "  Y = Conv <group = " + c + ", kernel_shape = [" + k + ", 1], pads = [0, " + pw + ", 0, " + pw + "]> (V, F2, B)\n";
  std::string outputs = "float[1," + c + ",OH,OW] Y";
  if (m.conv1_extra_reader) outputs += ", float[1," + c + ",VH,VW] V";
  onnx::ModelProto model = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1," + c + "," + std::to_string(m.h) + "," +
                                       std::to_string(m.w) + "] X) => (" + outputs + ") {\n" + body + "}\n");
  auto& g = *model.mutable_graph();
  set_random_initializer(g, "F1", onnx::TensorProto::FLOAT, {m.channels, 1, 1, m.k}, 71);
  set_random_initializer(g, "F2", onnx::TensorProto::FLOAT, {m.channels, 1, m.k, 1}, 72);
  set_random_initializer(g, "B", onnx::TensorProto::FLOAT, {m.channels}, 73);
  if (m.conv1_bias) set_random_initializer(g, "B1", onnx::TensorProto::FLOAT, {m.channels}, 74);
  name_node(model, "V", "up1");
  name_node(model, "Y", "up2");
  return model;
}

// The output length on one axis, from upfirdn2d's own formula: n*s + pad0 + pad1 - (K - 1).
int64_t out_length(const PairSpec& m, int64_t n) { return n * m.s + m.pad_begin + m.pad_end - (m.k - 1); }

// The Convs of `graph` that read `input`, directly or through a Pad of it (a phase whose window starts inside the
// input crops it first), and the sum of their kernels' taps.
std::pair<std::vector<const onnx::NodeProto*>, int64_t> convs_reading(const onnx::GraphProto& graph, const std::string& input) {
  std::set<std::string> reads_input{input};
  for (const auto& node : graph.node()) {
    if (node.op_type() == "Pad" && node.input(0) == input) reads_input.insert(node.output(0));
  }
  std::vector<const onnx::NodeProto*> convs;
  int64_t taps = 0;
  for (const auto& node : graph.node()) {
    if (node.op_type() != "Conv" || reads_input.count(node.input(0)) == 0) continue;
    convs.push_back(&node);
    const auto dims = conv_weight_dims(graph, node);
    taps += dims[2] * dims[3];
  }
  return {convs, taps};
}

// Requires the pair rewritten as two one-axis stages: s phase Convs on X with 1xK/s kernels (1/s^2 of the 1xK Conv's
// MACs), s phase Convs on their join with K/s x 1 kernels (1/s of the Kx1's), every hand-written node and the filters
// gone, the numbers the original's, and the rewrite idempotent and deterministic.
void require_pair_rewritten(const PairSpec& spec, std::array<int64_t, 4> pads, uint32_t seed, int crops = 0) {
  const auto original = pair_model(spec);
  REQUIRE(checker_error(original).empty());
  const auto out = rewrite_copy(original);
  REQUIRE(out.result.nodes.size() == 1);
  const auto& row = out.result.nodes[0];
  CAPTURE(row.reason);
  REQUIRE(row.rewritten);
  CHECK(row.summary.form == "fir_pair");
  CHECK(row.summary.name == "up1");
  CHECK(row.summary.stride == spec.s);
  CHECK(row.summary.kernel == std::array<int64_t, 2>{spec.k, spec.k});
  CHECK(row.summary.pads == pads);
  CHECK(row.layout == rewrite::PhaseLayout::kInterleave);
  const auto& g = out.model.graph();
  CHECK(checker_error(out.model).empty());
  const auto [first, first_taps] = convs_reading(g, "X");
  CHECK(first.size() == static_cast<size_t>(spec.s));
  CHECK(first_taps == spec.k);  // K taps over s phases: each output of the first stage meets K/s of them
  REQUIRE(!first.empty());
  // What the first stage writes: the tensor every other Conv reads (directly or through its Pad).
  std::set<std::string> read_by_second;
  for (const auto& node : g.node()) {
    if (node.op_type() != "Conv" || std::count(first.begin(), first.end(), &node) != 0) continue;
    const onnx::NodeProto* pad = nullptr;
    for (const auto& n : g.node()) {
      if (n.op_type() == "Pad" && n.output(0) == node.input(0)) pad = &n;
    }
    read_by_second.insert(pad != nullptr ? pad->input(0) : node.input(0));
  }
  REQUIRE(read_by_second.size() == 1);
  const std::string middle = *read_by_second.begin();
  const auto [second, second_taps] = convs_reading(g, middle);
  CHECK(second.size() == static_cast<size_t>(spec.s));
  CHECK(second_taps == spec.k);
  CHECK(count_ops(g, "Conv") == 2 * spec.s);
  // A Slice is left only where the output is no whole number of strides: it crops a stage's join, at its end.
  CHECK(count_ops(g, "Slice") == crops);
  for (const auto& node : g.node()) {
    if (node.op_type() == "Slice") CHECK((node.output(0) == "Y" || node.output(0) == middle));
  }
  for (const auto& op : {"Shape", "Transpose", "Cast", "ConstantOfShape"}) {
    CAPTURE(op);
    CHECK(count_ops(g, op) == 0);
  }
  for (const auto& node : g.node()) {  // the Pads left are the phases' crops of a stage's input
    if (node.op_type() == "Pad") CHECK((node.input(0) == "X" || node.input(0) == middle));
  }
  CHECK(count_ops(g, "Reshape") == 2);  // the two joins; the zero insertion's Reshapes are gone
  for (const auto& init : {"F1", "F2"}) {
    CAPTURE(init);
    CHECK(find_initializer(g, init) == nullptr);
  }
  CHECK(find_initializer(g, "B") != nullptr);
  const auto x = random_tensor4(1, spec.channels, spec.h, spec.w, seed);
  CHECK(output_diff(original, out.model, {{"X", x}}, "Y", {1, spec.channels, out_length(spec, spec.h), out_length(spec, spec.w)}) <
        kTolerance);
  CHECK(serialized(rewrite_copy(out.model).model) == serialized(out.model));
  CHECK(serialized(rewrite_copy(original).model) == serialized(out.model));
}

}  // namespace

TEST_CASE("StyleGAN3's x2 up path (K 12, pads 9 and 8) becomes two one-axis polyphase stages", "[rewrite][recogniser][fir_pair]") {
  PairSpec spec;
  // The equivalent ConvTranspose per axis: k 12, s 2, Pb = K-1-9 = 2, Pe = K-s-8 = 2; output 2n+6.
  require_pair_rewritten(spec, {2, 2, 2, 2}, 81);
}

TEST_CASE("A fir_pair's crop by Slices folds into the phase pads", "[rewrite][recogniser][fir_pair]") {
  SECTION("x2, pads -11 and -12 (StyleGAN3's last critically sampled layer): output 2n-34") {
    PairSpec spec;
    spec.pad_begin = -11;
    spec.pad_end = -12;
    spec.h = 20;
    spec.w = 19;
    require_pair_rewritten(spec, {22, 22, 22, 22}, 82);
  }
  SECTION("x4, K 24, pads -6 and -7: output 4n-36") {
    PairSpec spec = stylegan3_x4();
    spec.pad_end = -7;
    require_pair_rewritten(spec, {29, 29, 27, 27}, 83);
  }
}

TEST_CASE("A fir_pair whose output is no whole number of strides ends in a Slice of each stage's join", "[rewrite][recogniser][fir_pair]") {
  // StyleGAN3's x4 layers: K 24, pads -6 and -9, output 4n-38. Per axis the ConvTranspose is k 24, s 4, Pb 29, Pe 29;
  // the phases write 4n-36 (Pe 27) and the Slice crops the last 2.
  const PairSpec spec = stylegan3_x4();
  require_pair_rewritten(spec, {29, 29, 29, 29}, 84, 2);
}

TEST_CASE("On MNN a phase's crop is a Slice of the stage's input and elsewhere a Pad with negative pads: both exact",
          "[rewrite][fir_pair][targets][crop]") {
  // MNN 3.6.1 crashed on, or computed wrongly (StyleGAN3's L13: 0.28 off), a Pad with negative pads before a Conv;
  // the same crop as a Slice runs exactly there (BENCHMARKS.md, "StyleGAN3's separable FIR pair", each runtime).
  const PairSpec spec = stylegan3_x4();  // crops before the phases and a Slice after each join
  const auto original = pair_model(spec);
  const auto x = random_tensor4(1, spec.channels, spec.h, spec.w, 85);
  for (const auto& [target, explicit_pad] : {std::pair<std::string, bool>{"mnn", false}, {"mnn", true}, {"ort", false}}) {
    INFO(target << (explicit_pad ? " --explicit-pad" : ""));
    rewrite::RewriteOptions options;
    options.target = rewrite::find_target(target);
    REQUIRE(options.target != nullptr);
    options.emit.explicit_pad = explicit_pad;
    const auto out = rewrite_copy(original, options);
    REQUIRE(out.result.nodes.size() == 1);
    REQUIRE(out.result.nodes[0].rewritten);
    const auto& g = out.model.graph();
    CHECK(checker_error(out.model).empty());
    int negative_pads = 0, crop_slices = 0;
    for (const auto& node : g.node()) {
      if (node.op_type() == "Pad") {
        const auto* pads = find_initializer(g, node.input(1));
        REQUIRE(pads != nullptr);
        const auto values = onnx_io::to_doubles(*pads);
        REQUIRE(values);
        negative_pads += std::any_of(values->begin(), values->end(), [](double v) { return v < 0; }) ? 1 : 0;
      }
      if (node.op_type() == "Slice" && node.name().find("_crop_end") == std::string::npos && node.output(0) != "Y") {
        const auto* starts = find_initializer(g, node.input(1));
        REQUIRE(starts != nullptr);
        const auto values = onnx_io::to_doubles(*starts);
        REQUIRE(values);
        CHECK(std::any_of(values->begin(), values->end(), [](double v) { return v > 0; }));
        ++crop_slices;
      }
    }
    if (target == "mnn") {
      CHECK(negative_pads == 0);
      CHECK(crop_slices > 0);
    } else {
      CHECK(negative_pads > 0);
      CHECK(crop_slices == 0);
    }
    CHECK(output_diff(original, out.model, {{"X", x}}, "Y", {1, spec.channels, out_length(spec, spec.h), out_length(spec, spec.w)}) <
          kTolerance);
  }
  SECTION("with --explicit-pad, a phase that crops one end and pads the other: a Slice, then a Pad of zeros") {
    PairSpec mixed;  // x2, K 12: crop 3 at the start, pad 8 at the end
    mixed.pad_begin = -3;
    mixed.pad_end = 8;
    mixed.h = 9;
    mixed.w = 8;
    const auto model = pair_model(mixed);
    rewrite::RewriteOptions options;
    options.target = rewrite::find_target("mnn");
    options.emit.explicit_pad = true;
    const auto out = rewrite_copy(model, options);
    REQUIRE(out.result.nodes.size() == 1);
    REQUIRE(out.result.nodes[0].rewritten);
    const auto& g = out.model.graph();
    CHECK(checker_error(out.model).empty());
    int pads_after_slice = 0;
    for (const auto& node : g.node()) {
      if (node.op_type() != "Pad") continue;
      const auto values = onnx_io::to_doubles(*find_initializer(g, node.input(1)));
      REQUIRE(values);
      CHECK(std::none_of(values->begin(), values->end(), [](double v) { return v < 0; }));
      for (const auto& n : g.node()) pads_after_slice += n.op_type() == "Slice" && n.output(0) == node.input(0) ? 1 : 0;
    }
    CHECK(pads_after_slice > 0);
    const auto xm = random_tensor4(1, mixed.channels, mixed.h, mixed.w, 86);
    CHECK(output_diff(model, out.model, {{"X", xm}}, "Y", {1, mixed.channels, out_length(mixed, mixed.h), out_length(mixed, mixed.w)}) <
          kTolerance);
  }
}

TEST_CASE("On MNN before opset 10 a phase's crop is a Slice with its bounds as attributes", "[rewrite][fir_pair][targets][crop]") {
  // An x4 pair at opset 9 (Pad-2's attribute pads, no Slice): pads 0 and 3, so each stage's phases start inside x.
  auto model = parse_model(R"(<ir_version: 7, opset_import: ["" : 9]>
g (float[1,64,12,12] X) => (float[1,64,28,28] Y) {
  s6 = Constant <value = int64[6] {1, 64, 12, 1, 12, 1}> ()
  s4 = Constant <value = int64[4] {1, 64, 48, 48}> ()
  r = Reshape (X, s6)
  z = Pad <pads = [0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 3]> (r)
  u = Reshape (z, s4)
  q = Pad <pads = [0, 0, 0, 0, 0, 0, 3, 3]> (u)
  up1 = Conv <group = 64, kernel_shape = [1, 24]> (q, F1)
  Y = Conv <group = 64, kernel_shape = [24, 1]> (up1, F2, B)
}
)");
  auto& g0 = *model.mutable_graph();
  set_random_initializer(g0, "F1", onnx::TensorProto::FLOAT, {64, 1, 1, 24}, 87);
  set_random_initializer(g0, "F2", onnx::TensorProto::FLOAT, {64, 1, 24, 1}, 88);
  set_random_initializer(g0, "B", onnx::TensorProto::FLOAT, {64}, 89);
  REQUIRE(checker_error(model).empty());
  rewrite::RewriteOptions options;
  options.target = rewrite::find_target("mnn");
  const auto out = rewrite_copy(model, options);
  REQUIRE(out.result.nodes.size() == 1);
  REQUIRE(out.result.nodes[0].rewritten);
  const auto& g = out.model.graph();
  CHECK(checker_error(out.model).empty());
  CHECK(count_ops(g, "Pad") == 0);
  int crops = 0;
  for (const auto& node : g.node()) {
    if (node.op_type() != "Slice") continue;
    CHECK(node.input_size() == 1);  // Slice-1: starts, ends and axes are attributes
    std::vector<int64_t> starts;
    for (const auto& a : node.attribute()) {
      if (a.name() == "starts") starts.assign(a.ints().begin(), a.ints().end());
    }
    CHECK(std::any_of(starts.begin(), starts.end(), [](int64_t v) { return v > 0; }));
    ++crops;
  }
  CHECK(crops > 0);
  // The same pair at opset 13 (pads as inputs, which the naive executor runs at rank 6) computes the reference.
  auto same = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,64,12,12] X) => (float[1,64,28,28] Y) {
  s6 = Constant <value = int64[6] {1, 64, 12, 1, 12, 1}> ()
  s4 = Constant <value = int64[4] {1, 64, 48, 48}> ()
  ip = Constant <value = int64[12] {0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 3}> ()
  pp = Constant <value = int64[8] {0, 0, 0, 0, 0, 0, 3, 3}> ()
  r = Reshape (X, s6)
  z = Pad (r, ip)
  u = Reshape (z, s4)
  q = Pad (u, pp)
  up1 = Conv <group = 64, kernel_shape = [1, 24]> (q, F1)
  Y = Conv <group = 64, kernel_shape = [24, 1]> (up1, F2, B)
}
)");
  for (const auto& init : g0.initializer()) *same.mutable_graph()->add_initializer() = init;
  CHECK(output_diff(same, out.model, {{"X", random_tensor4(1, 64, 12, 12, 90)}}, "Y", {1, 64, 28, 28}) < kTolerance);
}

TEST_CASE("near-miss fir_pair upsamplers are kept with a reason", "[rewrite][recogniser][fir_pair][refusal]") {
  SECTION("the 1xK Conv has a bias, which lands on the inserted zero rows") {
    PairSpec spec;
    spec.conv1_bias = true;
    require_upsampler_kept(pair_model(spec), "fir_pair", "the 1xK Conv has a non-zero bias");
  }
  SECTION("the Kx1 Conv pads W after the 1xK filter") {
    PairSpec spec;
    spec.conv2_pad_w = 1;
    require_upsampler_kept(pair_model(spec), "fir_pair", "the Kx1 Conv pads W (1, 1), after the 1xK filter");
  }
  SECTION("a zero insertion that inserts nothing (upfirdn2d's down path, up = 1): no pair, the 1xK Conv is judged alone") {
    PairSpec spec;
    spec.s = 1;
    require_upsampler_kept(pair_model(spec), "reshape_zero_insertion", "zero-inserting Pad inserts no zeros");
  }
  SECTION("the 1xK Conv's output is read elsewhere: no pair, the 1xK Conv is judged alone") {
    PairSpec spec;
    spec.conv1_extra_reader = true;
    require_upsampler_kept(pair_model(spec), "reshape_zero_insertion", "not a clean upscale: output is 2*H+17 on that axis");
  }
}

TEST_CASE("The default target keeps a fir_pair: its join was not measured on every runtime", "[rewrite][fir_pair][targets]") {
  rewrite::RewriteOptions options;
  options.target = rewrite::find_target("default");
  const auto original = pair_model(PairSpec{});
  const auto out = rewrite_copy(original, options);
  REQUIRE(out.result.nodes.size() == 1);
  CHECK_FALSE(out.result.nodes[0].rewritten);
  CHECK(out.result.nodes[0].summary.form == "fir_pair");
  CHECK(serialized(out.model) == serialized(original));
}

TEST_CASE("Which targets rewrite a fir_pair: ONNX Runtime, the executor and MNN, where it was measured, and no other",
          "[rewrite][fir_pair][targets]") {
  // Written down from BENCHMARKS.md, "StyleGAN3's separable FIR pair": timed on ONNX Runtime (C 32-512, x2 and x4), on
  // the executor (xnnpack's rule for strides that differ per axis, from 64 channels) and on MNN (x2 and x4 at C 32-512,
  // its crops as Slices); OpenVINO measured 0.82x-1.28x; LiteRT, ExecuTorch and ncnn could not run the original.
  const std::map<std::string, std::pair<bool, bool>> rewrites{
      // target -> (x2 K 12 pads 9+8, x4 K 24 pads -6-9), 64 channels
      {"default", {false, false}},    {"xnnpack", {true, true}},    {"litert", {false, false}}, {"ort", {true, true}},
      {"executorch", {false, false}}, {"openvino", {false, false}}, {"mnn", {true, true}},      {"ncnn", {false, false}}};
  REQUIRE(rewrites.size() == rewrite::targets().size());
  const PairSpec x4 = stylegan3_x4();
  for (const bool four : {false, true}) {
    const auto original = pair_model(four ? x4 : PairSpec{});
    for (const auto& [name, expected] : rewrites) {
      INFO(name << (four ? " x4" : " x2"));
      rewrite::RewriteOptions options;
      options.target = rewrite::find_target(name);
      REQUIRE(options.target != nullptr);
      const auto out = rewrite_copy(original, options);
      REQUIRE(out.result.nodes.size() == 1);
      CHECK(out.result.nodes[0].summary.form == "fir_pair");
      CHECK(out.result.nodes[0].rewritten == (four ? expected.second : expected.first));
    }
  }
}
