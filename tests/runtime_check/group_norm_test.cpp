// GroupNorm as PyTorch exports it (Reshape -> InstanceNormalization -> Reshape -> Mul -> Add) runs as one step in the
// producer's layout (runtime_check/step_norm.cpp). It must compute what the reference kernels compute node by node,
// read and write no layout conversion between two Convs, leave alone chains whose values make them something else
// (and still compute them right), and say in the placements which nodes it took.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "onnx_io/tensor.h"
#include "runtime_check/executor.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

struct ChainCase {
  const char* name;
  bool conv_first = true;                // x comes from a Conv (NHWC); else it is the graph input (NCHW)
  bool affine = true;                    // the Mul and Add follow
  bool gamma_first = false;              // Mul(gamma, y) rather than Mul(y, gamma)
  bool scale_is_input = false;           // the InstanceNormalization's scale is a graph input: not a constant
  std::string group_shape = "0, 2, -1";  // the first Reshape's shape
  const char* fused_note = "";           // the expected note's start on the last node; "" when the chain must not fuse
};

constexpr int64_t kChannels = 8;
constexpr size_t kInputBytes = 8 * 5 * 6 * sizeof(float);  // x, [1, 8, 5, 6]

onnx::ModelProto chain_model(const ChainCase& c) {
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]> g (float[1,8,5,6] x";
  if (c.scale_is_input) text += ", float[2] s";
  text += ") => (float[1,8,5,6] y) {\n";
  const std::string h = c.conv_first ? "h" : "x";
  if (c.conv_first) text += "  h = Conv (x, w1, b1)\n";
  text += "  r = Reshape (" + h + ", gshape)\n";
  text += "  n = InstanceNormalization <epsilon = 0.1> (r, s, bias)\n";
  text += "  hs = Shape (" + h + ")\n";
  text += "  r2 = Reshape (n, hs)\n";
  std::string last = "r2";
  if (c.affine) {
    text += c.gamma_first ? "  m = Mul (gamma, r2)\n" : "  m = Mul (r2, gamma)\n";
    text += "  a = Add (m, beta)\n";
    last = "a";
  }
  text += "  y = Conv (" + last + ", w2)\n}";
  auto model = parse_model_text(text);
  auto* graph = model.mutable_graph();
  for (auto& node : *graph->mutable_node()) node.set_name(node.output(0));
  add_initializer(model, "w1", {kChannels, kChannels, 1, 1}, 11);
  // A large bias: each group's mean is far from 0, which a careless variance loses.
  *graph->add_initializer() = onnx_io::make_tensor("b1", onnx::TensorProto::FLOAT, {kChannels}, std::vector<double>(kChannels, 40.0), true);
  std::vector<int64_t> shape;  // the first Reshape's shape, from the case's text
  for (size_t at = 0; at < c.group_shape.size();) {
    const size_t comma = std::min(c.group_shape.find(',', at), c.group_shape.size());
    shape.push_back(std::stoll(c.group_shape.substr(at, comma - at)));
    at = comma + 1;
  }
  add_int64_initializer(model, "gshape", shape);
  if (!c.scale_is_input) add_initializer(model, "s", {2}, 12);
  add_initializer(model, "bias", {2}, 13);
  add_initializer(model, "gamma", {kChannels, 1, 1}, 14);
  add_initializer(model, "beta", {kChannels, 1, 1}, 15);
  add_initializer(model, "w2", {kChannels, kChannels, 1, 1}, 16);
  return model;
}

Executor make(const onnx::ModelProto& model, bool use_xnnpack, const std::vector<NamedTensor>& inputs) {
  ExecutorOptions options;
  options.use_xnnpack = use_xnnpack;
  options.inputs = inputs;
  options.seed = 5;
  options.profile = true;
  auto executor = Executor::create(model, options);
  INFO((executor.ok() ? std::string() : executor.error().message));
  REQUIRE(executor.ok());
  return std::move(executor.value());
}

// The placement of the node named `node` (described as "Op 'node'").
const NodePlacement& placement_of(const Executor& executor, const std::string& node) {
  for (const auto& p : executor.placements()) {
    if (p.node.size() > node.size() + 2 && p.node.compare(p.node.size() - node.size() - 2, std::string::npos, "'" + node + "'") == 0) {
      return p;
    }
  }
  FAIL("no placement for " << node);
  return executor.placements().front();
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dims == b.dims);
  double scale = 0, diff = 0;
  for (size_t k = 0; k < a.f.size(); ++k) {
    scale = std::max(scale, std::abs(static_cast<double>(b.f[k])));
    diff = std::max(diff, std::abs(static_cast<double>(a.f[k]) - b.f[k]));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace

TEST_CASE("GroupNorm as PyTorch exports it runs as one step in the producer's layout, equal to the node-by-node kernels",
          "[executor][group_norm]") {
  const ChainCase c = GENERATE(ChainCase{"between two Convs (NHWC)", true, true, false, false, "0, 2, -1",
                                         "optimized group normalization (2 groups of 4 channels, NHWC; the step of 5 nodes)"},
                               ChainCase{"on the NCHW graph input", false, true, false, false, "0, 2, -1",
                                         "optimized group normalization (2 groups of 4 channels, NCHW; the step of 5 nodes)"},
                               ChainCase{"gamma as the Mul's first operand", true, true, true, false, "1, 2, 120",
                                         "optimized group normalization (2 groups of 4 channels, NHWC; the step of 5 nodes)"},
                               ChainCase{"without the affine Mul and Add", true, false, false, false, "0, 2, -1",
                                         "optimized group normalization (2 groups of 4 channels, NHWC; the step of 3 nodes)"},
                               ChainCase{"a scale that is a graph input (not fused)", true, true, false, true, "0, 2, -1", ""},
                               ChainCase{"a Reshape that does not keep the batch (not fused)", true, true, false, false, "2, 2, 60", ""},
                               ChainCase{"a Reshape to rank 4 (not fused)", true, true, false, false, "0, 2, 4, -1", ""});
  INFO(c.name);
  const onnx::ModelProto model = chain_model(c);
  std::vector<NamedTensor> inputs;
  if (c.scale_is_input) {
    Tensor s;
    s.reshape(onnx::TensorProto::FLOAT, {2});
    s.f[0] = 0.75f;
    s.f[1] = -1.5f;
    inputs.push_back(NamedTensor{"s", s});
  }
  Executor fast = make(model, true, inputs);
  Executor generic = make(model, false, fast.creation_inputs());
  const std::string last = c.affine ? "a" : "r2";
  const NodePlacement& p = placement_of(fast, last);
  CHECK(p.placement == Placement::kReference);  // the executor's own kernel, as the nearest upsample
  const std::vector<std::string> others = c.affine ? std::vector<std::string>{"r", "n", "r2", "m"} : std::vector<std::string>{"r", "n"};
  const bool fused = std::string(c.fused_note).size() > 0;
  if (fused) {
    CHECK(p.note == c.fused_note);
    for (const auto& node : others) {
      INFO(node);
      CHECK(placement_of(fast, node).note == "optimized group normalization: runs in the step of " + p.node);
    }
    CHECK_THAT(fast.placement_summary(),
               Catch::Contains("; optimized group normalization 1 (" + std::to_string(others.size() + 1) + " nodes)"));
    if (c.conv_first) {
      // Conv (NHWC) -> the step (NHWC) -> Conv (NHWC): only the NCHW graph input converts, for the first Conv.
      CHECK(fast.memory_plan().conversion_bytes == kInputBytes);
    }
  } else {
    CHECK(p.note.empty());
    for (const auto& node : others) CHECK(placement_of(fast, node).note.empty());
    CHECK_THAT(fast.placement_summary(), !Catch::Contains("group normalization"));
    // The reference kernels read NCHW: the Conv's NHWC output converts, and the chain's NCHW output back.
    if (c.conv_first) CHECK(fast.memory_plan().conversion_bytes > kInputBytes);
  }

  // Twice, the second time on other values (a larger spread and another mean), so reused buffers are checked too.
  std::vector<NamedTensor> given = fast.creation_inputs();
  for (int round = 0; round < 2; ++round) {
    auto y_fast = fast.run(given);
    auto y_generic = generic.run(given);
    REQUIRE((y_fast.ok() && y_generic.ok()));
    REQUIRE(y_fast->size() == 1);
    INFO("round " << round);
    CHECK(max_rel_diff(y_fast->at(0).tensor, y_generic->at(0).tensor) < 2e-5);
    for (auto& in : given) {
      if (in.name == "x") {
        for (float& v : in.tensor.f) v = 3.0f * v - 0.25f;
      }
    }
  }
}

TEST_CASE("a GroupNorm chain whose inner value is also read elsewhere is not fused", "[executor][group_norm]") {
  // The InstanceNormalization's output is a graph output too: skipping its node would lose it.
  auto model = parse_model_text(R"(<ir_version: 8, opset_import: ["" : 17]> g (float[1,8,5,6] x) => (float[1,8,5,6] y, float[1,2,120] n) {
    r = Reshape (x, gshape)
    n = InstanceNormalization (r, s, bias)
    hs = Shape (x)
    y = Reshape (n, hs)
  })");
  add_int64_initializer(model, "gshape", {0, 2, -1});
  add_initializer(model, "s", {2}, 12);
  add_initializer(model, "bias", {2}, 13);
  Executor fast = make(model, true, {});
  Executor generic = make(model, false, fast.creation_inputs());
  CHECK_THAT(fast.placement_summary(), !Catch::Contains("group normalization"));
  auto y_fast = fast.run(fast.creation_inputs());
  auto y_generic = generic.run(fast.creation_inputs());
  REQUIRE((y_fast.ok() && y_generic.ok()));
  REQUIRE(y_fast->size() == 2);
  for (size_t k = 0; k < 2; ++k) CHECK(y_fast->at(k).tensor.f == y_generic->at(k).tensor.f);
}

TEST_CASE("a GroupNorm chain whose Reshape changes the element count is refused, not normalized", "[executor][group_norm]") {
  // [1,8,5,6] holds 240 values; [1,2,122] holds 244. ONNX Runtime refuses the Reshape, and so must the executor: the
  // fused step once took the shape for a grouping and "verified" a model no runtime runs.
  ChainCase c{"244 elements", true, true, false, false, "1, 2, 122", ""};
  const onnx::ModelProto model = chain_model(c);
  ExecutorOptions options;
  auto executor = Executor::create(model, options);
  REQUIRE(!executor.ok());
  CHECK_THAT(executor.error().message, Catch::Contains("Reshape 'r'") && Catch::Contains("cannot reshape"));
}
