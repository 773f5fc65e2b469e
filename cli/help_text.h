// What --help (and so the man page) says first, and how it names option values.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace dwdeconv::cli {

// The first lines of --help: which forms are rewritten, into what, for which runtimes, and where the rewrite
// does not pay off.
std::string app_description();

// Replaces CLI11's value descriptions ("UINT:INT in [1 - 256]", "TEXT ...") with the names the help text uses
// (N, FILE, NAME, [NAME:]DIMS); an option without an entry shows its own type name, without validator text.
void use_readable_value_names(CLI::App& app);

}  // namespace dwdeconv::cli
