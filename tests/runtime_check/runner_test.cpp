// The runners of runtime_check/runner.h, the one interface cli/run_checks.cpp writes --verify and --bench against:
// the executor's and a Python runtime's answer, and judge_outputs(), the one comparison rule both use. The expected
// facts are written here: the model's node names, the samples given, each precision's documented tolerances.
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime_check/runner.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

// A depthwise ConvTranspose named "up" (C 2, k 4, s 2) and the tool's rewrite of it.
ModelPair deconv_pair() {
  auto original = parse_model_text(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[1,2,4,4] x) => (float[1,2,8,8] y) {
      y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)
    })");
  add_initializer(original, "w", {2, 1, 4, 4}, 3);
  original.mutable_graph()->mutable_node(0)->set_name("up");
  onnx::ModelProto rewritten = original;
  auto result = rewrite::rewrite_model(rewritten, {});
  REQUIRE(result.ok());
  REQUIRE(result->rewritten == 1);
  return {original, rewritten};
}

NamedTensor output(const std::string& name, const std::vector<float>& values) {
  NamedTensor t;
  t.name = name;
  t.tensor.reshape(onnx::TensorProto::FLOAT, {static_cast<int64_t>(values.size())});
  for (size_t k = 0; k < values.size(); ++k) t.tensor.f[k] = values[k];
  return t;
}

}  // namespace

TEST_CASE("the executor's runner verifies both models whole and times them, each node's time under its name", "[runner]") {
  const ModelPair pair = deconv_pair();
  RuntimeInfo info;
  info.name = "xnnpack";
  info.label = "XNNPACK (a test's label)";
  BenchOptions bo;
  bo.warmup = 1;
  bo.runs = 3;
  bo.profile_runs = 2;
  bo.profile_top_nodes = static_cast<size_t>(-1);
  ExecutorRunner executor(pair.original, pair.rewritten, info, VerifyOptions{}, bo);
  Runner& runner = executor;
  CHECK(runner.info().label == "XNNPACK (a test's label)");
  CHECK_FALSE(runner.bench_phase().empty());  // bench() creates both executors: a phase of its own in the log
  CHECK(runner.notes().empty());

  auto verified = runner.verify();
  INFO((verified.ok() ? verified->summary() : verified.error().message));
  REQUIRE(verified.ok());
  CHECK(verified->mode == VerifyMode::kWholeModel);
  CHECK(verified->passed);
  REQUIRE(verified->outputs.size() == 1);
  CHECK(verified->outputs[0].name == "y");
  CHECK(verified->outputs[0].compared == 2 * 8 * 8);

  auto timed = runner.bench();
  REQUIRE(timed.ok());
  CHECK(timed->counted == "runs");
  CHECK(timed->node_values == NodeValues::kNames);
  CHECK(timed->bench.runs == 3);
  CHECK(timed->bench.original_samples_ms.size() == 3);
  CHECK(timed->bench.rewritten_samples_ms.size() == 3);
  // The original's one node by its name ("up", not the profile's "ConvTranspose 'up'"); the rewritten side's by the
  // names of the nodes the rewrite emitted.
  REQUIRE(timed->original_nodes.size() == 1);
  CHECK(timed->original_nodes[0].node == "up");
  CHECK(timed->original_nodes[0].op == "ConvTranspose");
  CHECK(timed->original_nodes[0].ms >= 0);
  std::set<std::string> emitted;
  for (const auto& n : pair.rewritten.graph().node()) emitted.insert(n.name());
  REQUIRE_FALSE(timed->rewritten_nodes.empty());
  for (const auto& n : timed->rewritten_nodes) CHECK(emitted.count(n.node) == 1);
}

TEST_CASE("a Python runtime's runner judges its run at the precision it converted to and passes its figures on", "[runner]") {
  PythonRun run;
  run.runtime.name = "ort";
  run.runtime.label = "ONNX Runtime (a test's label)";
  run.precision = "fp16";
  // 5e-4 apart at scale 1: over fp32's bound (1e-6 + 1e-4), within fp16's (1e-3 + 1e-2).
  run.original_outputs = {output("y", {0.0f, 0.5f, 1.0f})};
  run.rewritten_outputs = {output("y", {0.0f, 0.5005f, 1.0f})};
  run.original_samples_ms = {3.0, 1.0, 2.0};
  run.rewritten_samples_ms = {1.0, 1.5, 0.5};
  run.original_nodes = {{"up", "ConvTranspose", 1.5, {"x", "w"}, {"y"}}};
  run.rewritten_nodes = {{"up_phase_0_0", "Conv", 0.25, {"x"}, {"p"}}, {"up", "DepthToSpace", 0.25, {"p"}, {"y"}}};
  run.node_values = NodeValues::kOnnx;
  run.notes = {"original: the converter left ConvTranspose in float"};
  PythonRunner python(run, Tolerances{}, 2.0, 4);
  Runner& runner = python;
  CHECK(runner.info().label == "ONNX Runtime (a test's label)");
  CHECK(runner.bench_phase().empty());  // both models ran before: bench() runs nothing new
  CHECK(runner.notes() == run.notes);

  auto verified = runner.verify();
  REQUIRE(verified.ok());
  CHECK(verified->passed);
  CHECK(verified->mode_reason == "on ONNX Runtime (a test's label)");
  REQUIRE(verified->outputs.size() == 1);
  CHECK(verified->outputs[0].tolerance.atol == 1e-3);
  CHECK(verified->outputs[0].tolerance.rtol == 1e-2);
  // The same outputs converted at fp32 fail: the precision chooses the rule, the runner does not.
  run.precision = "fp32";
  auto at_fp32 = PythonRunner(run, Tolerances{}, 2.0, 4).verify();
  REQUIRE(at_fp32.ok());
  CHECK_FALSE(at_fp32->passed);

  auto timed = runner.bench();
  REQUIRE(timed.ok());
  CHECK(timed->counted == "pairs");
  CHECK(timed->node_values == NodeValues::kOnnx);
  CHECK(timed->bench.threads == 4);
  CHECK(timed->bench.runs == 3);
  CHECK(timed->bench.original_ms == 2.0);   // the median of 3, 1, 2
  CHECK(timed->bench.rewritten_ms == 1.0);  // the median of 1, 1.5, 0.5
  CHECK(timed->bench.speedup == 2.0);
  REQUIRE(timed->original_nodes.size() == 1);
  CHECK(timed->original_nodes[0].node == "up");
  REQUIRE(timed->rewritten_nodes.size() == 2);
  CHECK(timed->rewritten_nodes[1].outputs == std::vector<std::string>{"y"});
}

TEST_CASE("judge_outputs is one rule: fp32 as compare_model_outputs, fp16 and bf16 with their dtype's defaults", "[runner][compare]") {
  const auto y = output("y", {0.0f, 0.5f, 1.0f});
  const auto off = output("y", {0.0f, 0.5005f, 1.0f});  // 5e-4 from y at scale 1
  // fp32 (the executor's): 1e-6 + 1e-4 * 1 is under 5e-4.
  const auto fp32 = judge_outputs({off}, {y}, {});
  CHECK_FALSE(fp32.passed);
  REQUIRE(fp32.outputs.size() == 1);
  CHECK(fp32.outputs[0].tolerance.atol == 1e-6);
  CHECK_THAT(fp32.outputs[0].message, Catch::Contains("max abs error"));
  // An output the original lacks fails, as compare_model_outputs says.
  const auto extra = judge_outputs({y, output("z", {1.0f})}, {y}, {});
  CHECK_FALSE(extra.passed);
  REQUIRE(extra.outputs.size() == 2);
  CHECK(extra.outputs[1].message == "not an output of the original");

  PrecisionRule fp16;
  fp16.precision = "fp16";
  const auto half = judge_outputs({off}, {y}, {}, fp16);
  CHECK(half.passed);
  CHECK(half.outputs[0].tolerance.atol == 1e-3);
  CHECK(half.outputs[0].tolerance.rtol == 1e-2);
  // Tolerances given on the command line stay, whatever the precision.
  const auto given = judge_outputs({off}, {y}, Tolerances{1e-6, 1e-6}, fp16);
  CHECK_FALSE(given.passed);
  CHECK(given.outputs[0].tolerance.atol == 1e-6);

  PrecisionRule bf16;
  bf16.precision = "bf16";
  const auto brain = judge_outputs({off}, {y}, {}, bf16);
  CHECK(brain.passed);
  CHECK(brain.outputs[0].tolerance.atol == 1e-2);
  CHECK(brain.outputs[0].tolerance.rtol == 2e-2);
}
