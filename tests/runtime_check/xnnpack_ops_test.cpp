// Ops the reference kernels ran until XNNPACK got the forms it has an operator for: Softmax over the innermost axis,
// ReduceMean over H and W with keepdims (global average pooling), Split on the innermost axis in storage (strided
// copies), Pow by a constant 2 (square), HardSwish, PRelu by a constant slope and bilinear Upsample (with nearest
// Upsample on the replication kernel). Each placement is asserted, the other forms stay on the reference
// kernels, and the numbers are compared with the reference kernels (bit for bit where XNNPACK computes the same).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "onnx_io/tensor.h"
#include "ops/ops.h"
#include "runtime_check/executor.h"
#include "runtime_check/step_list.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

// Runs `model` on XNNPACK and on the reference kernels alone, on the same inputs.
struct Both {
  Ran fast;
  Ran slow;
};

Both run_both(const onnx::ModelProto& model) {
  ExecutorOptions options;
  options.seed = 17;
  auto fast = create_and_run(model, options);
  ExecutorOptions reference_only;
  reference_only.use_xnnpack = false;
  reference_only.inputs = fast.executor.creation_inputs();
  auto slow = create_and_run(model, reference_only);
  REQUIRE(fast.outputs.size() == slow.outputs.size());
  return Both{std::move(fast), std::move(slow)};
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dims == b.dims);
  double worst = 0;
  for (int64_t k = 0; k < a.numel(); ++k) worst = std::max(worst, std::abs(a.get(k) - b.get(k)));
  return worst;
}

void add_scalar(onnx::ModelProto& model, const std::string& name, double value) {
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor(name, onnx::TensorProto::FLOAT, {}, {value}, true);
}

std::string placement_of(const Executor& executor, const std::string& node) {
  for (const auto& p : executor.placements()) {
    if (p.node == node) return placement_name(p.placement);
  }
  return "missing";
}

// The placement of `node`; the test fails when there is none.
const NodePlacement& placement(const Executor& executor, const std::string& node) {
  for (const auto& p : executor.placements()) {
    if (p.node == node) return p;
  }
  FAIL("no placement for " << node);
  return executor.placements().front();
}

}  // namespace

TEST_CASE("Softmax over the innermost axis runs on XNNPACK and matches the reference kernels", "[xnnpack][softmax]") {
  const int opset = GENERATE(11, 13);
  INFO("opset " << opset);
  // The Conv's output is NHWC: the innermost ONNX axis (W) is read NCHW. Before opset 13, axis 2 coerces [H, W] into
  // one row, also contiguous in NCHW; from 13, axis 1 is one axis in the middle and stays on the reference kernels.
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) +
                                "]> g (float[1,3,6,5] x, float[4,7] m) => (float a, float b, float c, float d) {\n"
                                "  conv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
                                "  a = Softmax <axis = 3> (conv)\n"
                                "  b = Softmax <axis = 2> (conv)\n"
                                "  c = Softmax <axis = 1> (conv)\n"
                                "  d = Softmax <axis = -1> (m)\n"
                                "}");
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.output(0) != "conv") node.set_name("softmax_" + node.output(0));
  }
  add_initializer(model, "w", {4, 3, 3, 3}, 41);
  const Both both = run_both(model);
  const Executor& fast = both.fast.executor;
  CHECK(placement_of(fast, "Softmax 'softmax_a'") == "xnnpack");
  CHECK(placement_of(fast, "Softmax 'softmax_b'") == (opset < 13 ? "xnnpack" : "reference"));
  CHECK(placement_of(fast, "Softmax 'softmax_c'") == (opset < 13 ? "xnnpack" : "reference"));
  CHECK(placement_of(fast, "Softmax 'softmax_d'") == "xnnpack");
  CHECK(fast.count("Softmax", Placement::kXnnpack) == (opset < 13 ? 4 : 2));
  CHECK(both.slow.executor.count("Softmax", Placement::kXnnpack) == 0);
  for (size_t k = 0; k < both.fast.outputs.size(); ++k) {
    INFO(both.fast.outputs[k].name);
    // The Conv's own rounding (XNNPACK vs reference) is within 1e-5 of values whose exp is taken.
    CHECK(max_abs_diff(both.fast.outputs[k].tensor, both.slow.outputs[k].tensor) < 1e-5);
  }
}

TEST_CASE("ReduceMean over H and W with keepdims runs on XNNPACK's global average pooling", "[xnnpack][reduce]") {
  const int opset = GENERATE(13, 18);
  INFO("opset " << opset);
  // Before opset 18 the axes are an attribute, from 18 a constant input.
  const bool as_input = opset >= 18;
  const auto reduce = [&](const std::string& axes_name, const std::string& axes, const std::string& extra) {
    if (as_input) return "<" + (extra.empty() ? std::string("keepdims = 1") : extra) + "> (conv, " + axes_name + ")";
    return "<axes = " + axes + (extra.empty() ? "" : ", " + extra) + "> (conv)";
  };
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) +
                                "]> g (float[2,3,6,5] x) => (float a, float b, float c, float d) {\n"
                                "  conv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
                                "  a = ReduceMean " +
                                reduce("hw", "[2, 3]", "") +
                                "\n"
                                "  b = ReduceMean " +
                                reduce("wh", "[-1, -2]", "") +
                                "\n"
                                "  c = ReduceMean " +
                                reduce("hw", "[2, 3]", "keepdims = 0") +
                                "\n"
                                "  d = ReduceMean " +
                                reduce("ch", "[1]", "") +
                                "\n"
                                "}");
  add_int64_initializer(model, "hw", {2, 3});
  add_int64_initializer(model, "wh", {-1, -2});
  add_int64_initializer(model, "ch", {1});
  add_initializer(model, "w", {4, 3, 3, 3}, 42);
  const Both both = run_both(model);
  const Executor& fast = both.fast.executor;
  CHECK(placement_of(fast, "ReduceMean producing 'a'") == "xnnpack");
  CHECK(placement_of(fast, "ReduceMean producing 'b'") == "xnnpack");
  CHECK(placement_of(fast, "ReduceMean producing 'c'") == "reference");  // keepdims 0
  CHECK(placement_of(fast, "ReduceMean producing 'd'") == "reference");  // channels
  CHECK(fast.count("ReduceMean", Placement::kXnnpack) == 2);
  REQUIRE(both.fast.outputs.size() == 4);
  CHECK(both.fast.outputs[0].tensor.dims == std::vector<int64_t>{2, 4, 1, 1});
  for (size_t k = 0; k < both.fast.outputs.size(); ++k) {
    INFO(both.fast.outputs[k].name);
    CHECK(max_abs_diff(both.fast.outputs[k].tensor, both.slow.outputs[k].tensor) < 1e-5);
  }
}

TEST_CASE("Split on the innermost axis in storage runs on XNNPACK copies, bit for bit", "[xnnpack][split]") {
  // x is a graph input (NCHW): its last axis is innermost, and the copies must give exactly the reference's bits.
  // The Conv's output is NHWC: its channels are innermost; its H axis is not, and stays on the reference kernels.
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,3,6,5] x) => (float a, float b, float c, float d, float e, "
      "float f, float g1, float h) {\n"
      "  a, b, c = Split <axis = 3> (x, last)\n"
      "  conv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
      "  d, e = Split <axis = 1> (conv, channels)\n"
      "  f, g1 = Split <axis = 2> (conv)\n"
      "  h = Sigmoid (d)\n"
      "}");
  add_int64_initializer(model, "last", {1, 3, 1});
  add_int64_initializer(model, "channels", {3, 1});
  add_initializer(model, "w", {4, 3, 3, 3}, 43);
  const Both both = run_both(model);
  const Executor& fast = both.fast.executor;
  CHECK(placement_of(fast, "Split producing 'a'") == "xnnpack");
  CHECK(placement_of(fast, "Split producing 'd'") == "xnnpack");
  CHECK(placement_of(fast, "Split producing 'f'") == "reference");
  CHECK(fast.count("Split", Placement::kXnnpack) == 2);
  const auto& y = both.fast.outputs;
  const auto& r = both.slow.outputs;
  REQUIRE(y.size() == 8);
  CHECK(y[0].tensor.dims == std::vector<int64_t>{1, 3, 6, 1});
  CHECK(y[1].tensor.dims == std::vector<int64_t>{1, 3, 6, 3});
  CHECK(y[3].tensor.dims == std::vector<int64_t>{1, 3, 6, 5});
  CHECK(y[4].tensor.dims == std::vector<int64_t>{1, 1, 6, 5});
  for (size_t k = 0; k < 3; ++k) {
    INFO(y[k].name);
    CHECK(y[k].tensor.f == r[k].tensor.f);  // a copy of the input
  }
  // The Conv differs between XNNPACK and the reference kernels by its own rounding only.
  for (size_t k = 3; k < y.size(); ++k) {
    INFO(y[k].name);
    CHECK(max_abs_diff(y[k].tensor, r[k].tensor) < 1e-5);
  }
  // Within the XNNPACK run, the channel split (XNNPACK copies) has exactly the bits of the split along H (reference
  // kernels) of the same Conv output.
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t p = 0; p < 6 * 5; ++p) {
      const int64_t row = p / 5, col = p % 5;
      const double split_value = y[3].tensor.get(c * 30 + p);
      const double by_rows = row < 3 ? y[5].tensor.get(c * 15 + row * 5 + col) : y[6].tensor.get(c * 15 + (row - 3) * 5 + col);
      CHECK(split_value == by_rows);
    }
  }
}

TEST_CASE("Pow by a constant 2 runs on XNNPACK's square bit for bit, and other exponents stay on the reference", "[xnnpack][pow]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,3,6,5] x, float e) => (float a, float b, float c, float d) {\n"
      "  a = Pow (x, two)\n"
      "  b = Pow (x, three)\n"
      "  pos = Exp (x)\n"
      "  c = Pow (pos, e)\n"
      "  conv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
      "  d = Pow (conv, two)\n"
      "}");
  add_scalar(model, "two", 2.0);
  add_scalar(model, "three", 3.0);
  add_initializer(model, "w", {4, 3, 3, 3}, 44);
  const Both both = run_both(model);
  const Executor& fast = both.fast.executor;
  CHECK(placement_of(fast, "Pow producing 'a'") == "xnnpack");
  CHECK(placement_of(fast, "Pow producing 'b'") == "reference");
  CHECK(placement_of(fast, "Pow producing 'c'") == "reference");  // not a constant
  CHECK(placement_of(fast, "Pow producing 'd'") == "xnnpack");
  CHECK(fast.count("Pow", Placement::kXnnpack) == 2);
  const auto& y = both.fast.outputs;
  const auto& r = both.slow.outputs;
  REQUIRE(y.size() == 4);
  CHECK(y[0].tensor.f == r[0].tensor.f);  // x * x rounded once to f32, either way
  CHECK(y[1].tensor.f == r[1].tensor.f);
  CHECK(y[2].tensor.f == r[2].tensor.f);
  CHECK(y[3].tensor.dims == std::vector<int64_t>{1, 4, 6, 5});
  CHECK(max_abs_diff(y[3].tensor, r[3].tensor) < 1e-4);
}

TEST_CASE("HardSwish runs on XNNPACK in the producer's layout and matches the reference kernels", "[xnnpack][hardswish]") {
  // x * 4 reaches past both of HardSwish's bends (-3 and 3); the Conv's output is NHWC and is read as it is.
  const int opset = GENERATE(14, 22);
  INFO("opset " << opset);
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) +
                                "]> g (float[1,3,6,5] x) => (float a, float b) {\n"
                                "  wide = Mul (x, four)\n"
                                "  a = HardSwish (wide)\n"
                                "  conv = Conv <pads = [1, 1, 1, 1]> (wide, w)\n"
                                "  b = HardSwish (conv)\n"
                                "}");
  add_scalar(model, "four", 4.0);
  add_initializer(model, "w", {4, 3, 3, 3}, 45);
  const Both both = run_both(model);
  const Executor& fast = both.fast.executor;
  CHECK(placement_of(fast, "HardSwish producing 'a'") == "xnnpack");
  CHECK(placement_of(fast, "HardSwish producing 'b'") == "xnnpack");
  CHECK(both.slow.executor.count("HardSwish", Placement::kReference) == 2);
  const auto& y = both.fast.outputs;
  const auto& r = both.slow.outputs;
  REQUIRE(y.size() == 2);
  // XNNPACK computes x * clamp(x / 6 + 1/2, 0, 1) in f32, the reference in double rounded once: an ulp or so of 4.
  CHECK(max_abs_diff(y[0].tensor, r[0].tensor) < 2e-6);
  CHECK(max_abs_diff(y[1].tensor, r[1].tensor) < 1e-4);  // and the Conv's own rounding
}

TEST_CASE("PRelu by a constant slope along one innermost axis runs on XNNPACK, bit for bit", "[xnnpack][prelu]") {
  // A per-channel slope on a rank-4 value runs NHWC (the Conv's layout); a slope along the last axis runs in ONNX
  // order; a one-element slope in any layout. A slope varying along two axes, or one that is a graph input, stays on
  // the reference kernels.
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 16]> g (float[1,3,6,5] x, float[3,1,1] s) => (float a, float b, float c, "
      "float d, float e, float f) {\n"
      "  conv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
      "  a = PRelu (conv, per_channel)\n"
      "  b = PRelu (x, last_axis)\n"
      "  c = PRelu (x, one)\n"
      "  d = PRelu (x, two_axes)\n"
      "  e = PRelu (x, s)\n"
      "  f = PRelu (x, x_channels)\n"
      "}");
  add_initializer(model, "w", {4, 3, 3, 3}, 46);
  add_initializer(model, "per_channel", {4, 1, 1}, 47);
  add_initializer(model, "last_axis", {5}, 48);
  add_initializer(model, "one", {1}, 49);
  add_initializer(model, "two_axes", {3, 1, 5}, 50);
  add_initializer(model, "x_channels", {1, 3, 1, 1}, 51);
  const Both both = run_both(model);
  const Executor& fast = both.fast.executor;
  CHECK(placement_of(fast, "PRelu producing 'a'") == "xnnpack");
  CHECK(placement_of(fast, "PRelu producing 'b'") == "xnnpack");
  CHECK(placement_of(fast, "PRelu producing 'c'") == "xnnpack");
  CHECK(placement_of(fast, "PRelu producing 'd'") == "reference");
  CHECK_THAT(placement(fast, "PRelu producing 'd'").reason, Catch::Contains("more than one axis"));
  CHECK(placement_of(fast, "PRelu producing 'e'") == "reference");
  CHECK(placement_of(fast, "PRelu producing 'f'") == "xnnpack");  // per channel of an NCHW input: converted to NHWC
  CHECK(fast.count("PRelu", Placement::kXnnpack) == 4);
  const auto& y = both.fast.outputs;
  const auto& r = both.slow.outputs;
  REQUIRE(y.size() == 6);
  CHECK(y[0].tensor.dims == std::vector<int64_t>{1, 4, 6, 5});
  CHECK(max_abs_diff(y[0].tensor, r[0].tensor) < 1e-5);  // the Conv's own rounding
  for (size_t k = 1; k < y.size(); ++k) {
    INFO(y[k].name);
    CHECK(y[k].tensor.dims == std::vector<int64_t>{1, 3, 6, 5});
    CHECK(y[k].tensor.f == r[k].tensor.f);  // one f32 multiply where x < 0, either way
  }
}

TEST_CASE("Upsample: linear runs on XNNPACK's bilinear resize, integer nearest on the replication kernel", "[xnnpack][upsample]") {
  // Upsample-7 (scales attribute) and -9 (scales input) are Resize-10 for scales >= 1. Linear by scales XNNPACK can
  // take runs there; nearest by integer factors on H and W replicates rows and pixels (exact); nearest by 1.5 and
  // linear that scales N stay on the reference kernels.
  const int opset = GENERATE(7, 9);
  INFO("opset " << opset);
  const auto up = [&](const std::string& mode, const std::string& x, const std::string& scales, const std::string& values) {
    const std::string m = mode.empty() ? "" : "mode = \"" + mode + "\"";
    if (opset < 9) return "Upsample <" + m + (m.empty() ? "" : ", ") + "scales = " + values + "> (" + x + ")";
    return "Upsample " + (m.empty() ? std::string() : "<" + m + "> ") + "(" + x + ", " + scales + ")";
  };
  auto model = parse_model_text("<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) +
                                "]> g (float[2,3,4,5] x) => (float a, float b, float c, float d, float e) {\n"
                                "  conv = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
                                "  a = " +
                                up("linear", "conv", "two", "[1.0, 1.0, 2.0, 2.0]") +
                                "\n"
                                "  b = " +
                                up("", "conv", "two", "[1.0, 1.0, 2.0, 2.0]") +
                                "\n"
                                "  c = " +
                                up("nearest", "x", "three_two", "[1.0, 1.0, 3.0, 2.0]") +
                                "\n"
                                "  d = " +
                                up("nearest", "x", "one_half", "[1.0, 1.0, 1.5, 1.5]") +
                                "\n"
                                "  e = " +
                                up("linear", "x", "batch", "[2.0, 1.0, 2.0, 2.0]") +
                                "\n"
                                "}");
  add_initializer(model, "w", {4, 3, 3, 3}, 52);
  for (const auto& [name, values] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"two", {1, 1, 2, 2}}, {"three_two", {1, 1, 3, 2}}, {"one_half", {1, 1, 1.5, 1.5}}, {"batch", {2, 1, 2, 2}}}) {
    if (opset >= 9) *model.mutable_graph()->add_initializer() = onnx_io::make_tensor(name, onnx::TensorProto::FLOAT, {4}, values, true);
  }
  const Both both = run_both(model);
  const Executor& fast = both.fast.executor;
  CHECK(placement_of(fast, "Upsample producing 'a'") == "xnnpack");
  CHECK(placement_of(fast, "Upsample producing 'b'") == "reference");
  CHECK_THAT(placement(fast, "Upsample producing 'b'").note, Catch::StartsWith("optimized nearest upsample (2x2 replication, NHWC)"));
  CHECK_THAT(placement(fast, "Upsample producing 'c'").note, Catch::StartsWith("optimized nearest upsample (3x2 replication, NCHW)"));
  CHECK(placement(fast, "Upsample producing 'd'").note.empty());
  CHECK(placement_of(fast, "Upsample producing 'e'") == "reference");
  CHECK_THAT(placement(fast, "Upsample producing 'e'").reason, Catch::Contains("resizes N or C"));
  CHECK(fast.count("Upsample", Placement::kXnnpack) == 1);
  const auto& y = both.fast.outputs;
  const auto& r = both.slow.outputs;
  REQUIRE(y.size() == 5);
  CHECK(y[0].tensor.dims == std::vector<int64_t>{2, 4, 8, 10});
  CHECK(y[2].tensor.dims == std::vector<int64_t>{2, 3, 12, 10});
  CHECK(y[3].tensor.dims == std::vector<int64_t>{2, 3, 6, 7});
  CHECK(y[4].tensor.dims == std::vector<int64_t>{4, 3, 8, 10});
  CHECK(max_abs_diff(y[0].tensor, r[0].tensor) < 1e-5);  // bilinear in f32, and the Conv's own rounding
  CHECK(max_abs_diff(y[1].tensor, r[1].tensor) < 1e-5);  // the Conv's own rounding
  for (size_t k = 2; k < y.size(); ++k) {
    INFO(y[k].name);
    CHECK(y[k].tensor.f == r[k].tensor.f);
  }
}

TEST_CASE("Each XNNPACK family implements a subset of what the op table implements", "[executor][xnnpack][table]") {
  const auto families = detail::xnnpack_family_attributes();
  REQUIRE(families.size() >= 20);
  for (const auto& [op, attributes] : families) {
    CAPTURE(op);
    const ops::OpSpec* spec = ops::find_op(op);
    REQUIRE(spec != nullptr);
    for (const auto& a : attributes) {
      CAPTURE(a.name);
      const auto it =
          std::find_if(spec->attributes.begin(), spec->attributes.end(), [&](const ops::AttributeSpec& s) { return s.name == a.name; });
      REQUIRE(it != spec->attributes.end());
      // A value the family takes is one the reference implements, so a node XNNPACK runs is one the judge can run.
      for (const auto& v : a.strings) {
        CAPTURE(v);
        CHECK((it->strings.empty() || std::find(it->strings.begin(), it->strings.end(), v) != it->strings.end()));
      }
      for (int64_t v : a.ints) {
        CAPTURE(v);
        CHECK((it->ints.empty() || std::find(it->ints.begin(), it->ints.end(), v) != it->ints.end()));
      }
    }
  }
}
