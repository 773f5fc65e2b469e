// The nearest_conv form: nearest Resize by s, then a stride-1 Conv of any group, rewritten as the ConvTranspose
// it computes (k = K+s-1) in polyphase form. Structure (Resize and Conv gone, s*s phase Convs with the Conv's
// group and [C_out, C_in/g, My, Mx] weights, Concat, DCR DepthToSpace, which constants stay) and numbers through
// the naive executor; near-misses kept with a reason; idempotence and determinism.
#include <catch2/catch.hpp>

#include <cmath>

#include "nearest_conv_fixtures.h"
#include "onnx_io/tensor.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

// Rewrites with every form selected and requires the one nearest_conv upsampler rewritten: the Resize, the Conv
// that read it and every constant only they read are gone, the polyphase form computes Y, and the numbers equal
// the original's. `reference` is the model whose numbers the rewrite must match (the original by default).
Rewritten require_rewritten(const onnx::ModelProto& original, const NearestConvSpec& spec, const onnx::ModelProto* reference = nullptr) {
  auto out = rewrite_copy(original, all_forms());
  REQUIRE(out.result.nodes.size() == 1);
  const auto& row = out.result.nodes[0];
  CAPTURE(row.reason);
  REQUIRE(row.rewritten);
  CHECK(row.summary.form == "nearest_conv");
  CHECK(row.summary.name == "up1");
  CHECK(row.summary.stride == spec.s);
  CHECK(row.summary.channels == spec.c_in);
  // ConvTranspose k = K+s-1 (pads checked per test where they are not symmetric).
  CHECK(row.summary.kernel == std::array<int64_t, 2>{spec.ky + spec.s - 1, spec.kx + spec.s - 1});
  const auto& g = out.model.graph();
  CHECK(checker_error(out.model).empty());
  // A 1x1 Conv: every phase would be the same Conv, so it runs once on X and a nearest Resize follows it.
  const bool one_by_one = spec.ky == 1 && spec.kx == 1;
  CHECK(row.layout == (one_by_one ? rewrite::PhaseLayout::kNearest : rewrite::PhaseLayout::kDcr));
  const auto convs = one_by_one ? require_conv_then_nearest(g, "Y", spec.s, spec.group, spec.opset, "up1")
                                : require_polyphase(g, "Y", spec.s, spec.group, spec.opset, "up1");
  CHECK(count_ops(g, "Resize") == (one_by_one ? 1 : 0));
  CHECK(count_ops(g, "Conv") == (one_by_one ? 1 : spec.s * spec.s));
  for (const auto* conv : convs) {
    CHECK(conv->input(0) == "X");  // the low-resolution input, never an upsampled one
    const auto dims = conv_weight_dims(g, *conv);
    REQUIRE(dims.size() == 4);
    CHECK(dims[0] == spec.c_out);
    CHECK(dims[1] == spec.c_in / spec.group);
    CHECK(conv->input_size() == (spec.bias ? 3 : 2));
  }
  for (const char* init : {"roi", "scales", "sizes", "W"}) {
    CAPTURE(init);
    CHECK(find_initializer(g, init) == nullptr);
  }
  CHECK((find_initializer(g, "B") != nullptr) == spec.bias);
  const int64_t h = spec.h > 0 ? spec.h : 5, w = spec.w > 0 ? spec.w : 3;
  const auto x = random_tensor4(1, spec.c_in, h, w, spec.seed + 100);
  CHECK(output_diff(reference ? *reference : original, out.model, {{"X", x}}, "Y", {1, spec.c_out, spec.s * h, spec.s * w}) < kTolerance);
  // Idempotent and deterministic.
  CHECK(serialized(rewrite_copy(out.model, all_forms()).model) == serialized(out.model));
  CHECK(serialized(rewrite_copy(original, all_forms()).model) == serialized(out.model));
  return out;
}

// Requires the upsampler kept with a reason holding `reason`, and the model unchanged.
void require_kept(const onnx::ModelProto& original, const std::string& reason) {
  require_upsampler_kept(original, "nearest_conv", reason, all_forms());
}

}  // namespace

TEST_CASE("nearest + Conv becomes ConvTranspose k = K+s-1 in polyphase form: depthwise, dense and grouped",
          "[rewrite][recogniser][nearest_conv]") {
  NearestConvSpec spec;
  const std::string kind = GENERATE("depthwise", "dense", "grouped");
  if (kind == "dense") {
    spec.c_in = 3, spec.c_out = 5, spec.group = 1;
  } else if (kind == "grouped") {
    spec.c_in = 4, spec.c_out = 6, spec.group = 2;
  }
  spec.s = GENERATE(2, 3);
  spec.ky = spec.kx = GENERATE(1, 3, 5);
  const int64_t c = (spec.ky - 1) / 2;
  spec.pads = {c, c, c, c};
  spec.opset = GENERATE(11, 13, 17);
  spec.bias = spec.ky == 3;
  CAPTURE(kind, spec.s, spec.ky, spec.opset);
  const auto original = nearest_conv_model(spec);
  REQUIRE(checker_error(original).empty());
  const auto out = require_rewritten(original, spec);
  // Pb = K-1-cb, Pe = K-1-ce.
  CHECK(out.result.nodes[0].summary.pads == std::array<int64_t, 4>{spec.ky - 1 - c, spec.ky - 1 - c, spec.ky - 1 - c, spec.ky - 1 - c});
  // The s*s phases each see ceil((K+s-1-r)/s) taps per axis: for 2x nearest + 3x3 that is 2x2 on every phase.
  if (spec.s == 2 && spec.ky == 3) {
    for (const auto* conv : nodes_of(out.model.graph(), "Conv")) CHECK(attr_ints(*conv, "kernel_shape") == std::vector<int64_t>{2, 2});
  }
}

TEST_CASE("nearest + Conv with asymmetric pads, a rectangular kernel and auto_pad", "[rewrite][recogniser][nearest_conv]") {
  NearestConvSpec spec;
  spec.c_in = 2, spec.c_out = 3, spec.group = 1;
  SECTION("K 4, pads 1 then 2") {
    spec.ky = spec.kx = 4;
    spec.pads = {1, 2, 2, 1};
    const auto out = require_rewritten(nearest_conv_model(spec), spec);
    CHECK(out.result.nodes[0].summary.pads == std::array<int64_t, 4>{2, 1, 1, 2});
  }
  SECTION("K 2, pads 0 then 1, s 3") {
    spec.s = 3;
    spec.ky = spec.kx = 2;
    spec.pads = {0, 0, 1, 1};
    require_rewritten(nearest_conv_model(spec), spec);
  }
  SECTION("kernel 3x1") {
    spec.ky = 3, spec.kx = 1;
    spec.pads = {1, 0, 1, 0};
    require_rewritten(nearest_conv_model(spec), spec);
  }
  SECTION("auto_pad SAME_UPPER and SAME_LOWER with an even kernel equal explicit pads") {
    spec.ky = spec.kx = 4;
    const std::string mode = GENERATE("SAME_UPPER", "SAME_LOWER");
    spec.auto_pad = mode;
    // ONNX: the odd one of the K-1 = 3 pads goes at the end for SAME_UPPER, at the begin for SAME_LOWER.
    NearestConvSpec explicit_spec = spec;
    explicit_spec.auto_pad.clear();
    explicit_spec.pads = mode == "SAME_UPPER" ? std::array<int64_t, 4>{1, 1, 2, 2} : std::array<int64_t, 4>{2, 2, 1, 1};
    const auto reference = nearest_conv_model(explicit_spec);
    const auto out = require_rewritten(nearest_conv_model(spec), spec, &reference);
    // ... and the same phases as the explicit form.
    const auto from_explicit = rewrite_copy(reference, all_forms());
    CHECK(out.result.nodes[0].summary.pads == from_explicit.result.nodes[0].summary.pads);
  }
  SECTION("auto_pad VALID with K 1") {
    spec.ky = spec.kx = 1;
    spec.auto_pad = "VALID";
    require_rewritten(nearest_conv_model(spec), spec);
  }
}

TEST_CASE("every Resize spelling that replicates exactly is recognised", "[rewrite][recogniser][nearest_conv]") {
  NearestConvSpec spec;
  spec.c_in = 3, spec.c_out = 2, spec.group = 1;
  SECTION("opset 10: Resize(X, scales)") {
    spec.opset = 10;
    spec.coordinate.clear();
    spec.rounding.clear();
    require_rewritten(nearest_conv_model(spec), spec);
  }
  SECTION("the defaults from opset 11 on: half_pixel, round_prefer_floor") {
    spec.coordinate.clear();
    spec.rounding.clear();
    spec.s = GENERATE(2, 3);
    require_rewritten(nearest_conv_model(spec), spec);
  }
  SECTION("half_pixel and pytorch_half_pixel round either way") {
    spec.coordinate = GENERATE("half_pixel", "pytorch_half_pixel");
    spec.rounding = GENERATE("round_prefer_floor", "round_prefer_ceil");
    spec.s = GENERATE(2, 3);
    CAPTURE(spec.coordinate, spec.rounding, spec.s);
    require_rewritten(nearest_conv_model(spec), spec);
  }
  SECTION("half_pixel_symmetric (opset 19), whose offset is 0 when the output is exactly s times the input") {
    spec.opset = 19;
    spec.coordinate = "half_pixel_symmetric";
    spec.rounding = GENERATE("round_prefer_floor", "round_prefer_ceil");
    spec.s = 3;
    require_rewritten(nearest_conv_model(spec), spec);
  }
  SECTION("tf_half_pixel_for_nn with floor") {
    spec.coordinate = "tf_half_pixel_for_nn";
    spec.s = 3;
    require_rewritten(nearest_conv_model(spec), spec);
  }
  SECTION("asymmetric with round_prefer_floor at s 2 (a/s is 0 or the tie 0.5)") {
    spec.rounding = "round_prefer_floor";
    require_rewritten(nearest_conv_model(spec), spec);
  }
  SECTION("sizes, with the input's shape known") {
    spec.by_sizes = true;
    spec.opset = GENERATE(11, 13, 17);
    require_rewritten(nearest_conv_model(spec), spec);
  }
}

TEST_CASE("nearest + Conv whose phases sum to zero still reads x in them, as the original's cancelling taps do",
          "[rewrite][recogniser][nearest_conv][bias_only]") {
  // K 2 with pads (0, 1) and f[y] = (1, -1) down y: the box gives g = (1, 0, -1), so the ConvTranspose kernel
  // w = (-1, 0, 1) has the zero tap alone on phase ay = 0. Those phases are Convs on x with zero weights: the
  // original computes x*f0 + x*(-f0) there, NaN for an infinite x, and so does 0 x inf; the bias alone would not.
  NearestConvSpec spec;
  spec.c_in = 2, spec.c_out = 3, spec.group = 1;
  spec.ky = spec.kx = 2;
  spec.pads = {0, 0, 1, 1};
  spec.bias = GENERATE(false, true);
  CAPTURE(spec.bias);
  auto original = nearest_conv_model(spec);
  std::vector<double> w;
  const auto pair = dyadic_values(6, 3);
  for (int64_t p = 0; p < 6; ++p) {
    for (int64_t y = 0; y < 2; ++y) {
      for (int64_t x = 0; x < 2; ++x) w.push_back((y == 0 ? 1.0 : -1.0) * (x == 0 ? 0.5 : 0.25) * (pair[p] + 2.0));
    }
  }
  for (auto& init : *original.mutable_graph()->mutable_initializer()) {
    if (init.name() == "W") init = onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {3, 2, 2, 2}, w, true);
  }
  auto out = rewrite_copy(original, all_forms());
  REQUIRE(out.result.rewritten == 1);
  const auto& g = out.model.graph();
  CHECK(checker_error(out.model).empty());
  const auto d2s = find_producer(g, "Y");
  REQUIRE(d2s != nullptr);
  const auto concat = find_producer(g, d2s->input(0));
  REQUIRE(concat != nullptr);
  REQUIRE(concat->input_size() == 4);
  // Phases (0,0) and (0,1) are dense Convs on X like the others, their weights all zero.
  for (int p = 0; p < 4; ++p) {
    const auto* phase = find_producer(g, concat->input(p));
    REQUIRE(phase != nullptr);
    CHECK(phase->op_type() == "Conv");
    CHECK(phase->input(0) == "X");
    CHECK(find_attr(*phase, "group")->i() == 1);
  }
  CHECK(count_ops(g, "Conv") == 4);
  CHECK(count_ops(g, "ConstantOfShape") == 0);
  const auto x = random_tensor4(1, 2, 3, 4, 9);
  CHECK(output_diff(original, out.model, {{"X", x}}, "Y", {1, 3, 6, 8}) < kTolerance);
}

TEST_CASE("nearest + reflect or edge Pad + Conv is nearest_conv on an edge-padded x", "[rewrite][recogniser][nearest_conv][edge]") {
  // fast_neural_style's UpsampleConvLayer: nearest x s, ReflectionPad2d(p), a stride-1 Conv without pads. Reflecting
  // an s-times nearest upsampling by p <= s-1 repeats x's edge sample, as an edge Pad does for any p, so each phase
  // is a Conv on x padded by repeating its edge (a Pad with mode edge), where the zero form pads with zeros.
  NearestConvSpec spec;
  spec.pads = {0, 0, 0, 0};
  spec.pad_mode = GENERATE("reflect", "edge");
  spec.s = GENERATE(2, 3);
  spec.opset = GENERATE(11, 13, 17, 18);
  spec.group = GENERATE(1, 4);
  spec.c_out = 4;
  spec.bias = spec.group == 1;
  if (std::string(spec.pad_mode) == "reflect") {
    spec.pad_amounts = {1, 1, 1, 1};  // k // 2 for a 3x3: at most s - 1
  } else {
    spec.ky = spec.kx = 5;
    spec.pad_amounts = {2, 3, 2, 1};  // edge: any amount, even past the first cell, and asymmetric
  }
  CAPTURE(spec.pad_mode, spec.s, spec.opset, spec.group);
  const auto original = nearest_conv_model(spec);
  auto out = rewrite_copy(original, all_forms());
  REQUIRE(out.result.nodes.size() == 1);
  const auto& row = out.result.nodes[0];
  CAPTURE(row.reason);
  REQUIRE(row.rewritten);
  CHECK(row.summary.form == "nearest_conv");
  const auto& g = out.model.graph();
  CHECK(checker_error(out.model).empty());
  const auto convs = require_polyphase(g, "Y", spec.s, spec.group, spec.opset, "up1");
  CHECK(count_ops(g, "Resize") == 0);
  for (const char* init : {"scales", "padsP", "W"}) CHECK(find_initializer(g, init) == nullptr);
  // Every phase Conv reads an edge Pad of X (or X itself, where its window needs no padding) and pads nothing.
  int edge_padded = 0;
  for (const auto* conv : convs) {
    CHECK(attr_ints(*conv, "pads") == std::vector<int64_t>{0, 0, 0, 0});
    if (conv->input(0) == "X") continue;
    ++edge_padded;
    const auto* pad = find_producer(g, conv->input(0));
    REQUIRE(pad != nullptr);
    CHECK(pad->op_type() == "Pad");
    CHECK(pad->input(0) == "X");
    REQUIRE(find_attr(*pad, "mode") != nullptr);
    CHECK(find_attr(*pad, "mode")->s() == "edge");
  }
  CHECK(edge_padded >= spec.s * spec.s - 1);
  const auto x = random_tensor4(1, spec.c_in, spec.h, spec.w, spec.seed + 100);
  CHECK(output_diff(original, out.model, {{"X", x}}, "Y", {1, spec.c_out, spec.s * spec.h, spec.s * spec.w}) < kTolerance);
  CHECK(serialized(rewrite_copy(out.model, all_forms()).model) == serialized(out.model));
}

TEST_CASE("nearest + constant zero Pad + Conv adds the Pad to the Conv's zero padding", "[rewrite][recogniser][nearest_conv][edge]") {
  NearestConvSpec spec;
  spec.pad_mode = "constant";
  spec.pad_amounts = {1, 0, 0, 1};
  spec.pads = {0, 1, 1, 0};
  spec.opset = GENERATE(11, 13);
  CAPTURE(spec.opset);
  require_rewritten(nearest_conv_model(spec), spec);
}

TEST_CASE("near-miss nearest + Conv is kept with a reason", "[rewrite][recogniser][nearest_conv][refusal]") {
  NearestConvSpec spec;
  SECTION("a reflect Pad past the first cell: x2 by 2 reflects the second sample, not x's edge") {
    spec.pads = {0, 0, 0, 0};
    spec.ky = spec.kx = 5;
    spec.pad_mode = "reflect";
    spec.pad_amounts = {2, 2, 2, 2};
    require_kept(nearest_conv_model(spec), "reflect Pad pads [2,2,2,2] reach past the first cell of the x2 upsampling (at most 1)");
  }
  SECTION("zero Conv pads after a reflect Pad") {
    spec.pad_mode = "reflect";
    spec.pad_amounts = {1, 1, 0, 0};
    spec.pads = {0, 0, 1, 1};
    require_kept(nearest_conv_model(spec), "Conv pads zeros after a reflect Pad");
  }
  SECTION("a wrap Pad") {
    spec.opset = 19;
    spec.pads = {0, 0, 0, 0};
    spec.pad_mode = "wrap";
    require_kept(nearest_conv_model(spec), "Pad mode wrap");
  }
  SECTION("Resize mode linear") {
    spec.mode = "linear";
    spec.rounding.clear();
    require_kept(nearest_conv_model(spec), "Resize mode linear");
  }
  SECTION("Conv stride 2") {
    spec.conv_stride = 2;
    require_kept(nearest_conv_model(spec), "Conv stride 2");
  }
  SECTION("Conv with both auto_pad and pads") {
    require_kept(with_string_attribute(nearest_conv_model(spec), "Y", "auto_pad", "SAME_UPPER"),
                 "Conv has both auto_pad SAME_UPPER and pads, which the ONNX spec forbids");
  }
  SECTION("Conv kernel_shape that disagrees with its weight") {
    require_kept(with_kernel_shape(nearest_conv_model(spec), "Y", {5, 5}), "Conv kernel_shape [5,5] disagrees with its weight");
  }
  SECTION("Conv dilation 2") {
    spec.conv_dilation = 2;
    spec.pads = {2, 2, 2, 2};
    require_kept(nearest_conv_model(spec), "Conv dilation 2");
  }
  SECTION("Resize output has another reader") {
    spec.resize_extra_reader = true;
    require_kept(nearest_conv_model(spec), "Resize output has another reader");
  }
  SECTION("Resize scale 1.5") {
    spec.scales = {1, 1, 1.5, 1.5};
    require_kept(nearest_conv_model(spec), "Resize scales are not [1,1,s,s] with an integer s >= 2 (1,1,1.5,1.5)");
  }
  SECTION("Resize scales that differ per axis") {
    spec.scales = {1, 1, 2, 3};
    require_kept(nearest_conv_model(spec), "(1,1,2,3)");
  }
  SECTION("asymmetric with round_prefer_floor at s 3") {
    spec.s = 3;
    spec.rounding = "round_prefer_floor";
    require_kept(nearest_conv_model(spec),
                 "Resize coordinate_transformation_mode asymmetric with nearest_mode round_prefer_floor is not x[floor(o/3)]");
  }
  SECTION("half_pixel with floor") {
    spec.coordinate = "half_pixel";
    require_kept(nearest_conv_model(spec), "Resize coordinate_transformation_mode half_pixel with nearest_mode floor");
  }
  SECTION("tf_half_pixel_for_nn with round_prefer_floor") {
    spec.coordinate = "tf_half_pixel_for_nn";
    spec.rounding = "round_prefer_floor";  // (a+0.5)/s rounds up to h+1 for the last a of each cell
    require_kept(nearest_conv_model(spec),
                 "Resize coordinate_transformation_mode tf_half_pixel_for_nn with nearest_mode round_prefer_floor");
  }
  SECTION("align_corners") {
    spec.coordinate = "align_corners";
    spec.rounding = "round_prefer_floor";
    require_kept(nearest_conv_model(spec), "Resize coordinate_transformation_mode align_corners");
  }
  SECTION("sizes of an input whose shape is not known") {
    spec.by_sizes = true;
    spec.h = spec.w = 0;
    require_kept(nearest_conv_model(spec), "Resize by sizes of an input whose shape is not known");
  }
  SECTION("sizes with keep_aspect_ratio_policy not_larger") {
    spec.opset = 18;
    spec.by_sizes = true;
    spec.resize_extra = "keep_aspect_ratio_policy = \"not_larger\"";
    require_kept(nearest_conv_model(spec), "Resize by sizes with keep_aspect_ratio_policy not_larger");
  }
  SECTION("Resize with axes") {
    spec.opset = 18;
    spec.scales = {2, 2};
    spec.resize_extra = "axes = [2, 3]";
    require_kept(nearest_conv_model(spec), "Resize with axes");
  }
  SECTION("Conv pads that do not keep the size") {
    spec.pads = {0, 0, 0, 0};
    require_kept(nearest_conv_model(spec), "not a clean upscale: output is 2*H-2 on that axis");
  }
  SECTION("a derived kernel too large to hold") {
    // 32 channels x (1+1024-1)^2 taps: 2^25 elements, twice what the constant evaluator may fold.
    spec.c_in = spec.c_out = spec.group = 32;
    spec.s = 1024;
    spec.ky = spec.kx = 1;
    spec.pads = {0, 0, 0, 0};
    require_kept(nearest_conv_model(spec), "the equivalent ConvTranspose kernel would have 33554432 elements");
  }
  SECTION("Conv weight not constant") {
    spec.weight_input = true;
    require_kept(nearest_conv_model(spec), "Conv weight not constant");
  }
}

TEST_CASE("the forms option selects nearest_conv, which the default rewrites", "[rewrite][recogniser][nearest_conv][options]") {
  NearestConvSpec spec;
  spec.c_in = 2, spec.c_out = 3, spec.group = 1;
  const auto original = nearest_conv_model(spec);
  rewrite::RewriteOptions options;
  options.forms = {rewrite::Form::kConvTranspose, rewrite::Form::kNearestMask};
  auto out = rewrite_copy(original, options);
  REQUIRE(out.result.nodes.size() == 1);
  CHECK_FALSE(out.result.nodes[0].rewritten);
  CHECK(out.result.nodes[0].reason == "form nearest_conv not selected by --forms");
  CHECK(serialized(out.model) == serialized(original));
  out = rewrite_copy(original);
  REQUIRE(out.result.nodes.size() == 1);
  CHECK(out.result.nodes[0].rewritten);
  options = all_forms();
  options.skip = {"up1"};
  out = rewrite_copy(original, options);
  CHECK(out.result.nodes[0].reason == "skipped by --skip");
}

TEST_CASE("nearest + Conv whose box sums overflow the weight's type is kept", "[rewrite][recogniser][nearest_conv][refusal]") {
  // Taps of 2e38 (float32) or 30000 (float16) are finite, but the ConvTranspose kernel sums s x s of them: stored,
  // its weights were inf and the rewrite gave inf where the original is finite (ONNX Runtime, x = 1e-3).
  for (const auto& [type, tap] :
       std::vector<std::pair<int32_t, double>>{{onnx::TensorProto::FLOAT, 2e38}, {onnx::TensorProto::FLOAT16, 30000}}) {
    CAPTURE(type);
    auto original = nearest_conv_model(NearestConvSpec{});
    for (auto& init : *original.mutable_graph()->mutable_initializer()) {
      if (init.name() == "W") init = onnx_io::make_tensor("W", type, {4, 1, 3, 3}, std::vector<double>(36, tap), true);
    }
    // A corner phase sums two taps along one axis and one along the other; float16 fits 2 x 30000, not 4 x 30000.
    require_kept(original, type == onnx::TensorProto::FLOAT ? "a derived weight (4e+38) overflows FLOAT: the rewrite would compute inf"
                                                            : "a derived weight (120000) overflows FLOAT16");
  }
  // Half of that is no overflow, and is rewritten.
  auto fits = nearest_conv_model(NearestConvSpec{});
  for (auto& init : *fits.mutable_graph()->mutable_initializer()) {
    if (init.name() == "W")
      init = onnx_io::make_tensor("W", onnx::TensorProto::FLOAT16, {4, 1, 3, 3}, std::vector<double>(36, 15000), true);
  }
  CHECK(rewrite_copy(fits, all_forms()).result.rewritten == 1);
}

namespace {

// t = Relu(X), Y = Conv(Resize(t, sizes [1,3,8,10]), W): a nearest_conv x2 when t is 4x5. `x_dims` is X's shape.
onnx::ModelProto relu_resize_by_sizes(const std::string& x_dims) {
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[)" + x_dims + R"(] X) => (float[1,3,OH,OW] Y) {
  t = Relu (X)
  sizes = Constant <value = int64[4] {1, 3, 8, 10}> ()
  u = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (t, , , sizes)
  Y = Conv <group = 3, kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (u, W)
})");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {3, 1, 3, 3}, 17);
  name_node(m, "Y", "up1");
  return m;
}

onnx::ValueInfoProto declared_4x5(const std::string& name) {
  onnx::ValueInfoProto v;
  v.set_name(name);
  auto* type = v.mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 3, 4, 5}) type->mutable_shape()->add_dim()->set_dim_value(d);
  return v;
}

}  // namespace

TEST_CASE("a Resize by sizes takes no factor from the shapes a file declares for computed tensors",
          "[rewrite][recogniser][nearest_conv][value_info]") {
  // X is [1,3,H,W] and the file says t is 4x5: Resize to 8x10 looked like x2. ONNX Runtime's original gives 8x10 for
  // every input size, the rewrite gave 2H x 2W. A graph output's declared shape is such a claim
  // too when a node reads that output. Kept, with the declarations left in the model.
  auto original = relu_resize_by_sizes("1,3,H,W");
  SECTION("a value_info entry") { *original.mutable_graph()->add_value_info() = declared_4x5("t"); }
  SECTION("a graph output that the Resize also reads") { *original.mutable_graph()->add_output() = declared_4x5("t"); }
  require_upsampler_kept(original, "nearest_conv", "Resize by sizes of an input whose shape is not known");
}

TEST_CASE("a Resize by sizes of an input whose dims inference knows is rewritten, and declared value_info stays",
          "[rewrite][recogniser][nearest_conv][value_info]") {
  auto original = relu_resize_by_sizes("1,3,4,5");
  *original.mutable_graph()->add_value_info() = declared_4x5("t");
  const auto out = rewrite_copy(original);
  REQUIRE(out.result.rewritten == 1);
  CHECK(out.result.nodes[0].summary.form == "nearest_conv");
  CHECK(count_ops(out.model.graph(), "Resize") == 0);
  CHECK(count_ops(out.model.graph(), "DepthToSpace") == 1);
  const auto* kept = find_value_info(out.model.graph(), "t");  // t is still computed: its declaration is not lost
  REQUIRE(kept != nullptr);
  CHECK(kept->SerializeAsString() == declared_4x5("t").SerializeAsString());
  // The derived kernel sums float taps: equal to float rounding, not bit for bit.
  CHECK(output_diff(original, out.model, {{"X", random_tensor4(1, 3, 4, 5, 18)}}, "Y", {1, 3, 8, 10}) < 1e-5);
}

TEST_CASE("a 1x1 Conv after a nearest Resize runs once on X, the Resize after it: no s*s equal phases, at every opset",
          "[rewrite][recogniser][nearest_conv][nearest_layout]") {
  // s*s identical 1x1 phases are the same MACs with s*s times the weights and a join (0.36x-0.43x on LiteRT); the Conv
  // commutes with the replication, so it runs at the low resolution: 1/s^2 of its MACs.
  NearestConvSpec spec;
  spec.ky = spec.kx = 1;
  spec.pads = {0, 0, 0, 0};
  spec.opset = GENERATE(10, 11, 12, 13, 18);
  spec.s = GENERATE(2, 3);
  spec.c_in = 6, spec.c_out = 2, spec.group = 1;
  spec.bias = true;
  if (spec.opset == 10) spec.coordinate = spec.rounding = "";  // Resize-10 has neither attribute
  CAPTURE(spec.opset, spec.s);
  const auto out = require_rewritten(nearest_conv_model(spec), spec);
  const auto* conv = find_producer(out.model.graph(), find_producer(out.model.graph(), "Y")->input(0));
  CHECK(attr_ints(*conv, "kernel_shape") == std::vector<int64_t>{1, 1});
  CHECK(conv_weight_dims(out.model.graph(), *conv) == std::vector<int64_t>{2, 6, 1, 1});
}

TEST_CASE("a ConvTranspose whose every phase is the same tap is a Conv and a nearest Resize, and one tap alone stays phases",
          "[rewrite][nearest_layout]") {
  // k = s = 2, pads 0: each output pixel of a 2x2 cell reads one input pixel through one tap. The same value on all
  // four taps of a channel is a per-channel scale, then replication.
  DeconvSpec spec;
  spec.kh = spec.kw = 2;
  spec.attrs = "strides=[2,2]";
  spec.bias = true;
  auto uniform = deconv_model(spec);
  auto& w = *uniform.mutable_graph()->mutable_initializer(0);
  REQUIRE(w.name() == "W");
  std::vector<double> v;
  for (int c = 0; c < 3; ++c) v.insert(v.end(), 4, 0.25 * (c + 1));
  w = onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {3, 1, 2, 2}, v, true);
  const auto out = rewrite_copy(uniform);
  REQUIRE(out.result.rewritten == 1);
  CHECK(out.result.nodes[0].layout == rewrite::PhaseLayout::kNearest);
  require_conv_then_nearest(out.model.graph(), "Y", 2, 3, 13, "up1");
  CHECK(output_diff(uniform, out.model, {{"X", input_for(spec)}}, "Y") < kTolerance);
  // FastDepth's Unpool: one non-zero tap per channel. Its phases differ (three are zero): the DCR join.
  v.assign(12, 0.0);
  for (int c = 0; c < 3; ++c) v[static_cast<size_t>(c * 4)] = 1.0;
  auto unpool = deconv_model(spec);
  *unpool.mutable_graph()->mutable_initializer(0) = onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {3, 1, 2, 2}, v, true);
  const auto phases = rewrite_copy(unpool);
  REQUIRE(phases.result.rewritten == 1);
  CHECK(phases.result.nodes[0].layout == rewrite::PhaseLayout::kDcr);
  CHECK(count_ops(phases.model.graph(), "Resize") == 0);
  // A -0 among the taps makes the phases differ bit for bit: they stay phases, whose zero tap keeps its sign.
  v.assign(12, 0.5);
  auto signed_zero = deconv_model(spec);
  v[0] = 0.0;
  v[3] = std::copysign(0.0, -1.0);
  *signed_zero.mutable_graph()->mutable_initializer(0) = onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {3, 1, 2, 2}, v, true);
  CHECK(rewrite_copy(signed_zero).result.nodes[0].layout == rewrite::PhaseLayout::kDcr);
  // Before opset 10 there is no Resize: kept, never s*s equal phases.
  spec.opset = 9;
  auto old = deconv_model(spec);
  *old.mutable_graph()->mutable_initializer(0) = w;
  const auto kept = rewrite_copy(old);
  CHECK(kept.result.rewritten == 0);
  CHECK_THAT(kept.result.nodes[0].reason, Catch::Contains("nearest Resize, which exists from opset 10 on"));
}

TEST_CASE("a Resize moved below a 1x1 Conv starts the next form, in the same run: the output is a fixpoint",
          "[rewrite][nearest_layout][idempotent]") {
  // nearest -> 1x1 (32 -> 8 channels) -> 3x3: the first pass moves the Resize below the 1x1, where it starts a
  // nearest + 3x3 that the next pass rewrites. Running the tool on its output must change nothing.
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,4,5] X) => (float[1,4,8,10] Y) {
  u = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (X, , scales)
  r = Conv <kernel_shape = [1, 1]> (u, R, RB)
  Y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (r, W)
})");
  auto& g = *m.mutable_graph();
  *g.add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, {1, 1, 2, 2}, false);
  *g.add_initializer() = onnx_io::make_tensor("R", onnx::TensorProto::FLOAT, {6, 8, 1, 1}, dyadic_values(48, 3), true);
  *g.add_initializer() = onnx_io::make_tensor("RB", onnx::TensorProto::FLOAT, {6}, dyadic_values(6, 4), true);
  *g.add_initializer() = onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {4, 6, 3, 3}, dyadic_values(216, 5), true);
  name_node(m, "r", "reduce");
  name_node(m, "Y", "mix");
  const auto out = rewrite_copy(m, all_forms());
  REQUIRE(out.result.nodes.size() == 2);
  CHECK(out.result.rewritten == 2);
  for (const auto& row : out.result.nodes) {
    CAPTURE(row.summary.name, row.reason);
    CHECK(row.rewritten);
    CHECK(row.summary.form == "nearest_conv");
    CHECK(row.layout == (row.summary.name == "reduce" ? rewrite::PhaseLayout::kNearest : rewrite::PhaseLayout::kDcr));
  }
  const auto& og = out.model.graph();
  CHECK(count_ops(og, "Resize") == 0);  // the moved Resize became the 3x3's phases
  CHECK(count_ops(og, "DepthToSpace") == 1);
  CHECK(count_ops(og, "Conv") == 1 + 4);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(m, out.model, {{"X", random_tensor4(1, 8, 4, 5, 9)}}, "Y") < kTolerance);
  CHECK(serialized(rewrite_copy(out.model, all_forms()).model) == serialized(out.model));
  CHECK(serialized(rewrite_copy(m, all_forms()).model) == serialized(out.model));
}
