#include "rewrite/forms.h"

#include <algorithm>
#include <stdexcept>

namespace dwdeconv::rewrite {

// The built-in forms' rows, each defined in its own file (rewrite/form_<name>.cpp).
const FormRow& conv_transpose_form();
const FormRow& nearest_mask_form();
const FormRow& zero_insertion_form();
const FormRow& fir_pair_form();
const FormRow& reshape_zero_insertion_form();
const FormRow& nearest_conv_form();
const FormRow& nearest_concat_conv_form();
const FormRow& upsample1d_form();

namespace {

// The rows in order; a row that names no Form (no code refers to it by value) gets one past kFirstRegisteredForm.
std::deque<FormRow>& table() {
  static std::deque<FormRow> rows = [] {
    // fir_pair before reshape_zero_insertion: both start at a Conv after the same zero insertion, and the pair's first
    // Conv, judged alone, is no clean upscale.
    std::deque<FormRow> built_in = {conv_transpose_form(),         nearest_mask_form(), zero_insertion_form(), fir_pair_form(),
                                    reshape_zero_insertion_form(), nearest_conv_form(), upsample1d_form(),     nearest_concat_conv_form()};
    int next = kFirstRegisteredForm;
    for (auto& row : built_in) {
      if (row.form == Form::kNearestResize) row.form = static_cast<Form>(next++);
    }
    return built_in;
  }();
  return rows;
}

// How many rows are built in: register_form appends after them, unregister_form removes none of them.
size_t built_in_count() {
  static const size_t count = table().size();
  return count;
}

}  // namespace

bool FormRow::may_start_at(const onnx::NodeProto& node, int64_t opset) const {
  if (node.op_type() != root_op || !(node.domain().empty() || node.domain() == "ai.onnx")) return false;
  if (opset < min_opset || (max_opset != 0 && opset > max_opset)) return false;
  return root_any_arity || (node.input_size() >= root_min_inputs && node.output_size() == 1);
}

const std::deque<FormRow>& forms() {
  built_in_count();  // counted before any registration
  return table();
}

const char* form_name(Form form) { return form == Form::kNearestResize ? "resize" : form_info(form).name; }

const FormRow& form_info(Form form) {
  const auto& t = forms();
  const auto it = std::find_if(t.begin(), t.end(), [form](const FormRow& f) { return f.form == form; });
  if (it == t.end()) throw std::logic_error("no row for form " + std::to_string(static_cast<int>(form)));
  return *it;
}

Form register_form(FormRow row) {
  auto& t = table();
  built_in_count();
  if (row.name == nullptr || *row.name == '\0' || row.recognise == nullptr) {
    throw std::logic_error("a form's row needs a name and a recogniser");
  }
  if (row.form == Form::kNearestResize) {
    int next = kFirstRegisteredForm;
    for (const auto& f : t) next = std::max(next, static_cast<int>(f.form) + 1);
    row.form = static_cast<Form>(next);
  }
  for (const auto& f : t) {
    if (f.form == row.form || std::string(f.name) == row.name) {
      throw std::logic_error(std::string("form '") + row.name + "' is registered already");
    }
  }
  t.push_back(std::move(row));
  return t.back().form;
}

void unregister_form(Form form) {
  auto& t = table();
  const auto first = t.begin() + static_cast<std::ptrdiff_t>(built_in_count());
  t.erase(std::remove_if(first, t.end(), [form](const FormRow& f) { return f.form == form; }), t.end());
}

std::optional<Form> form_by_name(const std::string& name) {
  for (const auto& f : forms()) {
    if (name == f.name) return f.form;
  }
  return std::nullopt;
}

std::string form_names(bool defaults_only) {
  std::string names;
  for (const auto& f : forms()) {
    if (!defaults_only || f.on_by_default) names += (names.empty() ? "" : ", ") + std::string(f.name);
  }
  return names;
}

std::set<Form> all_forms() {
  std::set<Form> out;
  for (const auto& f : forms()) out.insert(f.form);
  return out;
}

std::set<Form> default_forms() {
  std::set<Form> out;
  for (const auto& f : forms()) {
    if (f.on_by_default) out.insert(f.form);
  }
  return out;
}

std::set<std::string> form_ops() {
  std::set<std::string> ops;
  for (const auto& f : forms()) ops.insert(f.ops.begin(), f.ops.end());
  return ops;
}

std::set<std::string> form_root_ops() {
  std::set<std::string> ops;
  for (const auto& f : forms()) ops.insert(f.root_op);
  return ops;
}

}  // namespace dwdeconv::rewrite
