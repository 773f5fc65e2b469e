// Command-line parse errors in the tool's own voice: the "dwdeconv-rewrite: error:" prefix every other error
// has, and for an unknown option the nearest known one ("did you mean '--verify'?").
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace dwdeconv::cli {

// The known option nearest to `word` (an unknown "--verfy", "--input-shapes", "--overwrite-input-shape"), or ""
// when none is near enough to be a likely typo.
std::string nearest_option(const CLI::App& app, const std::string& word);

// The message for a CLI11 parse error, without the prefix: an unknown option is named with a suggestion,
// a missing MODEL says what a command looks like, anything else is CLI11's own text.
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& error);

}  // namespace dwdeconv::cli
