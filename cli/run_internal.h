// What cli/run.cpp, cli/run_checks.cpp and cli/process_model.cpp share: the pieces of one run of the tool. Internal to
// the CLI; cli/run.h is the entry point.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "cli/input_shape.h"
#include "cli/options.h"
#include "cli/output_files.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "cli/runtime_python.h"
#include "core/result.h"
#include "rewrite/rewriter.h"
#include "runtime_check/bench.h"
#include "runtime_check/tensor.h"
#include "runtime_check/verify.h"

namespace dwdeconv::cli {

// Logs `e`'s message as an error and returns its exit code (exit_code_for, cli/exit_codes.h).
int fail(const core::Error& e);

// Logs the time since the previous mark at debug level (-v), to show where a run spends its time.
class PhaseTimer {
 public:
  void mark(const char* phase);

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Said instead of a bare std::bad_alloc.
std::string out_of_memory(const std::string& input, const std::string& doing);

// `e` as the error of a check that could not be done (kCannotVerify, exit 4), its message after `prefix`; a usage
// error (exit 2) and an I/O error (exit 3) keep their kind.
core::Error not_checked_error(const core::Error& e, const std::string& prefix);

// What the executor needs from the command line, shared by --verify, --compare and --bench.
struct RuntimeSetup {
  std::vector<InputShapeArg> input_shapes;  // resolved per model (a bare shape names its only input)
  std::vector<runtime_check::NamedTensor> inputs;
  std::function<void(const std::string&)> progress;  // empty unless stderr is a terminal
  std::shared_ptr<StatusLine> status;                // what `progress` draws on, or null
};

// Parses --input-shape and loads --input files, once per run; errors are usage errors or unreadable input files.
core::Result<RuntimeSetup> runtime_setup(const Options& opt);

// `shared` with the shapes of a model's input-shapes file (`side`, read from `side_path`) added for the inputs the
// command line gives none (merge_input_shapes); logs what it took from the file and what --input-shape overrode.
core::Result<RuntimeSetup> setup_with_shapes_file(const RuntimeSetup& shared, const std::vector<InputShapeArg>& side,
                                                  const onnx::ModelProto& model, const std::string& model_path,
                                                  const std::string& side_path);

// A verification's summary, line by line: info when it passed, error when it did not. `prefix` names the model in
// a batch.
void log_verify_summary(const runtime_check::VerifyResult& result, const std::string& prefix);

// What --verify and --bench found on opt.runtime, and where they ran.
struct RuntimeChecks {
  std::optional<runtime_check::VerifyResult> verify;
  std::optional<runtime_check::BenchResult> bench;
  RuntimeRunInfo info;
};

// Runs --verify (when `verify`) and --bench (when `bench`) on opt.runtime. The executor verifies first and times
// only a model that passed; a Python runtime converts and runs both models once for both. `result` (null for
// --compare) is the rewrite that wrote `rewritten`: its record names the upsamplers of the per-node table and the
// regions of per-node verification. An error's message starts with `verify_prefix` or `bench_prefix` when the
// executor's verification or timing failed.
core::Result<RuntimeChecks> run_checks(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                       const rewrite::RewriteResult* result, const Options& opt, const RuntimeSetup& setup,
                                       const std::string& model_path, PhaseLog& log, const std::string& prefix, bool verify, bool bench,
                                       const std::string& verify_prefix, const std::string& bench_prefix);

// The --min-speedup gate: "" when the bench passes it (or there is none), else why it fails.
std::string speedup_shortfall(const Options& opt, const RuntimeChecks& checks);

// The outcome of one model: its exit code (0 when it succeeded), and what the report says about it.
struct ModelOutcome {
  RunInfo info;
  rewrite::RewriteResult result;
  bool overwrite_refused = false;  // a file it would write is one it reads: write nothing, not even the report
};

// Loads, validates, rewrites, checks and writes one model (cli/process_model.cpp). Errors are logged there and end
// in info.exit_code.
ModelOutcome process_model(const Options& opt, const RuntimeSetup& setup, const std::string& input, const std::string& output, bool batch);

}  // namespace dwdeconv::cli
