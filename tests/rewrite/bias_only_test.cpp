// Phases that see only the bias (k < s): they must not read x's values, so inf and NaN in x reach exactly
// the pixels the original ConvTranspose gives them. Structure and numbers through the naive executor.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <set>

#include "rewrite_fixtures.h"
#include "upsampler_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;
using onnx::TensorProto;

namespace {

// Which output pixels are NaN, which are +-inf, and the largest difference between the finite ones.
struct NonFinite {
  std::vector<size_t> nan;
  std::vector<size_t> inf;
};

NonFinite non_finite(const NaiveTensor& t) {
  NonFinite r;
  for (size_t i = 0; i < t.data.size(); ++i) {
    if (std::isnan(t.data[i])) r.nan.push_back(i);
    if (std::isinf(t.data[i])) r.inf.push_back(i);
  }
  return r;
}

// The tensors in `graph` whose value depends on `x`'s values (not only on its shape): Shape cuts the chain.
std::set<std::string> reads_values_of(const onnx::GraphProto& graph, const std::string& x) {
  std::set<std::string> tainted{x};
  for (const auto& node : graph.node()) {
    if (node.op_type() == "Shape") continue;
    bool reads = false;
    for (const auto& in : node.input()) reads = reads || tainted.count(in) != 0;
    if (reads) tainted.insert(node.output().begin(), node.output().end());
  }
  return tainted;
}

// The s*s Concat inputs behind DepthToSpace(blocksize s) writing `output`, in phase order.
std::vector<std::string> phase_inputs(const onnx::GraphProto& graph, const std::string& output, int64_t s) {
  const auto* d2s = find_producer(graph, output);
  REQUIRE(d2s != nullptr);
  REQUIRE(d2s->op_type() == "DepthToSpace");
  CHECK(find_attr(*d2s, "blocksize")->i() == s);
  const auto* concat = find_producer(graph, d2s->input(0));
  REQUIRE(concat != nullptr);
  REQUIRE(concat->op_type() == "Concat");
  REQUIRE(concat->input_size() == s * s);
  return {concat->input().begin(), concat->input().end()};
}

}  // namespace

TEST_CASE("inf and NaN in x reach exactly the pixels the original gives them", "[rewrite][bias_only][nonfinite]") {
  struct Case {
    const char* what;
    int64_t k, s;
    const char* attrs;
    size_t tapped;  // phases with taps: the Convs that may read X
  };
  const Case c = GENERATE(values<Case>({
      {"k1 s2", 1, 2, "strides=[2,2], output_padding=[1,1]", 1},
      {"k2 s3", 2, 3, "strides=[3,3], output_padding=[1,1]", 4},
  }));
  const bool bias = GENERATE(true, false);
  CAPTURE(c.what, bias);
  DeconvSpec spec;
  spec.kh = spec.kw = c.k;
  spec.bias = bias;
  spec.attrs = c.attrs;
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  CHECK(checker_error(out.model).empty());

  // Numbers: a NaN in channel 0 and an inf in channel 1 land on the same pixels before and after.
  auto x = input_for(spec);
  x.at(0, 0, 1, 1) = std::numeric_limits<double>::quiet_NaN();
  x.at(0, 1, 2, 0) = std::numeric_limits<double>::infinity();
  const NaiveTensor y0 = run_naive(original, {{"X", x}}).at("Y");
  const NaiveTensor y1 = run_naive(out.model, {{"X", x}}).at("Y");
  REQUIRE(y1.dims == y0.dims);
  const NonFinite before = non_finite(y0), after = non_finite(y1);
  CHECK(!before.nan.empty());
  CHECK(!before.inf.empty());
  CHECK(after.nan.size() == before.nan.size());
  CHECK(after.inf.size() == before.inf.size());
  CHECK(after.nan == before.nan);
  CHECK(after.inf == before.inf);
  double largest = 0.0;
  for (size_t i = 0; i < y0.data.size(); ++i) {
    if (std::isfinite(y0.data[i])) largest = std::max(largest, std::abs(y0.data[i] - y1.data[i]));
  }
  CHECK(largest < kTolerance);

  // Structure: one Shape of X and one ConstantOfShape per node; no bias-only phase reads X's values.
  const auto phases = phase_inputs(g, "Y", c.s);
  REQUIRE(count_ops(g, "Shape") == 1);
  REQUIRE(count_ops(g, "ConstantOfShape") == 1);
  const auto* shape = nodes_of(g, "Shape")[0];
  const auto* zeros = nodes_of(g, "ConstantOfShape")[0];
  CHECK(shape->input(0) == "X");
  CHECK(zeros->input(0) == shape->output(0));
  const auto& fill = find_attr(*zeros, "value")->t();
  CHECK(fill.data_type() == TensorProto::FLOAT);
  CHECK(values_of(fill) == std::vector<double>{0.0});
  const auto tainted = reads_values_of(g, "X");
  std::set<std::string> untainted_inputs;
  size_t tainted_inputs = 0;
  for (const auto& in : phases) {
    if (tainted.count(in) != 0) {
      ++tainted_inputs;
      CHECK(find_producer(g, in)->op_type() == "Conv");
    } else {
      untainted_inputs.insert(in);
    }
  }
  CHECK(tainted_inputs == c.tapped);
  REQUIRE(untainted_inputs.size() == 1);  // every bias-only phase shares one tensor
  const auto* bias_only = find_producer(g, *untainted_inputs.begin());
  if (bias) {
    CHECK(bias_only->op_type() == "Conv");
    CHECK(bias_only->input(0) == zeros->output(0));
    CHECK(bias_only->input(2) == "B");
  } else {
    CHECK(bias_only == zeros);
  }
  int x_convs = 0;
  for (const auto* conv : nodes_of(g, "Conv")) x_convs += tainted.count(conv->input(0)) != 0 ? 1 : 0;
  CHECK(x_convs == static_cast<int>(c.tapped));
}

TEST_CASE("the zeros of a bias-only phase take the weight's element type", "[rewrite][bias_only][dtype]") {
  const int32_t dtype = GENERATE(TensorProto::FLOAT16, TensorProto::DOUBLE, TensorProto::FLOAT);
  const bool raw = GENERATE(true, false);
  CAPTURE(type_name(dtype), raw);
  DeconvSpec spec;
  spec.kh = spec.kw = 1;
  spec.dtype = dtype;
  spec.raw = raw;
  spec.bias = true;
  spec.attrs = "strides=[2,2], output_padding=[1,1]";
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  REQUIRE(count_ops(g, "ConstantOfShape") == 1);
  const auto& fill = find_attr(*nodes_of(g, "ConstantOfShape")[0], "value")->t();
  CHECK(fill.data_type() == dtype);
  CHECK(onnx_io::dims_of(fill) == std::vector<int64_t>{1});
  CHECK(values_of(fill) == std::vector<double>{0.0});
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 10, 8}) < kTolerance);
}

TEST_CASE("phase weights hold each tap once plus one zero kernel per node", "[rewrite][bias_only][size]") {
  // k1 s8: one phase has a tap, 63 see only the bias. They share one [C,1,1,1] zero kernel, so the emitted
  // weights cost the original weight plus C elements, whatever the stride.
  DeconvSpec spec;
  spec.kh = spec.kw = 1;
  spec.bias = true;
  spec.h = spec.w = 2;
  spec.attrs = "strides=[8,8], output_padding=[7,7]";
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  CHECK(count_ops(g, "Conv") == 2);  // the tapped phase and the bias Conv over the zeros
  int64_t elements = 0;
  for (const auto& init : g.initializer()) {
    if (init.name() != "B") elements += *onnx_io::element_count(init);
  }
  CHECK(elements == 3 + 3);
  CHECK(out.result.derived_tensors.size() == 2);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 16, 16}) < kTolerance);
}

TEST_CASE("bias-only phases before opset 9 keep the node: there is no ConstantOfShape", "[rewrite][bias_only][opset]") {
  const int64_t opset = GENERATE(8, 9);
  CAPTURE(opset);
  DeconvSpec spec;
  spec.kh = spec.kw = 1;
  spec.bias = true;
  spec.opset = opset;
  spec.ir_version = opset >= 9 ? 5 : 4;
  spec.attrs = "strides=[2,2], output_padding=[1,1]";
  const auto original = deconv_model(spec);
  const auto out = rewrite_copy(original);
  if (opset < 9) {
    CHECK(out.result.rewritten == 0);
    REQUIRE(out.result.kept == 1);
    CHECK(out.result.nodes[0].reason ==
          "kernel 1x1 < stride 2 leaves phases that see only the bias; emitting them without reading x needs "
          "ConstantOfShape (opset 9), the model is opset 8");
    CHECK(serialized(out.model) == serialized(original));
  } else {
    REQUIRE(out.result.rewritten == 1);
    CHECK(count_ops(out.model.graph(), "ConstantOfShape") == 1);
    CHECK(checker_error(out.model).empty());
    CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}, "Y", {1, 3, 10, 8}) < kTolerance);
  }
  // k >= s has no bias-only phase and is rewritten at opset 8 too.
  spec.kh = spec.kw = 2;
  spec.attrs = "strides=[2,2]";
  const auto full = deconv_model(spec);
  const auto rewritten = rewrite_copy(full);
  CHECK(rewritten.result.rewritten == 1);
  CHECK(count_ops(rewritten.model.graph(), "ConstantOfShape") == 0);
  CHECK(checker_error(rewritten.model).empty());
}

TEST_CASE("a phase whose weights are all zero still reads x, so 0 x inf is NaN there as in the original",
          "[rewrite][bias_only][zero_phase]") {
  // Zero insertion written as a ConvTranspose: k2 s2 p0 with [[a,0],[0,0]] in every channel. Every phase has taps,
  // three of them zero-valued; a bias-only tensor there would give the bias where the original gives NaN.
  const bool bias = GENERATE(true, false);
  CAPTURE(bias);
  DeconvSpec spec;
  spec.kh = spec.kw = 2;
  spec.attrs = "strides=[2,2]";
  spec.bias = bias;
  auto original = deconv_model(spec);
  auto& w = *original.mutable_graph()->mutable_initializer(0);
  REQUIRE(w.name() == "W");
  std::vector<double> values(static_cast<size_t>(spec.channels) * 4, 0.0);
  for (int64_t c = 0; c < spec.channels; ++c) values[static_cast<size_t>(c) * 4] = 1.0 + static_cast<double>(c);
  w = onnx_io::make_tensor("W", TensorProto::FLOAT, {spec.channels, 1, 2, 2}, values, true);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  CHECK(checker_error(out.model).empty());
  // Structure: four phase Convs, each on X; nothing made from X's shape alone.
  const auto inputs = phase_inputs(g, "Y", 2);
  for (const auto& in : inputs) {
    const auto* phase = find_producer(g, in);
    REQUIRE(phase != nullptr);
    CHECK(phase->op_type() == "Conv");
    CHECK(phase->input(0) == "X");
  }
  CHECK(count_ops(g, "Conv") == 4);
  CHECK(count_ops(g, "ConstantOfShape") == 0);
  CHECK(count_ops(g, "Shape") == 0);
  // Numbers: finite inputs agree, and an inf and a NaN in x reach the same pixels, all four phases of their cell.
  auto x = input_for(spec);
  CHECK(output_diff(original, out.model, {{"X", x}}, "Y", {1, spec.channels, 2 * spec.h, 2 * spec.w}) < kTolerance);
  x.at(0, 0, 1, 1) = std::numeric_limits<double>::quiet_NaN();
  x.at(0, 1, 2, 0) = std::numeric_limits<double>::infinity();
  const NonFinite before = non_finite(run_naive(original, {{"X", x}}).at("Y"));
  const NonFinite after = non_finite(run_naive(out.model, {{"X", x}}).at("Y"));
  CHECK(before.nan.size() == 4 + 3);  // the NaN's cell, and inf x 0 at the inf's three zero taps
  CHECK(after.nan == before.nan);
  CHECK(after.inf == before.inf);
}

TEST_CASE("hand-written forms are exact on finite inputs, and their x*0 mask terms spread inf as NaN where the rewrite does not",
          "[rewrite][bias_only][nonfinite][handwritten]") {
  // The documented decision (docs/verification.md): a nearest x mask computes x*0 at the s*s-1 masked samples of every
  // cell, which is NaN for an infinite x, and its Conv then spreads that NaN over every output whose window
  // touches the cell. The ConvTranspose it equals, and so the rewrite, multiplies x only by the filter's taps. The
  // rewrite is kept: exporters write these forms for finite activations, where both agree to rounding.
  MaskSpec spec;
  const auto original = mask_model(spec);
  const auto out = rewrite_copy(original);
  REQUIRE(out.result.rewritten == 1);
  auto x = random_tensor4(1, spec.channels, spec.h, spec.w, 5);
  CHECK(output_diff(original, out.model, {{"X", x}}, "Y", {1, spec.channels, spec.s * spec.h, spec.s * spec.w}) < kTolerance);
  x.at(0, 1, 2, 2) = std::numeric_limits<double>::infinity();
  const NonFinite before = non_finite(run_naive(original, {{"X", x}}).at("Y"));
  const NonFinite after = non_finite(run_naive(out.model, {{"X", x}}).at("Y"));
  // The original: of the 5x5 outputs whose 4x4 window touches the inf's 2x2 cell, the 24 that also touch one of its
  // three x*0 samples are NaN, and the one that touches only the kept sample is +-inf. The rewrite: +-inf at the
  // 4x4 outputs the filter's taps reach, and no NaN.
  CHECK(before.nan.size() == 24);
  CHECK(before.inf.size() == 1);
  CHECK(after.nan.empty());
  CHECK(after.inf.size() == 16);
}
