#include "cli/run.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <onnx/defs/schema.h>
#include <spdlog/spdlog.h>

#include "cli/batch_inputs.h"
#include "cli/exit_codes.h"
#include "cli/usage_errors.h"
#include "core/text.h"
#include "onnx_io/model_io.h"
#include "onnx_io/validate.h"
#include "run_internal.h"
#include "runtime_check/graph_match.h"

namespace dwdeconv::cli {

int fail(const core::Error& e) {
  spdlog::error("{}", e.message);
  return exit_code_for(e);
}

void PhaseTimer::mark(const char* phase) {
  const auto now = std::chrono::steady_clock::now();
  spdlog::debug("{}: {:.3f} s", phase, std::chrono::duration<double>(now - last_).count());
  last_ = now;
}

std::string out_of_memory(const std::string& input, const std::string& doing) {
  return "out of memory while " + doing + " " + input + "; lower --max-phases if it was raised, or free memory";
}

namespace {

// Writes the report; kExitOk, or the I/O error's exit code after logging it.
int write_report(ReportFile& report, const std::string& json) {
  if (auto written = commit_report(report, json); !written) return fail(written.error());
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
  // Ends the run with `error` (logged, its exit code), or passed when there is none; the report says either.
  auto finish = [&](const std::optional<core::Error>& error) {
    const int code = error ? exit_code_for(*error) : kExitOk;
    if (error) {
      log.fail();
      fail(*error);
    }
    info.exit_code = code;
    info.error = error ? error->message : "";
    if (int written = write_report(report, report_json(info, {})); written != kExitOk) return written;
    return code;
  };
  const auto with = [](core::ErrorKind kind, const std::string& message) { return core::Error{kind, message}; };
  log.start("load both models");
  auto loaded_original = onnx_io::load_model_with_external_data(input);
  auto loaded_other = onnx_io::load_model_with_external_data(opt.compare);
  log.end();
  // The report must not land on either model or their data.
  std::vector<RunFile> reads;
  add_compare_reads(input, loaded_original, reads);
  add_compare_reads(opt.compare, loaded_other, reads);
  add_input_tensor_files(opt, reads);
  add_protected_reads(opt, reads);
  // MODEL's own shapes, beside it (MODEL.input-shapes), as a rewrite of it reads them.
  const std::string side_path = input_shapes_file_of(input);
  auto side = read_input_shapes_file(side_path);
  // Kept from any write, also when it is not a shapes file (a report must not replace what was there).
  if (std::error_code ec; !side_path.empty() && std::filesystem::exists(std::filesystem::symlink_status(side_path, ec))) {
    reads.push_back({side_path, FileRole::kInputShapes, input});
  }
  std::vector<RunFile> writes;
  if (report.file) writes.push_back({report.file->path(), FileRole::kReport, ""});
  if (auto safe = refuse_overwrites(reads, writes, /*batch=*/false); !safe) return fail(safe.error());
  if (!loaded_original) return finish(loaded_original.error());
  if (!loaded_other) return finish(loaded_other.error());
  const onnx::ModelProto& original = loaded_original->model;
  const onnx::ModelProto& other = loaded_other->model;
  info.opset = onnx_io::default_opset(original);
  if (auto named = check_input_shape_names(setup.input_shapes, original, input); !named) {
    return finish(with(named.error().kind, core::printable(input) + ": " + named.error().message));
  }
  if (!side) return finish(with(side.error().kind, core::printable(input) + ": " + side.error().message));
  std::optional<RuntimeSetup> own_setup;
  if (*side) {
    auto own = setup_with_shapes_file(setup, **side, original, input, side_path);
    if (!own) return finish(with(own.error().kind, core::printable(input) + ": " + own.error().message));
    own_setup = std::move(*own);
    info.input_shapes_file = side_path;
  }
  const RuntimeSetup& model_setup = own_setup ? *own_setup : setup;
  // The executor runs models ONNX refuses (a value defined twice, an unknown attribute): judge both first, as a
  // rewrite judges its input and output, so that passing means OTHER is a model at all.
  log.start("validate both models");
  for (const auto& [path, model] : {std::pair<const std::string&, const onnx::ModelProto&>{input, original}, {opt.compare, other}}) {
    auto checked = onnx_io::validate_model(model, {});
    if (!checked) {
      return finish(with(core::ErrorKind::kFailedValidation, core::printable(path) + ": invalid model: " + checked.error().message));
    }
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
      return finish(with(core::ErrorKind::kCheckVerdictFailed,
                         core::printable(opt.compare) + ": --min-speedup " + gate + ": the two models are the same (1.00x)"));
    }
  }
  auto checked = run_checks(original, other, nullptr, opt, model_setup, input, log, "", /*verify=*/true, opt.bench && !same,
                            "cannot verify " + core::printable(opt.compare) + ": ", "");
  if (!checked) return finish(checked.error());
  info.runtime = checked->info;
  info.verify = checked->verify;
  info.bench = checked->bench;
  if (!checked->verify->passed)
    return finish(with(core::ErrorKind::kCheckVerdictFailed, core::printable(opt.compare) + ": verification failed"));
  if (const std::string gate = speedup_shortfall(opt, *checked); !gate.empty())
    return finish(with(core::ErrorKind::kCheckVerdictFailed, core::printable(opt.compare) + ": " + gate));
  if (checked->bench)
    spdlog::info("{}: passed{}{}", core::printable(opt.compare), speedup_text(checked->bench->speedup, checked->info.runtime),
                 target_runtime_note(opt));
  return finish(std::nullopt);
}

// A run that fails before any model is processed (on its --input files): logs the error, and the report says
// it for every model (a list in a batch), so a job that reads only the report sees it too.
int fail_before_run(const Options& opt, ReportFile& report, const core::Error& error, bool batch) {
  const int code = fail(error);
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
  add_protected_reads(opt, reads);
  if (auto safe = refuse_overwrites(reads, writes, batch); !safe) {
    fail(safe.error());
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
  if (!expanded) return fail_before_report(given, expanded.error());
  const Options& opt = *expanded;
  // Up to the report's staging, a failure still writes the report, saying it (fail_before_report).
  if (const std::string problem = usage_problem(opt); !problem.empty()) return fail_before_report(opt, {core::ErrorKind::kUsage, problem});
  // A Python --runtime without its interpreter or packages is a usage error, found before any model is written.
  if (auto probed = probe_runtime(opt); !probed) return fail_before_report(opt, probed.error());
  const bool batch = opt.compare.empty() && (opt.models.size() > 1 || !opt.out_dir.empty() || opt.from_directory);
  if (batch) {
    if (auto safe = check_batch_files(opt); !safe) return fail(safe.error());
  }
  // The output directory first, since the report may go into it; taken away again if the report cannot be staged.
  auto made_dirs = create_out_dir(opt.out_dir);
  if (!made_dirs) return fail_before_report(opt, made_dirs.error());
  auto report = stage_report(opt);
  if (!report) {
    remove_made_dirs(*made_dirs);
    return fail(report.error());
  }
  // --input files and --input-shape are read once, for every model and for both --verify and --bench.
  auto setup = runtime_setup(opt);
  if (!setup) return fail_before_run(opt, *report, setup.error(), batch);
  try {
    if (!opt.compare.empty()) return run_compare(opt, *setup, *report);
    return batch ? run_batch(opt, *setup, *report) : run_single(opt, *setup, *report);
  } catch (const std::bad_alloc&) {
    return fail({core::ErrorKind::kOutOfMemory, out_of_memory(opt.models.front(), "processing")});
  } catch (const std::exception& e) {
    return fail({core::ErrorKind::kInvalidModel, opt.models.front() + ": " + e.what()});
  }
}

}  // namespace dwdeconv::cli
