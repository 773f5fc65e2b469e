// The machine-readable --report JSON and the --dry-run plan text.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/model_stats.h"
#include "cli/runtime_python.h"
#include "cli/tune.h"
#include "rewrite/rewriter.h"
#include "runtime_check/bench.h"
#include "runtime_check/verify.h"

namespace dwdeconv::cli {

// The report's "schema_version": raised when a member is removed, renamed, or changes its type or meaning (a
// member added keeps it). docs/report.md says what each version changed; docs/report.schema.json describes it.
inline constexpr int kReportSchemaVersion = 1;

struct RunInfo {
  int exit_code = 0;   // this model's exit code
  std::string error;   // why it failed; empty when it succeeded
  std::string input;   // the model as given; empty when the command line gave none (a usage error)
  std::string output;  // empty when nothing is written (--dry-run, --check)
  int64_t opset = 0;
  std::string validation;         // what the output validation checked; empty when nothing is written
  std::string compared;           // the other model of --compare; empty otherwise
  std::string input_shapes_file;  // the model's input-shapes file its checks ran with; empty without one
  // The model's stats before and after the rewrite (the report's "changes"); unset when it was not rewritten in memory.
  std::optional<std::pair<ModelStats, ModelStats>> stats;
  std::optional<runtime_check::VerifyResult> verify;
  std::optional<runtime_check::BenchResult> bench;
  std::optional<RuntimeRunInfo> runtime;        // where verify and bench ran, when either did
  std::optional<std::vector<TuneFigure>> tune;  // with --tune: each candidate's figure and decision
};

// {"schema_version", "tool_version", "exit_code", "error", "input", "output", "opset", "target", "cpu",
// "outside_delegate", "nodes": [...], "rewritten", "kept", "validation"}, plus "changes", "compared", "verify",
// "bench", "runtime" and "tune" when the run got to them. docs/report.md documents it, docs/report.schema.json is its
// schema.
std::string report_json(const RunInfo& run, const rewrite::RewriteResult& result);

// A batch report: the per-model objects of report_json (each its text), as a JSON list.
std::string report_list_json(const std::vector<std::string>& entries);

// One line per upsampler: decision, name, form (when not a ConvTranspose), C, k, s, resolved pads,
// output_padding, and the reason if kept.
std::string plan_text(const rewrite::RewriteResult& result);

// "ConvTranspose nodes" when every row is a ConvTranspose (as before hand-written forms were recognised),
// else "upsamplers": the noun of the summary lines.
std::string upsampler_noun(const rewrite::RewriteResult& result);

// A name quoted for a line of text (the plan, the --tune lines): a JSON string literal, so quotes, backslashes and
// controls are escaped. Bytes that are not part of well-formed UTF-8 become U+FFFD, one per byte.
std::string json_string(const std::string& s);

}  // namespace dwdeconv::cli
