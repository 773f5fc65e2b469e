// The command line: the options, how CLI11 parses them, and the combinations that cannot mean anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rewrite/defaults.h"

// CLI11 is included only where options are declared or parsed: its header alone takes seconds to compile.
namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace dwdeconv::cli {

struct Options {
  std::vector<std::string> models;  // one, or several for a batch
  std::string output;
  std::string out_dir;          // batch output directory
  std::string suffix;           // --suffix: batch outputs are <stem><suffix>.onnx
  bool from_directory = false;  // a model argument was a directory (a batch, even of one model)
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
  std::vector<std::string> forms;                // --forms; empty means rewrite::default_forms()
  std::string target = rewrite::kDefaultTarget;  // --target: a profile of rewrite::targets()
  bool target_given = false;                     // --target was on the command line: --check reads no recorded one
  std::vector<std::string> input_shapes;         // NAME=1x4x256x256
  std::vector<std::string> input_files;          // [NAME=]FILE.npy|.pb
  uint64_t seed = 0;
  std::optional<double> atol;
  std::optional<double> rtol;
  size_t threads = 1;
  std::string runtime = "xnnpack";             // --runtime: where --verify, --bench and --compare run (cli/runtime_python.h)
  std::string python;                          // --python; empty: $DWDECONV_PYTHON, else python3
  std::optional<double> min_speedup;           // --min-speedup X with --bench
  std::string precision = "fp32";              // --precision fp32|fp16|int8|bf16 on a Python runtime
  std::optional<double> max_steps;             // --max-steps X: int8's bound in quantisation steps (default 2)
  bool tune = false;                           // --tune: time each candidate alone on --runtime, rewrite the faster ones
  std::string external_data;                   // --external-data NAME
  std::optional<uint64_t> external_threshold;  // --external-data-threshold BYTES
  bool copy = false;                           // --copy: write MODEL to -o as it is, rewriting nothing
  std::vector<std::string> protect;            // --protect MODEL: never write over it or its data files
  int verbosity = 0;                           // -1 quiet, 0 info, 1+ debug
};

// Declares every option of `app`, each writing into `opt`, with the help text, the examples footer and --version.
void add_options(CLI::App& app, Options& opt);

// What makes a parsed command line meaningless, as the usage error to print; "" when the options make sense.
std::string usage_problem(const Options& opt);

// A CLI11 transform that replaces a name by canonical(name) when that is not "" (any case, an alias), and leaves
// any other name for usage_problem to refuse.
CLI::Validator canonical_name(std::string (*canonical)(const std::string&));

// The path of an --input argument, [NAME=]FILE.
std::string input_file_path(const std::string& argument);

}  // namespace dwdeconv::cli
