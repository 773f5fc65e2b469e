// Command-line parse errors in the tool's own voice: the "dwdeconv-rewrite: error:" prefix every other error
// has, and for an unknown option the nearest known one ("did you mean '--verify'?"). And the report a run still
// writes when it stops before its report is staged: after a usage error, the command line's or its options'.
#pragma once

#include <string>

#include "cli/options.h"
#include "core/result.h"

// CLI11 is included only where options are declared or parsed (docs/development.md, "Build time").
namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace dwdeconv::cli {

// The known option nearest to `word` (an unknown "--verfy", "--input-shapes", "--overwrite-input-shape"), or ""
// when none is near enough to be a likely typo.
std::string nearest_option(const CLI::App& app, const std::string& word);

// The message for a CLI11 parse error, without the prefix: an unknown option is named with a suggestion,
// a missing MODEL says what a command looks like, anything else is CLI11's own text.
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& error);

// What a command line CLI11 refused still says, from the words it read (CLI11 stores values only once the whole
// line parses): the models, --report, and the options that name the files a run reads and writes (-o, --out-dir,
// --suffix, --compare, --input, --external-data, --external-data-threshold, --dry-run, --check). An option given
// more than once, or without its value, keeps its default.
Options options_as_given(const CLI::App& app);

// The report of a run that stopped with `message` (exit `exit_code`) before its report was staged: for each model an
// object with the exit code and the error (a list in a batch; one object with a null "input" when no model was
// given). Nothing when opt.report is empty. Not written, and the refusal is the error, when the report's path is a
// file the run reads (a model, its data, an --input file, the --compare model) or one it would write (an output model
// or its data file), or cannot be staged (cli/output_files.h, stage_report).
core::Status write_early_report(const Options& opt, int exit_code, const std::string& message);

// Logs `error` and writes the report saying it (write_early_report; a report that cannot be written is logged too);
// returns the error's exit code.
int fail_before_report(const Options& opt, const core::Error& error);

}  // namespace dwdeconv::cli
