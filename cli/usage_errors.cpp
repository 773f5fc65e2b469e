#include "cli/usage_errors.h"

#include <algorithm>
#include <vector>

namespace dwdeconv::cli {
namespace {

// Levenshtein distance: insertions, deletions and substitutions, each costing 1.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Every spelling of every option: "--verify", "-o", "--output", ...
std::vector<std::string> option_spellings(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const auto& l : option->get_lnames()) names.push_back("--" + l);
    for (const auto& s : option->get_snames()) names.push_back("-" + s);
  }
  return names;
}

}  // namespace

std::string nearest_option(const CLI::App& app, const std::string& word) {
  const std::string typed = word.substr(0, word.find('='));  // "--runs=5" is the option "--runs"
  std::string best;
  size_t best_distance = std::string::npos;
  for (const auto& name : option_spellings(app)) {
    const size_t d = edit_distance(typed, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  // A typo is a couple of keys; a longer name that contains a known one ("--overwrite-input-shape", onnxsim's
  // spelling, holds "--input-shape" without its dashes) is the neighbouring tool's option for the same thing.
  if (!best.empty() && typed.size() > 2 && best_distance <= std::max<size_t>(2, typed.size() / 4)) return best;
  std::string longest;
  for (const auto& name : option_spellings(app)) {
    if (name.size() > 4 && name.rfind("--", 0) == 0 && typed.find(name.substr(2)) != std::string::npos && name.size() > longest.size()) {
      longest = name;
    }
  }
  return longest;
}

std::string parse_error_message(const CLI::App& app, const CLI::ParseError& error) {
  if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
    std::string message;
    for (const auto& word : app.remaining()) {
      if (!message.empty()) message += "; ";
      const bool option = word.size() > 1 && word[0] == '-';
      message += (option ? "unknown option '" : "unexpected argument '") + word + "'";
      if (!option) continue;
      if (const std::string near = nearest_option(app, word); !near.empty()) message += ": did you mean '" + near + "'?";
    }
    if (!message.empty()) return message + " (see --help)";
  }
  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr && app.get_option("models")->count() == 0) {
    return "no model given: dwdeconv-rewrite MODEL.onnx -o OUT.onnx (see --help)";
  }
  return std::string(error.what()) + " (see --help)";
}

}  // namespace dwdeconv::cli
