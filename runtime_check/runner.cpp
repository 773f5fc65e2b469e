// The two runners: the executor's, over verify_models() and bench_models(), and a Python runtime's, over the answer
// run_python_check() read. Both judge outputs with judge_outputs() and give node times as NodeMs.
#include "runtime_check/runner.h"

#include <algorithm>
#include <utility>

namespace dwdeconv::runtime_check {
namespace {

// The node name inside describe_node()'s text: "Conv 'c1'" -> c1, "Conv producing 'y'" -> y.
std::string quoted_name(const std::string& described) {
  const auto open = described.find('\'');
  const auto close = described.rfind('\'');
  if (open == std::string::npos || close <= open) return described;
  return described.substr(open + 1, close - open - 1);
}

// The side whose notes say it ran ops in float that the other quantises (each such note starts "original: " or
// "rewritten: "), the original first; "" when neither.
std::string float_side(const std::vector<std::string>& notes) {
  for (const char* side : {"original", "rewritten"}) {
    const std::string prefix = std::string(side) + ": ";
    if (std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; })) return side;
  }
  return "";
}

}  // namespace

ExecutorRunner::ExecutorRunner(const onnx::ModelProto& original, const onnx::ModelProto& rewritten, RuntimeInfo info, VerifyOptions verify,
                               BenchOptions bench)
    : original_(original),
      rewritten_(rewritten),
      info_(std::move(info)),
      verify_options_(std::move(verify)),
      bench_options_(std::move(bench)) {}

core::Result<VerifyResult> ExecutorRunner::verify() { return verify_models(original_, rewritten_, verify_options_); }

core::Result<Timing> ExecutorRunner::bench() {
  auto timed = bench_models(original_, rewritten_, bench_options_);
  if (!timed) return timed.error();
  Timing t;
  t.original_nodes = executor_node_times(timed->original_profile);
  t.rewritten_nodes = executor_node_times(timed->rewritten_profile);
  t.bench = std::move(*timed);
  return t;
}

std::string ExecutorRunner::bench_phase() const { return "bench: creating both executors (each runs its model once) and warming up"; }

PythonRunner::PythonRunner(PythonRun run, Tolerances tolerances, double max_steps, size_t threads)
    : run_(std::move(run)), tolerances_(tolerances), max_steps_(max_steps), threads_(threads) {}

core::Result<VerifyResult> PythonRunner::verify() { return verify_from_run(run_, tolerances_, max_steps_); }

core::Result<Timing> PythonRunner::bench() {
  Timing t;
  t.bench = bench_from_run(run_, threads_);
  t.original_nodes = run_.original_nodes;
  t.rewritten_nodes = run_.rewritten_nodes;
  t.node_values = run_.node_values;
  t.counted = "pairs";
  return t;
}

std::vector<NodeMs> executor_node_times(const ExecutorProfile& profile) {
  std::vector<NodeMs> out;
  const double runs = profile.runs > 0 ? static_cast<double>(profile.runs) : 1.0;
  for (const auto& n : profile.top_nodes) out.push_back({quoted_name(n.node), n.op_type, (n.ms + n.convert_ms) / runs, {}, {}});
  return out;
}

VerifyResult verify_from_run(const PythonRun& run, const Tolerances& tolerances, double max_steps) {
  VerifyResult v;
  v.mode = VerifyMode::kWholeModel;
  v.mode_reason = "on " + run.runtime.label;
  PrecisionRule rule;
  rule.precision = run.precision;
  rule.original_steps = run.original_steps;
  rule.rewritten_steps = run.rewritten_steps;
  rule.max_steps = max_steps;
  rule.float_side = float_side(run.notes);
  const auto report = judge_outputs(run.rewritten_outputs, run.original_outputs, tolerances, rule);
  v.outputs = report.outputs;
  v.passed = report.passed && !run.original_outputs.empty();
  v.placement = "converted for " + run.runtime.label +
                (run.rewritten_outside.empty() ? std::string() : "; outside the XNNPACK delegate: " + run.rewritten_outside);
  v.original_runs = v.rewritten_runs = 1;
  return v;
}

BenchResult bench_from_run(const PythonRun& run, size_t threads) {
  BenchResult b;
  b.threads = threads;
  b.runs = run.original_samples_ms.size();
  b.original_samples_ms = run.original_samples_ms;
  b.rewritten_samples_ms = run.rewritten_samples_ms;
  b.original_ms = median(b.original_samples_ms);
  b.rewritten_ms = median(b.rewritten_samples_ms);
  b.speedup = b.rewritten_ms > 0 ? b.original_ms / b.rewritten_ms : 0;
  const auto where = [&](const std::string& outside) {
    return run.runtime.label + (outside.empty() ? std::string() : "; outside the XNNPACK delegate: " + outside);
  };
  b.original_placement = where(run.original_outside);
  b.rewritten_placement = where(run.rewritten_outside);
  return b;
}

}  // namespace dwdeconv::runtime_check
