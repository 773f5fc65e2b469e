// One interface for the runtimes --verify and --bench run on: the executor (XNNPACK, this library) and the deployment
// runtimes behind the Python bridge (python_bridge.h). The check is written once against it (cli/run_checks.cpp):
// verify, time a model that passed, then the per-upsampler table from the node times either one gives. Both judge
// outputs with compare.h's judge_outputs(), the executor at fp32 and a Python runtime at the precision it converted to.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "runtime_check/bench.h"
#include "runtime_check/compare.h"
#include "runtime_check/executor.h"
#include "runtime_check/python_bridge.h"
#include "runtime_check/verify.h"

namespace dwdeconv::runtime_check {

// Both models timed on one runtime: the medians and samples, and each node's time per run from the profiled runs
// after the timed ones (empty when the runtime gives none), for the per-upsampler table.
struct Timing {
  BenchResult bench;
  std::vector<NodeMs> original_nodes;
  std::vector<NodeMs> rewritten_nodes;
  NodeValues node_values = NodeValues::kNames;  // what the NodeMs' inputs and outputs name
  std::string counted = "runs";                 // what one sample times: "runs" on the executor, "pairs" on a Python runtime
};

// A runtime both models run on. verify() before bench(): a caller times only a rewrite that passed.
class Runner {
 public:
  virtual ~Runner() = default;

  // Where the results come from: the name, label and versions the report and every log line about them use.
  virtual const RuntimeInfo& info() const = 0;

  // Both models run on the same inputs, the rewritten model's outputs judged against the original's. A numeric
  // mismatch is passed == false; an error says why nothing could be verified.
  virtual core::Result<VerifyResult> verify() = 0;

  // Both models timed, with each node's time when the runtime profiles them. An error says why they could not be.
  virtual core::Result<Timing> bench() = 0;

  // The phase bench() opens in the log, or "" when it runs nothing new (a Python runtime ran both models once, for
  // both checks, before either).
  virtual std::string bench_phase() const { return ""; }

  // What the runtime said of the run that the verdict does not (an op a converter left in float), a line each.
  virtual std::vector<std::string> notes() const { return {}; }
};

// The executor: verify_models() and bench_models() with the options given. The models must outlive the runner.
class ExecutorRunner final : public Runner {
 public:
  ExecutorRunner(const onnx::ModelProto& original, const onnx::ModelProto& rewritten, RuntimeInfo info, VerifyOptions verify,
                 BenchOptions bench);
  const RuntimeInfo& info() const override { return info_; }
  core::Result<VerifyResult> verify() override;
  core::Result<Timing> bench() override;
  std::string bench_phase() const override;

 private:
  const onnx::ModelProto& original_;
  const onnx::ModelProto& rewritten_;
  RuntimeInfo info_;
  VerifyOptions verify_options_;
  BenchOptions bench_options_;
};

// A Python runtime's answer for both models (run_python_check(), which converted and ran them once for both checks),
// judged under `tolerances` (int8: within `max_steps` quantisation steps), its samples taken on `threads` threads.
class PythonRunner final : public Runner {
 public:
  PythonRunner(PythonRun run, Tolerances tolerances, double max_steps, size_t threads);
  const RuntimeInfo& info() const override { return run_.runtime; }
  core::Result<VerifyResult> verify() override;
  core::Result<Timing> bench() override;
  std::vector<std::string> notes() const override { return run_.notes; }

 private:
  PythonRun run_;
  Tolerances tolerances_;
  double max_steps_;
  size_t threads_;
};

// The executor's profile as NodeMs per run (describe_node() names stripped to the node's name).
std::vector<NodeMs> executor_node_times(const ExecutorProfile& profile);

// --verify's result from a Python run: every output of the rewritten model against the original's, by name, with
// judge_outputs() at the precision the run converted to (`tolerances`; int8: at most `max_steps` quantisation steps).
VerifyResult verify_from_run(const PythonRun& run, const Tolerances& tolerances, double max_steps = 2.0);

// --bench's result from a Python run's samples.
BenchResult bench_from_run(const PythonRun& run, size_t threads);

}  // namespace dwdeconv::runtime_check
