// dwdeconv-rewrite: rewrites clean xs depthwise ConvTranspose nodes into polyphase Conv + Concat +
// DepthToSpace. This file only parses options, sets up logging, prints errors and picks exit codes.
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/exit_codes.h"
#include "cli/report.h"
#include "cli/version.h"
#include "onnx_io/model_io.h"
#include "onnx_io/validate.h"
#include "rewrite/rewriter.h"

namespace {

using namespace dwdeconv;

struct Options {
  std::string input;
  std::string output;
  std::string report;
  bool dry_run = false;
  bool check = false;
  bool explicit_pad = false;
  std::vector<std::string> only;
  std::vector<std::string> skip;
  int verbosity = 0;  // -1 quiet, 0 info, 1+ debug
};

const char* kExamples = R"(Examples:
  dwdeconv-rewrite model.onnx -o model.xnn.onnx            rewrite every clean depthwise ConvTranspose
  dwdeconv-rewrite model.onnx --dry-run                    print the plan, write nothing
  dwdeconv-rewrite model.onnx --check                      CI gate: exit 1 if any node would be rewritten
  dwdeconv-rewrite model.onnx -o out.onnx --only up1 --only up2 --report r.json

Exit codes: 0 ok; 1 --check found a node to rewrite; 2 usage error; 3 invalid model, failed output
validation, or I/O error (nothing is written).)";

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
  return e.kind == core::ErrorKind::kUsage ? cli::kExitUsage : cli::kExitInvalidModel;
}

int run(const Options& opt) {
  PhaseTimer timer;
  auto loaded = onnx_io::load_model(opt.input);
  timer.mark("load");
  if (!loaded) return fail(exit_code_for(loaded.error()), loaded.error().message);
  onnx::ModelProto& model = *loaded;

  // Judge the input first, so a broken input is blamed on the input and not on the rewrite.
  auto input_check = onnx_io::validate_model(model, {});
  timer.mark("validate input");
  if (!input_check) return fail(cli::kExitInvalidModel, opt.input + ": invalid model: " + input_check.error().message);
  if (!input_check->full) spdlog::warn("{}: {}", opt.input, input_check->detail);

  rewrite::RewriteOptions ro;
  ro.emit.explicit_pad = opt.explicit_pad;
  ro.only = {opt.only.begin(), opt.only.end()};
  ro.skip = {opt.skip.begin(), opt.skip.end()};
  auto rewritten = rewrite::rewrite_model(model, ro);
  timer.mark("rewrite");
  if (!rewritten) return fail(exit_code_for(rewritten.error()), opt.input + ": " + rewritten.error().message);
  const rewrite::RewriteResult& result = *rewritten;
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

  cli::RunInfo info{opt.input, "", onnx_io::default_opset(model), ""};
  const bool writes_model = !opt.dry_run && !opt.check;
  if (writes_model) {
    auto validation = onnx_io::validate_model(model, rewrite::emitted_node_names(result));
    timer.mark("validate output");
    if (!validation) {
      return fail(cli::kExitInvalidModel, opt.input + ": the rewritten model failed validation, nothing written: " +
                                              validation.error().message);
    }
    if (!validation->full) spdlog::warn("{}", validation->detail);
    auto bytes = onnx_io::serialize_model(model);
    timer.mark("serialize");
    if (!bytes) return fail(cli::kExitInvalidModel, opt.output + ": " + bytes.error().message);
    if (auto written = onnx_io::write_file_atomic(opt.output, *bytes); !written) {
      return fail(cli::kExitInvalidModel, written.error().message);
    }
    timer.mark("write");
    info.output = opt.output;
    info.validation = validation->detail;
  }
  if (!opt.report.empty()) {
    if (auto written = onnx_io::write_file_atomic(opt.report, cli::report_json(info, result)); !written) {
      return fail(cli::kExitInvalidModel, written.error().message);
    }
  }
  if (opt.check && result.rewritten > 0) {
    for (const auto& n : result.nodes) {
      if (n.rewritten) spdlog::error("{}: ConvTranspose '{}' would be rewritten", opt.input, n.summary.name);
    }
    spdlog::error("check failed: {} of {} ConvTranspose nodes would be rewritten", result.rewritten, result.nodes.size());
    return cli::kExitCheckFailed;
  }
  spdlog::info("{} {} of {} ConvTranspose nodes (kept {}){}", writes_model ? "rewrote" : "would rewrite", result.rewritten,
               result.nodes.size(), result.kept, writes_model ? " -> " + opt.output : std::string());
  return cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"Rewrites clean xs depthwise ConvTranspose nodes into polyphase depthwise Convs + Concat + "
               "DepthToSpace(DCR), which XNNPACK runs 15-28x faster.",
               "dwdeconv-rewrite"};
  app.footer(kExamples);
  app.set_version_flag("--version", std::string("dwdeconv-rewrite ") + cli::kVersion);
  app.add_option("model", opt.input, "Input ONNX model")->required();
  app.add_option("-o,--output", opt.output, "Output model (written atomically; may equal the input)");
  app.add_flag("--dry-run", opt.dry_run, "Print the plan, one line per ConvTranspose, and write no model");
  app.add_flag("--check", opt.check, "Exit 1 if any node would be rewritten; write no model");
  app.add_option("--only", opt.only, "Rewrite only the ConvTranspose with this node name (repeatable)")->allow_extra_args(false);
  app.add_option("--skip", opt.skip, "Never rewrite the ConvTranspose with this node name (repeatable)")->allow_extra_args(false);
  app.add_flag("--explicit-pad", opt.explicit_pad, "Emit phase pads as Pad nodes instead of folding them into the Convs");
  app.add_option("--report", opt.report, "Write a JSON report to this file");
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

  if (opt.dry_run && opt.check) return fail(cli::kExitUsage, "--dry-run and --check cannot be combined");
  if ((opt.dry_run || opt.check) && !opt.output.empty()) {
    return fail(cli::kExitUsage, std::string(opt.dry_run ? "--dry-run" : "--check") + " writes no model; drop -o");
  }
  if (!opt.dry_run && !opt.check && opt.output.empty()) return fail(cli::kExitUsage, "no output: give -o OUT, --dry-run or --check");
  try {
    return run(opt);
  } catch (const std::exception& e) {
    return fail(cli::kExitInvalidModel, opt.input + ": " + e.what());
  }
}
