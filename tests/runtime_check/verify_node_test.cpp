// verify_node on a depthwise ConvTranspose and a hand-built polyphase replacement (docs/design.md): it passes, and
// fails once one phase weight is wrong.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "onnx_io/attributes.h"
#include "runtime_check/verify_node.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

struct Config {
  int64_t channels, kernel, stride, pad, output_padding;
};

// One axis of one phase, straight from docs/design.md, "The polyphase identity".
struct AxisPhase {
  int64_t first_tap, taps, pad_begin, pad_end;
};

AxisPhase axis_phase(int64_t a, const Config& c) {
  const int64_t r = (a + c.pad) % c.stride;                                          // r = (a + Pb) mod s
  const int64_t shift = (a + c.pad) / c.stride;                                      // c = floor((a + Pb) / s)
  const int64_t m = std::max<int64_t>(0, (c.kernel - r + c.stride - 1) / c.stride);  // M = ceil((k - r) / s)
  return {r, m, m - 1 - shift, shift};                                               // pads M-1-c and c
}

// `original` with its ConvTranspose 'up' replaced: per phase Pad -> depthwise Conv, Concat, DepthToSpace(DCR).
onnx::ModelProto rewrite_by_hand(const onnx::ModelProto& original, const std::vector<double>& w, const Config& c) {
  onnx::ModelProto model = original;
  auto* graph = model.mutable_graph();
  graph->mutable_node()->Clear();
  const int64_t s = c.stride, k = c.kernel;
  std::vector<std::string> phase_outputs;
  for (int64_t ay = 0; ay < s; ++ay) {
    for (int64_t ax = 0; ax < s; ++ax) {
      const AxisPhase py = axis_phase(ay, c), px = axis_phase(ax, c);
      REQUIRE(py.pad_begin >= 0);  // no crops for these configurations
      REQUIRE(px.pad_begin >= 0);
      const std::string tag = std::to_string(ay) + std::to_string(ax);
      // g[n] = w[r + s*(M-1-n)]: every s-th tap, flipped; the phase kernel is [C, 1, My, Mx].
      std::vector<double> g;
      for (int64_t ch = 0; ch < c.channels; ++ch)
        for (int64_t ny = 0; ny < py.taps; ++ny)
          for (int64_t nx = 0; nx < px.taps; ++nx) {
            const int64_t ty = py.first_tap + s * (py.taps - 1 - ny), tx = px.first_tap + s * (px.taps - 1 - nx);
            g.push_back(w[static_cast<size_t>((ch * k + ty) * k + tx)]);
          }
      *graph->add_initializer() = onnx_io::make_tensor("w_" + tag, onnx::TensorProto::FLOAT, {c.channels, 1, py.taps, px.taps}, g, true);
      add_int64_initializer(model, "pads_" + tag, {0, 0, py.pad_begin, px.pad_begin, 0, 0, py.pad_end, px.pad_end});
      auto* pad = graph->add_node();
      pad->set_op_type("Pad");
      pad->set_name("pad_" + tag);
      pad->add_input("x");
      pad->add_input("pads_" + tag);
      pad->add_output("xp_" + tag);
      auto* conv = graph->add_node();
      conv->set_op_type("Conv");
      conv->set_name("phase_" + tag);
      conv->add_input("xp_" + tag);
      conv->add_input("w_" + tag);
      conv->add_input("b");
      conv->add_output("y_" + tag);
      *conv->add_attribute() = onnx_io::make_int_attribute("group", c.channels);
      phase_outputs.push_back("y_" + tag);
    }
  }
  auto* concat = graph->add_node();
  concat->set_op_type("Concat");
  concat->set_name("phases");
  for (const auto& name : phase_outputs) concat->add_input(name);
  concat->add_output("cat");
  *concat->add_attribute() = onnx_io::make_int_attribute("axis", 1);
  auto* d2s = graph->add_node();
  d2s->set_op_type("DepthToSpace");
  d2s->set_name("interleave");
  d2s->add_input("cat");
  d2s->add_output("y");
  *d2s->add_attribute() = onnx_io::make_int_attribute("blocksize", s);
  *d2s->add_attribute() = onnx_io::make_string_attribute("mode", "DCR");
  return model;
}

}  // namespace

TEST_CASE("verify_node passes a correct polyphase replacement and catches a wrong phase weight", "[verify_node]") {
  const Config c = GENERATE(Config{4, 4, 2, 1, 0},   // the MI-GAN / StyleGAN x2 upsampler
                            Config{3, 3, 2, 1, 1},   // k3 s2 p1 with output_padding 1
                            Config{2, 6, 3, 2, 1});  // s3: phases with different tap counts
  INFO("C=" << c.channels << " k=" << c.kernel << " s=" << c.stride << " p=" << c.pad << " op=" << c.output_padding);
  const std::string ch = std::to_string(c.channels);
  auto original = parse_model_text("<ir_version: 8, opset_import: [\"\" : 17]> g (float[1," + ch +
                                   ",5,6] x) => (float y) {\n"
                                   "  y = ConvTranspose <group = " +
                                   ch + ", strides = [" + std::to_string(c.stride) + ", " + std::to_string(c.stride) + "], pads = [" +
                                   std::to_string(c.pad) + ", " + std::to_string(c.pad) + ", " + std::to_string(c.pad) + ", " +
                                   std::to_string(c.pad) + "], output_padding = [" + std::to_string(c.output_padding) + ", " +
                                   std::to_string(c.output_padding) + "]> (x, w, b)\n}");
  original.mutable_graph()->mutable_node(0)->set_name("up");
  const auto w = add_initializer(original, "w", {c.channels, 1, c.kernel, c.kernel}, 91);
  add_initializer(original, "b", {c.channels}, 92);  // each phase Conv reuses the bias
  auto rewritten = rewrite_by_hand(original, w, c);

  const std::vector<int64_t> shape = {2, c.channels, 7, 5};  // not the declared shape: the caller's shape wins
  auto good = verify_node(original, rewritten, "y", "x", shape, onnx_io::infer_types(original), 7, {});
  INFO((good.ok() ? good->summary() : good.error().message));
  REQUIRE(good.ok());
  CHECK(good->passed);
  CHECK(good->node == "ConvTranspose 'up'");
  CHECK(good->replacement_nodes == static_cast<size_t>(2 * c.stride * c.stride + 2));
  CHECK_THAT(good->original_placement, Catch::StartsWith("xnnpack 1 (ConvTranspose 1)"));
  CHECK_THAT(good->rewritten_placement, Catch::Contains("Concat 1, Conv " + std::to_string(c.stride * c.stride) + ", DepthToSpace 1, Pad " +
                                                        std::to_string(c.stride * c.stride)));
  CHECK_THAT(good->rewritten_placement, Catch::Contains("reference 0"));
  CHECK(good->rewritten.max_rel_error < 1e-5);
  CHECK(good->runs == 2);  // each side once: the run creating its executor gives the outputs compared

  // Plant an error in the last phase's weight.
  const std::string last = std::to_string(c.stride - 1) + std::to_string(c.stride - 1);
  for (auto& init : *rewritten.mutable_graph()->mutable_initializer()) {
    if (init.name() != "w_" + last) continue;
    auto values = onnx_io::to_doubles(init);
    REQUIRE(values.ok());
    values.value()[0] += 0.25;
    init = onnx_io::make_tensor(init.name(), onnx::TensorProto::FLOAT, onnx_io::dims_of(init), values.value(), true);
  }
  auto bad = verify_node(original, rewritten, "y", "x", shape, onnx_io::infer_types(original), 7, {});
  REQUIRE(bad.ok());
  INFO(bad->summary());
  CHECK_FALSE(bad->passed);
  CHECK(bad->original.passed);
  CHECK_FALSE(bad->rewritten.passed);
  CHECK(bad->rewritten.max_abs_error > 0.01);
}

TEST_CASE("verify_node refuses what it cannot isolate", "[verify_node]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 17]> g (float[1,2,4,4] x) => (float y) {\n"
      "  y = Relu (x)\n}");
  auto not_deconv = verify_node(model, model, "y", "x", {1, 2, 4, 4}, onnx_io::infer_types(model), 0, {});
  REQUIRE_FALSE(not_deconv.ok());
  CHECK_THAT(not_deconv.error().message, Catch::Contains("not a Conv or ConvTranspose"));
  auto missing = verify_node(model, model, "nope", "x", {1, 2, 4, 4}, onnx_io::infer_types(model), 0, {});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("'nope'"));
}

namespace {

// `original` with its 1-D ConvTranspose 'up' replaced: per phase a 1-D depthwise Conv with the phase's pads, each
// phase unsqueezed to [N, C, L, 1], concatenated on that axis and reshaped to [N, C, L*s].
onnx::ModelProto rewrite_1d_by_hand(const onnx::ModelProto& original, const std::vector<double>& w, const Config& c) {
  onnx::ModelProto model = original;
  auto* graph = model.mutable_graph();
  graph->mutable_node()->Clear();
  add_int64_initializer(model, "last_axis", {3});
  add_int64_initializer(model, "flat", {0, 0, -1});
  std::vector<std::string> stacked;
  for (int64_t a = 0; a < c.stride; ++a) {
    const AxisPhase p = axis_phase(a, c);
    REQUIRE(p.pad_begin >= 0);
    const std::string tag = std::to_string(a);
    std::vector<double> g;
    for (int64_t ch = 0; ch < c.channels; ++ch)
      for (int64_t n = 0; n < p.taps; ++n) g.push_back(w[static_cast<size_t>(ch * c.kernel + p.first_tap + c.stride * (p.taps - 1 - n))]);
    *graph->add_initializer() = onnx_io::make_tensor("w_" + tag, onnx::TensorProto::FLOAT, {c.channels, 1, p.taps}, g, true);
    auto* conv = graph->add_node();
    conv->set_op_type("Conv");
    conv->set_name("phase_" + tag);
    conv->add_input("x");
    conv->add_input("w_" + tag);
    conv->add_input("b");
    conv->add_output("y_" + tag);
    *conv->add_attribute() = onnx_io::make_int_attribute("group", c.channels);
    *conv->add_attribute() = onnx_io::make_ints_attribute("pads", {p.pad_begin, p.pad_end});
    auto* unsqueeze = graph->add_node();
    unsqueeze->set_op_type("Unsqueeze");
    unsqueeze->set_name("stack_" + tag);
    unsqueeze->add_input("y_" + tag);
    unsqueeze->add_input("last_axis");
    unsqueeze->add_output("u_" + tag);
    stacked.push_back("u_" + tag);
  }
  auto* concat = graph->add_node();
  concat->set_op_type("Concat");
  concat->set_name("phases");
  for (const auto& name : stacked) concat->add_input(name);
  concat->add_output("cat");
  *concat->add_attribute() = onnx_io::make_int_attribute("axis", 3);
  auto* reshape = graph->add_node();
  reshape->set_op_type("Reshape");
  reshape->set_name("interleave");
  reshape->add_input("cat");
  reshape->add_input("flat");
  reshape->add_output("y");
  return model;
}

}  // namespace

TEST_CASE("verify_node checks a 1-D ConvTranspose against the formula and catches a wrong phase weight", "[verify_node]") {
  const Config c = GENERATE(Config{4, 4, 2, 1, 0},   // a vocoder's x2 (k 2s, p s/2)
                            Config{3, 6, 3, 2, 1});  // s3 with output_padding
  INFO("C=" << c.channels << " k=" << c.kernel << " s=" << c.stride << " p=" << c.pad << " op=" << c.output_padding);
  const std::string ch = std::to_string(c.channels);
  auto original = parse_model_text("<ir_version: 8, opset_import: [\"\" : 17]> g (float[1," + ch +
                                   ",9] x) => (float y) {\n"
                                   "  y = ConvTranspose <group = " +
                                   ch + ", strides = [" + std::to_string(c.stride) + "], pads = [" + std::to_string(c.pad) + ", " +
                                   std::to_string(c.pad) + "], output_padding = [" + std::to_string(c.output_padding) + "]> (x, w, b)\n}");
  original.mutable_graph()->mutable_node(0)->set_name("up");
  const auto w = add_initializer(original, "w", {c.channels, 1, c.kernel}, 93);
  add_initializer(original, "b", {c.channels}, 94);
  auto rewritten = rewrite_1d_by_hand(original, w, c);

  const std::vector<int64_t> shape = {2, c.channels, 11};
  auto good = verify_node(original, rewritten, "y", "x", shape, onnx_io::infer_types(original), 7, {});
  INFO((good.ok() ? good->summary() : good.error().message));
  REQUIRE(good.ok());
  CHECK(good->passed);
  CHECK(good->expected == "the double-precision ConvTranspose formula");
  CHECK(good->rewritten.compared == static_cast<int64_t>(2 * c.channels * 11 * c.stride));
  CHECK(good->rewritten.max_rel_error < 1e-5);

  for (auto& init : *rewritten.mutable_graph()->mutable_initializer()) {
    if (init.name() != "w_" + std::to_string(c.stride - 1)) continue;
    auto values = onnx_io::to_doubles(init);
    REQUIRE(values.ok());
    values.value()[0] += 0.25;
    init = onnx_io::make_tensor(init.name(), onnx::TensorProto::FLOAT, onnx_io::dims_of(init), values.value(), true);
  }
  auto bad = verify_node(original, rewritten, "y", "x", shape, onnx_io::infer_types(original), 7, {});
  REQUIRE(bad.ok());
  INFO(bad->summary());
  CHECK_FALSE(bad->passed);
  CHECK(bad->original.passed);
  CHECK_FALSE(bad->rewritten.passed);
}
