// The executor's memory plan (ExecutorOptions::plan_memory): activations share one arena by lifetime. On graphs
// where a careless plan would overwrite a value still needed, the outputs must be bit-identical to giving every value
// its own buffer, and the arena must really be shared (sizes asserted).
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "onnx_io/model_io.h"
#include "rewrite/rewriter.h"
#include "runtime_check/executor.h"
#include "runtime_check/memory_plan.h"
#include "runtime_check/tensor_io.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

Executor make_executor(const onnx::ModelProto& model, bool plan, const std::vector<NamedTensor>& inputs = {}) {
  ExecutorOptions options;
  options.plan_memory = plan;
  options.inputs = inputs;
  options.seed = 3;
  return std::move(create_and_run(model, options).executor);
}

// Runs both executors on the same fresh inputs, twice over (and once more through run_steps), and requires
// bit-identical outputs.
void check_bit_identical(Executor& planned, Executor& unplanned, const onnx::ModelProto& model) {
  for (uint64_t seed = 11; seed <= 12; ++seed) {
    auto inputs = make_random_inputs(model, {}, seed);
    REQUIRE(inputs.ok());
    REQUIRE(planned.run_steps().ok());  // a run on the previous inputs in between must not disturb the next
    auto a = planned.run(inputs.value());
    auto b = unplanned.run(inputs.value());
    INFO((a.ok() ? std::string() : a.error().message));
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    require_bit_identical(a.value(), b.value());
  }
}

struct Case {
  const char* what;
  const char* text;
};

}  // namespace

TEST_CASE("Memory plan: outputs are bit-identical to one buffer per value where a careless plan would overwrite one", "[memory]") {
  const Case c = GENERATE(Case{"a value read after later producers",
                               "g (float[1,4,6,6] x) => (float y) {\n"
                               "  a = Conv <pads = [1, 1, 1, 1]> (x, w)\n  b = Sigmoid (a)\n  c = Conv <pads = [1, 1, 1, 1]> (b, w)\n"
                               "  d = LeakyRelu (c)\n  e = Conv <pads = [1, 1, 1, 1]> (d, w)\n  y = Add (a, e)\n}"},
                          Case{"a value read by two branches",
                               "g (float[1,4,6,6] x) => (float y) {\n"
                               "  a = Conv <pads = [1, 1, 1, 1]> (x, w)\n  b1 = Sigmoid (a)\n  c1 = Conv <pads = [1, 1, 1, 1]> (b1, w)\n"
                               "  b2 = LeakyRelu (a)\n  c2 = Conv <pads = [1, 1, 1, 1]> (b2, w)\n  y = Mul (c1, c2)\n}"},
                          Case{"in-place chains",
                               "g (float[1,4,6,6] x) => (float y) {\n"
                               "  a = Sigmoid (x)\n  b = LeakyRelu (a)\n  c = Tanh (b)\n  d = Sigmoid (c)\n  e = Tanh (d)\n"
                               "  f = Conv <pads = [1, 1, 1, 1]> (e, w)\n  g1 = Sigmoid (f)\n  h = Tanh (g1)\n  y = LeakyRelu (h)\n}"},
                          Case{"a graph output read by a later node",
                               "g (float[1,4,6,6] x) => (float a, float y) {\n"
                               "  a = Conv <pads = [1, 1, 1, 1]> (x, w)\n  b = Sigmoid (a)\n  c = Conv <pads = [1, 1, 1, 1]> (b, w)\n"
                               "  d = Tanh (c)\n  y = Add (d, a)\n}"},
                          Case{"layout conversions",
                               "g (float[1,4,6,6] x) => (float y, float z, float t) {\n"
                               "  a = Conv <pads = [1, 1, 1, 1]> (x, w)\n  r = Reshape (a, shape)\n  s = Tanh (r)\n"
                               "  b = Conv <pads = [1, 1, 1, 1]> (a, w)\n  z = Reshape (s, back)\n  c = Conv <pads = [1, 1, 1, 1]> (z, w)\n"
                               "  t = Transpose <perm = [0, 2, 3, 1]> (b)\n  y = Add (b, c)\n}"});
  INFO(c.what);
  auto model = parse_model_text(std::string("<ir_version: 8, opset_import: [\"\" : 13]> ") + c.text);
  add_initializer(model, "w", {4, 4, 3, 3}, 21);
  add_int64_initializer(model, "shape", {1, 4, 36});
  add_int64_initializer(model, "back", {1, 4, 6, 6});

  auto planned = make_executor(model, true);
  auto unplanned = make_executor(model, false, planned.creation_inputs());

  // Structure: the planned executor shares one arena; the unplanned one has none.
  const MemoryPlan& memory = planned.memory_plan();
  CHECK(memory.values > 0);
  CHECK(memory.arena_bytes > 0);
  CHECK(memory.arena_bytes < memory.value_bytes + memory.conversion_bytes);
  CHECK(unplanned.memory_plan().arena_bytes == 0);
  CHECK(planned.placement_summary() == unplanned.placement_summary());

  check_bit_identical(planned, unplanned, model);
}

TEST_CASE("Memory plan: weights XNNPACK packed are freed, constants a step reads on every run are kept", "[memory]") {
  // w feeds two Convs (packed twice by XNNPACK, read by no step on a run); m is read by the Mul on every run.
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,4,6,6] x) => (float y) {\n"
      "  a = Conv <pads = [1, 1, 1, 1]> (x, w)\n  b = Conv <pads = [1, 1, 1, 1]> (a, w)\n"
      "  y = Mul (b, m)\n}");
  add_initializer(model, "w", {4, 4, 3, 3}, 31);
  add_initializer(model, "m", {1, 4, 1, 1}, 32);
  const bool plan = GENERATE(true, false);
  CAPTURE(plan);
  auto executor = make_executor(model, plan);
  CHECK(executor.memory_plan().constant_bytes == 4 * sizeof(float));  // m only: w's 144 floats are gone
  // Still right on new values after the weights were freed: against the reference kernels, which keep them.
  ExecutorOptions generic;
  generic.use_xnnpack = false;
  generic.inputs = executor.creation_inputs();
  auto reference = std::move(create_and_run(model, generic).executor);
  CHECK(reference.memory_plan().constant_bytes == (144 + 4) * sizeof(float));
  auto inputs = executor.creation_inputs();
  for (float& v : inputs[0].tensor.f) v = -2.0f * v;
  const auto y = executor.run(inputs);
  const auto y_ref = reference.run(inputs);
  REQUIRE((y.ok() && y_ref.ok()));
  double worst = 0;
  for (size_t k = 0; k < y->at(0).tensor.f.size(); ++k) {
    worst = std::max(worst, std::abs(static_cast<double>(y->at(0).tensor.f[k]) - y_ref->at(0).tensor.f[k]));
  }
  CHECK(worst < 1e-4);
}

TEST_CASE("Memory plan: a layout conversion gets its own lifetime, not a permanent copy", "[memory]") {
  // a is NHWC (a Conv output) and read NCHW by the Reshape: one conversion, alive for that step only.
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,4,6,6] x) => (float y) {\n"
      "  a = Conv <pads = [1, 1, 1, 1]> (x, w)\n  r = Reshape (a, shape)\n  s = Sigmoid (r)\n"
      "  b = Reshape (s, back)\n  c = Conv <pads = [1, 1, 1, 1]> (b, w)\n  y = Sigmoid (c)\n}");
  add_initializer(model, "w", {4, 4, 3, 3}, 22);
  add_int64_initializer(model, "shape", {1, 4, 36});
  add_int64_initializer(model, "back", {1, 4, 6, 6});
  auto planned = make_executor(model, true);
  auto unplanned = make_executor(model, false, planned.creation_inputs());
  const size_t value = 4 * 6 * 6 * sizeof(float);
  const MemoryPlan& memory = planned.memory_plan();
  // a is read NCHW by the first Reshape, b (NCHW) NHWC by the Conv, and y (NHWC, after the Conv) NCHW by run().
  CHECK(memory.conversion_bytes == 3 * value);
  CHECK(memory.value_bytes == 6 * value);  // a, r, s, b, c, y
  // Never more than three activations are alive at once (a step's inputs, its output and a conversion).
  CHECK(memory.arena_bytes <= 3 * value + 64);
  check_bit_identical(planned, unplanned, model);
}

TEST_CASE("plan_arena: values alive at the same time never overlap, and the rest share", "[memory]") {
  using detail::ArenaValue;
  std::vector<ArenaValue> values = {
      {0, 1, 100, 0},  // A
      {1, 2, 50, 0},   // B: overlaps A at step 1
      {2, 3, 100, 0},  // C: overlaps B only, so it can take A's place
      {3, 3, 10, 0},   // D: overlaps C only
      {0, 3, 20, 0},   // E: alive throughout
  };
  const size_t arena = detail::plan_arena(values);
  for (size_t i = 0; i < values.size(); ++i) {
    CHECK(values[i].offset % detail::kArenaAlignment == 0);
    CHECK(values[i].offset + values[i].size <= arena);
    for (size_t j = i + 1; j < values.size(); ++j) {
      const bool alive_together = values[i].first <= values[j].last && values[j].first <= values[i].last;
      const bool disjoint = values[i].offset + values[i].size <= values[j].offset || values[j].offset + values[j].size <= values[i].offset;
      INFO(i << " and " << j);
      if (alive_together) CHECK(disjoint);
    }
  }
  CHECK(values[2].offset == values[0].offset);  // largest first: A at 0, then C reuses it
  CHECK(arena == 112 + 64 + 32);                // A/C, B, E (each rounded up to 16 floats); D fits in B's place
}

TEST_CASE("Memory plan: the MI-GAN-like example's arena is at most half the sum of its value sizes", "[memory][examples]") {
  const ModelPair migan = migan_example_pair();
  for (const onnx::ModelProto* model : {&migan.original, &migan.rewritten}) {
    auto planned = make_executor(*model, true);
    auto unplanned = make_executor(*model, false, planned.creation_inputs());
    const MemoryPlan& memory = planned.memory_plan();
    INFO("arena " << memory.arena_bytes << " B, values " << memory.value_bytes << " B, conversions " << memory.conversion_bytes << " B in "
                  << memory.values);
    CHECK(memory.values > 100);
    CHECK(memory.arena_bytes * 2 <= memory.value_bytes);
    check_bit_identical(planned, unplanned, *model);
  }
}
