#include "cli/run.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <onnx/defs/schema.h>
#include <spdlog/spdlog.h>

#include "cli/batch_inputs.h"
#include "cli/exit_codes.h"
#include "cli/input_shape.h"
#include "cli/model_stats.h"
#include "cli/output_files.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "cli/runtime_python.h"
#include "cli/tune.h"
#include "core/text.h"
#include "onnx_io/external_data.h"
#include "onnx_io/model_io.h"
#include "onnx_io/validate.h"
#include "rewrite/rewriter.h"
#include "runtime_check/bench.h"
#include "runtime_check/graph_match.h"
#include "runtime_check/tensor_io.h"
#include "runtime_check/verify.h"

namespace dwdeconv::cli {
namespace {

int fail(int code, const std::string& message) {
  spdlog::error("{}", message);
  return code;
}

// Logs the time since the previous mark at debug level (-v), to show where a run spends its time.
class PhaseTimer {
 public:
  void mark(const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    spdlog::debug("{}: {:.3f} s", phase, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Said instead of a bare std::bad_alloc.
std::string out_of_memory(const std::string& input, const std::string& doing) {
  return "out of memory while " + doing + " " + input + "; lower --max-phases if it was raised, or free memory";
}

int exit_code_for(const core::Error& e) {
  switch (e.kind) {
    case core::ErrorKind::kUsage: return kExitUsage;
    case core::ErrorKind::kCheckFailed: return kExitCheckFailed;
    default: return kExitInvalidModel;
  }
}

// What the executor needs from the command line, shared by --verify, --compare and --bench.
struct RuntimeSetup {
  std::vector<InputShapeArg> input_shapes;  // resolved per model (a bare shape names its only input)
  std::vector<runtime_check::NamedTensor> inputs;
  std::function<void(const std::string&)> progress;  // empty unless stderr is a terminal
};

// Parses --input-shape and loads --input files, once per run; errors are usage errors or unreadable input files.
core::Result<RuntimeSetup> runtime_setup(const Options& opt) {
  RuntimeSetup setup;
  for (const auto& text : opt.input_shapes) {
    auto parsed = parse_input_shape_arg(text);
    if (!parsed) return parsed.error();
    setup.input_shapes.push_back(std::move(*parsed));
  }
  for (const auto& text : opt.input_files) {
    const auto eq = text.find('=');
    const std::string path = input_file_path(text);
    auto tensor = runtime_check::load_tensor_file(path);
    if (!tensor) return tensor.error();
    if (eq != std::string::npos) tensor->name = text.substr(0, eq);
    // XNNPACK's output clamps (min -inf, max +inf) do not keep NaN: each path turns it into -inf or +inf its own
    // way, and an infinity makes NaN wherever a model computes 0 * inf or inf - inf, so the executor's runs on such
    // inputs are not the models' (a correct rewrite failed, a wrong pair passed). --bench only times, so it may run them.
    const bool compares = opt.verify || !opt.compare.empty();
    for (int64_t k = 0; compares && tensor->tensor.is_float() && k < tensor->tensor.numel(); ++k) {
      if (const double x = tensor->tensor.get(k); !std::isfinite(x)) {
        const std::string what = std::isnan(x) ? "NaN" : x > 0 ? "inf" : "-inf";
        return core::Error{core::ErrorKind::kUsage,
                           "--input " + path + ": element " + std::to_string(k) + " is " + what + "; --verify and --compare "
                           "cannot compare non-finite inputs, since XNNPACK's output clamps do not keep NaN (each model "
                           "turns a NaN, also one made from an infinity by 0 * inf or inf - inf, into -inf or +inf its own "
                           "way): give an input with finite values"};
      }
    }
    setup.inputs.push_back(std::move(*tensor));
  }
  // A progress line on stderr, only for a person watching a terminal.
  if (opt.verbosity >= 0 && isatty(STDERR_FILENO)) {
    setup.progress = [](const std::string& line) { std::fprintf(stderr, "\r\033[K%s", line.c_str()); };
  }
  return setup;
}

void clear_progress(const RuntimeSetup& setup) {
  if (setup.progress) std::fprintf(stderr, "\r\033[K");
}

// A verification's summary, line by line: info when it passed, error when it did not. `prefix` names the model in
// a batch.
void log_verify_summary(const runtime_check::VerifyResult& result, const std::string& prefix) {
  std::istringstream lines(result.summary());
  for (std::string line; std::getline(lines, line);) {
    if (result.passed) {
      spdlog::info("{}{}", prefix, line);
    } else {
      spdlog::error("{}{}", prefix, line);
    }
  }
}

// Runs the verifier and logs its summary; the result, or the reason nothing could be verified.
// `record` (null for --compare) is the rewrite that wrote `rewritten`: per-node mode checks the regions it recorded.
// `prefix` names the model on every line in a batch ("a.onnx: "); `log` gets a phase per model run.
core::Result<runtime_check::VerifyResult> run_verify(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                                     const Options& opt, const RuntimeSetup& setup,
                                                     const std::string& model_path, PhaseLog& log, const std::string& prefix,
                                                     const rewrite::RewriteResult* record) {
  runtime_check::VerifyOptions vo;
  auto shapes = resolve_input_shapes(setup.input_shapes, original, model_path);
  if (!shapes) return shapes.error();
  vo.input_shapes = *shapes;
  vo.inputs = setup.inputs;
  vo.seed = opt.seed;
  vo.threads = opt.threads;
  vo.tolerances = {opt.atol, opt.rtol};
  vo.progress = setup.progress ? setup.progress : log.callback();
  if (record != nullptr) {
    vo.regions.emplace();
    for (const auto& n : record->nodes) {
      if (n.rewritten && n.summary.graph_path == "main") vo.regions->push_back(n.region);
    }
  }
  auto result = runtime_check::verify_models(original, rewritten, vo);
  clear_progress(setup);
  if (!result) return result;  // the caller's failure ends the phase as failed
  log.end();
  log_verify_summary(*result, prefix);
  spdlog::debug("placement:\n{}", result->placement);
  return result;
}

// The bench's one line: where it ran, the medians with their spread, and the ratio ("runs" on the executor, "pairs"
// on a Python runtime, as each counts them). `prefix` names the model in a batch.
void log_bench_line(const runtime_check::BenchResult& b, const std::string& where, const char* counted, const std::string& prefix) {
  if (b.original_samples_ms.empty() || b.rewritten_samples_ms.empty()) return;
  const auto [olo, ohi] = std::minmax_element(b.original_samples_ms.begin(), b.original_samples_ms.end());
  const auto [rlo, rhi] = std::minmax_element(b.rewritten_samples_ms.begin(), b.rewritten_samples_ms.end());
  spdlog::info("{}bench on {} ({} thread{}, median [min-max] of {} interleaved {}): original {:.3f} [{:.3f}-{:.3f}] ms, "
               "rewritten {:.3f} [{:.3f}-{:.3f}] ms, {:.2f}x", prefix, where, b.threads, b.threads == 1 ? "" : "s", b.runs,
               counted, b.original_ms, *olo, *ohi, b.rewritten_ms, *rlo, *rhi, b.speedup);
}

// Times both models on the executor and logs medians and the speedup.
core::Result<runtime_check::BenchResult> run_bench(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                                   const Options& opt, const RuntimeSetup& setup,
                                                   const std::string& model_path, PhaseLog& log, const std::string& prefix) {
  runtime_check::BenchOptions bo;
  auto shapes = resolve_input_shapes(setup.input_shapes, original, model_path);
  if (!shapes) return shapes.error();
  bo.input_shapes = *shapes;
  bo.inputs = setup.inputs;
  bo.seed = opt.seed;
  bo.threads = opt.threads;
  bo.runs = opt.runs;
  bo.profile_runs = 3;  // after the timed runs: the per-node table, and the profile -v prints
  bo.profile_top_nodes = static_cast<size_t>(-1);  // every node, for the per-node table
  bo.progress = setup.progress ? setup.progress : log.callback();
  log.start("bench: creating both executors (each runs its model once) and warming up");
  auto result = runtime_check::bench_models(original, rewritten, bo);
  clear_progress(setup);
  if (!result) return result;  // the caller's failure ends the phase as failed
  log.end();
  log_bench_line(*result, builtin_runtime_info().label, "runs", prefix);
  spdlog::debug("bench placement, original: {}", result->original_placement);
  spdlog::debug("bench placement, rewritten: {}", result->rewritten_placement);
  if (opt.verbosity > 0) {
    spdlog::debug("profile of the original model (separate runs):\n{}", runtime_check::format_profile(result->original_profile));
    spdlog::debug("profile of the rewritten model (separate runs):\n{}", runtime_check::format_profile(result->rewritten_profile));
  }
  return result;
}

// What --verify and --bench found on opt.runtime, and where they ran.
struct RuntimeChecks {
  std::optional<runtime_check::VerifyResult> verify;
  std::optional<runtime_check::BenchResult> bench;
  RuntimeRunInfo info;
};

// Logs the per-node table, one line each, when there is one.
void log_upsampler_times(const std::vector<UpsamplerTime>& rows, const std::string& where) {
  if (rows.empty()) return;
  spdlog::info("per upsampler on {} (profiled runs after the timed ones):", where);
  std::istringstream lines(format_upsampler_times(rows));
  for (std::string line; std::getline(lines, line);) spdlog::info("{}", line);
}

// Runs --verify (when `verify`) and --bench (when `bench`) on opt.runtime. The executor verifies first and times
// only a model that passed; a Python runtime converts and runs both models once for both. `result` (null for
// --compare) names the upsamplers of the per-node table. An error's message starts with `verify_prefix` or
// `bench_prefix` when the executor's verification or timing failed.
core::Result<RuntimeChecks> run_checks(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                       const rewrite::RewriteResult* result, const Options& opt, const RuntimeSetup& setup,
                                       const std::string& model_path, PhaseLog& log, const std::string& prefix, bool verify,
                                       bool bench, const std::string& verify_prefix, const std::string& bench_prefix) {
  RuntimeChecks checks;
  checks.info.min_speedup = opt.min_speedup;
  // One interface check, by name, before any runtime runs either model: the same rule and exit code (1) on every
  // runtime, whatever the runtime would have made of a model fed or read differently.
  if (const std::string difference = runtime_check::interface_difference(original, rewritten); !difference.empty()) {
    checks.info.runtime = runtime_info_before_run(opt);
    checks.verify = runtime_check::interface_mismatch(difference);
    log_verify_summary(*checks.verify, prefix);
    return checks;
  }
  if (const std::string note = runtime_check::interface_order_note(original, rewritten); !note.empty()) {
    spdlog::warn("{}{}", prefix, note);
  }
  // The inputs a check can be fed meaningfully: the same rule, before any runtime runs, on every runtime.
  if (verify) {
    if (auto fed = runtime_check::check_verifiable_inputs(original, setup.inputs); !fed) {
      return core::Error{fed.error().kind, verify_prefix + fed.error().message};
    }
  }
  if (opt.runtime == kBuiltinRuntime) {
    checks.info.runtime = builtin_runtime_info();
    if (verify) {
      auto verified = run_verify(original, rewritten, opt, setup, model_path, log, prefix, result);
      if (!verified) return core::Error{verified.error().kind, verify_prefix + verified.error().message};
      checks.verify = *verified;
      if (!verified->passed) return checks;
    }
    if (bench) {
      auto timed = run_bench(original, rewritten, opt, setup, model_path, log, prefix);
      if (!timed) return core::Error{timed.error().kind, bench_prefix + timed.error().message};
      checks.bench = *timed;
      if (result != nullptr) {
        auto shapes = resolve_input_shapes(setup.input_shapes, original, model_path);
        auto inputs = shapes ? runtime_inputs(original, *shapes, setup.inputs, opt.seed)
                             : core::Result<std::vector<runtime_check::NamedTensor>>(shapes.error());
        checks.info.upsamplers = upsampler_times(original, rewritten, *result, executor_node_times(timed->original_profile),
                                                 executor_node_times(timed->rewritten_profile),
                                                 inputs ? *inputs : std::vector<runtime_check::NamedTensor>{});
        log_upsampler_times(checks.info.upsamplers, checks.info.runtime.label);
      }
    }
    return checks;
  }
  auto shapes = resolve_input_shapes(setup.input_shapes, original, model_path);
  if (!shapes) return core::Error{shapes.error().kind, "--runtime " + opt.runtime + ": " + shapes.error().message};
  auto inputs = runtime_inputs(original, *shapes, setup.inputs, opt.seed);
  if (!inputs) return core::Error{inputs.error().kind, "--runtime " + opt.runtime + ": " + inputs.error().message};
  if (setup.progress) setup.progress("converting and running both models on --runtime " + opt.runtime + " ...");
  // The per-node table's runs: each node's median over 3 to 10 profiled runs of each model, after the timed pairs.
  const size_t profile_runs = bench && result ? std::clamp<size_t>(opt.runs, 3, 10) : 0;
  auto run = run_on_python_runtime(original, rewritten, *inputs, opt, bench ? opt.runs : 0, profile_runs);
  clear_progress(setup);
  // --compare (no `result`) writes nothing anyway and names OTHER first; a rewrite says it wrote nothing.
  if (!run) return core::Error{run.error().kind, result ? run.error().message + "; nothing written" : verify_prefix + run.error().message};
  checks.info.runtime = run->runtime;
  if (verify) {
    checks.verify = verify_from_run(*run, {opt.atol, opt.rtol});
    log_verify_summary(*checks.verify, prefix);
    if (!checks.verify->passed) return checks;
  }
  if (bench) {
    checks.bench = bench_from_run(*run, opt.threads);
    const auto& b = *checks.bench;
    log_bench_line(b, run->runtime.label, "pairs", prefix);
    spdlog::debug("bench placement, original: {}", b.original_placement);
    spdlog::debug("bench placement, rewritten: {}", b.rewritten_placement);
    if (result != nullptr && (!run->original_nodes.empty() || !run->rewritten_nodes.empty())) {
      checks.info.upsamplers = upsampler_times(original, rewritten, *result, run->original_nodes, run->rewritten_nodes, *inputs);
      log_upsampler_times(checks.info.upsamplers, run->runtime.label);
    }
  }
  return checks;
}

// The --min-speedup gate: "" when the bench passes it (or there is none), else why it fails.
std::string speedup_shortfall(const Options& opt, const RuntimeChecks& checks) {
  if (!opt.min_speedup || !checks.bench || checks.bench->speedup >= *opt.min_speedup) return "";
  char gate[32], ran[32];
  std::snprintf(gate, sizeof gate, "%g", *opt.min_speedup);
  std::snprintf(ran, sizeof ran, "%.2f", checks.bench->speedup);
  return std::string("--min-speedup ") + gate + ": the rewritten model ran " + ran + "x as fast as the original on " +
         checks.info.runtime.label + " (medians of " + std::to_string(checks.bench->runs) + " interleaved runs), under the " + gate +
         "x asked for";
}

// Writes the report; kExitOk, or the I/O error's exit code after logging it.
int write_report(ReportFile& report, const std::string& json) {
  if (auto written = commit_report(report, json); !written) return fail(exit_code_for(written.error()), written.error().message);
  return kExitOk;
}

// --compare: verify OTHER against MODEL without rewriting anything. The report is written however it ends,
// except when it would be a file the run reads.
int run_compare(const Options& opt, const RuntimeSetup& setup, ReportFile& report) {
  const std::string& input = opt.models.front();
  RunInfo info;
  info.input = input;
  info.compared = opt.compare;
  PhaseLog log(input == "-" ? "<stdin>" : core::printable(input), phase_lines_wanted(opt.verbosity));
  auto finish = [&](int code, const std::string& message) {
    if (code != kExitOk) log.fail();
    if (!message.empty()) fail(code, message);
    info.exit_code = code;
    info.error = message;
    if (int written = write_report(report, report_json(info, {})); written != kExitOk) return written;
    return code;
  };
  log.start("load both models");
  auto loaded_original = onnx_io::load_model_with_external_data(input);
  auto loaded_other = onnx_io::load_model_with_external_data(opt.compare);
  log.end();
  // The report must not land on either model or their data.
  std::vector<RunFile> reads;
  add_compare_reads(input, loaded_original, reads);
  add_compare_reads(opt.compare, loaded_other, reads);
  add_input_tensor_files(opt, reads);
  std::vector<RunFile> writes;
  if (report.file) writes.push_back({report.file->path(), FileRole::kReport, ""});
  if (auto safe = refuse_overwrites(reads, writes, /*batch=*/false); !safe) return fail(exit_code_for(safe.error()), safe.error().message);
  if (!loaded_original) return finish(exit_code_for(loaded_original.error()), loaded_original.error().message);
  if (!loaded_other) return finish(exit_code_for(loaded_other.error()), loaded_other.error().message);
  const onnx::ModelProto& original = loaded_original->model;
  const onnx::ModelProto& other = loaded_other->model;
  info.opset = onnx_io::default_opset(original);
  // The executor runs models ONNX refuses (a value defined twice, an unknown attribute): judge both first, as a
  // rewrite judges its input and output, so that passing means OTHER is a model at all.
  log.start("validate both models");
  for (const auto& [path, model] : {std::pair<const std::string&, const onnx::ModelProto&>{input, original}, {opt.compare, other}}) {
    auto checked = onnx_io::validate_model(model, {});
    if (!checked) return finish(kExitInvalidModel, core::printable(path) + ": invalid model: " + checked.error().message);
    if (!checked->full) spdlog::warn("{}: {}", core::printable(path), checked->detail);
  }
  log.end();
  // Two models that are the same (as the rewrite leaves a model it rewrites nothing of) have nothing to time: a ratio of
  // two timings of one model is noise, not a speedup, and a --min-speedup over 1 cannot be met.
  const auto a_bytes = onnx_io::serialize_model(original), b_bytes = onnx_io::serialize_model(other);
  const bool same = a_bytes && b_bytes && *a_bytes == *b_bytes;
  if (same && opt.bench) {
    spdlog::info("{}: nothing to time: the two models are the same (1.00x)", core::printable(opt.compare));
    if (opt.min_speedup && *opt.min_speedup > 1.0) {
      char gate[32];
      std::snprintf(gate, sizeof gate, "%g", *opt.min_speedup);
      return finish(kExitCheckFailed, core::printable(opt.compare) + ": --min-speedup " + gate + ": the two models are the same (1.00x)");
    }
  }
  auto checked = run_checks(original, other, nullptr, opt, setup, input, log, "", /*verify=*/true, opt.bench && !same,
                            "cannot verify " + core::printable(opt.compare) + ": ", "");
  if (!checked) return finish(exit_code_for(checked.error()), checked.error().message);
  info.runtime = checked->info;
  info.verify = checked->verify;
  info.bench = checked->bench;
  if (!checked->verify->passed) return finish(kExitCheckFailed, core::printable(opt.compare) + ": verification failed");
  if (const std::string gate = speedup_shortfall(opt, *checked); !gate.empty()) return finish(kExitCheckFailed, core::printable(opt.compare) + ": " + gate);
  if (checked->bench) spdlog::info("{}: passed{}{}", core::printable(opt.compare), speedup_text(checked->bench->speedup, checked->info.runtime),
                                   target_runtime_note(opt));
  return finish(kExitOk, "");
}

// Where the output's tensors go: external data when the input had it or the command line asks for it. Every
// tensor that was external stays external, and each phase weight follows the weight it was gathered from.
onnx_io::ExternalSaveOptions external_save_options(const Options& opt, const std::string& output,
                                                   const std::set<std::string>& loaded_external,
                                                   const rewrite::RewriteResult& result) {
  onnx_io::ExternalSaveOptions ext;
  ext.data_name = data_file_name(opt, output, !loaded_external.empty());
  if (ext.data_name.empty()) return ext;
  ext.tensor_names = loaded_external;
  for (const auto& [derived, source] : result.derived_tensors) {
    if (loaded_external.count(source) != 0) ext.tensor_names.insert(derived);
  }
  if (!opt.external_data.empty() || opt.external_threshold) ext.threshold_bytes = opt.external_threshold.value_or(1024);
  return ext;
}

// "-" reads the model from stdin: it must fit in memory and cannot have external data (there is no directory).
core::Result<onnx_io::LoadedModel> load_input(const std::string& input) {
  if (input != "-") return onnx_io::load_model_with_external_data(input);
  std::string bytes{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  auto model = onnx_io::parse_model(bytes, "<stdin>");
  if (!model) return model.error();
  if (auto refused = onnx_io::refuse_external_data(*model, "<stdin>"); !refused) return refused.error();
  return onnx_io::LoadedModel{std::move(*model), {}, {}};
}

// Writes the output model: a file (atomically, with its external data if any), or stdout for "-".
core::Status save_output(onnx::ModelProto& model, const std::string& output, const onnx_io::ExternalSaveOptions& ext) {
  if (output != "-") return onnx_io::save_model_with_external_data(model, output, ext);
  if (!ext.data_name.empty()) {
    return core::Error{core::ErrorKind::kUsage, "-o -: a model with external data cannot be written to stdout; give a file path"};
  }
  return onnx_io::serialize_to_fd(model, STDOUT_FILENO);
}

// The outcome of one model: its exit code (0 when it succeeded), and what the report says about it.
struct ModelOutcome {
  RunInfo info;
  rewrite::RewriteResult result;
  bool overwrite_refused = false;  // a file it would write is one it reads: write nothing, not even the report
};

// Loads, validates, rewrites, checks and writes one model. Errors are logged here and end in info.exit_code.
ModelOutcome process_model(const Options& opt, const RuntimeSetup& setup, const std::string& input, const std::string& output,
                           bool batch) {
  ModelOutcome out;
  RunInfo& info = out.info;
  info.input = input;
  // The input's path as messages show it (core/text.h): a file name may hold a newline too.
  const std::string shown = input == "-" ? "<stdin>" : core::printable(input);
  PhaseLog log(shown, phase_lines_wanted(opt.verbosity));
  auto finish = [&out, &log](int code, const std::string& message) {
    log.fail();
    out.info.exit_code = fail(code, message);
    out.info.error = message;
    out.info.output.clear();  // a failed run wrote no model: the report says null for both
    out.info.validation.clear();
    return out;
  };
  PhaseTimer timer;
  const std::string prefix = batch ? shown + ": " : std::string();
  log.start("load");
  auto loaded = load_input(input);
  if (!loaded) return finish(exit_code_for(loaded.error()), loaded.error().message);
  onnx::ModelProto& model = loaded->model;
  if (!loaded->external_tensors.empty()) spdlog::debug("{}: {} tensors read from external data", shown, loaded->external_tensors.size());
  {
    std::vector<RunFile> reads;
    add_model_reads(input, loaded->data_files, reads);
    add_input_tensor_files(opt, reads);
    const auto writes = model_writes(opt, input, output, !loaded->external_tensors.empty());
    if (auto safe = refuse_overwrites(reads, writes, batch); !safe) {
      out.overwrite_refused = true;
      return finish(exit_code_for(safe.error()), safe.error().message);
    }
    if (auto safe = check_write_targets(writes); !safe) return finish(exit_code_for(safe.error()), safe.error().message);
  }
  info.opset = onnx_io::default_opset(model);
  timer.mark("load");

  // Judge the input first, so a broken input is blamed on the input and not on the rewrite.
  auto input_check = onnx_io::validate_model(model, {});
  if (!input_check) return finish(kExitInvalidModel, shown + ": invalid model: " + input_check.error().message);
  if (!input_check->full) spdlog::warn("{}: {}", shown, input_check->detail);
  timer.mark("validate input");
  const ModelStats before = model_stats(model);

  std::optional<onnx::ModelProto> original;
  if (opt.verify || opt.bench || opt.tune) original = model;  // verify, bench and tune run the model as it was

  rewrite::RewriteOptions ro;
  ro.emit.explicit_pad = opt.explicit_pad;
  ro.emit.max_phases = opt.max_phases;
  ro.only = {opt.only.begin(), opt.only.end()};
  ro.skip = {opt.skip.begin(), opt.skip.end()};
  if (!opt.forms.empty()) {
    ro.forms.clear();
    for (const auto& name : opt.forms) ro.forms.insert(*rewrite::form_by_name(name));  // usage_problem checked each name
  }
  ro.target = rewrite::find_target(opt.target);  // a known name: usage_problem checked it
  std::optional<core::Result<rewrite::RewriteResult>> attempt;
  log.start("rewrite");
  try {
    attempt.emplace(rewrite::rewrite_model(model, ro));
  } catch (const std::bad_alloc&) {
    // A raised --max-phases can plan more phases than memory holds.
    return finish(kExitInvalidModel, out_of_memory(shown, "rewriting"));
  }
  auto& rewritten = *attempt;
  if (!rewritten) return finish(exit_code_for(rewritten.error()), shown + ": " + rewritten.error().message);
  out.result = std::move(*rewritten);
  const rewrite::RewriteResult& result = out.result;
  timer.mark("rewrite");
  log.end();
  std::optional<RuntimeRunInfo> tuned;
  std::string tune_text;  // --tune's lines, for the --dry-run plan
  if (opt.tune && result.rewritten > 0) {
    // Each candidate alone on --runtime; the slower ones are skipped in a second rewrite of the original.
    auto shapes = resolve_input_shapes(setup.input_shapes, *original, input);
    if (!shapes) return finish(exit_code_for(shapes.error()), shown + ": --tune: " + shapes.error().message);
    auto inputs = runtime_inputs(*original, *shapes, setup.inputs, opt.seed);
    if (!inputs) return finish(exit_code_for(inputs.error()), shown + ": --tune: " + inputs.error().message);
    RuntimeInfo where;
    auto figures = tune_upsamplers(*original, model, result, ro, opt, *inputs, where);
    timer.mark("tune");
    if (!figures) return finish(exit_code_for(figures.error()), shown + ": --tune: " + figures.error().message);
    bool any_kept = false;
    for (const auto& f : *figures) {
      spdlog::info("{}{}", batch ? shown + ": " : std::string(), tune_line(f, where));
      any_kept = any_kept || !f.rewritten;
    }
    if (any_kept) {
      // Rewritten again from the original, now keeping what --tune did not measure faster: a kept zero_insertion
      // fold's ConvTranspose, untimed, is kept too.
      model = *original;
      ro.caller_keep = tune_keep_rule(result, *figures, where);
      auto second = rewrite::rewrite_model(model, ro);
      if (!second) return finish(exit_code_for(second.error()), shown + ": " + second.error().message);
      out.result = std::move(*second);
    }
    tuned.emplace();
    tuned->runtime = where;
    info.tune = *figures;
    info.runtime = tuned;
    // With --dry-run, the plan shows them too, after the model's header in a batch (printed with the plan, below).
    for (const auto& f : *figures) tune_text += tune_line(f, where) + "\n";
  }
  for (const auto& warning : result.warnings) spdlog::warn("{}: {}", shown, core::printable(warning));
  for (const auto& name : result.unmatched_names) {
    const std::string message = "--only/--skip name '" + name + "' matches no ConvTranspose or hand-written upsampler in " + input;
    // In a batch, each model has its own node names; a name missing from one model is not an error.
    if (!batch) return finish(kExitUsage, message);
    spdlog::debug("{}", message);
  }

  for (const auto& n : result.nodes) {
    if (n.rewritten) {
      spdlog::debug("{}: rewrote '{}' into {} nodes", shown, core::printable(n.summary.name), n.emitted_nodes.size());
    } else {
      const bool deconv = n.summary.form == rewrite::Form::kConvTranspose;
      spdlog::info("{}: kept {} '{}': {}", shown, deconv ? "ConvTranspose" : std::string(rewrite::form_name(n.summary.form)) + " upsampler", core::printable(n.summary.name), core::printable(n.reason));
    }
  }
  if (opt.dry_run) std::cout << (batch ? shown + ":\n" : std::string()) << tune_text << plan_text(result) << std::flush;
  const ModelStats after = model_stats(model);
  info.stats = std::make_pair(before, after);

  const bool writes_model = !opt.dry_run && !opt.check;
  std::string summary = std::string(writes_model ? "rewrote " : "would rewrite ") + std::to_string(result.rewritten) + " of " +
                        std::to_string(result.nodes.size()) + " " + upsampler_noun(result) + " (kept " + std::to_string(result.kept) + ")";
  if (writes_model) {
    log.start("validate the output");
    auto validation = onnx_io::validate_model(model, rewrite::emitted_node_names(result));
    if (!validation) {
      return finish(kExitInvalidModel, shown + ": the rewritten model failed validation, nothing written: " + validation.error().message);
    }
    log.end();
    if (!validation->full) spdlog::warn("{}: {}", shown, validation->detail);
    info.validation = validation->detail;
    timer.mark("validate output");

    if (opt.verify && result.rewritten == 0) {
      // The output is the input: running both would only test the executor, and fail on ops it lacks.
      runtime_check::VerifyResult nothing;
      nothing.mode = runtime_check::VerifyMode::kNone;
      nothing.mode_reason = "nothing was rewritten: the output is the input";
      nothing.passed = true;
      info.verify = nothing;
      spdlog::info("{}: nothing to verify: no node was rewritten, so the output is the input", shown);
      summary += "; nothing to verify";
    }
    const bool verify = opt.verify && result.rewritten > 0;
    // Nor to time: both sides would be the same model, and a ratio of two timings of it is noise, not a speedup.
    const bool bench = opt.bench && result.rewritten > 0;
    if (opt.bench && !bench) {
      spdlog::info("{}: nothing to time: no node was rewritten, so the output runs as the input does", shown);
      summary += "; nothing to time (1.00x: the output is the input)";
      if (opt.min_speedup && *opt.min_speedup > 1.0) {
        char gate[32];
        std::snprintf(gate, sizeof gate, "%g", *opt.min_speedup);
        return finish(kExitCheckFailed, shown + ": --min-speedup " + gate +
                                            ": no node was rewritten, so the output is the input (1.00x); nothing written");
      }
    }
    if (verify || bench) {
      auto checked = run_checks(*original, model, &result, opt, setup, input, log, prefix, verify, bench,
                                "cannot verify the rewrite, nothing written: ", "--bench: ");
      timer.mark("verify and bench");
      if (!checked) return finish(exit_code_for(checked.error()), shown + ": " + checked.error().message);
      info.runtime = checked->info;
      const std::string& where = checked->info.runtime.label;
      const bool builtin = opt.runtime == kBuiltinRuntime;
      if (checked->verify) {
        info.verify = *checked->verify;
        if (!checked->verify->passed) {
          return finish(kExitCheckFailed, shown + ": verification failed" + (builtin ? "" : " on " + where) + ", nothing written");
        }
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2g", checked->verify->max_abs_error());
        summary += std::string("; verified") + (builtin ? "" : " on " + where) + ": max abs error " + buf;
      }
      if (checked->bench) {
        info.bench = *checked->bench;
        summary += speedup_text(checked->bench->speedup, checked->info.runtime);
        if (const std::string gate = speedup_shortfall(opt, *checked); !gate.empty()) {
          return finish(kExitCheckFailed, shown + ": " + gate + "; nothing written");
        }
      }
      summary += target_runtime_note(opt);
    }

    const auto ext = external_save_options(opt, output, loaded->external_tensors, result);
    log.start("save " + output);
    auto saved = save_output(model, output, ext);
    if (!saved) return finish(exit_code_for(saved.error()), saved.error().message);  // "save ...: failed", not "done"
    log.end();
    if (!ext.data_name.empty()) spdlog::debug("{}: tensor data written to {}", output, ext.data_name);
    timer.mark("save");
    info.output = output;
  }
  if (opt.check && result.rewritten > 0) {
    for (const auto& n : result.nodes) {
      if (n.rewritten) {
        spdlog::error("{}: {} '{}' would be rewritten", shown,
                      n.summary.form == rewrite::Form::kConvTranspose ? "ConvTranspose" : std::string(rewrite::form_name(n.summary.form)) + " upsampler", core::printable(n.summary.name));
      }
    }
    return finish(kExitCheckFailed, shown + ": check failed: " + std::to_string(result.rewritten) + " of " +
                                             std::to_string(result.nodes.size()) + " " + upsampler_noun(result) + " would be rewritten");
  }
  spdlog::info("{}{}: {}", prefix, writes_model ? "changed" : "would change", stats_change_text(before, after));
  spdlog::info("{}{}{}", prefix, summary, writes_model ? " -> " + output : std::string());
  return out;
}

// A run that fails before any model is processed (on its --input files): logs the error, and the report says
// it for every model (a list in a batch), so a job that reads only the report sees it too.
int fail_before_run(const Options& opt, ReportFile& report, const core::Error& error, bool batch) {
  const int code = fail(exit_code_for(error), error.message);
  // Not over a file the run reads, which the per-model checks would have refused.
  std::vector<RunFile> reads, writes;
  if (report.file) writes.push_back({report.file->path(), FileRole::kReport, ""});
  std::vector<std::string> models = opt.models;
  if (!opt.compare.empty()) models.push_back(opt.compare);
  for (const auto& input : models) {
    auto data_files = onnx_io::model_data_files(input);
    add_model_reads(input, data_files ? *data_files : std::set<std::string>{}, reads);
  }
  add_input_tensor_files(opt, reads);
  if (auto safe = refuse_overwrites(reads, writes, batch); !safe) {
    fail(exit_code_for(safe.error()), safe.error().message);
    return code;
  }
  std::vector<std::string> entries;
  for (const auto& input : opt.models) {
    RunInfo info;
    info.exit_code = code;
    info.error = error.message;
    info.input = input;
    info.compared = opt.compare;
    entries.push_back(report_json(info, {}));
  }
  if (int written = write_report(report, batch ? report_list_json(entries) : entries.front()); written != kExitOk) return written;
  return code;
}

// One model, as `dwdeconv-rewrite MODEL -o OUT` (or --dry-run / --check).
int run_single(const Options& opt, const RuntimeSetup& setup, ReportFile& report) {
  const ModelOutcome out = process_model(opt, setup, opt.models.front(), opt.output, /*batch=*/false);
  // A refused overwrite writes nothing at all, not even the report (it may be the file in question).
  if (out.overwrite_refused) return out.info.exit_code;
  if (int code = write_report(report, report_json(out.info, out.result)); code != kExitOk) return code;
  return out.info.exit_code;
}

// Several models: each is processed on its own (one failing does not stop the others), -j at a time. The exit
// code is the highest of the models' codes, and the report is a list with one entry per model.
int run_batch(const Options& opt, const RuntimeSetup& setup, ReportFile& report) {
  std::vector<ModelOutcome> outcomes(opt.models.size());
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t i = next++; i < opt.models.size(); i = next++) {
      const std::string& input = opt.models[i];
      const std::string output = batch_output(opt, input);
      outcomes[i] = process_model(opt, setup, input, output, /*batch=*/true);
    }
  };
  // Shape inference forks a child; build libonnx's schema registry now, before there are other threads.
  (void)onnx::OpSchemaRegistry::Instance();
  std::vector<std::thread> workers;
  for (size_t j = 1; j < std::min(opt.jobs, opt.models.size()); ++j) workers.emplace_back(worker);
  worker();
  for (auto& t : workers) t.join();

  std::vector<std::string> entries;
  int code = kExitOk;
  size_t failed = 0;
  std::string failed_list;
  for (const auto& o : outcomes) {
    entries.push_back(report_json(o.info, o.result));
    code = std::max(code, o.info.exit_code);
    if (o.info.exit_code != kExitOk) {
      ++failed;
      failed_list += (failed_list.empty() ? ": " : ", ") + o.info.input + " (exit " + std::to_string(o.info.exit_code) + ")";
    }
  }
  if (int written = write_report(report, report_list_json(entries)); written != kExitOk) return written;
  const std::string line = "batch: " + std::to_string(opt.models.size()) + " models, " + std::to_string(opt.models.size() - failed) +
                           " ok, " + std::to_string(failed) + " failed" + failed_list;
  if (failed) {
    spdlog::error("{}", line);
  } else {
    spdlog::info("{}", line);
  }
  return code;
}

}  // namespace

int run(const Options& given) {
  // A directory among the models stands for its *.onnx files, in name order.
  auto expanded = expand_model_directories(given);
  if (!expanded) return fail(exit_code_for(expanded.error()), expanded.error().message);
  const Options& opt = *expanded;
  if (const std::string problem = usage_problem(opt); !problem.empty()) return fail(kExitUsage, problem);
  // A Python --runtime without its interpreter or packages is a usage error, found before anything is written.
  if (auto probed = probe_runtime(opt); !probed) return fail(exit_code_for(probed.error()), probed.error().message);
  const bool batch = opt.compare.empty() && (opt.models.size() > 1 || !opt.out_dir.empty() || opt.from_directory);
  if (batch) {
    if (auto safe = check_batch_files(opt); !safe) return fail(exit_code_for(safe.error()), safe.error().message);
  }
  // The output directory first, since the report may go into it; taken away again if the report cannot be staged.
  auto made_dirs = create_out_dir(opt.out_dir);
  if (!made_dirs) return fail(exit_code_for(made_dirs.error()), made_dirs.error().message);
  auto report = stage_report(opt);
  if (!report) {
    remove_made_dirs(*made_dirs);
    return fail(exit_code_for(report.error()), report.error().message);
  }
  // --input files and --input-shape are read once, for every model and for both --verify and --bench.
  auto setup = runtime_setup(opt);
  if (!setup) return fail_before_run(opt, *report, setup.error(), batch);
  try {
    if (!opt.compare.empty()) return run_compare(opt, *setup, *report);
    return batch ? run_batch(opt, *setup, *report) : run_single(opt, *setup, *report);
  } catch (const std::bad_alloc&) {
    return fail(kExitInvalidModel, out_of_memory(opt.models.front(), "processing"));
  } catch (const std::exception& e) {
    return fail(kExitInvalidModel, opt.models.front() + ": " + e.what());
  }
}

}  // namespace dwdeconv::cli
