// Activation fusion (executor.h): a Relu or Clip that is the only reader of a Conv's output becomes that Conv's
// output range, as XNNPACK's own runtime does. The fused run must give the unfused run's numbers, and the fusion must
// really happen (placements asserted) only where it is safe.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime_check/executor.h"
#include "runtime_check/tensor_io.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

Executor make_executor(const onnx::ModelProto& model, bool fuse, bool xnnpack = true, const std::vector<NamedTensor>& inputs = {}) {
  ExecutorOptions options;
  options.fuse_activations = fuse;
  options.use_xnnpack = xnnpack;
  options.inputs = inputs;
  options.seed = 9;
  return std::move(create_and_run(model, options).executor);
}

const NodePlacement& placement_of(const Executor& executor, const std::string& node) {
  for (const auto& p : executor.placements()) {
    if (p.node == node) return p;
  }
  FAIL("no placement for " << node);
  return executor.placements().front();
}

size_t fused_activations(const Executor& executor) {
  size_t n = 0;
  for (const auto& p : executor.placements()) n += p.fusion.rfind("fused into ", 0) == 0 ? 1 : 0;
  return n;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dims == b.dims);
  double worst = 0.0;
  for (size_t k = 0; k < a.f.size(); ++k) worst = std::max(worst, static_cast<double>(std::abs(a.f[k] - b.f[k])));
  return worst;
}

// Runs the three executors on fresh inputs: fused == unfused (float tolerance), and both == the reference kernels.
void check_numbers(Executor& fused, Executor& unfused, Executor& reference, const onnx::ModelProto& model) {
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    auto inputs = make_random_inputs(model, {}, seed);
    REQUIRE(inputs.ok());
    auto a = fused.run(inputs.value());
    auto u = unfused.run(inputs.value());
    auto r = reference.run(inputs.value());
    REQUIRE(a.ok());
    REQUIRE(u.ok());
    REQUIRE(r.ok());
    REQUIRE(a->size() == u->size());
    for (size_t k = 0; k < a->size(); ++k) {
      INFO("output " << (*a)[k].name);
      CHECK(max_abs_diff((*a)[k].tensor, (*u)[k].tensor) <= 1e-6);
      CHECK(max_abs_diff((*a)[k].tensor, (*r)[k].tensor) <= 1e-4);
    }
  }
}

void name_nodes(onnx::ModelProto& model, const std::vector<std::string>& names) {
  REQUIRE(model.graph().node_size() == static_cast<int>(names.size()));
  for (size_t k = 0; k < names.size(); ++k) model.mutable_graph()->mutable_node(static_cast<int>(k))->set_name(names[k]);
}

}  // namespace

TEST_CASE("Activation fusion: a Relu or Clip that is a Conv's only reader becomes its output range", "[xnnpack][fusion]") {
  // Relu after a Conv; Relu6 (Clip 0..6) and a tight Clip (bounds as inputs, opset 13); a Clip after a ConvTranspose.
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,3,6,5] x) => "
      "(float y1, float y2, float y3, float y4) {\n"
      "  a = Conv <pads = [1, 1, 1, 1]> (x, w1, b1)\n  y1 = Relu (a)\n"
      "  c = Conv (x, w2)\n  y2 = Clip (c, zero, six)\n"
      "  d = Conv <group = 3> (x, w3)\n  y3 = Clip (d, lo, hi)\n"
      "  e = ConvTranspose <strides = [2, 2]> (x, wt)\n  y4 = Clip (e, lo, hi)\n}");
  name_nodes(model, {"c1", "r", "c2", "r6", "dw", "clip", "up", "clip_up"});
  add_initializer(model, "w1", {4, 3, 3, 3}, 31);
  add_initializer(model, "b1", {4}, 32);
  add_initializer(model, "w2", {2, 3, 1, 1}, 33);
  add_initializer(model, "w3", {3, 1, 3, 3}, 34);
  add_initializer(model, "wt", {3, 2, 2, 2}, 35);
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, float>>{{"zero", 0.0f}, {"six", 6.0f}, {"lo", -0.25f}, {"hi", 0.25f}}) {
    *model.mutable_graph()->add_initializer() = onnx_io::make_tensor(name, onnx::TensorProto::FLOAT, {}, {value}, true);
  }

  auto fused = make_executor(model, true);
  auto unfused = make_executor(model, false, true, fused.creation_inputs());
  auto reference = make_executor(model, true, false, fused.creation_inputs());

  // Structure: every activation runs inside its Conv; the unfused executor keeps them as steps.
  CHECK(fused_activations(fused) == 4);
  CHECK(describe_placement(placement_of(fused, "Relu 'r'")) == "xnnpack (fused into Conv 'c1')");
  CHECK(describe_placement(placement_of(fused, "Clip 'r6'")) == "xnnpack (fused into Conv 'c2')");
  CHECK(describe_placement(placement_of(fused, "Clip 'clip'")) == "xnnpack (fused into Conv 'dw')");
  CHECK(describe_placement(placement_of(fused, "Clip 'clip_up'")) == "xnnpack (fused into ConvTranspose 'up')");
  CHECK(placement_of(fused, "Conv 'c1'").fusion == "fused: Relu 'r' is its output range");
  CHECK_THAT(fused.placement_summary(),
             Catch::Contains("; fused activations 4 (Relu 'r' fused into Conv 'c1', Clip 'r6' fused into Conv 'c2', "
                             "Clip 'clip' fused into Conv 'dw', Clip 'clip_up' fused into ConvTranspose 'up')"));
  CHECK(fused_activations(unfused) == 0);
  CHECK(unfused.count("Clip", Placement::kXnnpack) == 3);
  CHECK_THAT(unfused.placement_summary(), !Catch::Contains("fused"));
  CHECK(fused_activations(reference) == 0);

  check_numbers(fused, unfused, reference, model);
}

TEST_CASE("Activation fusion skips a Conv output with another reader or a graph output, and a fused Clip may have two readers",
          "[xnnpack][fusion]") {
  // a: also a graph output.  b: read by a Relu and a Clip.  c: read by the Clip alone, whose output k has two readers.
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[2,2,5,4] x) => "
      "(float a, float z1, float s, float m) {\n"
      "  a = Conv (x, w)\n  z1 = Relu (a)\n"
      "  b = Conv (x, w)\n  z2 = Relu (b)\n  z3 = Clip (b, lo, hi)\n  s = Add (z2, z3)\n"
      "  c = Conv (x, w)\n  k = Clip (c, lo, hi)\n  p = Sigmoid (k)\n  m = Add (k, p)\n}");
  name_nodes(model, {"ca", "ra", "cb", "rb", "clip_b", "sum_b", "cc", "clip_c", "sig", "sum_c"});
  add_initializer(model, "w", {3, 2, 3, 3}, 41);
  for (const auto& [name, value] : std::vector<std::pair<std::string, float>>{{"lo", -0.5f}, {"hi", 0.5f}}) {
    *model.mutable_graph()->add_initializer() = onnx_io::make_tensor(name, onnx::TensorProto::FLOAT, {}, {value}, true);
  }

  auto fused = make_executor(model, true);
  auto unfused = make_executor(model, false, true, fused.creation_inputs());
  auto reference = make_executor(model, true, false, fused.creation_inputs());

  CHECK(fused_activations(fused) == 1);
  CHECK(describe_placement(placement_of(fused, "Clip 'clip_c'")) == "xnnpack (fused into Conv 'cc')");
  for (const char* kept : {"Relu 'ra'", "Relu 'rb'", "Clip 'clip_b'"}) {
    INFO(kept);
    CHECK(describe_placement(placement_of(fused, kept)) == "xnnpack");
  }
  CHECK(placement_of(fused, "Conv 'ca'").fusion.empty());
  CHECK(placement_of(fused, "Conv 'cb'").fusion.empty());

  check_numbers(fused, unfused, reference, model);
}

TEST_CASE("Activation fusion: a Conv with a fused Relu still writes into a Concat's channel slice", "[xnnpack][fusion]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,2,4,4] x) => (float y) {\n"
      "  a = Conv (x, w1)\n  ra = Relu (a)\n  b = Conv <pads = [1, 1, 1, 1]> (x, w2)\n  rb = Relu (b)\n"
      "  y = Concat <axis = 1> (ra, rb)\n}");
  name_nodes(model, {"c1", "r1", "c2", "r2", "cat"});
  add_initializer(model, "w1", {3, 2, 1, 1}, 51);
  add_initializer(model, "w2", {2, 2, 3, 3}, 52);

  auto fused = make_executor(model, true);
  auto unfused = make_executor(model, false, true, fused.creation_inputs());
  auto reference = make_executor(model, true, false, fused.creation_inputs());

  CHECK(fused_activations(fused) == 2);
  CHECK(fused.count_fused("Concat") == 1);
  CHECK(placement_of(fused, "Conv 'c1'").fusion == "fused: Relu 'r1' is its output range; writes into Concat 'cat' channels [0, 3)");
  CHECK(placement_of(fused, "Conv 'c2'").fusion == "fused: Relu 'r2' is its output range; writes into Concat 'cat' channels [3, 5)");
  CHECK(unfused.count_fused("Concat") == 0);  // its inputs come from Relu steps
  check_numbers(fused, unfused, reference, model);
}
