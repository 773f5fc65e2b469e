// Timing the original against the rewritten model on the executor, the way the --bench flag reports it.
//
// Both models are created once (operators and buffers set up), warmed up, then run `runs` times each,
// interleaved A B A B so that drift on a shared machine hits both. Times are medians of those runs. Then, so that
// timing steps never disturbs the medians, `profile_runs` extra runs of each model are profiled per node.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "runtime_check/executor.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check {

struct BenchOptions {
  std::map<std::string, std::vector<int64_t>> input_shapes;
  std::vector<NamedTensor> inputs;  // explicit graph inputs; the rest are seeded random
  uint64_t seed = 0;
  size_t threads = 1;
  size_t warmup = 2;              // untimed runs of each model first
  size_t runs = 10;               // timed runs of each model
  size_t profile_runs = 3;        // profiled runs of each model after the timed ones; 0: no profile
  size_t profile_top_nodes = 10;  // slowest nodes kept in each ExecutorProfile
  std::function<void(const std::string&)> progress;
};

struct BenchResult {
  size_t threads = 1;
  size_t runs = 0;
  double original_ms = 0;   // median
  double rewritten_ms = 0;  // median
  double speedup = 0;       // original_ms / rewritten_ms
  std::vector<double> original_samples_ms;
  std::vector<double> rewritten_samples_ms;
  std::string original_placement;  // where each model's nodes ran, so a reader knows what was timed
  std::string rewritten_placement;
  ExecutorProfile original_profile;  // where each model's time goes (profile_runs runs; empty when 0)
  ExecutorProfile rewritten_profile;
};

// The median of `samples` (the mean of the middle two for an even count).
double median(std::vector<double> samples);

// A short table for the log, per run (the profile's sums divided by its runs), slowest first:
//   op type                  ms/run   share  nodes
//   Conv                      512.3   61.2%     82
//   ...
//   (3 more)                    1.2    0.1%
//   total                     837.0  100.0%
// followed by the `node_rows` slowest nodes: "  slowest: Conv 'c1' 40.1 ms (4.8%)". Lines end in '\n'.
std::string format_profile(const ExecutorProfile& profile, size_t op_rows = 8, size_t node_rows = 3);

core::Result<BenchResult> bench_models(const onnx::ModelProto& original, const onnx::ModelProto& rewritten, const BenchOptions& options);

}  // namespace dwdeconv::runtime_check
