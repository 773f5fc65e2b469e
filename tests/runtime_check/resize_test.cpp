// Nearest Resize by integer factors runs on the executor's replication kernel (executor.h). It must give exactly
// the generic reference kernel's values, take only the mappings that really are replication, stay in the
// producer's layout, and keep MI-GAN's hand-written upsampler (Resize, mask Mul, Pad, Conv) free of conversions.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"
#include "runtime_check/compare.h"
#include "runtime_check/executor.h"
#include "tests/runtime_check/test_models.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

std::string ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
  return s + "]";
}

struct ResizeCase {
  std::vector<int64_t> x_dims;
  std::vector<double> scales;  // empty: sizes are given
  std::vector<int64_t> sizes;
  const char* coordinate;  // coordinate_transformation_mode
  const char* nearest;     // nearest_mode
  const char* fast;        // expected "FHxFW" replication, or "" when the generic kernel must run it
};

// x -> [depthwise 1x1 Conv with weights 1, an exact copy into NHWC] -> Resize(nearest) -> y, at opset 13.
onnx::ModelProto resize_model(const ResizeCase& c, bool nhwc_input) {
  const std::string channels = std::to_string(c.x_dims[1]);
  std::string text = "<ir_version: 8, opset_import: [\"\" : 13]> g (float" + ints(c.x_dims) + " x) => (float y) {\n";
  if (nhwc_input) text += "  h = Conv <group = " + channels + "> (x, ones)\n";
  text += std::string("  y = Resize <mode = \"nearest\", coordinate_transformation_mode = \"") + c.coordinate + "\", nearest_mode = \"" +
          c.nearest + "\"> (" + (nhwc_input ? "h" : "x") + ", roi, scales" + (c.sizes.empty() ? "" : ", sizes") + ")\n}";
  auto model = parse_model_text(text);
  auto* graph = model.mutable_graph();
  graph->mutable_node(graph->node_size() - 1)->set_name("up");
  if (nhwc_input) {
    *graph->add_initializer() = onnx_io::make_tensor("ones", onnx::TensorProto::FLOAT, {c.x_dims[1], 1, 1, 1},
                                                     std::vector<double>(static_cast<size_t>(c.x_dims[1]), 1.0), true);
  }
  *graph->add_initializer() = onnx_io::make_tensor("roi", onnx::TensorProto::FLOAT, {0}, {}, true);
  *graph->add_initializer() =
      onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {static_cast<int64_t>(c.scales.size())}, c.scales, true);
  if (!c.sizes.empty()) add_int64_initializer(model, "sizes", c.sizes);
  return model;
}

Executor make(const onnx::ModelProto& model, bool use_xnnpack, size_t threads, const std::vector<NamedTensor>& inputs) {
  ExecutorOptions options;
  options.use_xnnpack = use_xnnpack;
  options.threads = threads;
  options.inputs = inputs;
  options.seed = 3;
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

const NodePlacement& placement_of(const Executor& executor, const std::string& node) {
  for (const auto& p : executor.placements()) {
    if (p.node == node) return p;
  }
  FAIL("no node " << node);
  return executor.placements().front();
}

}  // namespace

TEST_CASE("Nearest Resize by integer factors replicates exactly what the generic kernel computes", "[resize]") {
  const ResizeCase c =
      GENERATE(ResizeCase{{1, 3, 4, 5}, {1, 1, 2, 2}, {}, "asymmetric", "floor", "2x2"},                // the MI-GAN form
               ResizeCase{{2, 16, 3, 3}, {1, 1, 2, 2}, {}, "half_pixel", "round_prefer_floor", "2x2"},  // exporters' default
               ResizeCase{{1, 4, 3, 2}, {1, 1, 3, 2}, {}, "half_pixel", "round_prefer_ceil", "3x2"},
               ResizeCase{{1, 2, 5, 4}, {}, {1, 2, 10, 4}, "pytorch_half_pixel", "round_prefer_floor", "2x1"},  // sizes
               ResizeCase{{1, 3, 2, 3}, {1, 1, 4, 3}, {}, "tf_half_pixel_for_nn", "floor", "4x3"},
               ResizeCase{{1, 3, 4, 4}, {1, 1, 1, 1}, {}, "asymmetric", "floor", "1x1"},  // a plain copy
               // round(o * 3/7) is o / 2 for o < 8: replication too, found by the index-by-index check.
               ResizeCase{{1, 3, 4, 4}, {1, 1, 2, 2}, {}, "align_corners", "round_prefer_floor", "2x2"},
               // Not replication: these must stay on the generic kernel.
               ResizeCase{{1, 5, 3, 4}, {1, 1, 4, 4}, {}, "asymmetric", "round_prefer_floor", ""},  // round(3/4) = 1
               ResizeCase{{1, 3, 4, 4}, {1, 1, 2, 2}, {}, "half_pixel", "floor", ""},               // floor(0.75 - ...) = 0
               ResizeCase{{1, 3, 4, 4}, {1, 1, 2, 2}, {}, "align_corners", "floor", ""},            // floor(6/7) = 0
               ResizeCase{{1, 3, 4, 4}, {1, 1, 1.5, 2}, {}, "asymmetric", "floor", ""},             // non-integer factor
               ResizeCase{{2, 2, 3, 3}, {2, 1, 2, 2}, {}, "asymmetric", "floor", ""});              // resizes N
  const bool nhwc = GENERATE(true, false);
  const size_t threads = GENERATE(1, 2);
  INFO("x " << ints(c.x_dims) << " " << c.coordinate << "/" << c.nearest << (nhwc ? " after a Conv (NHWC)" : " (NCHW)") << " threads "
            << threads);
  const auto model = resize_model(c, nhwc);
  auto fast = make(model, true, threads, {});
  auto generic = make(model, false, 1, fast.creation_inputs());

  const NodePlacement& up = placement_of(fast, "Resize 'up'");
  CHECK(up.placement == Placement::kReference);
  CHECK(placement_of(generic, "Resize 'up'").note.empty());
  if (std::string(c.fast).empty()) {
    CHECK(up.note.empty());
    CHECK_THAT(fast.placement_summary(), !Catch::Contains("nearest upsample"));
  } else {
    CHECK(up.note == std::string("optimized nearest upsample (") + c.fast + " replication, " + (nhwc ? "NHWC" : "NCHW") + ")");
    CHECK_THAT(fast.placement_summary(), Catch::EndsWith("; optimized nearest upsample 1"));
  }

  // Twice, the second time on new values, so reused buffers are checked too. Exact: both only copy values.
  std::vector<NamedTensor> inputs = fast.creation_inputs();
  for (int round = 0; round < 2; ++round) {
    const auto y_fast = run(fast, inputs);
    const auto y_generic = run(generic, inputs);
    REQUIRE(y_fast.size() == 1);
    REQUIRE(y_fast[0].tensor.dims == y_generic[0].tensor.dims);
    CHECK(y_fast[0].tensor.f == y_generic[0].tensor.f);
    for (float& v : inputs[0].tensor.f) v = 2.0f * v + 0.5f;
  }
}

TEST_CASE("MI-GAN's hand-written upsampler stays NHWC from Resize to Conv, with no layout conversion", "[resize][examples]") {
  const std::string source_dir = test::source_dir();
  auto model = onnx_io::load_model(source_dir + "/examples/migan_tiny_handwritten.onnx");
  REQUIRE(model.ok());
  size_t resizes = 0;
  for (const auto& node : model->graph().node()) resizes += node.op_type() == "Resize" ? 1 : 0;
  REQUIRE(resizes > 0);

  ExecutorOptions options;
  options.profile = true;
  auto executor = Executor::create(model.value(), options);
  REQUIRE(executor.ok());
  for (const auto& p : executor->placements()) {
    INFO(p.node);
    if (p.op_type == "Resize") {
      CHECK(p.placement == Placement::kReference);
      CHECK(p.note == "optimized nearest upsample (2x2 replication, NHWC)");
    } else {
      CHECK(p.placement == Placement::kXnnpack);  // the mask Mul and the Pad included
    }
  }
  CHECK_THAT(executor->placement_summary(), Catch::Contains("; optimized nearest upsample " + std::to_string(resizes)));

  REQUIRE(executor->run(executor->creation_inputs()).ok());
  const ExecutorProfile profile = executor->profile(executor->placements().size());
  REQUIRE(profile.top_nodes.size() == executor->placements().size());
  for (const auto& n : profile.top_nodes) {
    INFO(n.node);
    // Only the first Conv converts: it reads the NCHW graph input.
    if (n.node != "Conv 'enc.from_rgb'") CHECK(n.convert_ms == 0.0);
  }

  // The same function as form (a), the depthwise ConvTranspose, run on XNNPACK's deconvolution.
  auto deconv_form = onnx_io::load_model(source_dir + "/examples/migan_tiny_deconv.onnx");
  REQUIRE(deconv_form.ok());
  ExecutorOptions same_inputs;
  same_inputs.inputs = executor->creation_inputs();
  auto stock = Executor::create(deconv_form.value(), same_inputs);
  REQUIRE(stock.ok());
  const auto y = executor->run(executor->creation_inputs());
  const auto y_stock = stock->run(executor->creation_inputs());
  REQUIRE((y.ok() && y_stock.ok()));
  const ComparisonReport report = compare_outputs(y.value(), y_stock.value(), {});
  INFO(report.summary());
  CHECK(report.passed);
}

TEST_CASE("a channel Gather and a CRD DepthToSpace run as channel copies, in either layout, equal to the reference kernels",
          "[executor][depth_to_space]") {
  // The rewrite's Gather + CRD join (the default and executorch targets): the Gather takes DCR-ordered phases to
  // CRD order, so the pair equals one DCR DepthToSpace. Also a Gather that is no such permutation (repeats, a
  // negative index, fewer channels), since the step runs any constant 1-D channel Gather.
  using Case = std::pair<std::vector<int64_t>, int64_t>;                         // Gather indices, DepthToSpace block
  const auto [indices, block] = GENERATE(Case{{0, 3, 1, 4, 2, 5}, 0},            // a permutation, no D2S
                                         Case{{0, 2, 4, 6, 1, 3, 5, 7}, 2},      // DCR -> CRD, C = 2, s = 2
                                         Case{{-1, 0, 0, 3, 5, 1, 7, 2}, 2},     // repeats, -1
                                         Case{{0, 1, 2, 3, 4, 5, 6, 7, 0}, 3});  // 9 channels, s = 3
  const bool nhwc = GENERATE(true, false);
  const size_t threads = GENERATE(1, 2);
  CAPTURE(indices, block, nhwc, threads);
  const int64_t c = 8, out_c = static_cast<int64_t>(indices.size());
  std::string text = "<ir_version: 8, opset_import: [\"\" : 13]> g (float[2,8,3,5] x) => (float y) {\n";
  text += nhwc ? "  h = Conv <group = 8> (x, ones)\n" : "  h = Identity (x)\n";
  text += block > 0
              ? "  g = Gather <axis = 1> (h, order)\n  y = DepthToSpace <blocksize = " + std::to_string(block) + ", mode = \"CRD\"> (g)\n}"
              : "  y = Gather <axis = 1> (h, order)\n}";
  auto model = parse_model_text(text);
  *model.mutable_graph()->add_initializer() =
      onnx_io::make_tensor("ones", onnx::TensorProto::FLOAT, {c, 1, 1, 1}, std::vector<double>(8, 1.0), true);
  add_int64_initializer(model, "order", indices);
  auto fast = make(model, true, threads, {});
  auto generic = make(model, false, 1, fast.creation_inputs());
  const size_t expected = block > 0 ? 2 : 1;
  CHECK_THAT(fast.placement_summary(), Catch::EndsWith("; optimized channel permutation " + std::to_string(expected)));
  CHECK_THAT(generic.placement_summary(), !Catch::Contains("permutation"));
  std::vector<NamedTensor> inputs = fast.creation_inputs();
  for (int round = 0; round < 2; ++round) {
    const auto y_fast = run(fast, inputs);
    const auto y_generic = run(generic, inputs);
    REQUIRE(y_fast.size() == 1);
    const std::vector<int64_t> dims =
        block > 0 ? std::vector<int64_t>{2, out_c / (block * block), 3 * block, 5 * block} : std::vector<int64_t>{2, out_c, 3, 5};
    REQUIRE(y_fast[0].tensor.dims == dims);
    REQUIRE(y_generic[0].tensor.dims == dims);
    CHECK(y_fast[0].tensor.f == y_generic[0].tensor.f);  // exact: both only copy
    for (float& v : inputs[0].tensor.f) v = 2.0f * v + 0.5f;
  }
}

TEST_CASE("a Gather that is not a constant channel lookup, and a DCR DepthToSpace, take their usual steps", "[executor][depth_to_space]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,8,3,5] x, int64[2] i) => (float a, float b, float d) {\n"
      "  a = Gather <axis = 1> (x, i)\n  b = Gather <axis = 2> (x, two)\n  d = DepthToSpace <blocksize = 2> (x)\n}");
  add_int64_initializer(model, "two", {0, 2});
  ExecutorOptions options;
  options.inputs = {};
  auto executor = Executor::create(model, options);
  REQUIRE(executor.ok());
  CHECK_THAT(executor->placement_summary(), !Catch::Contains("permutation"));
  CHECK_THAT(executor->placement_summary(), Catch::Contains("xnnpack 1 (DepthToSpace 1)"));
}

namespace {

// Three rounds on new values, each against the reference kernels: B changes every time, so a step that kept its
// first packing would fail.
void check_three_rounds(Executor& fast, Executor& generic, const std::vector<int64_t>& dims) {
  std::vector<NamedTensor> inputs = fast.creation_inputs();
  for (int round = 0; round < 3; ++round) {
    const auto y_fast = run(fast, inputs);
    const auto y_generic = run(generic, inputs);
    REQUIRE(y_fast[0].tensor.dims == dims);
    REQUIRE(y_generic[0].tensor.dims == dims);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < y_fast[0].tensor.f.size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(y_fast[0].tensor.f[i]) - y_generic[0].tensor.f[i]));
      scale = std::max(scale, std::abs(static_cast<double>(y_generic[0].tensor.f[i])));
    }
    CHECK(scale > 0.1);
    CHECK(worst <= 1e-5 * scale);
    for (auto& in : inputs) {
      for (float& v : in.tensor.f) v = 1.5f * v - 0.25f * static_cast<float>(round + 1);
    }
  }
}

}  // namespace

TEST_CASE("a MatMul of two computed values runs on XNNPACK's fully-connected operator, repacked when B changes", "[executor][matmul]") {
  // Attention's Q x K^T and its x V: both operands computed. It ran on the naive reference kernel.
  using Case = std::pair<std::string, std::vector<int64_t>>;  // the graph's inputs and body, the output dims
  const auto [text, dims] =
      GENERATE(Case{"(float[2,3,5,4] a, float[2,3,6,4] b) => (float y) {\n  p = Relu (a)\n  q = Transpose <perm = [0, 1, 3, 2]> (b)\n"
                    "  y = MatMul (p, q)\n}",
                    {2, 3, 5, 6}},
               Case{"(float[1,7,5] a, float[5,3] b) => (float y) {\n  q = Sigmoid (b)\n  y = MatMul (a, q)\n}", {1, 7, 3}},
               Case{"(float[6,4] a, float[4,9] b) => (float y) {\n  q = Neg (b)\n  y = MatMul (a, q)\n}", {6, 9}});
  const size_t threads = GENERATE(1, 2);
  CAPTURE(text, threads);
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]> g " + text);
  model.mutable_graph()->mutable_node(model.graph().node_size() - 1)->set_name("mm");
  auto fast = make(model, true, threads, {});
  auto generic = make(model, false, 1, fast.creation_inputs());
  const NodePlacement& mm = placement_of(fast, "MatMul 'mm'");
  CHECK(mm.placement == Placement::kXnnpack);
  CHECK_THAT(mm.note, Catch::Contains("one fully-connected operator per batch matrix"));
  check_three_rounds(fast, generic, dims);
}

TEST_CASE("a Gemm of two computed values runs on XNNPACK's fully-connected operator, with transB and C as its bias", "[executor][matmul]") {
  struct Case {
    std::string body;  // after the inputs a [6, 4] and b (q = Neg(b) is computed)
    std::vector<int64_t> b_dims;
    bool xnnpack;  // false: an attribute the step does not take, so the reference kernel runs it
  };
  const Case c = GENERATE(Case{"y = Gemm (a, q)", {4, 9}, true}, Case{"y = Gemm <transB = 1, beta = 0.5> (a, q, c)", {9, 4}, true},
                          Case{"y = Gemm <beta = 2.0> (a, q, c1)", {4, 9}, true}, Case{"y = Gemm <alpha = 0.5> (a, q)", {4, 9}, false},
                          Case{"y = Gemm <transA = 1> (t, q)", {4, 9}, false});
  CAPTURE(c.body);
  std::string b_dims = std::to_string(c.b_dims[0]) + "," + std::to_string(c.b_dims[1]);
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]> g (float[6,4] a, float[" + b_dims +
                                "] b) => (float y) {\n  q = Neg (b)\n  t = Transpose (a)\n  " + c.body + "\n}");
  model.mutable_graph()->mutable_node(model.graph().node_size() - 1)->set_name("mm");
  add_initializer(model, "c", {9}, 21);
  add_initializer(model, "c1", {1}, 22);
  auto fast = make(model, true, 1, {});
  auto generic = make(model, false, 1, fast.creation_inputs());
  const NodePlacement& mm = placement_of(fast, "Gemm 'mm'");
  CHECK(mm.placement == (c.xnnpack ? Placement::kXnnpack : Placement::kReference));
  if (c.xnnpack) CHECK_THAT(mm.note, Catch::Contains("packed again when B changes"));
  check_three_rounds(fast, generic, {6, 9});
}

TEST_CASE("a DepthToSpace of blocksize 1 is a copy the reference kernel runs", "[executor][depth_to_space]") {
  // XNNPACK's depth-to-space refuses block size 1 at creation, which made the executor refuse a valid model.
  const std::string mode = GENERATE("DCR", "CRD");
  CAPTURE(mode);
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,3,2,4] x) => (float y) {\n"
      "  h = Relu (x)\n  y = DepthToSpace <blocksize = 1, mode = \"" +
      mode + "\"> (h)\n}");
  auto fast = make(model, true, 1, {});
  const auto inputs = fast.creation_inputs();
  const auto y = run(fast, inputs);
  REQUIRE(y[0].tensor.dims == std::vector<int64_t>{1, 3, 2, 4});
  for (size_t i = 0; i < y[0].tensor.f.size(); ++i) CHECK(y[0].tensor.f[i] == std::max(inputs[0].tensor.f[i], 0.0f));
}
