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

// `text` with each line longer than `width` broken at spaces, continued 2 columns past its own indent; runs of spaces
// inside a broken line become one.
std::string wrap_text(const std::string& text, size_t width);

// The completion script of `shell` ("bash" or "zsh") for the options declared on `app`, or "" for another shell.
// `dwdeconv-rewrite --completion SHELL` prints it; the build installs both (cli/CMakeLists.txt).
std::string completion_script(const CLI::App& app, const std::string& shell);

// Makes --help (and so the man page) fit in `width` columns.
void wrap_help(CLI::App& app, size_t width = 100);

}  // namespace dwdeconv::cli
