// The XNNPACK paths that could silently be wrong, each against core/reference.h, with placement asserted.
#include <cmath>
#include <string>
#include <vector>

#include <algorithm>

#include <catch2/catch.hpp>

#include "core/reference.h"
#include "runtime_check/compare.h"
#include "runtime_check/executor.h"
#include "runtime_check/tensor_io.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
  return s + "]";
}

constexpr double kTol = 1e-4;

}  // namespace

TEST_CASE("ConvTranspose runs on XNNPACK deconvolution and matches the reference", "[xnnpack][deconv]") {
  struct Case {
    int64_t c_in, c_out, group, kh, kw, sh, sw;
    std::array<int64_t, 4> pads;  // top, left, bottom, right
    std::array<int64_t, 2> output_padding, dilations;
  };
  const Case c = GENERATE(Case{4, 6, 2, 3, 2, 2, 3, {1, 0, 2, 1}, {1, 2}, {1, 1}},   // grouped, rectangular, asymmetric
                          Case{3, 3, 3, 4, 4, 2, 2, {1, 1, 1, 1}, {0, 0}, {1, 1}},   // depthwise k4 s2 p1
                          Case{2, 5, 1, 2, 3, 1, 2, {0, 1, 0, 0}, {0, 1}, {2, 1}},   // dense, dilated
                          Case{6, 3, 3, 3, 5, 3, 2, {2, 0, 0, 1}, {2, 1}, {1, 1}},   // group 3, C_in/g 2
                          Case{8, 8, 8, 3, 3, 2, 2, {1, 1, 1, 1}, {1, 1}, {1, 1}});  // depthwise, output_padding
  const std::vector<int64_t> x_dims = {2, c.c_in, 5, 4};
  const std::vector<int64_t> w_dims = {c.c_in, c.c_out / c.group, c.kh, c.kw};
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : 17]> g (float" + ints(x_dims) +
                                " x) => (float y) {\n"
                                "  y = ConvTranspose <group = " +
                                std::to_string(c.group) + ", strides = " + ints({c.sh, c.sw}) +
                                ", pads = " + ints({c.pads[0], c.pads[1], c.pads[2], c.pads[3]}) +
                                ", output_padding = " + ints({c.output_padding[0], c.output_padding[1]}) +
                                ", dilations = " + ints({c.dilations[0], c.dilations[1]}) + "> (x, w, b)\n}");
  const auto w = add_initializer(model, "w", w_dims, 11);
  const auto b = add_initializer(model, "b", {c.c_out}, 12);
  auto ran = create_and_run(model);
  CHECK(ran.executor.count("ConvTranspose", Placement::kXnnpack) == 1);

  core::ConvTranspose2dParams p;
  p.strides = {c.sh, c.sw};
  p.pads = c.pads;
  p.output_padding = c.output_padding;
  p.dilations = c.dilations;
  p.group = c.group;
  const auto expected = core::conv_transpose2d_reference(to_tensor4(ran.executor.creation_inputs()[0].tensor), to_tensor4(w, w_dims), b, p);
  CHECK(max_abs_diff(ran.outputs[0].tensor, expected) < kTol);
}

TEST_CASE("ConvTranspose padding forms resolve per the ONNX spec formula", "[xnnpack][deconv]") {
  // k3 s2 on H=W=4: natural size s*(H-1) + k = 9.
  struct Case {
    std::string attrs;
    std::array<int64_t, 4> pads;  // the pads the spec formula gives (negative end: extra output at the end)
    std::array<int64_t, 2> output_padding;
  };
  const Case c =
      GENERATE(Case{"auto_pad = \"SAME_UPPER\"", {0, 0, 1, 1}, {0, 0}},  // out 8, total 1: begin 0
               Case{"auto_pad = \"SAME_LOWER\"", {1, 1, 0, 0}, {0, 0}},  // rest at the begin
               Case{"auto_pad = \"VALID\"", {0, 0, 0, 0}, {0, 0}}, Case{"output_shape = [7, 8]", {1, 1, 1, 0}, {0, 0}},  // totals 2 and 1
               Case{"output_shape = [10, 9], output_padding = [0, 1]", {0, 1, -1, 0}, {0, 1}});
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 17]> g (float[1,2,4,4] x) => (float y) {\n"
      "  y = ConvTranspose <strides = [2, 2], " +
      c.attrs + "> (x, w)\n}");
  const auto w = add_initializer(model, "w", {2, 3, 3, 3}, 5);
  auto ran = create_and_run(model);
  INFO(c.attrs);
  CHECK(ran.executor.count("ConvTranspose", Placement::kXnnpack) == 1);
  core::ConvTranspose2dParams p;
  p.strides = {2, 2};
  p.pads = c.pads;
  p.output_padding = c.output_padding;
  const auto expected =
      core::conv_transpose2d_reference(to_tensor4(ran.executor.creation_inputs()[0].tensor), to_tensor4(w, {2, 3, 3, 3}), {}, p);
  CHECK(max_abs_diff(ran.outputs[0].tensor, expected) < kTol);
}

TEST_CASE("Depthwise and grouped Conv run on XNNPACK and match the reference", "[xnnpack][conv]") {
  struct Case {
    int64_t c, multiplier, k, stride;
    std::array<int64_t, 4> pads;
  };
  const Case c = GENERATE(Case{8, 1, 3, 1, {1, 1, 1, 1}}, Case{5, 1, 5, 2, {2, 0, 1, 2}}, Case{4, 2, 3, 2, {0, 1, 1, 0}},
                          Case{3, 1, 2, 1, {1, 0, 0, 1}});
  const std::vector<int64_t> w_dims = {c.c * c.multiplier, 1, c.k, c.k};
  auto model =
      parse_model_text("<ir_version: 8, opset_import: [\"\" : 17]> g (float[1," + std::to_string(c.c) +
                       ",9,7] x) => (float y) {\n  y = Conv <group = " + std::to_string(c.c) + ", strides = " + ints({c.stride, c.stride}) +
                       ", pads = " + ints({c.pads[0], c.pads[1], c.pads[2], c.pads[3]}) + "> (x, w, b)\n}");
  const auto w = add_initializer(model, "w", w_dims, 21);
  const auto b = add_initializer(model, "b", {w_dims[0]}, 22);
  auto ran = create_and_run(model);
  CHECK(ran.executor.count("Conv", Placement::kXnnpack) == 1);
  core::Conv2dParams p;
  p.strides = {c.stride, c.stride};
  p.pads = c.pads;
  p.group = c.c;
  const auto expected = core::conv2d_reference(to_tensor4(ran.executor.creation_inputs()[0].tensor), to_tensor4(w, w_dims), b, p);
  CHECK(max_abs_diff(ran.outputs[0].tensor, expected) < kTol);
}

TEST_CASE("Pad: non-negative pads run on XNNPACK in NHWC, negative pads crop on the reference", "[xnnpack][pad]") {
  // The Conv makes the Pad's input NHWC, so the XNNPACK pad must permute its pads.
  const std::vector<int64_t> pads = GENERATE(std::vector<int64_t>{0, 0, 1, 2, 0, 0, 3, 0},      // grow
                                             std::vector<int64_t>{0, 0, -1, 1, 0, 0, 1, -2},    // crop top and right
                                             std::vector<int64_t>{0, 0, -2, -1, 0, 0, 0, -3});  // crop only
  const bool crops = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; });
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,3,6,7] x) => (float y) {\n"
      "  c = Conv (x, w)\n  y = Pad (c, pads, value)\n}");
  const auto w = add_initializer(model, "w", {4, 3, 1, 1}, 31);
  add_int64_initializer(model, "pads", pads);
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("value", onnx::TensorProto::FLOAT, {}, {0.5}, false);
  auto ran = create_and_run(model);
  INFO(ints(pads));
  CHECK(ran.executor.count("Pad", crops ? Placement::kReference : Placement::kXnnpack) == 1);
  const auto conv =
      core::conv2d_reference(to_tensor4(ran.executor.creation_inputs()[0].tensor), to_tensor4(w, {4, 3, 1, 1}), {}, core::Conv2dParams{});
  const auto expected = core::pad2d_reference(conv, {pads[2], pads[3], pads[6], pads[7]}, 0.5);
  CHECK(max_abs_diff(ran.outputs[0].tensor, expected) < kTol);
}

TEST_CASE("Pad before opset 11 takes pads and value as attributes", "[pad]") {
  auto model = parse_model_text(
      "<ir_version: 5, opset_import: [\"\" : 10]> g (float[1,2,3,3] x) => (float y) {\n"
      "  y = Pad <pads = [0, 0, 1, -1, 0, 0, 0, 2], value = 2.0> (x)\n}");
  auto ran = create_and_run(model);
  const auto expected = core::pad2d_reference(to_tensor4(ran.executor.creation_inputs()[0].tensor), {1, -1, 0, 2}, 2.0);
  CHECK(max_abs_diff(ran.outputs[0].tensor, expected) < kTol);
}

TEST_CASE("DepthToSpace DCR runs on XNNPACK, CRD on the reference, and they differ", "[xnnpack][depth_to_space]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[2,3,4,5] x) => (float dcr, float crd) {\n"
      "  c = Conv (x, w)\n"
      "  dcr = DepthToSpace <blocksize = 2, mode = \"DCR\"> (c)\n"
      "  crd = DepthToSpace <blocksize = 2, mode = \"CRD\"> (c)\n}");
  const auto w = add_initializer(model, "w", {12, 3, 1, 1}, 41);
  auto ran = create_and_run(model);
  CHECK(ran.executor.count("DepthToSpace", Placement::kXnnpack) == 1);
  CHECK(ran.executor.count("DepthToSpace", Placement::kReference) == 1);
  const auto conv =
      core::conv2d_reference(to_tensor4(ran.executor.creation_inputs()[0].tensor), to_tensor4(w, {12, 3, 1, 1}), {}, core::Conv2dParams{});
  const auto dcr = core::depth_to_space_reference(conv, 2, true);
  const auto crd = core::depth_to_space_reference(conv, 2, false);
  CHECK(max_abs_diff(ran.outputs[0].tensor, dcr) < kTol);
  CHECK(max_abs_diff(ran.outputs[1].tensor, crd) < kTol);
  CHECK(max_abs_diff(ran.outputs[0].tensor, crd) > 0.1);  // the two orders really differ on this data
}

TEST_CASE("Concat on channels writes each NHWC input at its channel offset on XNNPACK", "[xnnpack][concat]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[2,2,5,3] x) => (float y, float z) {\n"
      "  a = Conv (x, wa)\n  b = Conv (x, wb)\n"
      "  y = Concat <axis = 1> (a, b, a)\n"
      "  c = Conv (x, wc)\n  z = Concat <axis = -1> (a, c)\n}");
  const auto wa = add_initializer(model, "wa", {3, 2, 1, 1}, 51);
  const auto wb = add_initializer(model, "wb", {5, 2, 1, 1}, 52);
  const auto wc = add_initializer(model, "wc", {3, 2, 1, 1}, 53);
  auto ran = create_and_run(model);
  CHECK(ran.executor.count("Concat", Placement::kXnnpack) == 1);    // the channel concat
  CHECK(ran.executor.count("Concat", Placement::kReference) == 1);  // the width concat (a plain block copy)
  const auto x = to_tensor4(ran.executor.creation_inputs()[0].tensor);
  const auto a = core::conv2d_reference(x, to_tensor4(wa, {3, 2, 1, 1}), {}, core::Conv2dParams{});
  const auto b = core::conv2d_reference(x, to_tensor4(wb, {5, 2, 1, 1}), {}, core::Conv2dParams{});
  const auto c = core::conv2d_reference(x, to_tensor4(wc, {3, 2, 1, 1}), {}, core::Conv2dParams{});
  CHECK(max_abs_diff(ran.outputs[0].tensor, core::concat_channels_reference({a, b, a})) < kTol);
  const Tensor& z = ran.outputs[1].tensor;
  REQUIRE(z.dims == std::vector<int64_t>{2, 3, 5, 6});
  double worst = 0.0;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t h = 0; h < 5; ++h)
        for (int64_t col = 0; col < 6; ++col) {
          const double want = col < 3 ? a.at(n, ch, h, col) : c.at(n, ch, h, col - 3);
          worst = std::max(worst, std::abs(z.f[static_cast<size_t>(((n * 3 + ch) * 5 + h) * 6 + col)] - want));
        }
  CHECK(worst < kTol);
}

TEST_CASE("run() reuses the plan: repeated runs on new inputs stay correct", "[executor]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 17]> g (float[1,4,6,6] x) => (float y) {\n"
      "  t = ConvTranspose <group = 4, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n"
      "  y = Relu (t)\n}");
  const auto w = add_initializer(model, "w", {4, 1, 4, 4}, 61);
  auto executor = Executor::create(model, {});
  REQUIRE(executor.ok());
  core::ConvTranspose2dParams p;
  p.strides = {2, 2};
  p.pads = {1, 1, 1, 1};
  p.group = 4;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto inputs = make_random_inputs(model, {}, seed);
    REQUIRE(inputs.ok());
    auto out = executor->run(inputs.value());
    REQUIRE(out.ok());
    auto expected = core::conv_transpose2d_reference(to_tensor4(inputs.value()[0].tensor), to_tensor4(w, {4, 1, 4, 4}), {}, p);
    for (double& v : expected.data) v = std::max(v, 0.0);
    CHECK(max_abs_diff(out.value()[0].tensor, expected) < kTol);
  }
  CHECK(executor->count(Placement::kXnnpack) == 2);
  CHECK(executor->count(Placement::kReference) == 0);

  // A thread pool and the all-reference mode give the same numbers.
  auto single = executor->run(executor->creation_inputs());
  REQUIRE(single.ok());
  for (const bool xnnpack : {true, false}) {
    ExecutorOptions options;
    options.threads = 2;
    options.use_xnnpack = xnnpack;
    auto other = Executor::create(model, options);
    REQUIRE(other.ok());
    CHECK(other->count(Placement::kXnnpack) == (xnnpack ? 2u : 0u));
    auto out = other->run(executor->creation_inputs());
    REQUIRE(out.ok());
    CHECK(compare_outputs(out.value(), single.value(), {}).passed);
  }
}

TEST_CASE("Exporter shape subgraphs fold at creation, integers included", "[executor]") {
  // Shape -> Gather -> Unsqueeze -> Concat -> Reshape, the way PyTorch exports x.view(x.size(0), -1).
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[2,3,4,4] x) => (float y) {\n"
      "  s = Shape (x)\n  i0 = Constant <value = int64 {0}> ()\n"
      "  n = Gather <axis = 0> (s, i0)\n  ax = Constant <value = int64[1] {0}> ()\n"
      "  nu = Unsqueeze (n, ax)\n  m1 = Constant <value = int64[1] {-1}> ()\n"
      "  shape = Concat <axis = 0> (nu, m1)\n  r = Relu (x)\n  y = Reshape (r, shape)\n}");
  auto ran = create_and_run(model);
  CHECK(ran.outputs[0].tensor.dims == std::vector<int64_t>{2, 48});
  CHECK(ran.executor.count(Placement::kFolded) == 7);
  CHECK(ran.executor.count("Relu", Placement::kXnnpack) == 1);
  const auto& x = ran.executor.creation_inputs()[0].tensor;
  for (size_t k = 0; k < x.f.size(); ++k) CHECK(ran.outputs[0].tensor.f[k] == std::max(x.f[k], 0.0f));
}

TEST_CASE("Broadcast Add of a per-channel bias runs on XNNPACK in NHWC", "[xnnpack][executor]") {
  const std::vector<int64_t> bias_dims = GENERATE(std::vector<int64_t>{5, 1, 1}, std::vector<int64_t>{1, 5, 1, 1});
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,2,3,4] x) => (float y) {\n"
      "  c = Conv (x, w)\n  y = Add (c, bias)\n}");
  const auto w = add_initializer(model, "w", {5, 2, 1, 1}, 71);
  const auto bias = add_initializer(model, "bias", bias_dims, 72);
  auto ran = create_and_run(model);
  CHECK(ran.executor.count("Add", Placement::kXnnpack) == 1);
  const auto expected =
      core::conv2d_reference(to_tensor4(ran.executor.creation_inputs()[0].tensor), to_tensor4(w, {5, 2, 1, 1}), bias, core::Conv2dParams{});
  CHECK(max_abs_diff(ran.outputs[0].tensor, expected) < kTol);
}

TEST_CASE("Neg and Sqrt run on XNNPACK in the producer's layout and match the reference kernels", "[xnnpack][unary]") {
  // The Conv leaves NHWC; Sqrt (of a Relu, so defined) and Neg keep it, and Erf (reference only) keeps it too.
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,3,6,6] x) => (float[1,4,6,6] y) {\n"
      "  c = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
      "  r = Relu (c)\n"
      "  s = Sqrt (r)\n"
      "  n = Neg (s)\n"
      "  y = Erf (n)\n"
      "}");
  add_initializer(model, "w", {4, 3, 3, 3}, 7);
  ExecutorOptions reference_only;
  reference_only.use_xnnpack = false;
  ExecutorOptions unfused;  // keep the Relu a step of its own, so the Sqrt reads a Relu and not a fused Conv
  unfused.fuse_activations = false;
  unfused.profile = true;  // the profile says which steps converted their input's layout
  auto fast = create_and_run(model, unfused);
  auto slow = create_and_run(model, reference_only);
  CHECK(fast.executor.count("Sqrt", Placement::kXnnpack) == 1);
  CHECK(fast.executor.count("Neg", Placement::kXnnpack) == 1);
  CHECK(fast.executor.count("Erf", Placement::kReference) == 1);
  REQUIRE(fast.outputs.size() == 1);
  CHECK(max_abs_diff(fast.outputs[0].tensor, to_tensor4(slow.outputs[0].tensor)) < 1e-5);
  // No layout conversion between the Conv and the graph output: each of these reads its producer's NHWC as is.
  const ExecutorProfile p = fast.executor.profile(10);
  size_t seen = 0;
  for (const auto& n : p.top_nodes) {
    if (n.op_type != "Sqrt" && n.op_type != "Neg" && n.op_type != "Erf") continue;
    INFO(n.node);
    CHECK(n.convert_ms == 0.0);
    ++seen;
  }
  CHECK(seen == 3);
}

TEST_CASE("A segmentation head ending in LogSoftmax and ArgMax runs whole and matches a double-precision head", "[executor][logsoftmax]") {
  // Before LogSoftmax and ArgMax were in the op table, Executor::create refused this model, so --verify fell back to
  // per-node mode and --bench exited 3. Before opset 13, LogSoftmax's axis 1 coerces [C, H, W] into one row; from 13
  // it is one axis (the classes).
  const int opset = GENERATE(11, 13);
  INFO("opset " << opset);
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) +
                                "]> g (float[2,3,5,4] x) => (float[2,6,5,4] scores, int64[2,1,5,4] labels) {\n"
                                "  logits = Conv <pads = [1, 1, 1, 1]> (x, w, b)\n"
                                "  scores = LogSoftmax <axis = 1> (logits)\n"
                                "  labels = ArgMax <axis = 1, keepdims = 1> (scores)\n"
                                "}");
  const std::vector<int64_t> w_dims = {6, 3, 3, 3};
  const auto w = add_initializer(model, "w", w_dims, 31);
  const auto b = add_initializer(model, "b", {6}, 32);
  auto ran = create_and_run(model);
  CHECK(ran.executor.count("Conv", Placement::kXnnpack) == 1);
  CHECK(ran.executor.count("LogSoftmax", Placement::kReference) == 1);  // XNNPACK has no log-softmax
  CHECK(ran.executor.count("ArgMax", Placement::kReference) == 1);
  REQUIRE(ran.outputs.size() == 2);

  // The naive head in double: the Conv from the ONNX formula, then log(exp(v) / sum of exp) over each row.
  core::Conv2dParams p;
  p.pads = {1, 1, 1, 1};
  const core::Tensor4 logits = core::conv2d_reference(to_tensor4(ran.executor.creation_inputs()[0].tensor), to_tensor4(w, w_dims), b, p);
  const int64_t n = 2, c = 6, hw = 5 * 4;
  core::Tensor4 expected = logits;
  for (int64_t image = 0; image < n; ++image) {
    // Opset 11: one row of C*H*W per image; opset 13: one row of C per pixel.
    const int64_t rows = opset < 13 ? 1 : hw, length = opset < 13 ? c * hw : c, stride = opset < 13 ? 1 : hw;
    for (int64_t row = 0; row < rows; ++row) {
      const auto at = [&](int64_t j) { return static_cast<size_t>(image * c * hw + row + j * stride); };
      double total = 0.0;
      for (int64_t j = 0; j < length; ++j) total += std::exp(logits.data[at(j)]);
      for (int64_t j = 0; j < length; ++j) expected.data[at(j)] = std::log(std::exp(logits.data[at(j)]) / total);
    }
  }
  CHECK(max_abs_diff(ran.outputs[0].tensor, expected) < kTol);

  // ArgMax over the classes of the executor's own scores: the first largest, as INT64, with the class axis kept.
  const Tensor& scores = ran.outputs[0].tensor;
  const Tensor& labels = ran.outputs[1].tensor;
  CHECK(labels.dtype == onnx::TensorProto::INT64);
  REQUIRE(labels.dims == std::vector<int64_t>{2, 1, 5, 4});
  for (int64_t image = 0; image < n; ++image) {
    for (int64_t pixel = 0; pixel < hw; ++pixel) {
      int64_t best = 0;
      for (int64_t k = 1; k < c; ++k) {
        if (scores.f[static_cast<size_t>((image * c + k) * hw + pixel)] > scores.f[static_cast<size_t>((image * c + best) * hw + pixel)])
          best = k;
      }
      CHECK(labels.i[static_cast<size_t>(image * hw + pixel)] == best);
    }
  }
}

TEST_CASE("Upsample-7 and -9 resize as Resize-10 does: floor(in * scale) outputs, asymmetric source coordinates", "[reference][upsample]") {
  // The conformance data has one Upsample case (opset 9, nearest, integer scales): the attribute form of 7, linear
  // mode and fractional scales are checked here against the formulas written out. Reference kernels only.
  struct Case {
    int opset;
    std::string mode;
    double sh, sw;
  };
  const Case c = GENERATE(Case{7, "nearest", 2.0, 3.0}, Case{7, "linear", 2.0, 2.0}, Case{8, "nearest", 1.5, 2.5},
                          Case{9, "linear", 1.5, 3.0}, Case{9, "nearest", 1.0, 2.0});
  CAPTURE(c.opset, c.mode, c.sh, c.sw);
  const std::string scales = "[1.0, 1.0, " + std::to_string(c.sh) + ", " + std::to_string(c.sw) + "]";
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : " + std::to_string(c.opset) +
                                "]> g (float[2,3,4,5] x) => (float y) {\n  y = Upsample <mode = \"" + c.mode + "\"" +
                                (c.opset < 9 ? ", scales = " + scales + "> (x)" : "> (x, s)") + "\n}");
  if (c.opset >= 9) {
    *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("s", onnx::TensorProto::FLOAT, {4}, {1.0, 1.0, c.sh, c.sw}, true);
  }
  ExecutorOptions reference_only;
  reference_only.use_xnnpack = false;
  auto ran = create_and_run(model, reference_only);
  CHECK(ran.executor.count("Upsample", Placement::kReference) == 1);
  const core::Tensor4 x = to_tensor4(ran.executor.creation_inputs()[0].tensor);
  const auto out_h = static_cast<int64_t>(std::floor(4 * c.sh)), out_w = static_cast<int64_t>(std::floor(5 * c.sw));
  core::Tensor4 expected(2, 3, out_h, out_w);
  // Per output index on one axis of `in`: the two source indices and the weight of the second.
  struct Tap {
    int64_t lo, hi;
    double t;
  };
  const auto tap = [&](int64_t o, int64_t in, double scale) {
    const double src = o / scale;  // asymmetric
    const auto lo = static_cast<int64_t>(std::floor(src));
    if (c.mode == "nearest") return Tap{lo, lo, 0.0};
    return Tap{std::min(lo, in - 1), std::min(lo + 1, in - 1), src - static_cast<double>(lo)};
  };
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t ch = 0; ch < 3; ++ch)
      for (int64_t oy = 0; oy < out_h; ++oy)
        for (int64_t ox = 0; ox < out_w; ++ox) {
          const Tap ty = tap(oy, 4, c.sh), tx = tap(ox, 5, c.sw);
          const auto at = [&](int64_t iy, int64_t ix) { return x.data[static_cast<size_t>(((n * 3 + ch) * 4 + iy) * 5 + ix)]; };
          const double top = at(ty.lo, tx.lo) * (1 - tx.t) + at(ty.lo, tx.hi) * tx.t;
          const double bottom = at(ty.hi, tx.lo) * (1 - tx.t) + at(ty.hi, tx.hi) * tx.t;
          expected.data[static_cast<size_t>(((n * 3 + ch) * out_h + oy) * out_w + ox)] = top * (1 - ty.t) + bottom * ty.t;
        }
  CHECK(max_abs_diff(ran.outputs[0].tensor, expected) < 1e-6);
}

TEST_CASE("Upsample refuses scales below 1, scales in the wrong place and linear integers, naming the node", "[reference][upsample]") {
  using Case = std::pair<std::string, std::string>;  // node text at its opset, expected message
  const auto [text, message] = GENERATE(
      Case{"<opset_import: [\"\" : 9]> g (float[1,1,4,4] x) => (float y) { y = Upsample (x, half) }",
           "scale 0.500000 is not a finite number >= 1"},
      Case{"<opset_import: [\"\" : 9]> g (float[1,1,4,4] x) => (float y) { y = Upsample <scales = [1.0, 1.0, 2.0, 2.0]> (x, two) }",
           "the scales attribute is Upsample-7's"},
      Case{"<opset_import: [\"\" : 7]> g (float[1,1,4,4] x) => (float y) { y = Upsample <scales = [1.0, 2.0]> (x) }",
           "2 scales for a rank-4 input"},
      Case{"<opset_import: [\"\" : 9]> g (int64[1,1,4,4] x) => (int64 y) { y = Upsample <mode = \"linear\"> (x, two) }",
           "linear mode on INT64[1x1x4x4] is not implemented"});
  CAPTURE(text);
  auto model = parse_model_text("<ir_version: 8, " + text.substr(1));
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("half", onnx::TensorProto::FLOAT, {4}, {1.0, 1.0, 0.5, 0.5}, true);
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("two", onnx::TensorProto::FLOAT, {4}, {1.0, 1.0, 2.0, 2.0}, true);
  model.mutable_graph()->mutable_node(0)->set_name("up");
  auto executor = Executor::create(model, {});
  REQUIRE_FALSE(executor.ok());
  CHECK_THAT(executor.error().message, Catch::Contains("Upsample 'up'") && Catch::Contains(message));
}

TEST_CASE("PRelu broadcasts its slope to X, integers included, and ArgMax picks the first or last maximum", "[reference][prelu][argmax]") {
  // Forms the conformance data lacks: a per-channel [C, 1, 1] slope, integer PRelu (PRelu-9), integer ArgMax and
  // ties with select_last_index on a middle axis. Reference kernels only, against values worked out by hand.
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,2,1,3] x, int64[4] k, float[2,3] t) => "
      "(float a, int64 b, int64 c, int64 d, int64 e) {\n"
      "  a = PRelu (x, channel_slope)\n"
      "  b = PRelu (k, int_slope)\n"
      "  c = ArgMax <axis = 0, keepdims = 0> (k)\n"
      "  d = ArgMax <axis = 1> (t)\n"
      "  e = ArgMax <axis = -1, keepdims = 0, select_last_index = 1> (t)\n"
      "}");
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("channel_slope", onnx::TensorProto::FLOAT, {2, 1, 1}, {0.5, -2.0}, true);
  *model.mutable_graph()->add_initializer() = onnx_io::make_int64_tensor("int_slope", {1}, {3});
  ExecutorOptions options;
  options.use_xnnpack = false;
  Tensor x, k, t;
  x.reshape(onnx::TensorProto::FLOAT, {1, 2, 1, 3});
  x.f = std::vector<float>{-1.0f, 2.0f, -4.0f, -1.0f, 0.0f, 3.0f};
  k.reshape(onnx::TensorProto::INT64, {4});
  k.i = {-5, 7, 7, 2};
  t.reshape(onnx::TensorProto::FLOAT, {2, 3});
  t.f = std::vector<float>{1.0f, 4.0f, 4.0f, -2.0f, -3.0f, -2.0f};
  options.inputs = {{"x", x}, {"k", k}, {"t", t}};
  auto ran = create_and_run(model, options);
  REQUIRE(ran.outputs.size() == 5);
  CHECK(ran.outputs[0].tensor.f == std::vector<float>{-0.5f, 2.0f, -2.0f, 2.0f, 0.0f, 3.0f});
  CHECK(ran.outputs[1].tensor.i == std::vector<int64_t>{-15, 7, 7, 2});
  CHECK(ran.outputs[2].tensor.dims.empty());
  CHECK(ran.outputs[2].tensor.i == std::vector<int64_t>{1});  // the first of the two 7s
  CHECK(ran.outputs[3].tensor.dims == std::vector<int64_t>{2, 1});
  CHECK(ran.outputs[3].tensor.i == std::vector<int64_t>{1, 0});
  CHECK(ran.outputs[4].tensor.dims == std::vector<int64_t>{2});
  CHECK(ran.outputs[4].tensor.i == std::vector<int64_t>{2, 2});
  for (size_t k = 1; k < 5; ++k) CHECK(ran.outputs[k].tensor.dtype == onnx::TensorProto::INT64);

  // NaN has no agreed index (numpy takes the first NaN, ONNX Runtime skips them): a run over one is refused.
  t.f[1] = std::nanf("");
  auto refused = ran.executor.run({{"x", x}, {"k", k}, {"t", t}});
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("ArgMax") && Catch::Contains("NaN"));
}

TEST_CASE("a Resize whose answer depends on the arithmetic is refused, one that does not runs", "[reference][resize]") {
  // asymmetric + round_prefer_ceil at scale 0.4: output 1 reads 1 / 0.4 = 2.5 in exact arithmetic, 2.4999999 in
  // double with the float32 scale (x[2], the ONNX reference) and 2.5 through float32's 1 / 0.4 (x[3], ONNX
  // Runtime). The executor ran the reference's answer, and --compare passed an OTHER ORT says differs.
  // align_corners downscaling 5 -> 3 (scale 0.64): the reference divides by 5 * 0.64 - 1, ONNX Runtime by 3 - 1.
  using Case = std::pair<std::string, std::string>;  // Resize attributes and scales, expected message ("" runs)
  const auto [attributes, message] =
      GENERATE(Case{"mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"round_prefer_ceil\"|0.4",
                    "axis 3: output 1 reads source coordinate 2.500000, which rounds to input 2 or 3 depending on the arithmetic"},
               Case{"mode = \"linear\", coordinate_transformation_mode = \"align_corners\"|0.64",
                    "axis 3: align_corners with in * scale = 3.200000 not the output length 3: runtimes differ"},
               Case{"mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"|2", ""},
               Case{"mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"|3", ""},
               Case{"mode = \"nearest\", coordinate_transformation_mode = \"half_pixel\", nearest_mode = \"round_prefer_floor\"|2", ""},
               Case{"mode = \"linear\", coordinate_transformation_mode = \"align_corners\"|2", ""});
  const auto bar = attributes.find('|');
  const double scale = std::stod(attributes.substr(bar + 1));
  CAPTURE(attributes);
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,1,1,5] x) => (float y) { y = Resize <" +
                                attributes.substr(0, bar) + "> (x, , sc) }");
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("sc", onnx::TensorProto::FLOAT, {4}, {1.0, 1.0, 1.0, scale}, true);
  model.mutable_graph()->mutable_node(0)->set_name("r");
  ExecutorOptions options;
  options.use_xnnpack = false;
  auto executor = Executor::create(model, options);
  if (message.empty()) {
    CHECK(executor.ok());
  } else {
    REQUIRE_FALSE(executor.ok());
    CHECK_THAT(executor.error().message, Catch::Contains("Resize 'r'") && Catch::Contains(message) && Catch::Contains("so it is not run"));
  }
}
