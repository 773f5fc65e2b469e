// --verify and --bench of one model on --runtime (run_checks, cli/run_internal.h): the one interface check, then one
// path for every runtime through its runner (runtime_check/runner.h: the executor, or a Python runtime that converted
// and ran both models once), the per-upsampler table from the runner's node times, and the --min-speedup gate.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "onnx_io/shapes.h"
#include "rewrite/shape_propagation.h"
#include "run_internal.h"
#include "runtime_check/graph_match.h"
#include "runtime_check/runner.h"
#include "runtime_check/tensor_io.h"

namespace dwdeconv::cli {
namespace {

// Per-node mode's regions: those the rewrite recorded (main graph), each with its input dims as the rewrite computed
// them at the graph inputs' dims (vo.input_shapes, the --input files).
void add_recorded_regions(const onnx::ModelProto& original, const onnx::ModelProto& rewritten, const rewrite::RewriteResult& record,
                          runtime_check::VerifyOptions& vo) {
  vo.regions.emplace();
  for (const auto& n : record.nodes) {
    if (n.rewritten && n.summary.graph_path == "main") vo.regions->push_back(n.region);
  }
  // The regions' input dims as the rewrite computed them, at the graph inputs' dims.
  std::vector<runtime_check::NamedTensor> dims;
  const auto add_dims = [&dims](const std::string& name, const std::vector<int64_t>& shape) {
    dims.emplace_back();
    dims.back().name = name;
    dims.back().tensor.dims = shape;  // the dims only: no values are copied
  };
  for (const auto& [name, shape] : vo.input_shapes) add_dims(name, shape);
  for (const auto& given : vo.inputs) add_dims(given.name, given.tensor.dims);
  for (const auto& region : upsampler_regions(original, rewritten, record, dims)) {
    if (!region.input_type) continue;
    if (auto shape = onnx_io::known_dims(*region.input_type); !shape.empty()) vo.region_shapes[region.input] = std::move(shape);
  }
}

// Per-node mode's sizes for two files the tool did not write (--compare), where no region was recorded: the input dims of
// every main-graph node, as the rewrite computes them at the graph inputs' dims (rewrite/shape_propagation.h), so that
// a region whose input libonnx's inference does not reach is sized from the dims the user gave, not asked for.
void add_computed_shapes(const onnx::ModelProto& original, runtime_check::VerifyOptions& vo) {
  onnx::ModelProto skeleton = onnx_io::skeleton_copy(original);
  for (auto& in : *skeleton.mutable_graph()->mutable_input()) {
    std::vector<int64_t> dims;
    if (const auto given = vo.input_shapes.find(in.name()); given != vo.input_shapes.end()) dims = given->second;
    for (const auto& t : vo.inputs) {
      if (t.name == in.name()) dims = t.tensor.dims;
    }
    if (dims.empty() || !in.type().has_tensor_type()) continue;
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  }
  const auto propagated = rewrite::propagate_types(skeleton);
  for (const auto& node : original.graph().node()) {
    for (const auto& name : node.input()) {
      const auto* type = propagated.types.find(0, name);
      if (type == nullptr || vo.region_shapes.count(name) != 0) continue;
      if (auto dims = onnx_io::known_dims(*type); !dims.empty()) vo.region_shapes[name] = std::move(dims);
    }
  }
}

void clear_progress(const RuntimeSetup& setup) {
  if (setup.status) setup.status->clear();
}

// The executor's verification options. `record` (null for --compare) is the rewrite that wrote `rewritten`: per-node
// mode checks the regions it recorded. Phases are logged in `log` as the executor's progress lines start them.
core::Result<runtime_check::VerifyOptions> verify_options(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                                          const Options& opt, const RuntimeSetup& setup, const std::string& model_path,
                                                          PhaseLog& log, const rewrite::RewriteResult* record) {
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
    add_recorded_regions(original, rewritten, *record, vo);
  } else {
    add_computed_shapes(original, vo);
  }
  return vo;
}

// The executor's timing options: opt.runs timed runs, then the profiled runs the per-upsampler table reads.
core::Result<runtime_check::BenchOptions> bench_options(const onnx::ModelProto& original, const Options& opt, const RuntimeSetup& setup,
                                                        const std::string& model_path, PhaseLog& log) {
  runtime_check::BenchOptions bo;
  auto shapes = resolve_input_shapes(setup.input_shapes, original, model_path);
  if (!shapes) return shapes.error();
  bo.input_shapes = *shapes;
  bo.inputs = setup.inputs;
  bo.seed = opt.seed;
  bo.threads = opt.threads;
  bo.runs = opt.runs;
  bo.profile_runs = 3;                             // after the timed runs: the per-node table, and the profile -v prints
  bo.profile_top_nodes = static_cast<size_t>(-1);  // every node, for the per-node table
  bo.progress = setup.progress ? setup.progress : log.callback();
  return bo;
}

// The bench's one line: where it ran, the medians with their spread, and the ratio ("runs" on the executor, "pairs"
// on a Python runtime, as each counts them). `prefix` names the model in a batch.
void log_bench_line(const runtime_check::BenchResult& b, const std::string& where, const std::string& counted, const std::string& prefix) {
  if (b.original_samples_ms.empty() || b.rewritten_samples_ms.empty()) return;
  const auto [olo, ohi] = std::minmax_element(b.original_samples_ms.begin(), b.original_samples_ms.end());
  const auto [rlo, rhi] = std::minmax_element(b.rewritten_samples_ms.begin(), b.rewritten_samples_ms.end());
  spdlog::info(
      "{}bench on {} ({} thread{}, median [min-max] of {} interleaved {}): original {:.3f} [{:.3f}-{:.3f}] ms, "
      "rewritten {:.3f} [{:.3f}-{:.3f}] ms, {:.2f}x",
      prefix, where, b.threads, b.threads == 1 ? "" : "s", b.runs, counted, b.original_ms, *olo, *ohi, b.rewritten_ms, *rlo, *rhi,
      b.speedup);
}

// Logs the per-node table, one line each, when there is one.
void log_upsampler_times(const std::vector<UpsamplerTime>& rows, const std::string& where) {
  if (rows.empty()) return;
  spdlog::info("per upsampler on {} (profiled runs after the timed ones):", where);
  std::istringstream lines(format_upsampler_times(rows));
  for (std::string line; std::getline(lines, line);) spdlog::info("{}", line);
}

// The runner of opt.runtime for this model, or the error that ends the checks (as not_checked_error() gives it): the
// executor with its options, or a Python runtime that has converted and run both models, once for both checks
// (`bench`: timed and, with a `result` to name the upsamplers, profiled).
core::Result<std::unique_ptr<runtime_check::Runner>> make_runner(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                                                 const rewrite::RewriteResult* result, const Options& opt,
                                                                 const RuntimeSetup& setup, const std::string& model_path, PhaseLog& log,
                                                                 bool verify, bool bench, const std::string& verify_prefix,
                                                                 const std::string& bench_prefix) {
  if (opt.runtime == kBuiltinRuntime) {
    runtime_check::VerifyOptions vo;
    runtime_check::BenchOptions bo;
    if (verify) {
      auto options = verify_options(original, rewritten, opt, setup, model_path, log, result);
      if (!options) return not_checked_error(options.error(), verify_prefix);
      vo = std::move(*options);
    }
    if (bench) {
      auto options = bench_options(original, opt, setup, model_path, log);
      if (!options) return not_checked_error(options.error(), bench_prefix);
      bo = std::move(*options);
    }
    return std::unique_ptr<runtime_check::Runner>(
        std::make_unique<runtime_check::ExecutorRunner>(original, rewritten, builtin_runtime_info(), std::move(vo), std::move(bo)));
  }
  auto shapes = resolve_input_shapes(setup.input_shapes, original, model_path);
  if (!shapes) return not_checked_error(shapes.error(), "--runtime " + opt.runtime + ": ");
  auto inputs = runtime_inputs(original, *shapes, setup.inputs, opt.seed);
  if (!inputs) return not_checked_error(inputs.error(), "--runtime " + opt.runtime + ": ");
  const std::string running = "converting and running both models on --runtime " + opt.runtime;
  if (setup.progress) setup.progress(running + " ...");
  log.start(running);
  // The per-node table's runs: each node's median over 3 to 10 profiled runs of each model, after the timed pairs.
  const size_t profile_runs = bench && result ? std::clamp<size_t>(opt.runs, 3, 10) : 0;
  auto run = run_on_python_runtime(original, rewritten, *inputs, opt, bench ? opt.runs : 0, profile_runs);
  clear_progress(setup);
  // --compare (no `result`) writes nothing anyway and names OTHER first; a rewrite says it wrote nothing. A failure
  // ends the phase as failed, in the caller.
  if (!run) {
    core::Error e = not_checked_error(run.error(), result ? "" : verify_prefix);
    if (result) e.message += "; nothing written";
    return e;
  }
  log.end();
  return std::unique_ptr<runtime_check::Runner>(std::make_unique<runtime_check::PythonRunner>(
      std::move(*run), runtime_check::Tolerances{opt.atol, opt.rtol}, opt.max_steps.value_or(2.0), opt.threads));
}

}  // namespace

// The error of a check that could not be done: exit 4 on every runtime (docs/exit-codes.md), whatever the executor
// or a runtime's module said went wrong (a shape not known, an op the executor lacks, a model the runtime cannot convert
// or run), except the command line's fault (exit 2) and a file that could not be read or written (exit 3).
core::Error not_checked_error(const core::Error& e, const std::string& prefix) {
  const bool keeps = e.kind == core::ErrorKind::kUsage || e.kind == core::ErrorKind::kIo;
  return {keeps ? e.kind : core::ErrorKind::kCannotVerify, prefix + e.message};
}

/// Parses --input-shape and loads --input files, once per run; errors are usage errors or unreadable input files.
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
                           "--input " + path + ": element " + std::to_string(k) + " is " + what +
                               "; --verify and --compare "
                               "cannot compare non-finite inputs, since XNNPACK's output clamps do not keep NaN (each model "
                               "turns a NaN, also one made from an infinity by 0 * inf or inf - inf, into -inf or +inf its own "
                               "way): give an input with finite values"};
      }
    }
    setup.inputs.push_back(std::move(*tensor));
  }
  // A progress line on stderr, only for a person watching a terminal.
  if (opt.verbosity >= 0 && isatty(STDERR_FILENO)) {
    setup.status = std::make_shared<StatusLine>();
    setup.progress = [status = setup.status](const std::string& line) { status->set(line); };
  }
  return setup;
}

core::Result<RuntimeSetup> setup_with_shapes_file(const RuntimeSetup& shared, const std::vector<InputShapeArg>& side,
                                                  const onnx::ModelProto& model, const std::string& model_path,
                                                  const std::string& side_path) {
  std::vector<std::string> overridden;
  auto merged = merge_input_shapes(shared.input_shapes, side, model, model_path, side_path, overridden);
  if (!merged) return merged.error();
  RuntimeSetup own = shared;
  own.input_shapes = std::move(*merged);
  const std::string shown = model_path == "-" ? "<stdin>" : core::printable(model_path);
  std::string taken;
  for (const auto& arg : side) {
    if (std::find(overridden.begin(), overridden.end(), arg.text) == overridden.end()) taken += (taken.empty() ? "" : ", ") + arg.text;
  }
  if (!taken.empty()) spdlog::info("{}: input shapes from {}: {}", shown, core::printable(side_path), core::printable(taken));
  for (const auto& text : overridden) {
    spdlog::warn("{}: {} gives '{}', which --input-shape overrides", shown, core::printable(side_path), core::printable(text));
  }
  return own;
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

// Runs --verify (when `verify`) and --bench (when `bench`) on opt.runtime. The executor verifies first and times
// only a model that passed; a Python runtime converts and runs both models once for both. `result` (null for
// --compare) names the upsamplers of the per-node table. An error's message starts with `verify_prefix` or
// `bench_prefix` when the executor's verification or timing failed.
core::Result<RuntimeChecks> run_checks(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                       const rewrite::RewriteResult* result, const Options& opt, const RuntimeSetup& setup,
                                       const std::string& model_path, PhaseLog& log, const std::string& prefix, bool verify, bool bench,
                                       const std::string& verify_prefix, const std::string& bench_prefix) {
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
      return not_checked_error(fed.error(), verify_prefix);
    }
  }
  auto made = make_runner(original, rewritten, result, opt, setup, model_path, log, verify, bench, verify_prefix, bench_prefix);
  if (!made) return made.error();
  runtime_check::Runner& runner = **made;
  checks.info.runtime = runner.info();
  if (verify) {
    auto verified = runner.verify();
    clear_progress(setup);
    if (!verified) return not_checked_error(verified.error(), verify_prefix);  // the caller ends the phase as failed
    log.end();
    for (const auto& note : runner.notes()) spdlog::warn("{}{}", prefix, note);
    log_verify_summary(*verified, prefix);
    spdlog::debug("placement:\n{}", verified->placement);
    checks.verify = std::move(*verified);
    if (!checks.verify->passed) return checks;
  }
  if (bench) {
    if (const std::string phase = runner.bench_phase(); !phase.empty()) log.start(phase);
    auto timed = runner.bench();
    clear_progress(setup);
    if (!timed) return not_checked_error(timed.error(), bench_prefix);  // the caller ends the phase as failed
    log.end();
    const auto& b = timed->bench;
    log_bench_line(b, checks.info.runtime.label, timed->counted, prefix);
    spdlog::debug("bench placement, original: {}", b.original_placement);
    spdlog::debug("bench placement, rewritten: {}", b.rewritten_placement);
    if (opt.verbosity > 0 && (b.original_profile.runs > 0 || b.rewritten_profile.runs > 0)) {
      spdlog::debug("profile of the original model (separate runs):\n{}", runtime_check::format_profile(b.original_profile));
      spdlog::debug("profile of the rewritten model (separate runs):\n{}", runtime_check::format_profile(b.rewritten_profile));
    }
    checks.bench = b;
    // The per-upsampler table, from the node times of whichever runtime ran; the inputs' dims size its regions.
    if (result != nullptr && (!timed->original_nodes.empty() || !timed->rewritten_nodes.empty())) {
      auto shapes = resolve_input_shapes(setup.input_shapes, original, model_path);
      auto inputs = shapes ? runtime_inputs(original, *shapes, setup.inputs, opt.seed)
                           : core::Result<std::vector<runtime_check::NamedTensor>>(shapes.error());
      checks.info.upsamplers = upsampler_times(original, rewritten, *result, timed->original_nodes, timed->rewritten_nodes,
                                               inputs ? *inputs : std::vector<runtime_check::NamedTensor>{}, timed->node_values);
      log_upsampler_times(checks.info.upsamplers, checks.info.runtime.label);
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

}  // namespace dwdeconv::cli
