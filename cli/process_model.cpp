// One model's run (process_model, cli/run_internal.h): load, validate, rewrite, --tune, the plan, then validate,
// check on the runtime and save the output, or the --check gate.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/exit_codes.h"
#include "cli/model_stats.h"
#include "cli/tune.h"
#include "cli/version.h"
#include "core/text.h"
#include "onnx_io/external_data.h"
#include "onnx_io/model_io.h"
#include "onnx_io/validate.h"
#include "run_internal.h"

namespace dwdeconv::cli {
namespace {

// The written model's metadata_props this tool owns: the --target it was written for and the tool's version.
constexpr const char* kTargetKey = "dwdeconv-rewrite.target";
constexpr const char* kVersionKey = "dwdeconv-rewrite.version";

std::optional<std::string> recorded_metadata(const onnx::ModelProto& model, const std::string& key) {
  for (const auto& entry : model.metadata_props()) {
    if (entry.key() == key) return entry.value();
  }
  return std::nullopt;
}

// Sets `key` to `value`: the first entry of that key in place (any later ones removed), else a new last entry.
void set_metadata(onnx::ModelProto& model, const std::string& key, const std::string& value) {
  auto* props = model.mutable_metadata_props();
  bool set = false;
  for (int i = 0; i < props->size();) {
    if (props->Get(i).key() != key) {
      ++i;
    } else if (!set) {
      props->Mutable(i)->set_value(value);
      set = true;
      ++i;
    } else {
      props->DeleteSubrange(i, 1);
    }
  }
  if (!set) {
    auto* entry = model.add_metadata_props();
    entry->set_key(key);
    entry->set_value(value);
  }
}

// Where the output's tensors go: external data when the input had it or the command line asks for it. Every
// tensor that was external stays external, and each phase weight follows the weight it was gathered from.
onnx_io::ExternalSaveOptions external_save_options(const Options& opt, const std::string& output,
                                                   const std::set<std::string>& loaded_external, const rewrite::RewriteResult& result) {
  onnx_io::ExternalSaveOptions ext;
  ext.data_name = data_file_name(opt, output, !loaded_external.empty());
  if (ext.data_name.empty()) return ext;
  ext.tensor_names = loaded_external;
  for (const auto& [derived, source] : result.derived_tensors) {
    if (loaded_external.count(source) != 0) ext.tensor_names.insert(derived);
  }
  if (!opt.external_data.empty() || opt.external_threshold) ext.threshold_bytes = opt.external_threshold.value_or(1024);
  return ext;
}

// "-" reads the model from stdin: it must fit in memory and cannot have external data (there is no directory).
core::Result<onnx_io::LoadedModel> load_input(const std::string& input) {
  if (input != "-") return onnx_io::load_model_with_external_data(input);
  std::string bytes{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  auto model = onnx_io::parse_model(bytes, "<stdin>");
  if (!model) return model.error();
  if (auto refused = onnx_io::refuse_external_data(*model, "<stdin>"); !refused) return refused.error();
  return onnx_io::LoadedModel{std::move(*model), {}, {}};
}

// Writes the output model: a file (atomically, with its external data if any), or stdout for "-".
core::Status save_output(onnx::ModelProto& model, const std::string& output, const onnx_io::ExternalSaveOptions& ext) {
  if (output != "-") return onnx_io::save_model_with_external_data(model, output, ext);
  if (!ext.data_name.empty()) {
    return core::Error{core::ErrorKind::kUsage, "-o -: a model with external data cannot be written to stdout; give a file path"};
  }
  return onnx_io::serialize_to_fd(model, STDOUT_FILENO);
}

// One model's run, stage by stage: each stage returns false once the run has failed (finish() has logged it and set
// the exit code), and process_model() runs them top to bottom.
class ModelRun {
 public:
  ModelRun(const Options& opt, const RuntimeSetup& setup, const std::string& input, const std::string& output, bool batch)
      : opt_(opt),
        shared_setup_(setup),
        input_(input),
        output_(output),
        batch_(batch),
        // The input's path as messages show it (core/text.h): a file name may hold a newline too.
        shown_(input == "-" ? "<stdin>" : core::printable(input)),
        prefix_(batch ? shown_ + ": " : std::string()),
        log_(shown_, phase_lines_wanted(opt.verbosity)) {
    out_.info.input = input;
  }

  ModelOutcome run() {
    if (load() && validate_input() && rewrite() && tune() && report_plan() && (!writes_model() || write_checked()) && gate()) {
      log_summary();
    }
    return std::move(out_);
  }

 private:
  // Logs `context` and `e`'s message, ends the open phase as failed, takes the exit code of `e`'s kind and says in
  // the report that nothing was written.
  bool finish(const core::Error& e, const std::string& context = "") {
    const std::string message = context + e.message;
    log_.fail();
    out_.info.exit_code = fail({e.kind, message});
    out_.info.error = message;
    out_.info.output.clear();  // a failed run wrote no model: the report says null for both
    out_.info.validation.clear();
    return false;
  }

  bool writes_model() const { return !opt_.dry_run && !opt_.check; }
  const rewrite::RewriteResult& result() const { return out_.result; }

  // Reads the model (and its external data), and refuses a run that would write over a file it reads.
  bool load() {
    log_.start("load");
    auto loaded = load_input(input_);
    if (!loaded) return finish(loaded.error());
    loaded_ = std::move(*loaded);
    if (!loaded_.external_tensors.empty()) spdlog::debug("{}: {} tensors read from external data", shown_, loaded_.external_tensors.size());
    std::vector<RunFile> reads;
    add_model_reads(input_, loaded_.data_files, reads);
    add_input_tensor_files(opt_, reads);
    add_protected_reads(opt_, reads);
    // A model's own shapes, beside it (MODEL.input-shapes), for a run that runs it: in a batch, each model's.
    const bool runs = opt_.verify || opt_.bench || opt_.tune;
    const std::string side_path = runs ? input_shapes_file_of(input_) : "";
    auto side = read_input_shapes_file(side_path);
    // Kept from any write, also when it is not a shapes file (a report must not replace what was there).
    if (std::error_code ec; !side_path.empty() && std::filesystem::exists(std::filesystem::symlink_status(side_path, ec))) {
      reads.push_back({side_path, FileRole::kInputShapes, input_});
    }
    const auto writes = model_writes(opt_, input_, output_, !loaded_.external_tensors.empty());
    if (auto safe = refuse_overwrites(reads, writes, batch_); !safe) {
      out_.overwrite_refused = true;
      return finish(safe.error());
    }
    if (auto safe = check_write_targets(writes); !safe) return finish(safe.error());
    out_.info.opset = onnx_io::default_opset(model());
    // A mistyped --input-shape name is said now, not after the rewrite and validation.
    if (auto named = check_input_shape_names(setup_->input_shapes, model(), input_); !named) return finish(named.error(), shown_ + ": ");
    if (!side) return finish(side.error(), shown_ + ": ");
    if (*side) {
      auto own = setup_with_shapes_file(shared_setup_, **side, model(), input_, side_path);
      if (!own) return finish(own.error(), shown_ + ": ");
      own_setup_ = std::move(*own);
      setup_ = &*own_setup_;
      out_.info.input_shapes_file = side_path;
    }
    timer_.mark("load");
    return true;
  }

  // Judges the input first, so a broken input is blamed on the input and not on the rewrite.
  bool validate_input() {
    auto input_check = onnx_io::validate_model(model(), {});
    if (!input_check) return finish({core::ErrorKind::kFailedValidation, shown_ + ": invalid model: " + input_check.error().message});
    if (!input_check->full) spdlog::warn("{}: {}", shown_, input_check->detail);
    timer_.mark("validate input");
    before_ = model_stats(model());
    if (opt_.verify || opt_.bench || opt_.tune) original_ = model();  // verify, bench and tune run the model as it was
    return true;
  }

  // The rewrite the options and the target ask for.
  bool rewrite() {
    if (opt_.copy) return true;  // nothing rewritten: the result is empty, and the model is written as it was read
    ro_.emit.explicit_pad = opt_.explicit_pad;
    ro_.emit.max_phases = opt_.max_phases;
    ro_.only = {opt_.only.begin(), opt_.only.end()};
    ro_.skip = {opt_.skip.begin(), opt_.skip.end()};
    if (!opt_.forms.empty()) {
      ro_.forms.clear();
      for (const auto& name : opt_.forms) ro_.forms.insert(*rewrite::form_by_name(name));  // usage_problem checked each name
    }
    ro_.target = rewrite::find_target(opt_.target);  // a known name: usage_problem checked it
    // --check of a model this tool wrote: the target it was written for, unless --target says otherwise. A target
    // rightly kept a node; the gate must not fail that under another target's rules.
    if (opt_.check && !opt_.target_given) {
      if (const auto recorded = recorded_metadata(model(), kTargetKey)) {
        if (const rewrite::Target* t = rewrite::find_target(*recorded)) {
          ro_.target = t;
          spdlog::info(
              "{}: --check against --target {}, which the model records it was written for (dwdeconv-rewrite {}; "
              "--target overrides)",
              shown_, t->name, core::printable(recorded_metadata(model(), kVersionKey).value_or("?")));
        } else {
          spdlog::warn("{}: the model records --target '{}', which this version does not know: --check uses --target {}", shown_,
                       core::printable(*recorded), opt_.target);
        }
      }
    }
    std::optional<core::Result<rewrite::RewriteResult>> attempt;
    log_.start("rewrite");
    try {
      attempt.emplace(rewrite::rewrite_model(model(), ro_));
    } catch (const std::bad_alloc&) {
      // A raised --max-phases can plan more phases than memory holds.
      return finish({core::ErrorKind::kOutOfMemory, out_of_memory(shown_, "rewriting")});
    }
    auto& rewritten = *attempt;
    if (!rewritten) return finish(rewritten.error(), shown_ + ": ");
    out_.result = std::move(*rewritten);
    timer_.mark("rewrite");
    log_.end();
    return true;
  }

  // --tune: each candidate alone on --runtime; the slower ones are kept in a second rewrite of the original.
  bool tune() {
    if (!opt_.tune || result().rewritten == 0) return true;
    // Inputs it cannot make (a symbolic dim with no --input-shape): nothing can be timed, exit 4 as for --bench.
    auto shapes = resolve_input_shapes(setup_->input_shapes, *original_, input_);
    if (!shapes) return finish(not_checked_error(shapes.error(), shown_ + ": --tune: "));
    auto inputs = runtime_inputs(*original_, *shapes, setup_->inputs, opt_.seed);
    if (!inputs) return finish(not_checked_error(inputs.error(), shown_ + ": --tune: "));
    RuntimeInfo where;
    auto figures = tune_upsamplers(*original_, model(), result(), ro_, opt_, *inputs, where);
    timer_.mark("tune");
    if (!figures) return finish(not_checked_error(figures.error(), shown_ + ": --tune: "));
    bool any_kept = false;
    for (const auto& f : *figures) {
      spdlog::info("{}{}", prefix_, tune_line(f, where));
      any_kept = any_kept || !f.rewritten;
    }
    if (any_kept) {
      // Rewritten again from the original, now keeping what --tune did not measure faster: a kept zero_insertion
      // fold's ConvTranspose, untimed, is kept too.
      model() = *original_;
      ro_.caller_keep = tune_keep_rule(result(), *figures, where);
      auto second = rewrite::rewrite_model(model(), ro_);
      if (!second) return finish(second.error(), shown_ + ": ");
      out_.result = std::move(*second);
    }
    tuned_.emplace();
    tuned_->runtime = where;
    out_.info.tune = *figures;
    out_.info.runtime = tuned_;
    // With --dry-run, the plan shows them too, after the model's header in a batch (printed with the plan).
    for (const auto& f : *figures) tune_text_ += tune_line(f, where) + "\n";
    return true;
  }

  // What the rewrite decided: its warnings, the names --only/--skip did not match, each kept upsampler's reason, the
  // --dry-run plan and the stats before and after.
  bool report_plan() {
    for (const auto& warning : result().warnings) spdlog::warn("{}: {}", shown_, core::printable(warning));
    for (const auto& name : result().unmatched_names) {
      const std::string message = "--only/--skip name '" + name + "' matches no ConvTranspose or hand-written upsampler in " + input_;
      // In a batch, each model has its own node names; a name missing from one model is not an error.
      if (!batch_) return finish({core::ErrorKind::kUsage, message});
      spdlog::debug("{}", message);
    }
    for (const auto& n : result().nodes) {
      if (n.rewritten) {
        spdlog::debug("{}: rewrote '{}' into {} nodes", shown_, core::printable(n.summary.name), n.emitted_nodes.size());
      } else {
        spdlog::info("{}: kept {} '{}': {}", shown_, upsampler_kind(n), core::printable(n.summary.name), core::printable(n.reason));
      }
    }
    if (opt_.dry_run) std::cout << (batch_ ? shown_ + ":\n" : std::string()) << tune_text_ << plan_text(result()) << std::flush;
    if (writes_model() && !opt_.copy) {
      // What the written model was written for, which --check reads back: the target and this tool's version, in
      // place of any this tool recorded before (the same model written twice is the same bytes). Also when nothing
      // was rewritten: a node its target rightly kept must not fail a later --check under another target's rules.
      set_metadata(model(), kTargetKey, result().target != nullptr ? result().target->name : opt_.target);
      set_metadata(model(), kVersionKey, kVersion);
    }
    after_ = model_stats(model());
    out_.info.stats = std::make_pair(before_, after_);
    summary_ = std::string(writes_model() ? "rewrote " : "would rewrite ") + std::to_string(result().rewritten) + " of " +
               std::to_string(result().nodes.size()) + " " + upsampler_noun(result()) + " (kept " + std::to_string(result().kept) + ")";
    if (opt_.copy) summary_ = "copied as it was read, rewriting nothing";
    return true;
  }

  // The written model's path: validated, checked on the runtime when asked, then saved.
  bool write_checked() { return (opt_.copy || validate_output()) && check_on_runtime() && save(); }

  bool validate_output() {
    log_.start("validate the output");
    auto validation = onnx_io::validate_model(model(), rewrite::emitted_node_names(result()));
    if (!validation) {
      return finish({core::ErrorKind::kFailedValidation,
                     shown_ + ": the rewritten model failed validation, nothing written: " + validation.error().message});
    }
    log_.end();
    if (!validation->full) spdlog::warn("{}: {}", shown_, validation->detail);
    out_.info.validation = validation->detail;
    timer_.mark("validate output");
    return true;
  }

  // --verify and --bench on --runtime, and the --min-speedup gate. Nothing rewritten: the output is the input, so
  // there is nothing to verify (running both would only test the executor) nor to time (a ratio of two timings of
  // one model is noise, not a speedup).
  bool check_on_runtime() {
    const bool rewrote = result().rewritten > 0;
    if (opt_.verify && !rewrote) {
      runtime_check::VerifyResult nothing;
      nothing.mode = runtime_check::VerifyMode::kNone;
      nothing.mode_reason = "nothing was rewritten: the output is the input";
      nothing.passed = true;
      out_.info.verify = nothing;
      spdlog::info("{}: nothing to verify: no node was rewritten, so the output is the input", shown_);
      summary_ += "; nothing to verify";
    }
    if (opt_.bench && !rewrote) {
      spdlog::info("{}: nothing to time: no node was rewritten, so the output runs as the input does", shown_);
      summary_ += "; nothing to time (1.00x: the output is the input)";
      // The gate guards against shipping a rewrite slower than its original. With nothing rewritten the tool did
      // the right thing and ships the original: the gate passes, saying so (a ratio of one model's two timings would
      // be noise, so nothing is timed).
      if (opt_.min_speedup) {
        char gate[32];
        std::snprintf(gate, sizeof gate, "%g", *opt_.min_speedup);
        spdlog::info("{}: --min-speedup {} passes: nothing to rewrite (the output is the input)", shown_, gate);
        summary_ += "; --min-speedup " + std::string(gate) + ": nothing to rewrite, passed";
      }
    }
    const bool verify = opt_.verify && rewrote, bench = opt_.bench && rewrote;
    if (!verify && !bench) return true;
    auto checked = run_checks(*original_, model(), &result(), opt_, *setup_, input_, log_, prefix_, verify, bench,
                              "cannot verify the rewrite, nothing written: ", "--bench: ");
    timer_.mark("verify and bench");
    if (!checked) return finish(checked.error(), shown_ + ": ");
    out_.info.runtime = checked->info;
    const std::string& where = checked->info.runtime.label;
    const bool builtin = opt_.runtime == kBuiltinRuntime;
    if (checked->verify) {
      out_.info.verify = *checked->verify;
      if (!checked->verify->passed) {
        return finish({core::ErrorKind::kCheckVerdictFailed,
                       shown_ + ": verification failed" + (builtin ? "" : " on " + where) + ", nothing written"});
      }
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2g", checked->verify->max_abs_error());
      summary_ += std::string("; verified") + (builtin ? "" : " on " + where) + ": max abs error " + buf;
    }
    if (checked->bench) {
      out_.info.bench = *checked->bench;
      summary_ += speedup_text(checked->bench->speedup, checked->info.runtime);
      if (const std::string gate = speedup_shortfall(opt_, *checked); !gate.empty()) {
        return finish({core::ErrorKind::kCheckVerdictFailed, shown_ + ": " + gate + "; nothing written"});
      }
    }
    summary_ += target_runtime_note(opt_);
    return true;
  }

  bool save() {
    const auto ext = external_save_options(opt_, output_, loaded_.external_tensors, result());
    log_.start("save " + output_);
    auto saved = save_output(model(), output_, ext);
    if (!saved) return finish(saved.error());  // "save ...: failed", not "done"
    log_.end();
    if (!ext.data_name.empty()) spdlog::debug("{}: tensor data written to {}", output_, ext.data_name);
    timer_.mark("save");
    out_.info.output = output_;
    return true;
  }

  // --check: the gate fails when anything would be rewritten.
  bool gate() {
    if (!opt_.check || result().rewritten == 0) return true;
    for (const auto& n : result().nodes) {
      if (n.rewritten) spdlog::error("{}: {} '{}' would be rewritten", shown_, upsampler_kind(n), core::printable(n.summary.name));
    }
    return finish({core::ErrorKind::kCheckVerdictFailed, shown_ + ": check failed: " + std::to_string(result().rewritten) + " of " +
                                                             std::to_string(result().nodes.size()) + " " + upsampler_noun(result()) +
                                                             " would be rewritten"});
  }

  void log_summary() {
    spdlog::info("{}{}: {}", prefix_, writes_model() ? "changed" : "would change", stats_change_text(before_, after_));
    spdlog::info("{}{}{}", prefix_, summary_, writes_model() ? " -> " + output_ : std::string());
  }

  // "ConvTranspose" or "<form> upsampler", as the log names a plan row.
  static std::string upsampler_kind(const rewrite::NodeReport& n) {
    return n.summary.form == rewrite::Form::kConvTranspose ? "ConvTranspose"
                                                           : std::string(rewrite::form_name(n.summary.form)) + " upsampler";
  }

  onnx::ModelProto& model() { return loaded_.model; }

  const Options& opt_;
  const RuntimeSetup& shared_setup_;            // the command line's --input-shape and --input
  std::optional<RuntimeSetup> own_setup_;       // the same with this model's input-shapes file, when it has one
  const RuntimeSetup* setup_ = &shared_setup_;  // the one of the two this model runs with
  const std::string& input_;
  const std::string& output_;
  const bool batch_;
  const std::string shown_;
  const std::string prefix_;
  PhaseLog log_;
  PhaseTimer timer_;
  ModelOutcome out_;
  onnx_io::LoadedModel loaded_;
  std::optional<onnx::ModelProto> original_;
  rewrite::RewriteOptions ro_;
  ModelStats before_, after_;
  std::optional<RuntimeRunInfo> tuned_;
  std::string tune_text_;  // --tune's lines, for the --dry-run plan
  std::string summary_;    // the run's last line
};

}  // namespace

ModelOutcome process_model(const Options& opt, const RuntimeSetup& setup, const std::string& input, const std::string& output, bool batch) {
  return ModelRun(opt, setup, input, output, batch).run();
}

}  // namespace dwdeconv::cli
