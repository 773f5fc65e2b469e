// The upsampler forms. Each is a self-contained pattern in a file of its own (rewrite/form_<name>.cpp) holding one
// row with named fields: the op it starts from and the opsets it reads, the ops its region may hold, whether it
// absorbs a ConvTranspose or claims a nearest Resize, and its recogniser, which returns a typed selection. forms.cpp
// lists the built-in rows; a test adds its own with register_form. The rewriter's select step, --forms, --help, the
// report, the targets and the verifier's op list all read the rows (docs/forms.md, "Adding a form").
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "rewrite/form_id.h"
#include "rewrite/matcher.h"

namespace dwdeconv::onnx_io {
class ScopedTypes;
}

namespace dwdeconv::rewrite {

struct GraphScope;
class ConstEvaluator;

// A recognised upsampler: the ConvTranspose it computes, and the tensors that only it may read. After the rewrite
// they are removed if nothing else reads them.
struct UpsamplerMatch {
  DeconvMatch deconv;
  // Tensors the rewrite may orphan, each with the graph that defines it.
  std::vector<std::pair<const GraphScope*, std::string>> replaced;
  // A ConvTranspose node the form folds in (zero_insertion, upsample1d); it must not also be rewritten on its own.
  const onnx::NodeProto* absorbs = nullptr;
  // A form of two chained upsamplers (fir_pair: a stride (1,s) then a stride (s,1) ConvTranspose): the second, reading
  // what `deconv` writes. The rewriter names that tensor afresh, and rewrites both or neither.
  std::optional<DeconvMatch> second;
};

// What a form selected at one root node (ONNX Runtime's selectors return a NodeGroup the same way): the plan row's
// summary, and the match or the reason the upsampler is kept; an error of kind kInvalidModel rejects the model.
struct FormSelection {
  NodeSummary summary;
  core::Result<UpsamplerMatch> match = core::declined("not matched");
  const onnx::NodeProto* resize = nullptr;           // the nearest Resize the form claims, if it has one
  std::vector<const onnx::NodeProto*> more_resizes;  // and the others it claims (nearest_concat_conv: one per part)

  // This selection, kept for `error` with the summary as far as matching got: the one tail every recogniser ends in.
  std::optional<FormSelection> fail(core::Error error) {
    match = std::move(error);
    return std::move(*this);
  }
  // This selection, matched: the ConvTranspose it computes, the tensors only it reads, and a ConvTranspose it folds in.
  std::optional<FormSelection> succeed(DeconvMatch deconv, std::vector<std::pair<const GraphScope*, std::string>> replaced,
                                       const onnx::NodeProto* absorbs = nullptr) {
    UpsamplerMatch m;
    m.deconv = std::move(deconv);
    m.replaced = std::move(replaced);
    m.absorbs = absorbs;
    match = std::move(m);
    return std::move(*this);
  }
};

// What every recogniser reads besides the node it starts from: one per pass over the model.
struct MatchContext {
  int64_t ir_version;
  const onnx_io::ScopedTypes& types;  // computed from the graph inputs (rewrite/shape_propagation.h)
  ConstEvaluator& eval;
  const std::map<std::string, int>& uses;  // count_uses of the model
  bool dense_conv_transpose;               // RewriteOptions::dense_conv_transpose
};

// How a form looks at a node whose op is its row's root_op: its selection, or nothing when the node does not start the
// form at all (no row in the plan).
using Recogniser = std::optional<FormSelection> (*)(const MatchContext& context, const onnx::NodeProto& root, const GraphScope& scope);

// One form, as its file states it. Fields are set by name in the form's row function (C++17 has no designated
// initialisers); a reader never counts positions.
struct FormRow {
  Form form = Form::kNearestResize;  // its identity; the table (or register_form) assigns one to a row that keeps this
  const char* name = "";             // what --forms takes and the report says
  const char* described = "";        // for --help
  // The default-domain op the form starts from, and the arity the select step checks before the recogniser runs:
  // at least `root_min_inputs` inputs and exactly one output, or any arity with `root_any_arity` (the matcher refuses
  // a ConvTranspose of the wrong arity as an invalid model, so that row must see every one).
  const char* root_op = "Conv";
  int root_min_inputs = 2;
  bool root_any_arity = false;
  // The default-domain opsets it reads, inclusive; 0 as the maximum: every newer opset too.
  int64_t min_opset = 1;
  int64_t max_opset = 0;
  // The ops its replaced region may hold on x's path or in the constant chains it folds: per-node verification
  // refuses any other op computed from x (runtime_check/graph_match.cpp reads form_ops()).
  std::vector<std::string> ops;
  Recogniser recognise = nullptr;
  // It folds a ConvTranspose in (zero_insertion): selected before the ConvTranspose, which then has no row of its own.
  bool absorbs_conv_transpose = false;
  // Its plan row takes the absorbed ConvTranspose's name (upsample1d): when the fold is kept, that row says why, and the
  // ConvTranspose gets a row of its own only where it is rewritten alone (one upsampler, one row).
  bool row_named_after_absorbed = false;
  bool on_by_default = true;  // rewritten without --forms
  // It claims a nearest Resize of its own (no separate plan row for it): the nearest layout moves that Resize, adding
  // none.
  bool has_resize = false;
  // Its written kernel is the equivalent ConvTranspose's k minus s - 1 per axis (a nearest + Conv's box of s taps).
  bool kernel_grows_by_stride = false;

  // Whether `node` (in a model of default-domain opset `opset`) is one this form's recogniser looks at.
  bool may_start_at(const onnx::NodeProto& node, int64_t opset) const;
};

// Every form, in the order --help and docs/forms.md list them and the select step tries them (kNearestResize, not a
// form, is not listed). A deque: a registered row never moves the others, so form_info's references stay valid.
const std::deque<FormRow>& forms();

// The row of `form`.
const FormRow& form_info(Form form);

// Adds `row` after the built-in forms (a test's own form) and returns its Form, assigned when the row has none.
// Throws std::logic_error for a row without a name or recogniser, or whose name or Form is taken.
Form register_form(FormRow row);

// Removes a form register_form added; a built-in form stays.
void unregister_form(Form form);

// The form named `name`, or nullopt.
std::optional<Form> form_by_name(const std::string& name);

// The names of every form, or only of those on by default: "conv_transpose, nearest_mask, ...".
std::string form_names(bool defaults_only = false);

// Every form; the forms rewritten without --forms.
std::set<Form> all_forms();
std::set<Form> default_forms();

// Every op some form's region may hold (the union of the rows' `ops`), for per-node verification.
std::set<std::string> form_ops();

// Every op a form starts from (the rows' `root_op`): where per-node verification finds an upsampler's region to end.
std::set<std::string> form_root_ops();

}  // namespace dwdeconv::rewrite
