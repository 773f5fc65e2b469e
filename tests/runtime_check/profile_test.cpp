// The executor's per-node profile (Executor::profile) and the benchmark's use of it (bench_models, format_profile):
// the rows add up to the run time, a known dominant op comes out on top, and profiling is off unless asked for.
#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime_check/bench.h"
#include "runtime_check/executor.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

// A dense 3x3 Conv (256 -> 64 channels on 24x24, ~170 MFLOP, about 4600 FLOPs per output element) that dominates
// a Relu and a Reshape after it by far, even in a -O0 sanitizer build of the executor's own kernels. The Reshape
// reads NCHW, so it converts the Conv's NHWC output.
onnx::ModelProto conv_heavy_model() {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 17]> g (float[1,256,24,24] x) => (float y, float[1,64,576] z) {\n"
      "  c = Conv <pads = [1, 1, 1, 1]> (x, w, b)\n"
      "  y = Relu (c)\n"
      "  z = Reshape (y, shape)\n"
      "}");
  auto* graph = model.mutable_graph();
  graph->mutable_node(0)->set_name("big");
  graph->mutable_node(1)->set_name("act");
  graph->mutable_node(2)->set_name("flat");
  add_initializer(model, "w", {64, 256, 3, 3}, 1);
  add_initializer(model, "b", {64}, 2);
  add_int64_initializer(model, "shape", {1, 64, 576});
  return model;
}

double sum_of_rows(const ExecutorProfile& p) {
  double sum = 0;
  for (const auto& op : p.by_op) sum += op.ms;
  return sum;
}

const OpTime* row(const ExecutorProfile& p, const std::string& op_type) {
  for (const auto& op : p.by_op) {
    if (op.op_type == op_type) return &op;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("Executor profile: rows add up to the run time and the dominant op comes first", "[profile]") {
  ExecutorOptions options;
  options.fuse_activations = false;  // the Relu stays a step of its own, so it gets a row
  auto ran = create_and_run(conv_heavy_model(), options);
  Executor& exec = ran.executor;
  const auto inputs = exec.creation_inputs();

  // Off by default: nothing is recorded, not even the creation run.
  REQUIRE(exec.run(inputs).ok());
  CHECK(exec.profile().runs == 0);
  CHECK(exec.profile().total_ms == 0.0);

  // The profile's total is measured inside run() and run_steps(), so it can never exceed the wall time of the
  // calls that hold it, and it is most of that time. Both come from the same calls, so load on this shared machine
  // moves them alike. Which op comes first can still flip when the process is preempted inside a short step, so
  // a batch is profiled again (up to 5 times) until the Conv, ~100x the work of the rest, leads; a profile that
  // charged the Conv's time to the wrong row would never get there.
  exec.set_profiling(true);
  ExecutorProfile p;
  double wall_ms = 0;
  for (int attempt = 0; attempt < 5; ++attempt) {
    exec.reset_profile();
    const auto start = std::chrono::steady_clock::now();
    for (int k = 0; k < 3; ++k) REQUIRE(exec.run(inputs).ok());
    REQUIRE(exec.run_steps().ok());
    wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    p = exec.profile(2);
    if (!p.by_op.empty() && p.by_op.front().op_type == "Conv" && p.by_op.front().share > 0.5) break;
  }
  CHECK(p.runs == 4);
  REQUIRE(p.total_ms > 0);
  // The rows (ops, conversions, graph I/O) account for the whole time.
  CHECK(sum_of_rows(p) == Approx(p.total_ms).epsilon(0.01));
  CHECK(p.total_ms <= wall_ms);
  CHECK(p.total_ms > 0.5 * wall_ms);

  REQUIRE(!p.by_op.empty());
  CHECK(p.by_op.front().op_type == "Conv");
  CHECK(p.by_op.front().nodes == 1);
  CHECK(p.by_op.front().share > 0.5);
  CHECK(std::is_sorted(p.by_op.begin(), p.by_op.end(), [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; }));
  double shares = 0;
  for (const auto& op : p.by_op) shares += op.share;
  CHECK(shares == Approx(1.0).epsilon(0.01));
  REQUIRE(row(p, "Relu") != nullptr);
  CHECK(row(p, "Relu")->nodes == 1);
  REQUIRE(row(p, kLayoutConversionRow) != nullptr);
  CHECK(row(p, kLayoutConversionRow)->ms > 0);
  CHECK(row(p, kGraphIoRow) != nullptr);

  REQUIRE(p.top_nodes.size() == 2);
  CHECK(p.top_nodes[0].node == "Conv 'big'");
  CHECK(p.top_nodes[0].placement == Placement::kXnnpack);
  CHECK(p.top_nodes[0].share > 0.5);
  const ExecutorProfile all = exec.profile(10);
  REQUIRE(all.top_nodes.size() == 3);
  for (const auto& n : all.top_nodes) {
    INFO(n.node);
    // Only the Reshape reads the other layout (the Conv converts the graph input: NCHW -> NHWC).
    if (n.node == "Reshape 'flat'" || n.node == "Conv 'big'") CHECK(n.convert_ms > 0);
    else CHECK(n.convert_ms == 0.0);
  }

  // Stopped: later runs add nothing. Reset: back to zero.
  exec.set_profiling(false);
  REQUIRE(exec.run(inputs).ok());
  CHECK(exec.profile().runs == 4);
  exec.reset_profile();
  CHECK(exec.profile().runs == 0);
  CHECK(sum_of_rows(exec.profile()) == 0.0);
}

TEST_CASE("ExecutorOptions::profile profiles from the first run() after creation", "[profile]") {
  ExecutorOptions options;
  options.profile = true;
  auto ran = create_and_run(conv_heavy_model(), options);
  const ExecutorProfile p = ran.executor.profile();
  CHECK(p.runs == 1);
  REQUIRE(row(p, "Conv") != nullptr);
  CHECK(row(p, "Conv")->nodes == 1);
  CHECK(row(p, "Conv")->ms > 0);
}

TEST_CASE("bench_models profiles each model in extra runs after the timed ones", "[profile][bench]") {
  const auto model = conv_heavy_model();
  BenchOptions options;
  options.warmup = 0;
  options.runs = 1;
  options.profile_runs = 2;
  auto r = bench_models(model, model, options);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->original_samples_ms.size() == 1);
  for (const ExecutorProfile* p : {&r->original_profile, &r->rewritten_profile}) {
    CHECK(p->runs == 2);
    REQUIRE(row(*p, "Conv") != nullptr);
    CHECK(row(*p, "Conv")->ms > 0);
    CHECK(p->top_nodes.size() == 2);  // Conv and Reshape: the Relu runs inside the Conv (activation fusion)
  }
  const std::string table = format_profile(r->original_profile, 2, 1);
  INFO(table);
  CHECK_THAT(table, Catch::StartsWith("  op type"));
  CHECK_THAT(table, Catch::Contains("\n  Conv "));
  CHECK_THAT(table, Catch::Contains("more)"));  // rows past the first two are summed into one
  CHECK_THAT(table, Catch::Contains("\n  total "));
  // The slowest node named is the profile's own first (which one leads is test 1's business, not the format's).
  REQUIRE(!r->original_profile.top_nodes.empty());
  CHECK_THAT(table, Catch::Contains("\n  slowest: " + r->original_profile.top_nodes.front().node + " "));
  CHECK(std::count(table.begin(), table.end(), '\n') == 6);  // header, 2 ops, "more", total, 1 node

  options.profile_runs = 0;
  auto unprofiled = bench_models(model, model, options);
  REQUIRE(unprofiled.ok());
  CHECK(unprofiled->original_profile.runs == 0);
  CHECK(format_profile(unprofiled->original_profile) == "  (no profiled runs)\n");
}
