// Timing the original against the rewritten model on the executor, the way the --bench flag reports it.
//
// Both models are created once (operators and buffers set up), warmed up, then run `runs` times each,
// interleaved A B A B so that drift on a shared machine hits both. Times are medians of those runs.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check {

struct BenchOptions {
  std::map<std::string, std::vector<int64_t>> input_shapes;
  std::vector<NamedTensor> inputs;  // explicit graph inputs; the rest are seeded random
  uint64_t seed = 0;
  size_t threads = 1;
  size_t warmup = 2;   // untimed runs of each model first
  size_t runs = 10;    // timed runs of each model
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
};

// The median of `samples` (the mean of the middle two for an even count).
double median(std::vector<double> samples);

core::Result<BenchResult> bench_models(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                       const BenchOptions& options);

}  // namespace dwdeconv::runtime_check
