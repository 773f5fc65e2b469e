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

#include <onnx/onnx_pb.h>

#include "cli/options.h"
#include "cli/upsampler_table.h"
#include "core/result.h"
#include "rewrite/rewriter.h"
#include "runtime_check/bench.h"
#include "runtime_check/python_bridge.h"
#include "runtime_check/tensor.h"
#include "runtime_check/verify.h"

// CLI11 is included only where options are declared or parsed: its header alone takes seconds to compile.
namespace CLI {
class App;
}  // namespace CLI

namespace dwdeconv::cli {

// The bridge's types, named in cli:: so the CLI's sources need not spell runtime_check:: for them.
using runtime_check::display_name;
using runtime_check::PythonRun;
using runtime_check::RuntimeInfo;

inline constexpr const char* kBuiltinRuntime = "xnnpack";

// --precision int8 without --input files: how many seeded input sets calibrate both models.
inline constexpr uint64_t kCalibrationSamples = 8;

// "xnnpack, ort, litert, executorch, openvino, mnn".
std::string runtime_names();

// The runtime `name` means: any case, and the aliases of the runtimes' registry (tflite: litert); "" for none.
std::string canonical_runtime_name(const std::string& name);

// Every alias --runtime takes, in the registry's order: "onnxruntime, tflite, ov" (for the shell completions).
std::vector<std::string> runtime_aliases();

// Declares --runtime, --python and --min-speedup on `app`.
void add_runtime_options(CLI::App& app, Options& opt);

// The usage error of the runtime options ("" when they make sense): an unknown --runtime, --runtime or --python
// without anything to run, --min-speedup without --bench.
std::string runtime_usage_problem(const Options& opt);

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

// What a --runtime adds to the report.
struct RuntimeRunInfo {
  RuntimeInfo runtime;
  std::optional<double> min_speedup;      // --min-speedup
  std::vector<UpsamplerTime> upsamplers;  // with --bench, when the runtime has a profiler
};

// Converts and runs both models on opt.runtime, on `inputs` (one per graph input, in graph order), timing `runs`
// interleaved pairs when runs > 0 and profiling `profile_runs` runs of each. Errors: kInvalidModel when a converter
// fails (its stage and message) or a converted model fails to run; kUsage when the interpreter or the module cannot
// be started.
core::Result<PythonRun> run_on_python_runtime(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                              const std::vector<runtime_check::NamedTensor>& inputs, const Options& opt, size_t runs,
                                              size_t profile_runs);

// The inputs the executor would use for `model`: the given ones, every other graph input seeded random.
core::Result<std::vector<runtime_check::NamedTensor>> runtime_inputs(const onnx::ModelProto& model,
                                                                     const std::map<std::string, std::vector<int64_t>>& shapes,
                                                                     const std::vector<runtime_check::NamedTensor>& given, uint64_t seed);

// "; 1.38x faster on LiteRT 2.3.0 (XNNPACK delegate)", "; 0.61x (slower) on ..." or "; 1.00x (as fast) on ...".
std::string speedup_text(double speedup, const RuntimeInfo& runtime);

// "" or, when --target names a runtime other than --runtime, "; --runtime litert would check on the target's runtime";
// with the default target, what --runtime's own target measured there. With --compare, which writes nothing, only
// the latter, and never which target wrote OTHER: the model does not say.
std::string target_runtime_note(const Options& opt);

}  // namespace dwdeconv::cli
