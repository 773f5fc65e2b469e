#include "cli/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <CLI/CLI.hpp>

#include "cli/runtime_python.h"
#include "cli/version.h"
#include "rewrite/forms.h"
#include "rewrite/targets.h"

namespace dwdeconv::cli {
namespace {

const char* kExamples = R"(Examples:
  dwdeconv-rewrite model.onnx -o model.xnn.onnx     only what pays on every runtime (the default)
  dwdeconv-rewrite model.onnx -o out.onnx --target litert    for LiteRT (TFLite) through onnx2tf
  dwdeconv-rewrite model.onnx --dry-run             print the plan, write nothing
  dwdeconv-rewrite model.onnx --check               CI gate: exit 1 if any node would be rewritten
  dwdeconv-rewrite model.onnx -o out.onnx --verify  rewrite, then run both through XNNPACK and diff
  dwdeconv-rewrite model.onnx --compare out.onnx    verify any pair without rewriting
  dwdeconv-rewrite model.onnx -o out.onnx --bench --runs 20    time both models on XNNPACK
  dwdeconv-rewrite model.onnx -o out.onnx --verify --input-shape image:1,3,256,256    dynamic dims
  dwdeconv-rewrite models/ --out-dir out/ --suffix .xnn -j 2    out/NAME.xnn.onnx for each model
  dwdeconv-rewrite model.onnx -o out.onnx --target litert --runtime litert --verify --bench
                                                    check and time on LiteRT itself
  dwdeconv-rewrite - -o - < in.onnx > out.onnx      stdin to stdout

Exit status:
  0 ok; 1 --check found a node to rewrite, verification failed, or --min-speedup was not met;
  2 usage error; 3 invalid model, failed output validation, or I/O error; 4 could not verify (a
  shape not known, an op the executor lacks, a runtime that cannot convert a model). Nothing is
  written unless the run succeeds.)";

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

// A finite number > 0 for --min-speedup.
CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value) || value <= 0) {
          return "'" + text + "' is not a finite number > 0";
        }
        return "";
      },
      "NUMBER > 0");
}

}  // namespace

void add_runtime_options(CLI::App& app, Options& opt) {
  std::string listed, names;
  for (const auto& r : runtime_check::python_runtimes()) {
    listed += ", " + r.name + " (" + r.summary + ")";
    names += (names.empty() ? "" : "|") + r.name;
  }
  app.add_option("--runtime", opt.runtime,
                 "Where --verify, --bench and --compare run: xnnpack (this tool's executor, the default; no Python)" + listed +
                     "; all but xnnpack through Python (docs/runtime-checks.md); any case, tflite for litert")
      ->type_name("NAME")
      ->transform(canonical_name(canonical_runtime_name));
  app.add_option("--python", opt.python, "The Python interpreter of --runtime " + names + " (default $DWDECONV_PYTHON, else python3)")
      ->type_name("PATH");
  app.add_option("--min-speedup", opt.min_speedup,
                 "With --bench: exit 1 and write nothing unless the rewritten model is at least X times as fast on the runtime timed")
      ->check(positive_number())
      ->type_name("X");
  // Which runtime converts to which precision comes from the registry rows, so that the help cannot list bf16 where
  // only openvino runs it.
  std::string precisions;
  for (const char* p : {"fp16", "int8", "bf16"}) {
    std::string on;
    for (const auto& r : runtime_check::python_runtimes()) {
      if (std::find(r.precisions.begin(), r.precisions.end(), p) != r.precisions.end()) on += (on.empty() ? "" : ", ") + r.name;
    }
    if (!on.empty()) precisions += std::string("; ") + p + " on " + on;
  }
  app.add_option("--precision", opt.precision,
                 "The precision both models are converted to and run at on --runtime: fp32 (default)" + precisions +
                     "; int8 is calibrated on the --input files, else on 8 seeded inputs (both models the same)")
      ->transform(CLI::IsMember({"fp32", "fp16", "int8", "bf16"}, CLI::ignore_case))
      ->type_name("P");
  app.add_option("--max-steps", opt.max_steps, "With --precision int8: the most quantisation steps an output may differ by (default 2)")
      ->check(positive_number())
      ->type_name("X");
  app.add_flag("--tune", opt.tune,
               "Time each upsampler the target would rewrite alone (cut out at its input shape), both ways, on --runtime, "
               "and rewrite only those that measured faster; the plan and the report show the figures");
}

CLI::Validator canonical_name(std::string (*canonical)(const std::string&)) {
  // A name it does not know is left as given, for usage_problem to refuse with the list of names.
  return CLI::Validator(
      [canonical](std::string& text) -> std::string {
        if (std::string name = canonical(text); !name.empty()) text = name;
        return "";
      },
      "", "canonical name");
}

void add_options(CLI::App& app, Options& opt) {
  app.footer(kExamples);
  app.set_version_flag("--version", std::string("dwdeconv-rewrite ") + kFullVersion);
  app.add_option("models", opt.models, "Input ONNX model(s), or directories of them (their *.onnx files); - reads one model from stdin")
      ->required();
  app.add_option("-o,--output", opt.output, "Output model (written atomically; may equal the input); - writes to stdout");
  app.add_option("--out-dir", opt.out_dir, "With several models or a directory: write each one here, under its own file name");
  app.add_option("--suffix", opt.suffix,
                 "With --out-dir: name each output <stem><TEXT>.onnx, e.g. --suffix .xnn (default: the input's name)")
      ->type_name("TEXT");
  app.add_option("-j,--jobs", opt.jobs, "With several models: how many to process at once (default 1)")->check(CLI::Range(1, 256));
  app.add_flag("--dry-run", opt.dry_run, "Print the plan, one line per upsampler (rewrite or keep, and why), and write no model");
  app.add_flag("--check", opt.check, "Exit 1 if any node would be rewritten; write no model");
  app.add_option("--only", opt.only, "Rewrite only the upsampler with this name, as the plan shows it (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--skip", opt.skip, "Never rewrite the upsampler with this name, as the plan shows it (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--forms", opt.forms,
                 "Upsampler forms to rewrite, comma-separated: " + rewrite::form_names() +
                     " (default: " + rewrite::form_names(/*defaults_only=*/true) + ")")
      ->delimiter(',')
      ->allow_extra_args(false);
  std::string targets = "The runtime the model ships to, which decides what is rewritten and how (any case):";
  for (const auto& t : rewrite::targets()) {
    std::string also;
    for (const auto& alias : t.aliases) also += (also.empty() ? " (also " : ", ") + alias;
    targets += "\n  " + t.name + (also.empty() ? "" : also + ")") + ": " + t.runtime + "; " + t.summary();
  }
  app.add_option("--target", opt.target, targets)->type_name("NAME")->transform(canonical_name(rewrite::canonical_target_name));
  app.add_flag("--explicit-pad", opt.explicit_pad, "Emit phase pads as Pad nodes instead of folding them into the Convs");
  app.add_option("--max-phases", opt.max_phases,
                 "Keep a node whose stride s would emit more than N phases, s*s (default 64: strides up to 8)")
      ->check(whole_number_from(1));
  app.add_option("--report", opt.report, "Write a JSON report to this file");
  app.add_flag("--verify", opt.verify, "Run the original and the rewritten model on --runtime (default: XNNPACK) and compare outputs");
  app.add_option("--compare", opt.compare, "Verify this model against MODEL without rewriting (exit 1 on mismatch)");
  app.add_option("--input-shape", opt.input_shapes,
                 "Fix an input's dims: image:1,3,256,256 (also image:[1,3,256,256], image=1x3x256x256, or 1,3,256,256 for a "
                 "model with one input; repeatable). Each model's own: a line each in MODEL.input-shapes beside it")
      ->allow_extra_args(false);
  app.add_option("--input", opt.input_files, "Feed an input from a .npy or TensorProto .pb file: [NAME=]FILE (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--seed", opt.seed, "Seed of the random inputs (default 0)");
  app.add_option("--atol", opt.atol, "Absolute tolerance (default per dtype: f32 1e-6, f16 1e-3)")->check(finite_non_negative());
  app.add_option("--rtol", opt.rtol, "Tolerance relative to each output's max |value| (default f32 1e-4, f16 1e-2)")
      ->check(finite_non_negative());
  app.add_flag("--bench", opt.bench,
               "Time the original and the rewritten model on --runtime (default: XNNPACK): medians, spread, speedup, per-upsampler table");
  app.add_option("--runs", opt.runs, "Timed runs of each model for --bench (default 10)")->check(CLI::Range(1, 100000));
  add_runtime_options(app, opt);
  app.add_option("--threads", opt.threads, "Threads for --verify, --bench and --compare, on any --runtime (default 1)")
      ->check(CLI::Range(1, 256));
  app.add_option("--external-data", opt.external_data,
                 "Store tensors in this file next to OUT (default OUT.data when the input had external data); not in a batch");
  app.add_option("--external-data-threshold", opt.external_threshold,
                 "Store every tensor of at least this many bytes outside, in NAME or OUT.data (default 1024 with --external-data)")
      ->check(whole_number_from(0));
  app.add_flag("--copy", opt.copy,
               "Write MODEL to -o OUT as it is, rewriting nothing: its tensors and data file as -o writes them, atomically "
               "(the Python API's Result.save)");
  app.add_option("--protect", opt.protect,
                 "Never write over this model or the data files it names, as if the run read it (repeatable; the Python "
                 "API protects the model it rewrote)")
      ->type_name("MODEL")
      ->allow_extra_args(false);
  app.add_flag_function(
      "-v,--verbose", [&opt](int64_t n) { opt.verbosity = static_cast<int>(n); }, "More log output");
  app.add_flag_function(
      "-q,--quiet", [&opt](int64_t) { opt.verbosity = -1; }, "Only errors");
}

std::string input_file_path(const std::string& argument) {
  const auto eq = argument.find('=');
  return eq == std::string::npos ? argument : argument.substr(eq + 1);
}

std::string usage_problem(const Options& opt) {
  if (std::string problem = runtime_usage_problem(opt); !problem.empty()) return problem;
  const bool batch = opt.models.size() > 1 || !opt.out_dir.empty() || opt.from_directory;
  if (!opt.suffix.empty() && opt.out_dir.empty()) return "--suffix names the outputs in --out-dir DIR: give --out-dir";
  if (opt.suffix.find('/') != std::string::npos) return "--suffix is added to a file name; it cannot hold '/'";
  if (opt.copy) {
    if (batch || opt.output.empty()) return "--copy writes one MODEL to -o OUT";
    if (opt.dry_run || opt.check || !opt.compare.empty() || opt.verify || opt.bench || opt.tune) {
      return "--copy rewrites nothing, so there is nothing to plan, check, verify, time or tune: drop --dry-run, --check, "
             "--compare, --verify, --bench and --tune";
    }
    if (!opt.only.empty() || !opt.skip.empty() || !opt.forms.empty() || opt.target_given || opt.explicit_pad) {
      return "--copy rewrites nothing: drop --only, --skip, --forms, --target and --explicit-pad";
    }
  }
  if (!opt.compare.empty()) {
    // --verify is what --compare does; it is accepted beside it (dwdeconv_rewrite.check() passes it with --runtime).
    if (batch || !opt.output.empty() || opt.dry_run || opt.check) {
      return "--compare runs alone on one MODEL: drop -o, --out-dir, --dry-run and --check";
    }
    return "";
  }
  if (opt.dry_run && opt.check) return "--dry-run and --check cannot be combined";
  if (rewrite::find_target(opt.target) == nullptr) {
    return "--target: unknown target '" + opt.target + "' (known: " + rewrite::target_names() + ")";
  }
  for (const auto& form : opt.forms) {
    if (!rewrite::form_by_name(form)) return "--forms: unknown form '" + form + "' (known: " + rewrite::form_names() + ")";
  }
  if (batch && !opt.output.empty()) return "several models take --out-dir DIR, not -o";
  if ((opt.dry_run || opt.check) && (!opt.output.empty() || !opt.out_dir.empty())) {
    return std::string(opt.dry_run ? "--dry-run" : "--check") + " writes no model; drop -o/--out-dir";
  }
  if ((opt.dry_run || opt.check) && (opt.verify || opt.bench))
    return "--verify and --bench need a rewritten model: use -o OUT, not --dry-run or --check";
  if (!opt.dry_run && !opt.check && opt.output.empty() && opt.out_dir.empty()) {
    return batch ? "several models need --out-dir DIR, --dry-run or --check"
                 : "no output: give -o OUT, --dry-run, --check or --compare OTHER";
  }
  const bool running = opt.verify || opt.bench || opt.tune || !opt.compare.empty();
  if (!running && (!opt.input_shapes.empty() || !opt.input_files.empty())) {
    return "--input-shape and --input apply to --verify, --bench, --compare and --tune";
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

}  // namespace dwdeconv::cli
