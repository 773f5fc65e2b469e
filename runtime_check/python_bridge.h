// The bridge to the deployment runtimes (--runtime ort|litert|executorch): the project's Python module
// (python/dwdeconv_rewrite/runtimes) converts both models the way that runtime's users do, runs them on the inputs
// given here and times them; this side starts it in a scratch directory of its own, hands it the models and inputs
// as files and reads its JSON Lines answer. It stands beside the executor (executor.h) it stands in for: the
// decisions (inputs, tolerances, exit codes) stay with the caller.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "runtime_check/bench.h"
#include "runtime_check/tensor.h"
#include "runtime_check/verify.h"

namespace dwdeconv::runtime_check {

// What the inputs and outputs of a profiler's NodeMs name (the registry's "node_values").
enum class NodeValues {
  kNames,  // nothing the ONNX graph names: none (the executor), or the runtime's own layer names (OpenVINO)
  kOnnx,   // the values of the ONNX graph the runtime ran (ONNX Runtime's optimised graph)
};

// A row of python/dwdeconv_rewrite/runtimes/registry.json, the one list of the Python runtimes (embedded at build time).
struct PythonRuntime {
  std::string name;                             // what --runtime takes: ort, litert, executorch, openvino, mnn
  std::vector<std::string> aliases;             // the other names --runtime takes for it, lower case: tflite
  std::string display_name;                     // "ONNX Runtime"
  std::string summary;                          // how it converts and runs, for --help
  std::string pinned_requirements;              // the pinned environment the project measured with ("" none)
  std::vector<std::string> precisions;          // what --precision it converts to: fp32 always, fp16 and int8 where it can
  NodeValues node_values = NodeValues::kNames;  // what its per-node profile's inputs and outputs name
};

// The registry's runtimes, in its order.
const std::vector<PythonRuntime>& python_runtimes();

// The registry row named `name`, or nullptr.
const PythonRuntime* find_python_runtime(const std::string& name);

// The one minimum Python version of the Python side ("3.10"), as the registry (and pyproject.toml) says.
const std::string& python_minimum();

// The runtime's display name ("ONNX Runtime"); "XNNPACK" for a name the registry does not hold (the executor).
std::string display_name(const std::string& runtime);

// Where results came from: the runtime's name, a label for the summary line and the packages' versions.
struct RuntimeInfo {
  std::string name;   // xnnpack, ort, litert, executorch, openvino, mnn
  std::string label;  // "ONNX Runtime 1.32.0 (CPU provider)", "XNNPACK ... (this tool's executor)"
  std::vector<std::pair<std::string, std::string>> versions;
  std::string python;              // the interpreter, for a Python runtime
  std::string precision = "fp32";  // --precision both models ran at
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
  std::vector<NamedTensor> original_outputs;
  std::vector<NamedTensor> rewritten_outputs;
  std::vector<double> original_samples_ms;  // one per timed run, in order
  std::vector<double> rewritten_samples_ms;
  std::vector<NodeMs> original_nodes;
  std::vector<NodeMs> rewritten_nodes;
  NodeValues node_values = NodeValues::kNames;  // what the NodeMs' inputs and outputs name (the runtime's registry row)
  std::string original_outside;                 // ops left outside the XNNPACK delegate ("" when the runtime has none)
  std::string rewritten_outside;
  // The precision both models were converted to (fp32, fp16, int8), the quantisation step of each output that comes
  // out of an integer tensor (by output name: the step in output units), and what the converter did that the
  // precision does not say (int8: an op it left in float), per side.
  std::string precision = "fp32";
  std::map<std::string, QuantStep> original_steps;
  std::map<std::string, QuantStep> rewritten_steps;
  std::vector<std::string> notes;
};

// What --precision asks of a Python runtime: the precision, and for int8 the calibration samples (each one input set,
// as `inputs`), the same for both models.
struct Precision {
  std::string name = "fp32";
  std::vector<std::vector<NamedTensor>> calibration;
  double max_steps = 2.0;  // int8: the most quantisation steps an output may differ by
};

// How to reach a runtime's Python side: the registry name, the interpreter and the dwdeconv_rewrite package directory
// its code is imported from (the caller finds it: cli/runtime_python.h, find_python_package_dir).
struct PythonSide {
  std::string runtime;
  std::string python;
  std::string package;
};

// Why `package` cannot be the dwdeconv_rewrite package the runtimes are imported from, or "". It must hold
// runtimes/__main__.py, and nobody but this user or root may change what Python imports from it.
std::string package_problem(const std::string& package);

// Checks that the interpreter runs and has the runtime's packages. Errors (kUsage) name the interpreter, the missing
// packages and the pip command that installs them.
core::Status probe_python_runtime(const PythonSide& side);

// Converts and runs both models on the runtime, on `inputs` (one per graph input, in graph order), timing `runs`
// interleaved pairs when runs > 0 and profiling `profile_runs` runs of each. Errors: kInvalidModel when a converter
// fails (its stage and message) or a converted model fails to run; kUsage when the interpreter or the module cannot
// be started. Nothing of the run (scratch files, child processes) outlives it, however it ends.
// `precision` is passed on (--precision, and --calibration for int8).
core::Result<PythonRun> run_python_check(const PythonSide& side, const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                         const std::vector<NamedTensor>& inputs, size_t threads, size_t runs, size_t profile_runs,
                                         const Precision& precision = {});

}  // namespace dwdeconv::runtime_check
