#include "cli/runtime_python.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/text.h"
#include "onnx_io/tensor.h"
#include "runtime_check/tensor_io.h"

namespace dwdeconv::cli {
namespace {

namespace fs = std::filesystem;

// --runtime's names: the executor, then the registry's Python runtimes (runtime_check/python_bridge.h).
const std::vector<std::string> kRuntimes = [] {
  std::vector<std::string> names = {kBuiltinRuntime};
  for (const auto& r : runtime_check::python_runtimes()) names.push_back(r.name);
  return names;
}();

bool is_python_runtime(const std::string& name) { return name != kBuiltinRuntime; }

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

std::string canonical_runtime_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (std::find(kRuntimes.begin(), kRuntimes.end(), lower) != kRuntimes.end()) return lower;
  // The other names users give a runtime, from its registry row (onnx2tf and TFLite users say tflite).
  for (const auto& r : runtime_check::python_runtimes()) {
    if (std::find(r.aliases.begin(), r.aliases.end(), lower) != r.aliases.end()) return r.name;
  }
  return "";
}

std::vector<std::string> runtime_aliases() {
  std::vector<std::string> aliases;
  for (const auto& r : runtime_check::python_runtimes()) aliases.insert(aliases.end(), r.aliases.begin(), r.aliases.end());
  return aliases;
}

std::string runtime_names() {
  std::string s;
  for (const auto& r : kRuntimes) s += (s.empty() ? "" : ", ") + r;
  return s;
}

std::string runtime_usage_problem(const Options& opt) {
  if (std::find(kRuntimes.begin(), kRuntimes.end(), opt.runtime) == kRuntimes.end()) {
    return "--runtime: unknown runtime '" + opt.runtime + "' (known: " + runtime_names() + ")";
  }
  if (opt.tune && (!opt.compare.empty() || opt.check)) return "--tune decides a rewrite: it does not combine with --compare or --check";
  const bool running = opt.verify || opt.bench || !opt.compare.empty() || opt.tune;
  if (!running && (opt.runtime != kBuiltinRuntime || !opt.python.empty())) {
    return "--runtime and --python apply to --verify, --bench, --compare and --tune";
  }
  if (!opt.python.empty() && !is_python_runtime(opt.runtime)) {
    std::string names;
    const auto& runtimes = runtime_check::python_runtimes();
    for (size_t k = 0; k < runtimes.size(); ++k) names += (k == 0 ? "" : k + 1 == runtimes.size() ? " or " : ", ") + runtimes[k].name;
    return "--python applies to --runtime " + names;
  }
  if (opt.min_speedup && !opt.bench) return "--min-speedup gates the timing of --bench: add --bench";
  if (opt.precision != "fp32") {
    if (opt.tune) return "--precision " + opt.precision + " with --tune: --tune times fp32 only";
    if (!opt.verify && !opt.bench && opt.compare.empty()) {
      return "--precision applies to --verify, --bench and --compare (on a --runtime whose row lists it)";
    }
    // Each runtime converts to what its registry row lists; the executor and ONNX Runtime's CPU provider run the
    // models as written (fp32), and no precision is approximated by another.
    std::string can;
    for (const auto& r : runtime_check::python_runtimes()) {
      if (std::find(r.precisions.begin(), r.precisions.end(), opt.precision) != r.precisions.end())
        can += (can.empty() ? "" : ", ") + r.name;
    }
    const auto* python = runtime_check::find_python_runtime(opt.runtime);
    if (python == nullptr || std::find(python->precisions.begin(), python->precisions.end(), opt.precision) == python->precisions.end()) {
      std::string runs = "fp32 only";
      if (python != nullptr && python->precisions.size() > 1) {
        runs.clear();
        for (const auto& p : python->precisions) runs += (runs.empty() ? "" : ", ") + p;
      }
      return "--precision " + opt.precision + ": --runtime " + opt.runtime + " runs " + runs + "; " + opt.precision +
             " runs on --runtime " + (can.empty() ? std::string("none") : can);
    }
  }
  if (opt.max_steps && opt.precision != "int8") return "--max-steps bounds --precision int8's comparison: add --precision int8";
  if (opt.precision == "int8" && (opt.atol || opt.rtol)) {
    return "--atol and --rtol are float tolerances; --precision int8 is judged in quantisation steps: give --max-steps";
  }
  return "";
}

RuntimeInfo builtin_runtime_info() {
  RuntimeInfo info;
  info.name = kBuiltinRuntime;
  info.label = std::string("XNNPACK ") + DWDECONV_XNNPACK_VERSION + " (this tool's executor)";
  info.versions = {{"xnnpack", DWDECONV_XNNPACK_VERSION}};
  return info;
}

RuntimeInfo runtime_info_before_run(const Options& opt) {
  if (!is_python_runtime(opt.runtime)) return builtin_runtime_info();
  RuntimeInfo info;
  info.name = opt.runtime;
  info.label = display_name(opt.runtime);
  info.python = python_interpreter(opt);
  return info;
}

std::string python_interpreter(const Options& opt) {
  if (!opt.python.empty()) return opt.python;
  const char* env = std::getenv("DWDECONV_PYTHON");
  return env != nullptr && *env != '\0' ? env : "python3";
}

core::Result<std::string> find_python_package_dir() {
  // Where this installation put the package, and nowhere else: never a parent guessed from where the binary happens
  // to be (a build directory made in /tmp would have made /tmp itself the search path).
  std::vector<std::pair<fs::path, std::string>> candidates;  // (package directory, where it comes from)
  if (const char* env = std::getenv("DWDECONV_PYTHONPATH"); env != nullptr && *env != '\0') {
    candidates.push_back({fs::path(env) / "dwdeconv_rewrite", "$DWDECONV_PYTHONPATH"});
  }
  const fs::path exe = executable_dir();
#if DWDECONV_WHEEL_LAYOUT
  // The wheel: <site-packages>/dwdeconv_rewrite/bin/dwdeconv-rewrite, the package one level up.
  if (!exe.empty() && exe.filename() == "bin" && exe.parent_path().filename() == "dwdeconv_rewrite") {
    candidates.push_back({exe.parent_path(), "the wheel's package"});
  }
#else
  if (!exe.empty() && exe == fs::path(DWDECONV_BUILD_CLI_DIR)) {
    // The binary where it was built: the source tree the build was configured from.
    candidates.push_back({fs::path(DWDECONV_SOURCE_PYTHON_DIR) / "dwdeconv_rewrite", "the source tree"});
  } else if (!exe.empty()) {
    // cmake --install: <prefix>/bin/dwdeconv-rewrite, the package in <prefix>/share/dwdeconv-rewrite/python.
    candidates.push_back({exe.parent_path() / "share" / "dwdeconv-rewrite" / "python" / "dwdeconv_rewrite", "the installation"});
  }
#endif
  std::string searched;
  for (const auto& [dir, origin] : candidates) {
    std::error_code ec;
    const std::string problem = runtime_check::package_problem(dir.string());
    if (problem.empty()) return fs::weakly_canonical(dir, ec).string();
    searched += (searched.empty() ? "" : "; ") + dir.lexically_normal().string() + " (" + origin + "): " + problem;
    if (origin == "$DWDECONV_PYTHONPATH") break;  // asked for by name: nothing else stands in for it
  }
  return core::Error{core::ErrorKind::kUsage,
                     "--runtime: the Python module dwdeconv_rewrite.runtimes was not found where this "
                     "installation puts it (" +
                         (searched.empty() ? std::string("no place known for this binary") : searched) +
                         "); set DWDECONV_PYTHONPATH to the folder that holds dwdeconv_rewrite/runtimes/"};
}

core::Status probe_runtime(const Options& opt) {
  if (!is_python_runtime(opt.runtime) || !(opt.verify || opt.bench || !opt.compare.empty() || opt.tune)) return core::Ok{};
  auto package = find_python_package_dir();
  if (!package) return package.error();
  const std::string python = python_interpreter(opt);
  spdlog::debug("--runtime {}: {} with the Python module from {}", opt.runtime, python, *package);
  return runtime_check::probe_python_runtime({opt.runtime, python, *package});
}

core::Result<std::vector<runtime_check::NamedTensor>> runtime_inputs(const onnx::ModelProto& model,
                                                                     const std::map<std::string, std::vector<int64_t>>& shapes,
                                                                     const std::vector<runtime_check::NamedTensor>& given, uint64_t seed) {
  if (auto ok = runtime_check::check_given_inputs(model, given, shapes); !ok) return ok.error();
  std::map<std::string, std::vector<int64_t>> dims = shapes;
  for (const auto& g : given) dims[g.name] = g.tensor.dims;  // a given input fixes its own dims
  auto inputs = runtime_check::make_random_inputs(model, dims, seed);
  if (!inputs) return inputs.error();
  // make_random_inputs gives each input its declared type; a given file of another type of the same kind (a
  // float64 or float16 file for a float input, int32 for int64) is converted to it, as the executor computes in
  // the declared type too, so that every runtime is fed the same values in the type the model declares.
  for (auto& in : *inputs) {
    for (const auto& g : given) {
      if (g.name != in.name) continue;
      const int32_t declared = in.tensor.dtype;
      in = g;
      if (in.tensor.dtype == declared || declared == onnx::TensorProto::UNDEFINED) continue;
      if (in.tensor.is_float() && runtime_check::is_float_type(declared)) {
        for (auto& v : in.tensor.f) v = runtime_check::round_to_type(v, declared);
      } else if (!in.tensor.is_float() && runtime_check::is_integer_type(declared)) {
        for (auto& v : in.tensor.i) v = runtime_check::wrap_to_type(v, declared);
      } else {
        return core::Error{core::ErrorKind::kUsage, "--input " + g.name + ": the file holds " + runtime_check::describe_tensor(g.tensor) +
                                                        ", but the input is declared " + onnx_io::data_type_name(declared)};
      }
      in.tensor.dtype = declared;
    }
  }
  return inputs;
}

core::Result<PythonRun> run_on_python_runtime(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                              const std::vector<runtime_check::NamedTensor>& inputs, const Options& opt, size_t runs,
                                              size_t profile_runs) {
  auto package = find_python_package_dir();
  if (!package) return package.error();
  runtime_check::Precision precision;
  precision.name = opt.precision;
  if (opt.precision == "int8") {
    // The same calibration for both models: the --input files (one sample), else kCalibrationSamples seeded input
    // sets, none of them the input the comparison runs on.
    if (!opt.input_files.empty()) {
      precision.calibration = {inputs};
    } else {
      std::map<std::string, std::vector<int64_t>> shapes;
      for (const auto& in : inputs) shapes[in.name] = in.tensor.dims;
      for (uint64_t k = 1; k <= kCalibrationSamples; ++k) {
        auto sample = runtime_inputs(original, shapes, {}, opt.seed + k);
        if (!sample) return sample.error();
        precision.calibration.push_back(std::move(*sample));
      }
    }
  }
  auto run = runtime_check::run_python_check({opt.runtime, python_interpreter(opt), *package}, original, rewritten, inputs, opt.threads,
                                             runs, profile_runs, precision);
  if (run && opt.precision != "fp32") {
    run->runtime.precision = opt.precision;
    run->runtime.label += " at " + opt.precision;
  }
  return run;
}

std::string speedup_text(double speedup, const RuntimeInfo& runtime) {
  char figure[32];
  std::snprintf(figure, sizeof figure, "%.2f", speedup);
  // Said by the figure shown: 0.999 prints as 1.00, which is neither faster nor (visibly) slower.
  const char* how = std::string(figure) == "1.00" ? "x (as fast) on " : speedup > 1 ? "x faster on " : "x (slower) on ";
  return std::string("; ") + figure + how + runtime.label;
}

std::string target_runtime_note(const Options& opt) {
  if (!opt.compare.empty()) {
    // --compare rewrites nothing, and OTHER records no target: --target says nothing of it, and OTHER may come from
    // any target or tool. What is known is what the runtime's own target measured there.
    for (const auto& own : rewrite::targets()) {
      if (own.runs_on == opt.runtime && !own.headline.empty() && opt.runtime != kBuiltinRuntime) {
        return "; " + core::printable(opt.compare) + " does not say which target wrote it: --target " + own.name + ", " +
               display_name(own.runs_on) + "'s own, measured " + own.headline + " there (BENCHMARKS.md)";
      }
    }
    return "";
  }
  const rewrite::Target* target = rewrite::find_target(opt.target);
  if (target != nullptr && target->runs_on.empty()) {
    // The default is meant for every runtime, so it keeps what any of them runs slower: the runtime's own target is
    // the form measured there.
    for (const auto& own : rewrite::targets()) {
      if (own.runs_on == opt.runtime && !own.headline.empty() && opt.runtime != kBuiltinRuntime) {
        return "; that is the default target's form, meant for every runtime: --target " + own.name + ", " + display_name(own.runs_on) +
               "'s own, measured " + own.headline + " there (BENCHMARKS.md)";
      }
    }
  }
  if (target == nullptr || target->runs_on.empty() || target->runs_on == opt.runtime) return "";
  return "; --target " + opt.target + " ships to " + display_name(target->runs_on) + ": --runtime " + target->runs_on +
         " would check there";
}

}  // namespace dwdeconv::cli
