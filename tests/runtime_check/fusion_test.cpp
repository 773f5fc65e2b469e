// Concat fusion (executor.h): Convs feeding only a channel Concat write straight into its slices. The fused path
// must give the unfused path's numbers, and it must really happen on rewritten models (placements asserted).
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/reference.h"
#include "onnx_io/model_io.h"
#include "rewrite/rewriter.h"
#include "runtime_check/compare.h"
#include "runtime_check/executor.h"
#include "runtime_check/tensor_io.h"
#include "tests/runtime_check/test_models.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

constexpr double kTol = 1e-4;

struct Deconv {
  int64_t channels, kernel, stride, pad, output_padding;
};

// A one-node depthwise ConvTranspose with bias on x [2, C, 5, 6] (N = 2 checks the batch stride of the slices).
onnx::ModelProto deconv_model(const Deconv& d, std::vector<double>& w, std::vector<double>& b) {
  const std::string c = std::to_string(d.channels), s = std::to_string(d.stride), p = std::to_string(d.pad),
                    op = std::to_string(d.output_padding);
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : 17]> g (float[2," + c +
                                ",5,6] x) => (float y) {\n"
                                "  y = ConvTranspose <group = " +
                                c + ", strides = [" + s + ", " + s + "], pads = [" + p + ", " + p + ", " + p + ", " + p +
                                "], output_padding = [" + op + ", " + op + "]> (x, w, b)\n}");
  model.mutable_graph()->mutable_node(0)->set_name("up");
  w = add_initializer(model, "w", {d.channels, 1, d.kernel, d.kernel}, 71);
  b = add_initializer(model, "b", {d.channels}, 72);
  return model;
}

onnx::ModelProto rewritten(const onnx::ModelProto& original, int expected_rewrites) {
  onnx::ModelProto model = original;
  auto result = rewrite::rewrite_model(model, {});
  INFO((result.ok() ? std::string() : result.error().message));
  REQUIRE(result.ok());
  REQUIRE(result->rewritten == expected_rewrites);
  return model;
}

Executor make_executor(const onnx::ModelProto& model, bool fuse, const std::vector<NamedTensor>& inputs = {}) {
  ExecutorOptions options;
  options.fuse_concat = fuse;
  options.inputs = inputs;
  options.seed = 5;
  auto executor = Executor::create(model, options);
  INFO((executor.ok() ? std::string() : executor.error().message));
  REQUIRE(executor.ok());
  return std::move(executor.value());
}

std::vector<NamedTensor> run(Executor& executor, const std::vector<NamedTensor>& inputs) {
  auto outputs = executor.run(inputs);
  INFO((outputs.ok() ? std::string() : outputs.error().message));
  REQUIRE(outputs.ok());
  return std::move(outputs.value());
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dims == b.dims);
  double worst = 0.0;
  for (size_t k = 0; k < a.f.size(); ++k) worst = std::max(worst, static_cast<double>(std::abs(a.f[k] - b.f[k])));
  return worst;
}

}  // namespace

TEST_CASE("Concat fusion: phase Convs write into the Concat's slices and give the unfused numbers", "[xnnpack][fusion]") {
  const Deconv d = GENERATE(Deconv{3, 4, 2, 1, 0},   // the MI-GAN / StyleGAN x2 upsampler
                            Deconv{5, 3, 2, 1, 1},   // output_padding: phases with different tap counts
                            Deconv{4, 2, 2, 0, 0},   // 1x1 phase kernels
                            Deconv{2, 6, 3, 2, 1});  // s3: nine phases
  INFO("C=" << d.channels << " k=" << d.kernel << " s=" << d.stride << " p=" << d.pad << " op=" << d.output_padding);
  std::vector<double> w, b;
  const auto original = deconv_model(d, w, b);
  const auto model = rewritten(original, 1);
  const auto phases = static_cast<size_t>(d.stride * d.stride);

  auto fused = make_executor(model, true);
  auto unfused = make_executor(model, false, fused.creation_inputs());

  // Structure: the fused Concat does no work; each phase Conv names its slice.
  CHECK(fused.count_fused("Concat") == 1);
  CHECK(fused.count_fused("Conv") == phases);
  CHECK(fused.count("Conv", Placement::kXnnpack) == phases);
  CHECK(fused.count(Placement::kReference) == 0);
  CHECK_THAT(fused.placement_summary(), Catch::Contains("; fused 1 (Concat 1: input Convs write into its channel slices)"));
  const int64_t c = d.channels;
  std::vector<std::string> slices;
  for (const auto& p : fused.placements()) {
    if (p.op_type == "Concat") CHECK(describe_placement(p) == "xnnpack (fused: input Convs write into its channel slices)");
    if (p.op_type == "Conv") slices.push_back(p.fusion);
    if (p.op_type == "DepthToSpace") CHECK(describe_placement(p) == "xnnpack");
  }
  REQUIRE(slices.size() == phases);
  for (size_t k = 0; k < phases; ++k) {
    CHECK_THAT(slices[k], Catch::StartsWith("fused: writes into Concat ") &&
                              Catch::EndsWith(" channels [" + std::to_string(static_cast<int64_t>(k) * c) + ", " +
                                              std::to_string(static_cast<int64_t>(k + 1) * c) + ")"));
  }
  CHECK(unfused.count_fused("Concat") == 0);
  CHECK(unfused.count("Concat", Placement::kXnnpack) == 1);
  CHECK_THAT(unfused.placement_summary(), !Catch::Contains("fused"));

  // Numbers: fused == unfused, both == the double reference, over repeated runs on new inputs.
  core::ConvTranspose2dParams params;
  params.strides = {d.stride, d.stride};
  params.pads = {d.pad, d.pad, d.pad, d.pad};
  params.output_padding = {d.output_padding, d.output_padding};
  params.group = c;
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    auto inputs = make_random_inputs(model, {}, seed);
    REQUIRE(inputs.ok());
    const auto a = run(fused, inputs.value());
    const auto u = run(unfused, inputs.value());
    CHECK(max_abs_diff(a[0].tensor, u[0].tensor) <= 1e-6);
    const auto expected =
        core::conv_transpose2d_reference(to_tensor4(inputs.value()[0].tensor), to_tensor4(w, {c, 1, d.kernel, d.kernel}), b, params);
    CHECK(testing::max_abs_diff(a[0].tensor, expected) < kTol);
  }
}

TEST_CASE("Concat fusion declines when a Conv output has another reader or an input is not a Conv", "[xnnpack][fusion]") {
  // y1: `a` is also a graph output.  y2: `c` is read by a Relu too.  y3: `r` comes from a Relu.  y4: fuses.
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[2,2,5,3] x) => "
      "(float a, float y1, float y2, float z, float y3, float y4) {\n"
      "  a = Conv (x, w1)\n  b = Conv (x, w2)\n  y1 = Concat <axis = 1> (a, b)\n"
      "  c = Conv (x, w1)\n  d = Conv (x, w2)\n  y2 = Concat <axis = 1> (c, d)\n  z = Relu (c)\n"
      "  e = Conv (x, w1)\n  r = Relu (x)\n  y3 = Concat <axis = 1> (e, r)\n"
      "  f = Conv (x, w1)\n  g = Conv (x, w2)\n  y4 = Concat <axis = -3> (g, f)\n}");
  const auto w1 = add_initializer(model, "w1", {3, 2, 1, 1}, 81);
  const auto w2 = add_initializer(model, "w2", {4, 2, 1, 1}, 82);
  auto fused = make_executor(model, true);
  auto unfused = make_executor(model, false, fused.creation_inputs());
  CHECK(fused.count_fused("Concat") == 1);
  CHECK(fused.count_fused("Conv") == 2);
  CHECK(fused.count("Concat", Placement::kXnnpack) == 4);
  for (const auto& p : fused.placements()) {
    if (p.op_type == "Concat") CHECK(p.fusion.empty() == (p.node != "Concat producing 'y4'"));
  }

  const auto x = to_tensor4(fused.creation_inputs()[0].tensor);
  const auto a = core::conv2d_reference(x, to_tensor4(w1, {3, 2, 1, 1}), {}, core::Conv2dParams{});
  const auto b = core::conv2d_reference(x, to_tensor4(w2, {4, 2, 1, 1}), {}, core::Conv2dParams{});
  const auto ya = run(fused, fused.creation_inputs());
  const auto yu = run(unfused, fused.creation_inputs());
  REQUIRE(ya.size() == 6);
  for (size_t k = 0; k < ya.size(); ++k) CHECK(max_abs_diff(ya[k].tensor, yu[k].tensor) <= 1e-6);
  CHECK(testing::max_abs_diff(ya[0].tensor, a) < kTol);
  CHECK(testing::max_abs_diff(ya[1].tensor, core::concat_channels_reference({a, b})) < kTol);
  CHECK(testing::max_abs_diff(ya[2].tensor, core::concat_channels_reference({a, b})) < kTol);
  CHECK(testing::max_abs_diff(ya[5].tensor, core::concat_channels_reference({b, a})) < kTol);
}

TEST_CASE("Concat fusion happens for every rewritten upsampler of the tiny MI-GAN example", "[xnnpack][fusion][examples]") {
  const std::string source_dir = test::source_dir();
  auto original = onnx_io::load_model(source_dir + "/examples/migan_tiny_deconv.onnx");
  REQUIRE(original.ok());
  int deconvs = 0;
  for (const auto& node : original->graph().node()) deconvs += node.op_type() == "ConvTranspose" ? 1 : 0;
  REQUIRE(deconvs > 0);
  const auto model = rewritten(original.value(), deconvs);

  auto stock = make_executor(original.value(), true);
  auto fused = make_executor(model, true, stock.creation_inputs());
  auto unfused = make_executor(model, false, stock.creation_inputs());
  CHECK(stock.count("ConvTranspose", Placement::kXnnpack) == static_cast<size_t>(deconvs));
  CHECK(fused.count_fused("Concat") == static_cast<size_t>(deconvs));
  CHECK(fused.count("Concat", Placement::kXnnpack) == static_cast<size_t>(deconvs));
  CHECK(fused.count(Placement::kReference) == unfused.count(Placement::kReference));

  const auto inputs = stock.creation_inputs();
  const auto ys = run(stock, inputs);
  const auto ya = run(fused, inputs);
  const auto yu = run(unfused, inputs);
  REQUIRE(ya.size() == ys.size());
  for (size_t k = 0; k < ya.size(); ++k) CHECK(max_abs_diff(ya[k].tensor, yu[k].tensor) <= 1e-6);
  const auto against_stock = compare_outputs(ya, ys, {});
  INFO(against_stock.summary());
  CHECK(against_stock.passed);
}

TEST_CASE("Depthwise Conv kernels without an XNNPACK microkernel are zero-extended and give the same numbers", "[xnnpack][conv]") {
  struct Case {
    int64_t kh, kw, stride, dilation;
    std::array<int64_t, 4> pads;  // top, left, bottom, right
    const char* note;             // expected NodePlacement::note
  };
  const Case c = GENERATE(
      Case{1, 2, 1, 1, {0, 0, 0, 1}, "1x2 kernel zero-extended to 1x3"}, Case{2, 1, 1, 1, {0, 0, 1, 0}, "2x1 kernel zero-extended to 3x1"},
      Case{2, 3, 2, 1, {1, 0, 0, 2}, "2x3 kernel zero-extended to 3x3"}, Case{4, 4, 2, 1, {1, 1, 1, 1}, "4x4 kernel zero-extended to 5x5"},
      Case{2, 3, 1, 2, {2, 1, 0, 3}, "2x3 kernel zero-extended to 3x3"},  // dilated
      Case{1, 1, 1, 1, {1, 0, 0, 1}, "1x1 kernel zero-extended to 1x3"},  // padded 1x1
      Case{1, 1, 1, 1, {0, 0, 0, 0}, ""},                                 // XNNPACK's per-channel multiply-add
      Case{3, 3, 2, 1, {1, 1, 1, 1}, ""});                                // 9 taps: a microkernel already
  INFO("kernel " << c.kh << "x" << c.kw << " stride " << c.stride << " dilation " << c.dilation);
  const int64_t channels = 6;
  const auto p = [&](size_t k) { return std::to_string(c.pads[k]); };
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 17]> g (float[2,6,7,9] x) => (float y) {\n"
      "  y = Conv <group = 6, strides = [" +
      std::to_string(c.stride) + ", " + std::to_string(c.stride) + "], dilations = [" + std::to_string(c.dilation) + ", " +
      std::to_string(c.dilation) + "], pads = [" + p(0) + ", " + p(1) + ", " + p(2) + ", " + p(3) + "]> (x, w, b)\n}");
  const auto w = add_initializer(model, "w", {channels, 1, c.kh, c.kw}, 91);
  const auto b = add_initializer(model, "b", {channels}, 92);
  auto extended = make_executor(model, true);
  ExecutorOptions as_written;
  as_written.zero_extend_depthwise = false;
  as_written.inputs = extended.creation_inputs();
  auto plain = Executor::create(model, as_written);
  REQUIRE(plain.ok());

  REQUIRE(extended.placements().size() == 1);
  CHECK(extended.count("Conv", Placement::kXnnpack) == 1);
  const std::string note = extended.placements()[0].note;
  if (std::string(c.note).empty()) {
    CHECK(note.empty());
  } else {
    CHECK_THAT(note, Catch::StartsWith(c.note));
    CHECK_THAT(extended.placement_summary(), Catch::EndsWith("; zero-extended depthwise kernels 1"));
  }
  CHECK(plain->placements()[0].note.empty());

  core::Conv2dParams params;
  params.strides = {c.stride, c.stride};
  params.dilations = {c.dilation, c.dilation};
  params.pads = c.pads;
  params.group = channels;
  const auto inputs = extended.creation_inputs();
  const auto y = run(extended, inputs);
  const auto y_plain = run(*plain, inputs);
  const auto expected = core::conv2d_reference(to_tensor4(inputs[0].tensor), to_tensor4(w, {channels, 1, c.kh, c.kw}), b, params);
  CHECK(testing::max_abs_diff(y[0].tensor, expected) < kTol);
  CHECK(max_abs_diff(y[0].tensor, y_plain[0].tensor) <= 1e-5);
}
