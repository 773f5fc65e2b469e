// Targets: the runtime a model ships to decides which upsamplers pay to rewrite and how to emit them. One table of
// profiles (name, runtime, forms, keep rules, phase join, the measurements the rules come from and the ranges they
// covered), written as named data in rewrite/targets.json (embedded at build time, read by parse_targets) and read by
// the rewriter, the CLI's --help and plan, the report and docs/targets.md (whose rule table is rules_markdown();
// tests/rewrite/target_rules_test.cpp checks the decisions against its own table of measured layers).
// No `if (target == ...)` anywhere else.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rewrite/defaults.h"
#include "rewrite/emitter.h"
#include "rewrite/forms.h"
#include "rewrite/matcher.h"

namespace dwdeconv::rewrite {

// What of the CPU the tool runs on a rule may read (ONNX Runtime's answer depends on it). The report's "cpu" object
// has a member for each (cli/report.cpp, docs/report.schema.json).
struct CpuFeatures {
  bool avx512f = false;
  std::string describe() const;  // "AVX-512F: no", as the plan header shows it
};

// The features of the CPU this process runs on.
CpuFeatures host_cpu();

// The families the measurements were taken on, and the rules name.
// kDiagonal: group 1 in the graph, zero off the channel diagonal (rewritten as the depthwise one it computes; the
// runtimes run its original as a dense ConvTranspose, C times the MACs).
enum class Grouping { kDepthwise, kGrouped, kDense, kDiagonal };
enum class KernelClass { k1x1, k3x3, kOther };
// The strides of the equivalent ConvTranspose: s x s with s >= 2 (DepthToSpace joins the phases), 1 x 1 (one Conv, no
// join), or s_h != s_w (the interleave join).
// kOneD: a 1-D node (rank-3 weight) with stride > 1, its own family (its join is the 1-D interleave).
enum class StrideClass { kSquare, kOne, kAnisotropic, kOneD };

// An upsampler as the rules see it.
struct Family {
  Form form = Form::kConvTranspose;
  Grouping grouping = Grouping::kDepthwise;
  // The kernel as written: the Conv's for the hand-written forms (a nearest + Conv's K, not the K+s-1 of the
  // equivalent ConvTranspose), the ConvTranspose's own for conv_transpose.
  KernelClass kernel = KernelClass::kOther;
  int64_t channels = 0;      // input channels
  int64_t out_channels = 0;  // output channels
  int64_t stride = 0;
  StrideClass strides = StrideClass::kSquare;
  // The kernel as written on each spatial axis (one for a 1-D node), smallest and largest.
  int64_t min_kernel = 0, max_kernel = 0;
  int64_t max_stride = 0;     // the largest stride of any spatial axis
  int rank = 2;               // spatial axes: 1 for a 1-D node (rank-3 weight), else 2
  bool graph_output = false;  // its output is an output of the graph it is in (OpenVINO's rules read it)
};

// What the measurement a rewriting rule follows covered: the input channels, kernels (as written, every axis),
// strides (the largest of the node's axes) and spatial ranks of the upsamplers that were timed. A rule rewrites only
// inside it; a node the rule names outside it is kept, with a reason saying it was not measured there. A bound of 0
// (or no ranks) bounds nothing.
struct MeasuredRange {
  int64_t min_channels = 0, max_channels = 0;  // inclusive
  int64_t min_kernel = 0, max_kernel = 0;      // inclusive
  int64_t min_stride = 0, max_stride = 0;      // inclusive
  std::set<int> ranks;
  std::string source;  // the rows the bounds come from (of the section the rule's `measured` cites, unless named)

  bool covers(const Family& f) const;
  // "C 21-64, k 4-16, s 2-8, 2-D": the bounds, as the reason, --help and docs/targets.md say them.
  std::string describe() const;
  // What of `f` lies outside: "C 3 (measured 21-64)"; "" when covers(f).
  std::string outside(const Family& f) const;
};

// The family of a matched upsampler.
Family family_of(const NodeSummary& summary, const DeconvMatch& match);

// An op a target emits that a runtime it is meant for runs outside its XNNPACK delegate: a row of the report's
// "outside_delegate" (docs/report.md).
struct OutsideOp {
  std::string op;       // the ONNX op it emits: "Gather"
  PhaseLayout layout;   // the join that emits it, as a rewritten node's "layout" names it
  std::string runtime;  // the runtime, as --runtime names it: "executorch", "litert"
  std::string runs_as;  // what that runtime's converter makes of it: "aten.index.Tensor", "GATHER"
  std::string on;       // the kernels that run it there: "portable kernels"
};

// One row of a target's rule table: the families it names and what the target does with them. A field left empty
// (or 0) names every value.
struct KeepRule {
  std::set<Form> forms = {};
  std::set<Grouping> groupings = {};
  std::set<KernelClass> kernels = {};
  int64_t min_channels = 0;  // C >= min_channels
  int64_t max_channels = 0;  // C < max_channels (0: no bound)
  // Whether the rule names only families whose output has more channels than their input (true), or only those with
  // at most as many (false); empty: both. A 1x1 Conv moved before the nearest Resize leaves it C_out channels to copy.
  std::optional<bool> widens = {};
  bool rewrite = false;
  // The figure the decision follows and its BENCHMARKS.md section: a kept node's reason, the docs' table cell.
  std::string measured = {};
  // For ONNX Runtime's depthwise ConvTranspose: the answer was seen to change on a CPU with AVX-512, which this
  // project cannot measure; the reason says so there.
  bool cpu_dependent = false;
  std::set<StrideClass> strides = {};  // empty: every stride class
  // For a rule that rewrites: what its measurement covered (each range quotes its BENCHMARKS.md rows where the table is
  // built). A family the rule names outside it is kept, not measured there. Every rewriting rule has one.
  std::optional<MeasuredRange> range = {};
  // Whether it names only upsamplers whose output is an output of their graph (true), or only the others (false);
  // empty: both.
  std::optional<bool> graph_output = {};

  bool names(const Family& f) const;
};

// A row of rewrite/targets.json: one runtime's profile.
struct Target {
  std::string name = {};      // what --target takes, and the report's "target"
  std::string runtime = {};   // the runtime it is for, as a user names it
  std::set<Form> forms = {};  // the forms it rewrites at all
  // In order: the first rule that names a family decides it; a family no rule names is rewritten.
  std::vector<KeepRule> rules = {};
  // How its emitted form joins the phases, at the model's default-domain opset.
  PhaseLayout (*layout)(const DeconvMatch& match, int64_t opset) = nullptr;
  std::string join = {};      // the join as docs/targets.md and --help say it
  std::string measured = {};  // the BENCHMARKS.md sections its rules cite
  // Which of its emitted ops a runtime it is meant for runs outside its XNNPACK delegate; empty for none.
  std::vector<OutsideOp> outside_delegate = {};
  // Whether its runtime converts a nearest Resize the rewrite adds (the nearest layout of a ConvTranspose or a
  // zero-insertion form, which had none): onnx2torch's Resize does not pass torch.export, so ExecuTorch (and the
  // default, which must convert there) keep such a node. A nearest + Conv had its Resize already.
  bool converts_added_resize = true;
  // The --runtime that checks and times what it writes (a name of the runtimes' registry, or "xnnpack": the executor);
  // "" for the default, which is meant for them all. Said by name, not matched from the prose of `runtime`.
  std::string runs_on = {};
  // What it measured on that runtime, as the README's target table says it; "" for the default.
  std::string headline = {};
  // Other names --target takes for it, lower case (tflite for litert); names are matched without regard to case.
  std::vector<std::string> aliases = {};
  // Why it keeps a dense (group 1) ConvTranspose: what was measured on its own runtime, or that nothing was.
  std::string dense_conv_transpose = {};
  // Whether a 1-D phase's edge padding is spelled as a Concat of x's edge samples rather than an edge Pad (its
  // converter writes an edge Pad as one op per sample, outside the runtime's delegate: EmitOptions::edge_as_slices).
  bool edge_as_slices = false;
  // Whether a phase's crop (a window that starts inside x) is spelled as a Slice rather than a Pad with negative pads,
  // which its runtime runs wrongly (MNN: EmitOptions::crop_as_slice).
  bool crop_as_slice = false;
  // Whether its converter takes a 1-D join only without Reshape (onnx2torch + torch.export: EmitOptions::flatten_1d_join).
  bool flatten_1d_join = false;

  // Why this target keeps an upsampler of a selected form (the rule and the measurement it comes from), or "" to
  // rewrite it.
  std::string keep(const NodeSummary& summary, const DeconvMatch& match, const CpuFeatures& cpu) const;
  // One line for --help: what it rewrites and keeps, from its rules.
  std::string summary() const;
  // Why a node of `form` emitted in `layout` must be kept on this target's runtime, or "": a nearest Resize it would
  // add where the runtime cannot convert one.
  std::string join_refusal(PhaseLayout layout, Form form) const;
  // The reason a dense (group 1) ConvTranspose is kept on this target: `what` ("dense (group 1), 16 to 16 channels", as
  // the matcher says it), then this target's own runtime's measurement.
  std::string dense_reason(const std::string& what) const;
};

// Every target, the default first: rewrite/targets.json as embedded at build time. A table that does not parse ends
// the process on first use, naming the problem (a build's mistake; tests/rewrite/targets_json_test.cpp reads it first).
const std::vector<Target>& targets();

// Reads a targets table written as rewrite/targets.json is into `table`: "" on success, else what is wrong and where
// ("targets.json: targets[3] (ort): rules[0]: unknown key 'widen'"). Every key is checked; none is ignored.
std::string parse_targets(const std::string& json, std::vector<Target>& table);

// The target named `name`, or nullptr.
const Target* find_target(const std::string& name);

// The name of the target `name` means, matched without regard to case and through its aliases ("TFLite" ->
// "litert"), or "" for none.
std::string canonical_target_name(const std::string& name);

// "default, xnnpack, litert (also tflite), ...": for --help and the usage error of an unknown name.
std::string target_names();

// "depthwise", "grouped", "dense", "diagonal"; "1x1", "3x3", "other"; "s x s", "1 x 1", "s_h != s_w".
const char* grouping_name(Grouping g);
const char* kernel_class_name(KernelClass k);
const char* stride_class_name(StrideClass s);

// Every target's rules as the Markdown table docs/targets.md holds between its "rules:begin" and "rules:end"
// markers: one row per rule, in order, and a last row per target for what no rule names.
std::string rules_markdown();

}  // namespace dwdeconv::rewrite
