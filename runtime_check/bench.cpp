#include "runtime_check/bench.h"

#include <algorithm>
#include <chrono>

#include "runtime_check/executor.h"

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

core::Result<BenchResult> bench_models(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                       const BenchOptions& options) {
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
  r.original_ms = median(r.original_samples_ms);
  r.rewritten_ms = median(r.rewritten_samples_ms);
  r.speedup = r.rewritten_ms > 0 ? r.original_ms / r.rewritten_ms : 0;
  return r;
}

}  // namespace dwdeconv::runtime_check
