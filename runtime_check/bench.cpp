#include "runtime_check/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "runtime_check/executor.h"
#include "runtime_check/verify.h"

namespace dwdeconv::runtime_check {
namespace {

// Runs `exec` once and returns the wall time in milliseconds.
core::Result<double> timed_run(Executor& exec, const std::vector<NamedTensor>& inputs) {
  const auto start = std::chrono::steady_clock::now();
  auto out = exec.run(inputs);
  const auto stop = std::chrono::steady_clock::now();
  if (!out) return out.error();
  return std::chrono::duration<double, std::milli>(stop - start).count();
}

}  // namespace

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t mid = samples.size() / 2;
  return samples.size() % 2 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
}

std::string format_profile(const ExecutorProfile& profile, size_t op_rows, size_t node_rows) {
  if (profile.runs == 0) return "  (no profiled runs)\n";
  const double runs = static_cast<double>(profile.runs);
  char line[160];
  std::string text;
  const auto row = [&](const std::string& label, double ms, double share, const std::string& nodes) {
    std::snprintf(line, sizeof line, "  %-24s %9.2f %6.1f%% %6s\n", label.c_str(), ms / runs, 100.0 * share, nodes.c_str());
    text += line;
  };
  std::snprintf(line, sizeof line, "  %-24s %9s %7s %6s\n", "op type", "ms/run", "share", "nodes");
  text += line;
  const size_t shown = std::min(op_rows, profile.by_op.size());
  double rest_ms = 0, rest_share = 0;
  for (size_t k = 0; k < profile.by_op.size(); ++k) {
    const OpTime& op = profile.by_op[k];
    if (k < shown) {
      row(op.op_type, op.ms, op.share, op.nodes > 0 ? std::to_string(op.nodes) : "");
    } else {
      rest_ms += op.ms;
      rest_share += op.share;
    }
  }
  if (shown < profile.by_op.size()) row("(" + std::to_string(profile.by_op.size() - shown) + " more)", rest_ms, rest_share, "");
  row("total", profile.total_ms, 1.0, "");
  for (size_t k = 0; k < std::min(node_rows, profile.top_nodes.size()); ++k) {
    const NodeTime& n = profile.top_nodes[k];
    std::snprintf(line, sizeof line, " %.2f ms (%.1f%%)\n", n.ms / runs, 100.0 * n.share);
    text += "  slowest: " + n.node + line;
  }
  return text;
}

core::Result<BenchResult> bench_models(const onnx::ModelProto& original, const onnx::ModelProto& rewritten, const BenchOptions& options) {
  if (auto given = check_given_inputs(original, options.inputs, options.input_shapes); !given) return given.error();
  ExecutorOptions eo;
  eo.input_shapes = options.input_shapes;
  eo.inputs = options.inputs;
  eo.seed = options.seed;
  eo.threads = options.threads;
  auto a = Executor::create(original, eo);
  if (!a) return core::Error{a.error().kind, "the original model cannot run for --bench: " + a.error().message};
  eo.inputs = a->creation_inputs();
  auto b = Executor::create(rewritten, eo);
  if (!b) return core::Error{b.error().kind, "the rewritten model cannot run for --bench: " + b.error().message};

  BenchResult r;
  r.threads = options.threads;
  r.runs = options.runs;
  r.original_placement = a->placement_summary();
  r.rewritten_placement = b->placement_summary();
  for (size_t i = 0; i < options.warmup; ++i) {
    for (Executor* exec : {&*a, &*b}) {
      if (auto t = timed_run(*exec, eo.inputs); !t) return t.error();
    }
  }
  for (size_t i = 0; i < options.runs; ++i) {
    if (options.progress) options.progress("bench: run " + std::to_string(i + 1) + "/" + std::to_string(options.runs));
    auto ta = timed_run(*a, eo.inputs);
    if (!ta) return ta.error();
    auto tb = timed_run(*b, eo.inputs);
    if (!tb) return tb.error();
    r.original_samples_ms.push_back(*ta);
    r.rewritten_samples_ms.push_back(*tb);
  }
  if (options.profile_runs > 0) {
    for (Executor* exec : {&*a, &*b}) exec->set_profiling(true);
    for (size_t i = 0; i < options.profile_runs; ++i) {
      if (options.progress) {
        options.progress("bench: profiled run " + std::to_string(i + 1) + "/" + std::to_string(options.profile_runs));
      }
      for (Executor* exec : {&*a, &*b}) {
        if (auto t = timed_run(*exec, eo.inputs); !t) return t.error();
      }
    }
    r.original_profile = a->profile(options.profile_top_nodes);
    r.rewritten_profile = b->profile(options.profile_top_nodes);
  }
  r.original_ms = median(r.original_samples_ms);
  r.rewritten_ms = median(r.rewritten_samples_ms);
  r.speedup = r.rewritten_ms > 0 ? r.original_ms / r.rewritten_ms : 0;
  return r;
}

}  // namespace dwdeconv::runtime_check
