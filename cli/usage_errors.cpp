#include "cli/usage_errors.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/output_files.h"
#include "cli/report.h"
#include "onnx_io/model_io.h"
#include "run_internal.h"

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

Options options_as_given(const CLI::App& app) {
  // The words CLI11 read for an option (its results), which it keeps whether or not the line parsed.
  auto words = [&app](const std::string& name) {
    const CLI::Option* option = app.get_option_no_throw(name);
    return option != nullptr ? option->results() : std::vector<std::string>{};
  };
  auto one = [&words](const std::string& name) {
    const std::vector<std::string> given = words(name);
    return given.size() == 1 ? given.front() : std::string();
  };
  Options opt;
  opt.models = words("models");
  opt.report = one("--report");
  opt.output = one("--output");
  opt.out_dir = one("--out-dir");
  opt.suffix = one("--suffix");
  opt.compare = one("--compare");
  opt.input_files = words("--input");
  opt.external_data = one("--external-data");
  opt.dry_run = !words("--dry-run").empty();
  opt.check = !words("--check").empty();
  const std::string threshold = one("--external-data-threshold");
  uint64_t bytes = 0;
  const char* end = threshold.data() + threshold.size();
  if (const auto [ptr, ec] = std::from_chars(threshold.data(), end, bytes); !threshold.empty() && ec == std::errc() && ptr == end) {
    opt.external_threshold = bytes;
  }
  return opt;
}

core::Status write_early_report(const Options& opt, int exit_code, const std::string& message) {
  namespace fs = std::filesystem;
  if (opt.report.empty()) return core::Ok{};
  auto directory = [](const std::string& model) {
    std::error_code ec;
    return model != "-" && fs::is_directory(model, ec);
  };
  // As run() decides it; a directory among the models (not yet expanded after a parse error) makes a batch too.
  const bool batch = opt.compare.empty() && (opt.models.size() > 1 || !opt.out_dir.empty() || opt.from_directory ||
                                             std::any_of(opt.models.begin(), opt.models.end(), directory));
  // The files the run names to read and to write: the report may be none of them, as a run that got further would
  // refuse it. The rest of those checks is moot: nothing else is written.
  std::vector<RunFile> named;
  std::vector<std::string> inputs = opt.models;
  if (!opt.compare.empty()) inputs.push_back(opt.compare);
  for (const auto& input : inputs) {
    std::set<std::string> data_files;
    if (input != "-" && !directory(input)) {
      if (auto listed = onnx_io::model_data_files(input)) data_files = std::move(*listed);
    }
    add_model_reads(input, data_files, named);
    const std::string output = batch ? batch_output(opt, input) : opt.output;
    if (!opt.compare.empty() || output.empty()) continue;  // --compare writes no model
    for (auto& file : model_writes(opt, input, output, !data_files.empty())) {
      if (file.role != FileRole::kReport) named.push_back(std::move(file));
    }
  }
  add_input_tensor_files(opt, named);
  add_protected_reads(opt, named);
  if (opt.report != "-") {
    if (auto safe = refuse_overwrites(named, {{opt.report, FileRole::kReport, ""}}, batch); !safe) return safe.error();
  }
  auto report = stage_report(opt);
  if (!report) return report.error();
  std::vector<std::string> entries;
  auto entry = [&](const std::string& input) {
    RunInfo info;
    info.exit_code = exit_code;
    info.error = message;
    info.input = input;
    info.compared = opt.compare;
    entries.push_back(report_json(info, {}));
  };
  for (const auto& input : opt.models) entry(input);
  if (entries.empty()) entry("");  // no model given: one object, its "input" null
  const std::string json = batch ? report_list_json(entries) : entries.front();
  if (auto written = commit_report(*report, json); !written) return written.error();
  return core::Ok{};
}

int fail_before_report(const Options& opt, const core::Error& error) {
  const int code = fail(error);
  if (auto written = write_early_report(opt, code, error.message); !written) fail(written.error());
  return code;
}

}  // namespace dwdeconv::cli
