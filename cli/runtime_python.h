// --runtime: where --verify, --bench and --compare run. `xnnpack` is the built-in executor (runtime_check/); `ort`,
// `litert` and `executorch` are the deployment runtimes, reached through the project's Python module
// (python/dwdeconv_rewrite/runtimes), which converts both models the way that runtime's users do, runs them on the
// inputs given here and times them. The decisions stay on this side: the inputs are the executor's (seeded or
// given), the outputs are compared under the same tolerances, and the exit codes are the tool's.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <onnx/onnx_pb.h>

#include "cli/options.h"
#include "core/result.h"
#include "rewrite/rewriter.h"
#include "runtime_check/bench.h"
#include "runtime_check/tensor.h"
#include "runtime_check/verify.h"

namespace dwdeconv::cli {

inline constexpr const char* kBuiltinRuntime = "xnnpack";

// "xnnpack, ort, litert, executorch".
std::string runtime_names();

// Declares --runtime, --python and --min-speedup on `app`.
void add_runtime_options(CLI::App& app, Options& opt);

// The usage error of the runtime options ("" when they make sense): an unknown --runtime, --runtime or --python
// without anything to run, --min-speedup without --bench.
std::string runtime_usage_problem(const Options& opt);

// Where results came from: the runtime's name, a label for the summary line and the packages' versions.
struct RuntimeInfo {
  std::string name;   // xnnpack, ort, litert, executorch
  std::string label;  // "ONNX Runtime 1.32.0 (CPU provider)", "XNNPACK ... (this tool's executor)"
  std::vector<std::pair<std::string, std::string>> versions;
  std::string python;  // the interpreter, for a Python runtime
};

// The built-in executor's RuntimeInfo.
RuntimeInfo builtin_runtime_info();

// What is known of opt.runtime before it runs: the executor's RuntimeInfo, or a Python runtime's name and display
// name (its versions come with its answer).
RuntimeInfo runtime_info_before_run(const Options& opt);

// The interpreter a Python runtime runs with: --python, else $DWDECONV_PYTHON, else python3 on PATH.
std::string python_interpreter(const Options& opt);

// The dwdeconv_rewrite package directory whose runtimes/ a Python --runtime runs: $DWDECONV_PYTHONPATH/dwdeconv_rewrite
// when set; else only where this binary's installation put it: the wheel's package (the binary is its bin/), the source
// tree the build was configured from (the binary in its build directory), or <prefix>/share/dwdeconv-rewrite/python
// (cmake --install). It must be owned by this user or root and writable by no one else. An error (kUsage) says what
// was looked at.
core::Result<std::string> find_python_package_dir();

// With a Python --runtime: checks that the interpreter runs and has the runtime's packages. Errors (kUsage) name the
// interpreter, the missing packages and the pip command that installs them. Ok at once for xnnpack.
core::Status probe_runtime(const Options& opt);

// One upsampler's time on the runtime timed, from its profiler (the per-node table of --bench).
struct UpsamplerTime {
  std::string name;   // the plan's name
  std::string form;
  std::string input_shape;  // "1x64x32x32", or "?" when shape inference does not know it
  double original_ms = 0;   // the original region's nodes, per run
  double rewritten_ms = 0;  // the emitted nodes, per run
};

// What a --runtime adds to the report.
struct RuntimeRunInfo {
  RuntimeInfo runtime;
  std::optional<double> min_speedup;   // --min-speedup
  std::vector<UpsamplerTime> upsamplers;  // with --bench, when the runtime has a profiler
};

// A profiler's time per node: the node's name as the runtime names it, its op type, ms per run, and (ONNX Runtime)
// the values it reads and writes in the graph the runtime ran.
struct NodeMs {
  std::string node;
  std::string op;
  double ms = 0;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

// Both models on a Python runtime: the outputs for the comparison, the timed runs and the profile.
struct PythonRun {
  RuntimeInfo runtime;
  std::vector<runtime_check::NamedTensor> original_outputs;
  std::vector<runtime_check::NamedTensor> rewritten_outputs;
  std::vector<double> original_samples_ms;  // one per timed run, in order
  std::vector<double> rewritten_samples_ms;
  std::vector<NodeMs> original_nodes;
  std::vector<NodeMs> rewritten_nodes;
  std::string original_outside;   // ops left outside the XNNPACK delegate ("" when the runtime has none)
  std::string rewritten_outside;
};

// Converts and runs both models on opt.runtime, on `inputs` (one per graph input, in graph order), timing `runs`
// interleaved pairs when runs > 0 and profiling `profile_runs` runs of each. Errors: kInvalidModel when a converter
// fails (its stage and message) or a converted model fails to run; kUsage when the interpreter or the module cannot
// be started.
core::Result<PythonRun> run_on_python_runtime(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                              const std::vector<runtime_check::NamedTensor>& inputs, const Options& opt,
                                              size_t runs, size_t profile_runs);

// The inputs the executor would use for `model`: the given ones, every other graph input seeded random.
core::Result<std::vector<runtime_check::NamedTensor>> runtime_inputs(const onnx::ModelProto& model,
                                                                     const std::map<std::string, std::vector<int64_t>>& shapes,
                                                                     const std::vector<runtime_check::NamedTensor>& given,
                                                                     uint64_t seed);

// --verify's result from a Python run: every output of the rewritten model against the original's, by name, under
// `tolerances`.
runtime_check::VerifyResult verify_from_run(const PythonRun& run, const runtime_check::Tolerances& tolerances);

// --bench's result from a Python run's samples.
runtime_check::BenchResult bench_from_run(const PythonRun& run, size_t threads);

// One rewritten upsampler of the main graph as a region of the original: the node the plan names and, walking back,
// the nodes feeding it whose outputs the rewrite removed (pointers into `original`), the nodes emitted for it
// (pointers into `rewritten`), its input and output values and what shape inference says of them.
struct UpsamplerRegion {
  std::string name;
  std::string form;
  std::vector<const onnx::NodeProto*> original_nodes;
  std::vector<const onnx::NodeProto*> emitted_nodes;
  std::string input;
  std::string output;
  std::optional<onnx::TypeProto> input_type;
  std::optional<onnx::TypeProto> output_type;
  std::string input_shape;  // "1x64x32x32", "?" where unknown
};

// The regions of `result`'s rewritten upsamplers; `inputs` fix the original's input dims for shape inference.
std::vector<UpsamplerRegion> upsampler_regions(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                               const rewrite::RewriteResult& result,
                                               const std::vector<runtime_check::NamedTensor>& inputs);

// The per-node table: per rewritten upsampler of `result`, the profiler's time of the original region (the named
// node and the nodes feeding it that the rewrite removed) and of the emitted nodes. `original` is the model before
// the rewrite; `inputs` fix its input dims for shape inference.
std::vector<UpsamplerTime> upsampler_times(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                           const rewrite::RewriteResult& result, const std::vector<NodeMs>& original_nodes,
                                           const std::vector<NodeMs>& rewritten_nodes,
                                           const std::vector<runtime_check::NamedTensor>& inputs);

// The executor's profile as NodeMs (describe_node() names stripped to the node's name).
std::vector<NodeMs> executor_node_times(const runtime_check::ExecutorProfile& profile);

// The table for the log: "  upsampler  form  input  original ms  rewritten ms  ratio" rows.
std::string format_upsampler_times(const std::vector<UpsamplerTime>& rows);

// "; 1.38x faster on LiteRT 2.3.0 (XNNPACK delegate)", "; 0.61x (slower) on ..." or "; 1.00x (as fast) on ...".
std::string speedup_text(double speedup, const RuntimeInfo& runtime);

// "" or, when --target names a runtime other than --runtime, "; --runtime litert would check on the target's runtime".
std::string target_runtime_note(const Options& opt);

}  // namespace dwdeconv::cli
