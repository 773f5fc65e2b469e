// dwdeconv-rewrite: rewrites clean xs depthwise ConvTranspose nodes into polyphase Conv + Concat +
// DepthToSpace. This file only parses options, sets up logging, prints errors and picks exit codes.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/exit_codes.h"
#include "cli/report.h"
#include "cli/version.h"
#include "onnx_io/external_data.h"
#include "onnx_io/model_io.h"
#include "onnx_io/validate.h"
#include "rewrite/rewriter.h"
#include "runtime_check/bench.h"
#include "runtime_check/tensor_io.h"
#include "runtime_check/verify.h"

namespace {

using namespace dwdeconv;

struct Options {
  std::string input;
  std::string output;
  std::string report;
  std::string compare;  // --compare OTHER: verify OTHER against the input, no rewrite
  bool dry_run = false;
  bool check = false;
  bool verify = false;
  bool bench = false;
  size_t runs = 10;
  bool explicit_pad = false;
  std::vector<std::string> only;
  std::vector<std::string> skip;
  std::vector<std::string> input_shapes;  // NAME=1x4x256x256
  std::vector<std::string> input_files;   // [NAME=]FILE.npy|.pb
  uint64_t seed = 0;
  std::optional<double> atol;
  std::optional<double> rtol;
  size_t threads = 1;
  std::string external_data;                 // --external-data NAME
  std::optional<uint64_t> external_threshold;  // --external-data-threshold BYTES
  int verbosity = 0;  // -1 quiet, 0 info, 1+ debug
};

const char* kExamples = R"(Examples:
  dwdeconv-rewrite model.onnx -o model.xnn.onnx            rewrite every clean depthwise ConvTranspose
  dwdeconv-rewrite model.onnx --dry-run                    print the plan, write nothing
  dwdeconv-rewrite model.onnx --check                      CI gate: exit 1 if any node would be rewritten
  dwdeconv-rewrite model.onnx -o out.onnx --verify         rewrite, then run both through XNNPACK and diff
  dwdeconv-rewrite model.onnx --compare out.onnx           verify any pair without rewriting
  dwdeconv-rewrite model.onnx -o out.onnx --bench --runs 20 time both models on XNNPACK
  dwdeconv-rewrite model.onnx -o out.onnx --verify --input-shape image=1x4x256x256 --report r.json

Exit codes: 0 ok; 1 --check found a node to rewrite, or verification failed; 2 usage error; 3 invalid
model, failed output validation, or I/O error. Nothing is written unless the run succeeds.)";

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

int exit_code_for(const core::Error& e) {
  switch (e.kind) {
    case core::ErrorKind::kUsage: return cli::kExitUsage;
    case core::ErrorKind::kCheckFailed: return cli::kExitCheckFailed;
    default: return cli::kExitInvalidModel;
  }
}

// What the executor needs from the command line, shared by --verify, --compare and --bench.
struct RuntimeSetup {
  std::map<std::string, std::vector<int64_t>> input_shapes;
  std::vector<runtime_check::NamedTensor> inputs;
  std::function<void(const std::string&)> progress;  // empty unless stderr is a terminal
};

// Parses --input-shape and loads --input files; errors are usage errors or unreadable input files.
core::Result<RuntimeSetup> runtime_setup(const Options& opt) {
  RuntimeSetup setup;
  for (const auto& text : opt.input_shapes) {
    auto parsed = runtime_check::parse_input_shape(text);
    if (!parsed) return core::Error{core::ErrorKind::kUsage, "--input-shape: " + parsed.error().message};
    setup.input_shapes[parsed->first] = parsed->second;
  }
  for (const auto& text : opt.input_files) {
    const auto eq = text.find('=');
    const std::string path = eq == std::string::npos ? text : text.substr(eq + 1);
    auto tensor = runtime_check::load_tensor_file(path);
    if (!tensor) return tensor.error();
    if (eq != std::string::npos) tensor->name = text.substr(0, eq);
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

// Runs the verifier and logs its summary; the result, or the reason nothing could be verified.
core::Result<runtime_check::VerifyResult> run_verify(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                                     const Options& opt) {
  auto setup = runtime_setup(opt);
  if (!setup) return setup.error();
  runtime_check::VerifyOptions vo;
  vo.input_shapes = setup->input_shapes;
  vo.inputs = setup->inputs;
  vo.seed = opt.seed;
  vo.threads = opt.threads;
  vo.tolerances = {opt.atol, opt.rtol};
  vo.progress = setup->progress;
  auto result = runtime_check::verify_models(original, rewritten, vo);
  clear_progress(*setup);
  if (!result) return result;
  std::istringstream lines(result->summary());
  for (std::string line; std::getline(lines, line);) {
    if (result->passed) {
      spdlog::info("{}", line);
    } else {
      spdlog::error("{}", line);
    }
  }
  spdlog::debug("placement:\n{}", result->placement);
  return result;
}

// Times both models on the executor and logs medians and the speedup.
core::Result<runtime_check::BenchResult> run_bench(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                                   const Options& opt) {
  auto setup = runtime_setup(opt);
  if (!setup) return setup.error();
  runtime_check::BenchOptions bo;
  bo.input_shapes = setup->input_shapes;
  bo.inputs = setup->inputs;
  bo.seed = opt.seed;
  bo.threads = opt.threads;
  bo.runs = opt.runs;
  bo.progress = setup->progress;
  auto result = runtime_check::bench_models(original, rewritten, bo);
  clear_progress(*setup);
  if (!result) return result;
  spdlog::info("bench ({} thread{}, median of {} interleaved runs): original {:.3f} ms, rewritten {:.3f} ms, {:.2f}x",
               result->threads, result->threads == 1 ? "" : "s", result->runs, result->original_ms, result->rewritten_ms,
               result->speedup);
  spdlog::debug("bench placement, original: {}", result->original_placement);
  spdlog::debug("bench placement, rewritten: {}", result->rewritten_placement);
  return result;
}

std::string speedup_text(double speedup) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "; %.2fx faster on XNNPACK", speedup);
  return buf;
}

int write_report(const Options& opt, const cli::RunInfo& info, const rewrite::RewriteResult& result) {
  if (opt.report.empty()) return cli::kExitOk;
  if (auto written = onnx_io::write_file_atomic(opt.report, cli::report_json(info, result)); !written) {
    return fail(cli::kExitInvalidModel, written.error().message);
  }
  return cli::kExitOk;
}

// --compare: verify OTHER against MODEL without rewriting anything.
int run_compare(const Options& opt) {
  auto original = onnx_io::load_model(opt.input);
  if (!original) return fail(exit_code_for(original.error()), original.error().message);
  auto other = onnx_io::load_model(opt.compare);
  if (!other) return fail(exit_code_for(other.error()), other.error().message);
  auto verified = run_verify(*original, *other, opt);
  if (!verified) return fail(exit_code_for(verified.error()), "cannot verify " + opt.compare + ": " + verified.error().message);
  cli::RunInfo info{opt.input, "", onnx_io::default_opset(*original), "", opt.compare, *verified, std::nullopt};
  if (verified->passed && opt.bench) {
    auto timed = run_bench(*original, *other, opt);
    if (!timed) return fail(exit_code_for(timed.error()), timed.error().message);
    info.bench = *timed;
  }
  if (int code = write_report(opt, info, {}); code != cli::kExitOk) return code;
  return verified->passed ? cli::kExitOk : cli::kExitCheckFailed;
}

// Where the output's tensors go: external data when the input had it or the command line asks for it. Every
// tensor that was external stays external, and each phase weight follows the weight it was gathered from.
onnx_io::ExternalSaveOptions external_save_options(const Options& opt, const std::set<std::string>& loaded_external,
                                                   const rewrite::RewriteResult& result) {
  onnx_io::ExternalSaveOptions ext;
  if (loaded_external.empty() && opt.external_data.empty() && !opt.external_threshold) return ext;
  ext.data_name = opt.external_data.empty() ? std::filesystem::path(opt.output).filename().string() + ".data" : opt.external_data;
  ext.tensor_names = loaded_external;
  for (const auto& [derived, source] : result.derived_tensors) {
    if (loaded_external.count(source) != 0) ext.tensor_names.insert(derived);
  }
  if (!opt.external_data.empty() || opt.external_threshold) ext.threshold_bytes = opt.external_threshold.value_or(1024);
  return ext;
}

int run(const Options& opt) {
  PhaseTimer timer;
  auto loaded = onnx_io::load_model_with_external_data(opt.input);
  if (!loaded) return fail(exit_code_for(loaded.error()), loaded.error().message);
  onnx::ModelProto& model = loaded->model;
  if (!loaded->external_tensors.empty()) {
    spdlog::debug("{}: {} tensors read from external data", opt.input, loaded->external_tensors.size());
  }
  timer.mark("load");

  // Judge the input first, so a broken input is blamed on the input and not on the rewrite.
  auto input_check = onnx_io::validate_model(model, {});
  if (!input_check) return fail(cli::kExitInvalidModel, opt.input + ": invalid model: " + input_check.error().message);
  if (!input_check->full) spdlog::warn("{}: {}", opt.input, input_check->detail);
  timer.mark("validate input");

  std::optional<onnx::ModelProto> original;
  if (opt.verify || opt.bench) original = model;  // verify and bench run the model as it was

  rewrite::RewriteOptions ro;
  ro.emit.explicit_pad = opt.explicit_pad;
  ro.only = {opt.only.begin(), opt.only.end()};
  ro.skip = {opt.skip.begin(), opt.skip.end()};
  auto rewritten = rewrite::rewrite_model(model, ro);
  if (!rewritten) return fail(exit_code_for(rewritten.error()), opt.input + ": " + rewritten.error().message);
  const rewrite::RewriteResult& result = *rewritten;
  timer.mark("rewrite");
  if (!result.unmatched_names.empty()) {
    return fail(cli::kExitUsage, "--only/--skip name '" + result.unmatched_names.front() + "' matches no ConvTranspose in " + opt.input);
  }

  for (const auto& n : result.nodes) {
    if (n.rewritten) {
      spdlog::debug("rewrote '{}' into {} nodes", n.summary.name, n.emitted_nodes.size());
    } else {
      spdlog::info("kept ConvTranspose '{}': {}", n.summary.name, n.reason);
    }
  }
  if (opt.dry_run) std::cout << cli::plan_text(result) << std::flush;

  cli::RunInfo info{opt.input, "", onnx_io::default_opset(model), "", "", std::nullopt, std::nullopt};
  const bool writes_model = !opt.dry_run && !opt.check;
  std::string summary = std::string(writes_model ? "rewrote " : "would rewrite ") + std::to_string(result.rewritten) + " of " +
                        std::to_string(result.nodes.size()) + " ConvTranspose nodes (kept " + std::to_string(result.kept) + ")";
  if (writes_model) {
    auto validation = onnx_io::validate_model(model, rewrite::emitted_node_names(result));
    if (!validation) {
      return fail(cli::kExitInvalidModel, opt.input + ": the rewritten model failed validation, nothing written: " +
                                              validation.error().message);
    }
    if (!validation->full) spdlog::warn("{}", validation->detail);
    info.validation = validation->detail;
    timer.mark("validate output");

    if (opt.verify) {
      auto verified = run_verify(*original, model, opt);
      timer.mark("verify");
      if (!verified) return fail(exit_code_for(verified.error()), "cannot verify the rewrite, nothing written: " + verified.error().message);
      info.verify = *verified;
      if (!verified->passed) {
        write_report(opt, info, result);
        return fail(cli::kExitCheckFailed, "verification failed, nothing written");
      }
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2g", verified->max_abs_error());
      summary += std::string("; verified: max abs error ") + buf;
    }
    if (opt.bench) {
      auto timed = run_bench(*original, model, opt);
      timer.mark("bench");
      if (!timed) return fail(exit_code_for(timed.error()), "--bench: " + timed.error().message);
      info.bench = *timed;
      summary += speedup_text(timed->speedup);
    }

    const auto ext = external_save_options(opt, loaded->external_tensors, result);
    if (auto saved = onnx_io::save_model_with_external_data(model, opt.output, ext); !saved) {
      return fail(exit_code_for(saved.error()), saved.error().message);
    }
    if (!ext.data_name.empty()) spdlog::debug("tensor data written to {}", ext.data_name);
    timer.mark("save");
    info.output = opt.output;
  }
  if (int code = write_report(opt, info, result); code != cli::kExitOk) return code;
  if (opt.check && result.rewritten > 0) {
    for (const auto& n : result.nodes) {
      if (n.rewritten) spdlog::error("{}: ConvTranspose '{}' would be rewritten", opt.input, n.summary.name);
    }
    spdlog::error("check failed: {} of {} ConvTranspose nodes would be rewritten", result.rewritten, result.nodes.size());
    return cli::kExitCheckFailed;
  }
  spdlog::info("{}{}", summary, writes_model ? " -> " + opt.output : std::string());
  return cli::kExitOk;
}

// Combinations that cannot mean anything; an empty string when the options make sense.
std::string usage_problem(const Options& opt) {
  if (!opt.compare.empty()) {
    if (!opt.output.empty() || opt.dry_run || opt.check || opt.verify) return "--compare runs alone: drop -o, --dry-run, --check and --verify";
    if (opt.runs < 1) return "--runs must be at least 1";
    return "";
  }
  if (opt.dry_run && opt.check) return "--dry-run and --check cannot be combined";
  if ((opt.dry_run || opt.check) && !opt.output.empty()) return std::string(opt.dry_run ? "--dry-run" : "--check") + " writes no model; drop -o";
  if ((opt.dry_run || opt.check) && (opt.verify || opt.bench)) return "--verify and --bench need a rewritten model: use -o OUT, not --dry-run or --check";
  if (!opt.dry_run && !opt.check && opt.output.empty()) return "no output: give -o OUT, --dry-run, --check or --compare OTHER";
  const bool running = opt.verify || opt.bench || !opt.compare.empty();
  if (!running && (!opt.input_shapes.empty() || !opt.input_files.empty())) {
    return "--input-shape and --input apply to --verify, --bench and --compare";
  }
  if (!opt.verify && opt.compare.empty() && (opt.atol || opt.rtol)) return "--atol and --rtol apply to --verify and --compare";
  if (opt.output.empty() && (!opt.external_data.empty() || opt.external_threshold)) return "--external-data options need -o OUT";
  if (opt.external_data.find('/') != std::string::npos) return "--external-data takes a file name (written next to OUT), not a path";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"Rewrites clean xs depthwise ConvTranspose nodes into polyphase depthwise Convs + Concat + "
               "DepthToSpace(DCR), which XNNPACK runs many times faster, and checks the result on XNNPACK.",
               "dwdeconv-rewrite"};
  app.footer(kExamples);
  app.set_version_flag("--version", std::string("dwdeconv-rewrite ") + cli::kVersion);
  app.add_option("model", opt.input, "Input ONNX model")->required();
  app.add_option("-o,--output", opt.output, "Output model (written atomically; may equal the input)");
  app.add_flag("--dry-run", opt.dry_run, "Print the plan, one line per ConvTranspose, and write no model");
  app.add_flag("--check", opt.check, "Exit 1 if any node would be rewritten; write no model");
  app.add_option("--only", opt.only, "Rewrite only the ConvTranspose with this name (repeatable)")->allow_extra_args(false);
  app.add_option("--skip", opt.skip, "Never rewrite the ConvTranspose with this name (repeatable)")->allow_extra_args(false);
  app.add_flag("--explicit-pad", opt.explicit_pad, "Emit phase pads as Pad nodes instead of folding them into the Convs");
  app.add_option("--report", opt.report, "Write a JSON report to this file");
  app.add_flag("--verify", opt.verify, "Run the original and the rewritten model through XNNPACK and compare outputs");
  app.add_option("--compare", opt.compare, "Verify this model against MODEL without rewriting (exit 1 on mismatch)");
  app.add_option("--input-shape", opt.input_shapes, "Fix an input's dims, e.g. image=1x4x256x256 (repeatable)")->allow_extra_args(false);
  app.add_option("--input", opt.input_files, "Feed an input from a .npy or TensorProto .pb file: [NAME=]FILE (repeatable)")->allow_extra_args(false);
  app.add_option("--seed", opt.seed, "Seed of the random inputs (default 0)");
  app.add_option("--atol", opt.atol, "Absolute tolerance (default per dtype: f32 1e-6, f16 1e-3)")->check(CLI::NonNegativeNumber);
  app.add_option("--rtol", opt.rtol, "Tolerance relative to each output's max |value| (default f32 1e-4, f16 1e-2)")->check(CLI::NonNegativeNumber);
  app.add_flag("--bench", opt.bench, "Time the original and the rewritten model on XNNPACK (medians, speedup)");
  app.add_option("--runs", opt.runs, "Timed runs of each model for --bench (default 10)")->check(CLI::Range(1, 100000));
  app.add_option("--threads", opt.threads, "XNNPACK threads for --verify, --bench and --compare (default 1)")->check(CLI::Range(1, 256));
  app.add_option("--external-data", opt.external_data,
                 "Store tensors in this file next to OUT (default OUT.data when the input had external data)");
  app.add_option("--external-data-threshold", opt.external_threshold,
                 "With --external-data: store every tensor of at least this many bytes outside (default 1024)");
  app.add_flag_function("-v,--verbose", [&opt](int64_t n) { opt.verbosity = static_cast<int>(n); }, "More log output");
  app.add_flag_function("-q,--quiet", [&opt](int64_t) { opt.verbosity = -1; }, "Only errors");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return cli::kExitUsage;
  }

  auto logger = spdlog::stderr_color_mt("dwdeconv");
  logger->set_pattern("dwdeconv-rewrite: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(opt.verbosity < 0 ? spdlog::level::err : opt.verbosity > 0 ? spdlog::level::debug : spdlog::level::info);

  if (const std::string problem = usage_problem(opt); !problem.empty()) return fail(cli::kExitUsage, problem);
  try {
    return opt.compare.empty() ? run(opt) : run_compare(opt);
  } catch (const std::exception& e) {
    return fail(cli::kExitInvalidModel, opt.input + ": " + e.what());
  }
}
