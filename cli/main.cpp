// dwdeconv-rewrite: rewrites clean xs depthwise ConvTranspose nodes into polyphase Conv + Concat +
// DepthToSpace. This file only parses options, sets up logging, prints errors and picks exit codes.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <thread>
#include <filesystem>
#include <functional>
#include <map>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <onnx/defs/schema.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/exit_codes.h"
#include "cli/report.h"
#include "cli/version.h"
#include "onnx_io/external_data.h"
#include "onnx_io/model_io.h"
#include "onnx_io/validate.h"
#include "rewrite/recognisers.h"
#include "rewrite/rewriter.h"
#include "runtime_check/bench.h"
#include "runtime_check/tensor_io.h"
#include "runtime_check/verify.h"

namespace {

using namespace dwdeconv;

struct Options {
  std::vector<std::string> models;  // one, or several for a batch
  std::string output;
  std::string out_dir;               // batch output directory
  size_t jobs = 1;
  std::string report;
  std::string compare;  // --compare OTHER: verify OTHER against the input, no rewrite
  bool dry_run = false;
  bool check = false;
  bool verify = false;
  bool bench = false;
  size_t runs = 10;
  bool explicit_pad = false;
  int64_t max_phases = rewrite::kDefaultMaxPhases;
  std::vector<std::string> only;
  std::vector<std::string> skip;
  std::vector<std::string> forms;  // --forms; empty means every form (rewrite::known_forms())
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
  dwdeconv-rewrite model.onnx -o model.xnn.onnx    rewrite every clean depthwise ConvTranspose
  dwdeconv-rewrite model.onnx --dry-run            print the plan, write nothing
  dwdeconv-rewrite model.onnx --check              CI gate: exit 1 if any node would be rewritten
  dwdeconv-rewrite model.onnx -o out.onnx --verify    rewrite, then run both through XNNPACK and diff
  dwdeconv-rewrite model.onnx --compare out.onnx   verify any pair without rewriting
  dwdeconv-rewrite model.onnx -o out.onnx --bench --runs 20    time both models on XNNPACK
  dwdeconv-rewrite a.onnx b.onnx --out-dir out/ -j 2    a batch; one failure does not stop the others
  dwdeconv-rewrite - -o - < in.onnx > out.onnx     stdin to stdout

Exit status:
  0 ok; 1 --check found a node to rewrite, or verification failed; 2 usage error; 3 invalid model, failed
  output validation, or I/O error. Nothing is written unless the run succeeds.)";

// Passes every log message through cli::printable before the terminal sink formats and colours it: messages
// quote node and tensor names straight from the model, and those are untrusted bytes.
class PrintableSink : public spdlog::sinks::sink {
 public:
  explicit PrintableSink(std::shared_ptr<spdlog::sinks::sink> inner) : inner_(std::move(inner)) {}
  void log(const spdlog::details::log_msg& msg) override {
    const std::string text = cli::printable(std::string(msg.payload.data(), msg.payload.size()));
    spdlog::details::log_msg safe = msg;
    safe.payload = text;
    inner_->log(safe);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override { inner_->set_formatter(std::move(formatter)); }

 private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
};

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

// A whole decimal number in [low, INT64_MAX]; the message names the range in words, not a 19-digit bound.
CLI::Validator whole_number_from(int64_t low) {
  const std::string range = std::to_string(low) + " to 2^63-1";
  return CLI::Validator(
      [low, range](std::string& text) -> std::string {
        int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec != std::errc() || ptr != end || value < low) return "'" + text + "' is not a whole number from " + range;
        return "";
      },
      "INT in " + range);
}

// A finite number >= 0: NaN would fail every comparison and an infinite tolerance would pass every one.
CLI::Validator finite_non_negative() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value < 0) {
          return "'" + text + "' is not a finite number >= 0";
        }
        return "";
      },
      "finite NUMBER >= 0");
}

// Said instead of a bare std::bad_alloc.
std::string out_of_memory(const std::string& input, const std::string& doing) {
  return "out of memory while " + doing + " " + input + "; lower --max-phases if it was raised, or free memory";
}

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

// Parses --input-shape and loads --input files, once per run; errors are usage errors or unreadable input files.
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
    // XNNPACK's output clamps (min -inf, max +inf) do not keep NaN: each path turns it into -inf or +inf its own
    // way, so NaN inputs would fail a correct rewrite element by element. --bench only times, so it may run them.
    const bool compares = opt.verify || !opt.compare.empty();
    for (int64_t k = 0; compares && tensor->tensor.is_float() && k < tensor->tensor.numel(); ++k) {
      if (std::isnan(tensor->tensor.get(k))) {
        return core::Error{core::ErrorKind::kUsage,
                           "--input " + path + ": element " + std::to_string(k) + " is NaN; --verify and --compare cannot compare "
                           "NaN inputs, since XNNPACK's output clamps do not keep NaN (each model turns it into -inf or +inf "
                           "its own way): give an input without NaN"};
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

// Runs the verifier and logs its summary; the result, or the reason nothing could be verified.
core::Result<runtime_check::VerifyResult> run_verify(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                                     const Options& opt, const RuntimeSetup& setup) {
  runtime_check::VerifyOptions vo;
  vo.input_shapes = setup.input_shapes;
  vo.inputs = setup.inputs;
  vo.seed = opt.seed;
  vo.threads = opt.threads;
  vo.tolerances = {opt.atol, opt.rtol};
  vo.progress = setup.progress;
  auto result = runtime_check::verify_models(original, rewritten, vo);
  clear_progress(setup);
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
                                                   const Options& opt, const RuntimeSetup& setup) {
  runtime_check::BenchOptions bo;
  bo.input_shapes = setup.input_shapes;
  bo.inputs = setup.inputs;
  bo.seed = opt.seed;
  bo.threads = opt.threads;
  bo.runs = opt.runs;
  bo.profile_runs = opt.verbosity > 0 ? 3 : 0;  // extra profiled runs only when -v will print them
  bo.progress = setup.progress;
  auto result = runtime_check::bench_models(original, rewritten, bo);
  clear_progress(setup);
  if (!result) return result;
  spdlog::info("bench ({} thread{}, median of {} interleaved runs): original {:.3f} ms, rewritten {:.3f} ms, {:.2f}x",
               result->threads, result->threads == 1 ? "" : "s", result->runs, result->original_ms, result->rewritten_ms,
               result->speedup);
  spdlog::debug("bench placement, original: {}", result->original_placement);
  spdlog::debug("bench placement, rewritten: {}", result->rewritten_placement);
  if (bo.profile_runs > 0) {
    spdlog::debug("profile of the original model (separate runs):\n{}", runtime_check::format_profile(result->original_profile));
    spdlog::debug("profile of the rewritten model (separate runs):\n{}", runtime_check::format_profile(result->rewritten_profile));
  }
  return result;
}

std::string speedup_text(double speedup) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "; %.2fx faster on XNNPACK", speedup);
  return buf;
}

// Where the report goes: nowhere (no --report), stdout (--report -), or a file staged before anything else is
// written (see stage_report).
struct ReportFile {
  bool to_stdout = false;
  std::optional<onnx_io::StagedFile> file;
};

int write_report(ReportFile& report, const std::string& json) {
  if (report.to_stdout) {
    std::cout << json << std::flush;
    if (!std::cout) return fail(cli::kExitInvalidModel, "--report -: cannot write the report to stdout");
    return cli::kExitOk;
  }
  if (!report.file) return cli::kExitOk;
  if (auto written = report.file->commit(json); !written) return fail(cli::kExitInvalidModel, written.error().message);
  return cli::kExitOk;
}

// A file the run reads or writes, for refusing to write over an input.
enum class FileRole { kInputModel, kInputData, kInputTensor, kOutputModel, kOutputData, kReport };
struct RunFile {
  std::string path;
  FileRole role;
  std::string model;  // the input model it belongs to; empty for the report and --input files
};

std::string describe(const RunFile& f) {
  switch (f.role) {
    case FileRole::kInputModel: return "the input model";
    case FileRole::kInputData: return "external data that " + f.model + " reads";
    case FileRole::kInputTensor: return "an --input file";
    case FileRole::kOutputModel: return "the output model of " + f.model;
    case FileRole::kOutputData: return "the data file of " + f.model + "'s output";
    case FileRole::kReport: return "the report";
  }
  return "";
}

// A usage error when a file the run writes is a file it reads, or another file it writes, compared by resolved
// path and by identity. The one overlap allowed is -o naming its own input model: an atomic in-place rewrite.
core::Status refuse_overwrites(const std::vector<RunFile>& reads, const std::vector<RunFile>& writes, bool batch) {
  auto refusal = [batch](const RunFile& w, const RunFile& other, const char* relation) {
    std::string hint = "; choose another path";
    if (w.role == FileRole::kOutputData) {
      hint = batch ? "; write the batch to another --out-dir" : "; give the output's data file another name with --external-data NEW";
    }
    return core::Error{core::ErrorKind::kUsage, "refusing to write " + w.path + " (" + describe(w) + "): it " + relation + " " +
                                                    other.path + " (" + describe(other) + "), nothing written" + hint};
  };
  for (size_t i = 0; i < writes.size(); ++i) {
    const RunFile& w = writes[i];
    for (const RunFile& r : reads) {
      const bool in_place = w.role == FileRole::kOutputModel && r.role == FileRole::kInputModel && w.model == r.model;
      if (!in_place && onnx_io::same_file(w.path, r.path)) return refusal(w, r, "is");
    }
    for (size_t j = 0; j < i; ++j) {
      if (onnx_io::same_file(w.path, writes[j].path)) return refusal(w, writes[j], "is also");
    }
  }
  return core::Ok{};
}

// A usage error when a file the run writes exists and is not a regular file once symlinks are followed (a
// directory, a device, a FIFO or a socket): an atomic write would replace it with a regular file. A symlink to
// a regular file is fine: the write goes to the file it points to, and the link stays.
core::Status check_write_targets(const std::vector<RunFile>& writes) {
  for (const RunFile& w : writes) {
    if (auto target = onnx_io::resolve_write_target(w.path); !target) {
      return core::Error{target.error().kind, "refusing to write " + describe(w) + ": " + target.error().message +
                                                  "; nothing written (`-o -` writes the model to stdout, `--report -` the report)"};
    }
  }
  return core::Ok{};
}

// Checks the report's path and creates its temporary file up front, so a report that cannot be written fails
// before any model is written: exit 2 for a path that is not a regular file, or for `--report -` when stdout
// already carries the model or the plan; exit 3 for an unwritable one. write_report puts it in place at the end.
core::Result<ReportFile> stage_report(const Options& opt) {
  ReportFile report;
  if (opt.report.empty()) return report;
  if (opt.report == "-") {
    if (opt.output == "-" || opt.dry_run) {
      return core::Error{core::ErrorKind::kUsage, std::string("--report -: stdout already carries the ") +
                                                      (opt.output == "-" ? "model (-o -)" : "plan (--dry-run)") +
                                                      "; give the report a file"};
    }
    report.to_stdout = true;
    return report;
  }
  if (auto safe = check_write_targets({{opt.report, FileRole::kReport, ""}}); !safe) return safe.error();
  auto staged = onnx_io::StagedFile::create(opt.report);
  if (!staged) return staged.error();
  report.file = std::move(*staged);
  return report;
}

// The --input files, which the run reads too.
void add_input_tensor_files(const Options& opt, std::vector<RunFile>& reads) {
  for (const auto& text : opt.input_files) {
    const auto eq = text.find('=');
    reads.push_back({eq == std::string::npos ? text : text.substr(eq + 1), FileRole::kInputTensor, ""});
  }
}

// The model file and the data files of one loaded input, as reads.
void add_model_reads(const std::string& input, const std::set<std::string>& data_files, std::vector<RunFile>& reads) {
  if (input != "-") reads.push_back({input, FileRole::kInputModel, input});
  for (const auto& f : data_files) reads.push_back({f, FileRole::kInputData, input});
}

// The files a --compare model reads: the model and its data files, as far as they can be known when it failed
// to load (its data files are then listed from the model alone, when it parses).
void add_compare_reads(const std::string& path, const core::Result<onnx_io::LoadedModel>& loaded, std::vector<RunFile>& reads) {
  std::set<std::string> data_files;
  if (loaded) {
    data_files = loaded->data_files;
  } else if (auto listed = onnx_io::model_data_files(path)) {
    data_files = std::move(*listed);
  }
  add_model_reads(path, data_files, reads);
}

// --compare: verify OTHER against MODEL without rewriting anything. The report is written however it ends,
// except when it would be a file the run reads.
int run_compare(const Options& opt, const RuntimeSetup& setup, ReportFile& report) {
  const std::string& input = opt.models.front();
  cli::RunInfo info;
  info.input = input;
  info.compared = opt.compare;
  auto finish = [&](int code, const std::string& message) {
    if (!message.empty()) fail(code, message);
    info.exit_code = code;
    info.error = message;
    if (int written = write_report(report, cli::report_json(info, {})); written != cli::kExitOk) return written;
    return code;
  };
  auto loaded_original = onnx_io::load_model_with_external_data(input);
  auto loaded_other = onnx_io::load_model_with_external_data(opt.compare);
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
  auto verified = run_verify(original, other, opt, setup);
  if (!verified) return finish(exit_code_for(verified.error()), "cannot verify " + opt.compare + ": " + verified.error().message);
  info.verify = *verified;
  if (verified->passed && opt.bench) {
    auto timed = run_bench(original, other, opt, setup);
    if (!timed) return finish(exit_code_for(timed.error()), timed.error().message);
    info.bench = *timed;
  }
  if (!verified->passed) return finish(cli::kExitCheckFailed, opt.compare + ": verification failed");
  return finish(cli::kExitOk, "");
}

// The name of the output's data file (next to it): --external-data NAME, else OUT.data when the input had
// external data or --external-data-threshold asks for it; empty when the output keeps every tensor inline.
std::string data_file_name(const Options& opt, const std::string& output, bool input_had_external) {
  if (!opt.external_data.empty()) return opt.external_data;
  if (!input_had_external && !opt.external_threshold) return "";
  return std::filesystem::path(output).filename().string() + ".data";
}

// The files one model's run writes: the output model and its data file (when it writes a model) and the report.
std::vector<RunFile> model_writes(const Options& opt, const std::string& input, const std::string& output, bool input_had_external) {
  std::vector<RunFile> writes;
  if (!opt.dry_run && !opt.check && output != "-") {
    writes.push_back({output, FileRole::kOutputModel, input});
    if (const std::string name = data_file_name(opt, output, input_had_external); !name.empty()) {
      writes.push_back({(std::filesystem::path(output).parent_path() / name).string(), FileRole::kOutputData, input});
    }
  }
  if (!opt.report.empty() && opt.report != "-") writes.push_back({opt.report, FileRole::kReport, ""});
  return writes;
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
  cli::RunInfo info;
  rewrite::RewriteResult result;
  bool overwrite_refused = false;  // a file it would write is one it reads: write nothing, not even the report
};

// Loads, validates, rewrites, checks and writes one model. Errors are logged here and end in info.exit_code.
ModelOutcome process_model(const Options& opt, const RuntimeSetup& setup, const std::string& input, const std::string& output,
                           bool batch) {
  ModelOutcome out;
  cli::RunInfo& info = out.info;
  info.input = input;
  auto finish = [&out](int code, const std::string& message) {
    out.info.exit_code = fail(code, message);
    out.info.error = message;
    out.info.output.clear();  // a failed run wrote no model: the report says null for both
    out.info.validation.clear();
    return out;
  };
  PhaseTimer timer;
  auto loaded = load_input(input);
  if (!loaded) return finish(exit_code_for(loaded.error()), loaded.error().message);
  onnx::ModelProto& model = loaded->model;
  if (!loaded->external_tensors.empty()) spdlog::debug("{}: {} tensors read from external data", input, loaded->external_tensors.size());
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
  if (!input_check) return finish(cli::kExitInvalidModel, input + ": invalid model: " + input_check.error().message);
  if (!input_check->full) spdlog::warn("{}: {}", input, input_check->detail);
  timer.mark("validate input");

  std::optional<onnx::ModelProto> original;
  if (opt.verify || opt.bench) original = model;  // verify and bench run the model as it was

  rewrite::RewriteOptions ro;
  ro.emit.explicit_pad = opt.explicit_pad;
  ro.emit.max_phases = opt.max_phases;
  ro.only = {opt.only.begin(), opt.only.end()};
  ro.skip = {opt.skip.begin(), opt.skip.end()};
  if (!opt.forms.empty()) ro.forms = {opt.forms.begin(), opt.forms.end()};
  std::optional<core::Result<rewrite::RewriteResult>> attempt;
  try {
    attempt.emplace(rewrite::rewrite_model(model, ro));
  } catch (const std::bad_alloc&) {
    // A raised --max-phases can plan more phases than memory holds.
    return finish(cli::kExitInvalidModel, out_of_memory(input, "rewriting"));
  }
  auto& rewritten = *attempt;
  if (!rewritten) return finish(exit_code_for(rewritten.error()), input + ": " + rewritten.error().message);
  out.result = std::move(*rewritten);
  const rewrite::RewriteResult& result = out.result;
  timer.mark("rewrite");
  for (const auto& name : result.unmatched_names) {
    const std::string message = "--only/--skip name '" + name + "' matches no ConvTranspose or hand-written upsampler in " + input;
    // In a batch, each model has its own node names; a name missing from one model is not an error.
    if (!batch) return finish(cli::kExitUsage, message);
    spdlog::debug("{}", message);
  }

  for (const auto& n : result.nodes) {
    if (n.rewritten) {
      spdlog::debug("{}: rewrote '{}' into {} nodes", input, n.summary.name, n.emitted_nodes.size());
    } else {
      const bool deconv = n.summary.form == "conv_transpose";
      spdlog::info("{}: kept {} '{}': {}", input, deconv ? "ConvTranspose" : n.summary.form + " upsampler", n.summary.name, n.reason);
    }
  }
  if (opt.dry_run) std::cout << (batch ? input + ":\n" : std::string()) << cli::plan_text(result) << std::flush;

  const bool writes_model = !opt.dry_run && !opt.check;
  std::string summary = std::string(writes_model ? "rewrote " : "would rewrite ") + std::to_string(result.rewritten) + " of " +
                        std::to_string(result.nodes.size()) + " " + cli::upsampler_noun(result) + " (kept " + std::to_string(result.kept) + ")";
  if (writes_model) {
    auto validation = onnx_io::validate_model(model, rewrite::emitted_node_names(result));
    if (!validation) {
      return finish(cli::kExitInvalidModel, input + ": the rewritten model failed validation, nothing written: " + validation.error().message);
    }
    if (!validation->full) spdlog::warn("{}: {}", input, validation->detail);
    info.validation = validation->detail;
    timer.mark("validate output");

    if (opt.verify && result.rewritten == 0) {
      // The output is the input: running both would only test the executor, and fail on ops it lacks.
      runtime_check::VerifyResult nothing;
      nothing.mode = runtime_check::VerifyMode::kNone;
      nothing.mode_reason = "nothing was rewritten: the output is the input";
      nothing.passed = true;
      info.verify = nothing;
      spdlog::info("{}: nothing to verify: no node was rewritten, so the output is the input", input);
      summary += "; nothing to verify";
    } else if (opt.verify) {
      auto verified = run_verify(*original, model, opt, setup);
      timer.mark("verify");
      if (!verified) return finish(exit_code_for(verified.error()), input + ": cannot verify the rewrite, nothing written: " + verified.error().message);
      info.verify = *verified;
      if (!verified->passed) return finish(cli::kExitCheckFailed, input + ": verification failed, nothing written");
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2g", verified->max_abs_error());
      summary += std::string("; verified: max abs error ") + buf;
    }
    if (opt.bench) {
      auto timed = run_bench(*original, model, opt, setup);
      timer.mark("bench");
      if (!timed) return finish(exit_code_for(timed.error()), input + ": --bench: " + timed.error().message);
      info.bench = *timed;
      summary += speedup_text(timed->speedup);
    }

    const auto ext = external_save_options(opt, output, loaded->external_tensors, result);
    if (auto saved = save_output(model, output, ext); !saved) return finish(exit_code_for(saved.error()), saved.error().message);
    if (!ext.data_name.empty()) spdlog::debug("{}: tensor data written to {}", output, ext.data_name);
    timer.mark("save");
    info.output = output;
  }
  if (opt.check && result.rewritten > 0) {
    for (const auto& n : result.nodes) {
      if (n.rewritten) {
        spdlog::error("{}: {} '{}' would be rewritten", input,
                      n.summary.form == "conv_transpose" ? "ConvTranspose" : n.summary.form + " upsampler", n.summary.name);
      }
    }
    return finish(cli::kExitCheckFailed, input + ": check failed: " + std::to_string(result.rewritten) + " of " +
                                             std::to_string(result.nodes.size()) + " " + cli::upsampler_noun(result) + " would be rewritten");
  }
  spdlog::info("{}{}{}", batch ? input + ": " : std::string(), summary, writes_model ? " -> " + output : std::string());
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
    cli::RunInfo info;
    info.exit_code = code;
    info.error = error.message;
    info.input = input;
    info.compared = opt.compare;
    entries.push_back(cli::report_json(info, {}));
  }
  if (int written = write_report(report, batch ? cli::report_list_json(entries) : entries.front()); written != cli::kExitOk) return written;
  return code;
}

// One model, as `dwdeconv-rewrite MODEL -o OUT` (or --dry-run / --check).
int run_single(const Options& opt, const RuntimeSetup& setup, ReportFile& report) {
  const ModelOutcome out = process_model(opt, setup, opt.models.front(), opt.output, /*batch=*/false);
  // A refused overwrite writes nothing at all, not even the report (it may be the file in question).
  if (out.overwrite_refused) return out.info.exit_code;
  if (int code = write_report(report, cli::report_json(out.info, out.result)); code != cli::kExitOk) return code;
  return out.info.exit_code;
}

// Where a batch writes `input`: OUT_DIR/<its file name>.
std::string batch_output(const Options& opt, const std::string& input) {
  return opt.out_dir.empty() ? std::string() : (std::filesystem::path(opt.out_dir) / std::filesystem::path(input).filename()).string();
}

// Before a batch writes anything: no file one model writes (its output, its data file, the report) may be a
// file another model writes or reads. Every output may get a data file (OUT.data), whether or not its model
// turns out to need one.
core::Status check_batch_files(const Options& opt) {
  namespace fs = std::filesystem;
  std::vector<RunFile> reads, writes;
  for (const auto& input : opt.models) {
    const std::string output = batch_output(opt, input);
    if (!output.empty() && !opt.dry_run && !opt.check) {
      writes.push_back({output, FileRole::kOutputModel, input});
      writes.push_back({output + ".data", FileRole::kOutputData, input});
    }
  }
  if (!opt.report.empty() && opt.report != "-") writes.push_back({opt.report, FileRole::kReport, ""});
  add_input_tensor_files(opt, reads);
  // A model's data files lie in its directory (load refuses others). Parsing a model to list them is only
  // needed when a written file could be one: it exists already, or the outputs go below that directory.
  const bool any_exists = std::any_of(writes.begin(), writes.end(), [](const RunFile& f) {
    std::error_code ec;
    return fs::exists(f.path, ec);
  });
  std::error_code ec;
  const fs::path out_dir = fs::weakly_canonical(fs::absolute(opt.out_dir, ec), ec);
  for (const auto& input : opt.models) {
    std::set<std::string> data_files;
    const fs::path dir = fs::weakly_canonical(fs::absolute(input, ec).parent_path(), ec);
    const bool outputs_below = !opt.out_dir.empty() && std::mismatch(dir.begin(), dir.end(), out_dir.begin(), out_dir.end()).first == dir.end();
    if (any_exists || outputs_below) {
      // A model that cannot be read fails on its own later, and is never written.
      if (auto listed = onnx_io::model_data_files(input)) data_files = std::move(*listed);
    }
    add_model_reads(input, data_files, reads);
  }
  return refuse_overwrites(reads, writes, /*batch=*/true);
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
  int code = cli::kExitOk;
  size_t failed = 0;
  for (const auto& o : outcomes) {
    entries.push_back(cli::report_json(o.info, o.result));
    code = std::max(code, o.info.exit_code);
    failed += o.info.exit_code != cli::kExitOk;
  }
  if (int written = write_report(report, cli::report_list_json(entries)); written != cli::kExitOk) return written;
  const std::string line = "batch: " + std::to_string(opt.models.size()) + " models, " + std::to_string(opt.models.size() - failed) +
                           " ok, " + std::to_string(failed) + " failed";
  if (failed) {
    spdlog::error("{}", line);
  } else {
    spdlog::info("{}", line);
  }
  return code;
}

// The directories create_out_dir made, innermost first. However the run ends, those still empty then are
// removed again (see remove_made_dirs), so a batch whose models all failed leaves no empty --out-dir behind.
class MadeDirs {
 public:
  explicit MadeDirs(std::vector<std::filesystem::path> dirs) : dirs_(std::move(dirs)) {}
  MadeDirs(MadeDirs&& other) noexcept : dirs_(std::exchange(other.dirs_, {})) {}
  MadeDirs& operator=(MadeDirs&&) = delete;
  ~MadeDirs();
  friend void remove_made_dirs(MadeDirs& made);

 private:
  std::vector<std::filesystem::path> dirs_;
};

// Creates --out-dir and its missing parents (nothing when `dir` is empty), and remembers which it made.
core::Result<MadeDirs> create_out_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> made;
  if (dir.empty()) return MadeDirs(std::move(made));
  std::error_code ec;
  for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && !fs::exists(p, ec) && !ec; p = p.parent_path()) {
    made.push_back(p);
    if (p == p.parent_path()) break;
  }
  fs::create_directories(dir, ec);
  if (ec) return core::io_error(dir + ": cannot create the output directory: " + ec.message());
  return MadeDirs(std::move(made));
}

// Takes away the directories create_out_dir made, if they are still empty: a run that stops before writing
// anything, or whose models all failed, leaves nothing behind.
void remove_made_dirs(MadeDirs& made) {
  std::error_code ec;
  for (const auto& d : made.dirs_) std::filesystem::remove(d, ec);  // rmdir: only when empty
  made.dirs_.clear();
}

MadeDirs::~MadeDirs() { remove_made_dirs(*this); }

// Combinations that cannot mean anything; an empty string when the options make sense.
std::string usage_problem(const Options& opt) {
  const bool batch = opt.models.size() > 1 || !opt.out_dir.empty();
  if (!opt.compare.empty()) {
    if (batch || !opt.output.empty() || opt.dry_run || opt.check || opt.verify) {
      return "--compare runs alone on one MODEL: drop -o, --out-dir, --dry-run, --check and --verify";
    }
    return "";
  }
  if (opt.dry_run && opt.check) return "--dry-run and --check cannot be combined";
  for (const auto& form : opt.forms) {
    const auto& known = rewrite::known_forms();
    if (std::find(known.begin(), known.end(), form) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return "--forms: unknown form '" + form + "' (known: " + list + ")";
    }
  }
  if (batch && !opt.output.empty()) return "several models take --out-dir DIR, not -o";
  if ((opt.dry_run || opt.check) && (!opt.output.empty() || !opt.out_dir.empty())) {
    return std::string(opt.dry_run ? "--dry-run" : "--check") + " writes no model; drop -o/--out-dir";
  }
  if ((opt.dry_run || opt.check) && (opt.verify || opt.bench)) return "--verify and --bench need a rewritten model: use -o OUT, not --dry-run or --check";
  if (!opt.dry_run && !opt.check && opt.output.empty() && opt.out_dir.empty()) {
    return batch ? "several models need --out-dir DIR, --dry-run or --check" : "no output: give -o OUT, --dry-run, --check or --compare OTHER";
  }
  const bool running = opt.verify || opt.bench || !opt.compare.empty();
  if (!running && (!opt.input_shapes.empty() || !opt.input_files.empty())) {
    return "--input-shape and --input apply to --verify, --bench and --compare";
  }
  if (!opt.verify && opt.compare.empty() && (opt.atol || opt.rtol)) return "--atol and --rtol apply to --verify and --compare";
  if (opt.output.empty() && opt.out_dir.empty() && (!opt.external_data.empty() || opt.external_threshold)) {
    return "--external-data options need -o OUT or --out-dir";
  }
  if (opt.external_data.find('/') != std::string::npos) return "--external-data takes a file name (written next to OUT), not a path";
  if (batch && !opt.external_data.empty()) {
    return "--external-data NAME names one file, which every model of a batch would write; drop it: "
           "--external-data-threshold alone still moves tensors out, into each output's own <output file name>.data";
  }
  std::set<std::string> names;
  for (const auto& m : opt.models) {
    if (m == "-" && batch) return "'-' (stdin) reads a single model";
    if (!opt.out_dir.empty() && !names.insert(std::filesystem::path(m).filename().string()).second) {
      return "two models are named '" + std::filesystem::path(m).filename().string() + "': their outputs in --out-dir would collide";
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"Rewrites clean xs depthwise ConvTranspose nodes into polyphase depthwise Convs + Concat + "
               "DepthToSpace(DCR), which XNNPACK runs many times faster, and checks the result on XNNPACK.",
               "dwdeconv-rewrite"};
  app.footer(kExamples);
  app.set_version_flag("--version", std::string("dwdeconv-rewrite ") + cli::kFullVersion);
  app.add_option("models", opt.models, "Input ONNX model(s); - reads one model from stdin")->required();
  app.add_option("-o,--output", opt.output, "Output model (written atomically; may equal the input); - writes to stdout");
  app.add_option("--out-dir", opt.out_dir, "With several models: write each one here, under its own file name");
  app.add_option("-j,--jobs", opt.jobs, "With several models: how many to process at once (default 1)")->check(CLI::Range(1, 256));
  app.add_flag("--dry-run", opt.dry_run, "Print the plan, one line per ConvTranspose, and write no model");
  app.add_flag("--check", opt.check, "Exit 1 if any node would be rewritten; write no model");
  app.add_option("--only", opt.only, "Rewrite only the ConvTranspose with this name (repeatable)")->allow_extra_args(false);
  app.add_option("--skip", opt.skip, "Never rewrite the ConvTranspose with this name (repeatable)")->allow_extra_args(false);
  app.add_option("--forms", opt.forms,
                 "Upsampler forms to rewrite, comma-separated: conv_transpose, nearest_mask (default: all)")
      ->delimiter(',')
      ->allow_extra_args(false);
  app.add_flag("--explicit-pad", opt.explicit_pad, "Emit phase pads as Pad nodes instead of folding them into the Convs");
  app.add_option("--max-phases", opt.max_phases, "Keep a node whose stride s would emit more than N phases, s*s (default 64: strides up to 8)")
      ->check(whole_number_from(1));
  app.add_option("--report", opt.report, "Write a JSON report to this file");
  app.add_flag("--verify", opt.verify, "Run the original and the rewritten model through XNNPACK and compare outputs");
  app.add_option("--compare", opt.compare, "Verify this model against MODEL without rewriting (exit 1 on mismatch)");
  app.add_option("--input-shape", opt.input_shapes, "Fix an input's dims, e.g. image=1x4x256x256 (repeatable)")->allow_extra_args(false);
  app.add_option("--input", opt.input_files, "Feed an input from a .npy or TensorProto .pb file: [NAME=]FILE (repeatable)")->allow_extra_args(false);
  app.add_option("--seed", opt.seed, "Seed of the random inputs (default 0)");
  app.add_option("--atol", opt.atol, "Absolute tolerance (default per dtype: f32 1e-6, f16 1e-3)")->check(finite_non_negative());
  app.add_option("--rtol", opt.rtol, "Tolerance relative to each output's max |value| (default f32 1e-4, f16 1e-2)")->check(finite_non_negative());
  app.add_flag("--bench", opt.bench, "Time the original and the rewritten model on XNNPACK (medians, speedup)");
  app.add_option("--runs", opt.runs, "Timed runs of each model for --bench (default 10)")->check(CLI::Range(1, 100000));
  app.add_option("--threads", opt.threads, "XNNPACK threads for --verify, --bench and --compare (default 1)")->check(CLI::Range(1, 256));
  app.add_option("--external-data", opt.external_data,
                 "Store tensors in this file next to OUT (default OUT.data when the input had external data); not in a batch");
  app.add_option("--external-data-threshold", opt.external_threshold,
                 "Store every tensor of at least this many bytes outside, in NAME or OUT.data (default 1024 with --external-data)")
      ->check(whole_number_from(0));
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

  // Colour only on a terminal, and never with NO_COLOR set (https://no-color.org).
  const char* no_color = std::getenv("NO_COLOR");
  auto terminal = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      no_color != nullptr && *no_color != '\0' ? spdlog::color_mode::never : spdlog::color_mode::automatic);
  auto logger = std::make_shared<spdlog::logger>("dwdeconv", std::make_shared<PrintableSink>(terminal));
  logger->set_pattern("dwdeconv-rewrite: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(opt.verbosity < 0 ? spdlog::level::err : opt.verbosity > 0 ? spdlog::level::debug : spdlog::level::info);

  if (const std::string problem = usage_problem(opt); !problem.empty()) return fail(cli::kExitUsage, problem);
  const bool batch = opt.compare.empty() && (opt.models.size() > 1 || !opt.out_dir.empty());
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
    return fail(cli::kExitInvalidModel, out_of_memory(opt.models.front(), "processing"));
  } catch (const std::exception& e) {
    return fail(cli::kExitInvalidModel, opt.models.front() + ": " + e.what());
  }
}
