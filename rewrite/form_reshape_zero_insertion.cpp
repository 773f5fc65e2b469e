// Form `reshape_zero_insertion`: StyleGAN2-ADA's Reshape / Pad / Reshape zero insertion, a constant-zero Pad, no-op
// Slices and a stride-1 Conv of any group, folded by parts::fold_zero_insertion as zero_insertion is.
#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "ops/ops.h"
#include "recogniser_parts.h"
#include "rewrite/forms.h"

namespace dwdeconv::rewrite {
namespace {

using core::declined;
using parts::join;
using parts::known_dim;
using parts::producer;
using parts::use_count;

// Slice ends at least this large keep a whole axis: PyTorch writes INT64_MAX for an open end, and no axis is
// anywhere near this long.
constexpr int64_t kLargeEnd = std::numeric_limits<int64_t>::max() / 2;

// One element of a shape tensor as the recognisers see it: a known value, or `factor` times dim `axis` of
// tensor `of`, read through Shape.
struct SymDim {
  std::optional<int64_t> value;
  std::string of;
  int64_t axis = -1;
  int64_t factor = 1;
};

// The rank of `name` if shape inference knows it.
std::optional<int64_t> known_rank(const onnx_io::ScopedTypes& types, const GraphScope& scope, const std::string& name) {
  const auto* type = types.find(scope.index, name);
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) return std::nullopt;
  return type->tensor_type().shape().dim_size();
}

// A tensor of shape elements: its dims, and its elements in row-major order.
struct SymTensor {
  std::vector<int64_t> dims;
  std::vector<SymDim> elements;
};

// The ops that move elements of a shape tensor without computing new ones, and which of their inputs carry those
// elements (the others are parameters that must fold: Gather's indices, Reshape's shape, Slice's bounds, ...).
bool moves_elements(const onnx::NodeProto& node) {
  static const std::set<std::string> kMovers = {"Identity", "Unsqueeze", "Squeeze", "Reshape", "Concat", "Gather",
                                                "Slice",    "Transpose", "Expand",  "Tile",    "Flatten"};
  if (node.op_type() == "Cast") {
    // A Cast keeps a dim only to another integer type wide enough for it (to bool, H becomes 1).
    const auto to = onnx_io::get_int(node, "to", 0);
    return to && (*to == onnx::TensorProto::INT64 || *to == onnx::TensorProto::INT32);
  }
  return kMovers.count(node.op_type()) > 0;
}

bool carries_elements(const onnx::NodeProto& node, int input) { return input == 0 || node.op_type() == "Concat"; }

// Gather(Shape(t), indices) where shape inference does not know t's rank: with non-negative constant indices the
// Gather reads only the first max(indices) + 1 dims of t whatever its rank, so those stand in for the whole Shape
// (a whole Shape, no start or end). An error when that does not apply.
core::Result<SymTensor> unranked_shape_prefix(const onnx::NodeProto& gather, const GraphScope& scope, ConstEvaluator& eval,
                                              const onnx_io::ScopedTypes& types) {
  const onnx::NodeProto* shape = producer(scope, gather.input(0), "Shape");
  if (shape == nullptr || onnx_io::find_attribute(*shape, "start") != nullptr || onnx_io::find_attribute(*shape, "end") != nullptr) {
    return declined(onnx_io::describe_node(gather) + " does not read a whole Shape");
  }
  if (known_rank(types, scope, shape->input(0))) return declined("the rank of '" + shape->input(0) + "' is known");
  auto index = gather.input_size() > 1 ? eval.evaluate(gather.input(1), scope) : core::Result<ConstTensor>(declined("no indices"));
  if (!index || !index->is_integer() || index->ints.empty()) return declined("the rank of '" + shape->input(0) + "' is not known");
  int64_t length = 0;
  for (int64_t i : index->ints) {
    if (i < 0) return declined("the rank of '" + shape->input(0) + "' is not known, so a negative index cannot be read");
    length = std::max(length, i + 1);
  }
  SymTensor prefix{{length}, {}};
  for (int64_t a = 0; a < length; ++a) prefix.elements.push_back({std::nullopt, shape->input(0), a, 1});
  return prefix;
}

// The value of an int64 shape tensor as the recognisers see it, element by element: folded where the evaluator
// can, else followed through the ops PyTorch writes for `x.shape[i] * k`. Shape(t) gives dims of t; an op that
// moves elements runs in the op library's own kernel on stand-in ids (element k of every input it moves becomes a
// distinct integer), so that Concat's axis, Gather's index ranks, Reshape and Slice mean exactly what they mean to
// a runtime; Mul by a constant scales one element; Add or Sub of 0 keeps it.
core::Result<SymTensor> symbolic_value(const std::string& name, const GraphScope& scope, ConstEvaluator& eval,
                                       const onnx_io::ScopedTypes& types, int depth = 0) {
  const int64_t opset = eval.opset();
  auto folded = eval.evaluate(name, scope);
  if (folded) {
    if (!folded->is_integer()) return declined("'" + name + "' is not an integer tensor");
    SymTensor out{folded->dims, {}};
    for (int64_t v : folded->ints) out.elements.push_back({v, "", -1, 1});
    return out;
  }
  if (depth > 16) return folded.error();
  const onnx::NodeProto* node = nullptr;
  for (const auto& n : scope.graph->node()) {
    if (n.output_size() == 1 && n.output(0) == name && parts::default_domain(n)) node = &n;
  }
  if (node == nullptr || node->input_size() < 1) return folded.error();
  const std::string& op = node->op_type();
  if (op == "Shape") {
    const auto rank = known_rank(types, scope, node->input(0));
    if (!rank) return declined("the rank of '" + node->input(0) + "' is not known");
    // The Shape kernel on a dims-only stand-in whose dims are the axis numbers gives the axes it selects.
    ops::Tensor axes;
    for (int64_t a = 0; a < *rank; ++a) axes.dims.push_back(a);
    ops::Tensor selected;
    if (auto ran = ops::run_reference_node(*node, ops::OpContext{opset}, {&axes}, {&selected}); !ran) return declined(ran.error().message);
    SymTensor out{selected.dims, {}};
    for (int64_t a : selected.i) out.elements.push_back({std::nullopt, node->input(0), a, 1});
    return out;
  }
  if (moves_elements(*node)) {
    std::vector<SymDim> table;  // stand-in id -> element
    std::vector<ops::Tensor> values(static_cast<size_t>(node->input_size()));
    ops::Inputs inputs(values.size(), nullptr);
    for (int k = 0; k < node->input_size(); ++k) {
      if (node->input(k).empty()) continue;
      ops::Tensor& t = values[static_cast<size_t>(k)];
      if (carries_elements(*node, k)) {
        auto part = symbolic_value(node->input(k), scope, eval, types, depth + 1);
        if (!part && op == "Gather") part = unranked_shape_prefix(*node, scope, eval, types);
        if (!part) return part.error();
        t.reshape(onnx::TensorProto::INT64, part->dims);
        for (size_t e = 0; e < part->elements.size(); ++e) {
          t.i[e] = static_cast<int64_t>(table.size());
          table.push_back(part->elements[e]);
        }
      } else {
        auto param = eval.evaluate(node->input(k), scope);
        if (!param || !param->is_integer())
          return declined(onnx_io::describe_node(*node) + ": input '" + node->input(k) + "' is not a constant");
        t.reshape(param->data_type, param->dims);
        std::copy(param->ints.begin(), param->ints.end(), t.i.begin());
      }
      inputs[static_cast<size_t>(k)] = &t;
    }
    ops::Tensor moved;
    if (auto ran = ops::run_reference_node(*node, ops::OpContext{opset, kMaxFoldedElements}, inputs, {&moved}); !ran) {
      return declined(ran.error().message);
    }
    SymTensor out{moved.dims, {}};
    for (int64_t id : moved.i) out.elements.push_back(table[static_cast<size_t>(id)]);
    return out;
  }
  if ((op == "Add" || op == "Sub") && node->input_size() == 2) {  // x.shape[2] - 0, as PyTorch writes a crop of 0
    auto b = eval.evaluate(node->input(1), scope);
    if (b && b->is_integer() && b->size() == 1 && b->ints[0] == 0 && b->dims.size() <= 1) {
      auto a = symbolic_value(node->input(0), scope, eval, types, depth + 1);
      if (a && a->dims.size() >= b->dims.size()) return a;
    }
  }
  if (op == "Mul" && node->input_size() == 2) {
    auto a = symbolic_value(node->input(0), scope, eval, types, depth + 1);
    auto b = symbolic_value(node->input(1), scope, eval, types, depth + 1);
    if (!a || !b) return (a ? b : a).error();
    if (a->elements.size() == 1 && b->elements.size() == 1) {
      SymDim x = a->elements[0], y = b->elements[0];
      if (x.value && !y.value) std::swap(x, y);
      // One element each: the product has the broadcast of their dims, the larger rank.
      std::vector<int64_t> dims = a->dims.size() >= b->dims.size() ? a->dims : b->dims;
      if (x.value && y.value) return SymTensor{dims, {{*x.value * *y.value, "", -1, 1}}};
      if (!x.value && y.value) {
        x.factor *= *y.value;
        return SymTensor{dims, {x}};
      }
    }
  }
  return folded.error();
}

// The elements of a 1-D shape tensor (a Reshape's target, a Slice's ends), or why they are not known.
core::Result<std::vector<SymDim>> shape_elements(const std::string& name, const GraphScope& scope, ConstEvaluator& eval,
                                                 const onnx_io::ScopedTypes& types) {
  auto value = symbolic_value(name, scope, eval, types);
  if (!value) return value.error();
  if (value->dims.size() != 1) return declined("'" + name + "' has " + std::to_string(value->dims.size()) + " dims, not 1");
  return value->elements;
}

// What a Reshape's target must say at one position: `factor` times dim `axis` of x, or the literal `factor`
// when axis is -1.
struct WantDim {
  int64_t axis = -1;
  int64_t factor = 1;
};

// Whether Reshape `reshape` certainly gives dims `want` (in terms of x). A target element may state the dim
// (folded, or read from Shape(x)), copy it with 0 from the Reshape's input whose dims are `input` in the same
// terms, or be the one uncertain element (-1, or a literal where x's dim is unknown) when every other element
// is certain, since the element count then fixes it.
core::Result<bool> reshape_gives(const onnx::NodeProto& reshape, const GraphScope& scope, ConstEvaluator& eval,
                                 const onnx_io::ScopedTypes& types, const std::string& x, const std::vector<WantDim>& want,
                                 const std::vector<WantDim>& input) {
  if (reshape.input_size() != 2) return declined("Reshape without a shape input");
  auto target = shape_elements(reshape.input(1), scope, eval, types);
  if (!target) return declined("Reshape shape not constant: " + target.error().message);
  auto allowzero = onnx_io::get_int(reshape, "allowzero", 0);
  if (!allowzero) return allowzero.error();
  if (target->size() != want.size()) return false;
  int inferred = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const SymDim& t = (*target)[i];
    const WantDim& w = want[i];
    if (t.value && *t.value == -1) {
      ++inferred;
    } else if (t.value && *t.value == 0 && *allowzero == 0) {
      if (i >= input.size() || input[i].axis != w.axis || input[i].factor != w.factor) return false;
    } else if (t.value) {
      const auto dim = w.axis < 0 ? std::optional<int64_t>(1) : known_dim(types, scope, x, w.axis);
      if (!dim) {
        ++inferred;  // a literal for a dim shape inference lost: as certain as a -1 once the rest is
      } else if (*t.value != w.factor * *dim) {
        return false;
      }
    } else if (t.of != x || t.axis != w.axis || t.factor != w.factor) {
      return false;
    }
  }
  return inferred <= 1;
}

// Why Slice `slice` is not a no-op on a 4-D tensor, or "" when it is: every axis it names starts at 0 with
// step 1 and ends at or past the end: a large constant, the known dim, or the dim read from Shape of a tensor
// in `same` (which all have the Slice's input shape).
std::string slice_not_noop(const onnx::NodeProto& slice, const GraphScope& scope, ConstEvaluator& eval, const onnx_io::ScopedTypes& types,
                           const std::set<std::string>& same) {
  if (slice.input_size() < 3) return "Slice in the attribute form (opset < 10)";
  auto starts = eval.evaluate(slice.input(1), scope);
  if (!starts || !starts->is_integer()) return "Slice starts not constant";
  std::vector<int64_t> axes, steps;
  if (slice.input_size() > 3 && !slice.input(3).empty()) {
    auto a = eval.evaluate(slice.input(3), scope);
    if (!a || !a->is_integer()) return "Slice axes not constant";
    axes = a->ints;
  } else {
    for (size_t i = 0; i < starts->ints.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (slice.input_size() > 4 && !slice.input(4).empty()) {
    auto st = eval.evaluate(slice.input(4), scope);
    if (!st || !st->is_integer()) return "Slice steps not constant";
    steps = st->ints;
  } else {
    steps.assign(starts->ints.size(), 1);
  }
  auto ends = shape_elements(slice.input(2), scope, eval, types);
  if (!ends) return "Slice ends not known: " + ends.error().message;
  if (ends->size() != starts->ints.size() || axes.size() != starts->ints.size() || steps.size() != starts->ints.size()) {
    return "Slice starts, ends, axes and steps differ in length";
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + 4 : axes[i];
    if (starts->ints[i] != 0 || steps[i] != 1)
      return "Slice on axis " + std::to_string(axes[i]) + " is not a no-op (start " + std::to_string(starts->ints[i]) + ", step " +
             std::to_string(steps[i]) + ")";
    const SymDim& e = (*ends)[i];
    const auto dim = known_dim(types, scope, slice.input(0), axis);
    const bool whole =
        e.value ? (*e.value >= kLargeEnd || (dim && *e.value >= *dim)) : (same.count(e.of) > 0 && e.axis == axis && e.factor == 1);
    if (whole) continue;
    const std::string at = "Slice on axis " + std::to_string(axes[i]);
    if (e.value && dim) return at + " crops (it ends at " + std::to_string(*e.value) + " of " + std::to_string(*dim) + ")";
    if (e.value) return at + " may crop (it ends at " + std::to_string(*e.value) + ", and the dim is not known)";
    return at + " may crop (it ends at " + (e.factor != 1 ? std::to_string(e.factor) + " x " : "") + "dim " + std::to_string(e.axis) +
           " of '" + e.of + "', not at its own dim)";
  }
  return "";
}

}  // namespace

core::Result<parts::ZeroInsertion> parts::reshape_insertion(const onnx::NodeProto& split, const onnx::NodeProto& insert,
                                                            const onnx::NodeProto& merge, const GraphScope& scope, ConstEvaluator& eval,
                                                            const onnx_io::ScopedTypes& types, NodeSummary& summary) {
  const std::string& x = split.input(0);
  // The zero insertion: pads only on the singleton axes 3 and 5 of [N,C,H,1,W,1], jy + (s-1-jy) zeros around H's.
  auto p6 = parts::constant_zero_pads(insert, scope, eval, 6);
  if (!p6) return p6.error();
  const auto& p = *p6;
  if (p[0] || p[1] || p[2] || p[4] || p[6] || p[7] || p[8] || p[10]) {
    return declined("zero-inserting Pad pads " + join(p) + " pad an axis other than the singletons of [N,C,H,1,W,1]");
  }
  const int64_t sy = 1 + p[3] + p[9], sx = 1 + p[5] + p[11];
  if (sy != sx) return declined("zero insertion factors differ per axis (" + std::to_string(sy) + " vs " + std::to_string(sx) + ")");
  if (sy < 2) return declined("zero-inserting Pad inserts no zeros");
  const int64_t s = sy;
  summary.stride = s;
  summary.strides = {s, s};

  // The Reshapes: x [N,C,H,W] -> [N,C,H,1,W,1], and the padded [N,C,H,s,W,s] -> [N,C,sH,sW].
  const std::vector<WantDim> x_dims{{0, 1}, {1, 1}, {2, 1}, {3, 1}};
  const std::vector<WantDim> split_dims{{0, 1}, {1, 1}, {2, 1}, {-1, 1}, {3, 1}, {-1, 1}};
  auto split_ok = reshape_gives(split, scope, eval, types, x, split_dims, x_dims);
  if (!split_ok) return split_ok.error();
  if (!*split_ok) return declined("first Reshape does not give [N,C,H,1,W,1] of its input");
  const std::vector<WantDim> padded_dims{{0, 1}, {1, 1}, {2, 1}, {-1, s}, {3, 1}, {-1, s}};
  auto merge_ok = reshape_gives(merge, scope, eval, types, x, {{0, 1}, {1, 1}, {2, s}, {3, s}}, padded_dims);
  if (!merge_ok) return merge_ok.error();
  if (!*merge_ok) return declined("second Reshape does not give [N,C," + std::to_string(s) + "H," + std::to_string(s) + "W]");
  parts::ZeroInsertion zi;
  zi.s = s;
  zi.j = {p[3], p[5]};
  zi.gains = {1.0};
  return zi;
}

namespace {

// rosinality's upfirdn2d_native (the StyleGAN2 that GPEN and GFPGAN v1 build on) folds the channels into the batch
// axis: x [N,C,H,W] -> [N*C,H,W,1] -> [N*C,H,1,W,1,1], zeros inserted on axes 2 and 4, -> [N*C,sH,sW,1], a Pad,
// crop Slices, Transpose (0,3,1,2) and a Reshape to [N*C,1,H',W'], then a one-channel Conv. Its factor s when
// `conv` reads such a chain (the row says what it is), else nothing: no form rewrites that layout.
std::optional<int64_t> channels_in_batch_insertion(const onnx::NodeProto& conv, const GraphScope& scope, ConstEvaluator& eval) {
  // Cheap and selective first: every Conv that reads no Slice comes here.
  const auto group = onnx_io::get_int(conv, "group", 1);
  if (!group || *group != 1 || conv.input_size() < 2) return std::nullopt;
  const onnx::NodeProto* reshape = producer(scope, conv.input(0), "Reshape");
  const onnx::NodeProto* transpose = reshape == nullptr ? nullptr : producer(scope, reshape->input(0), "Transpose");
  if (transpose == nullptr || transpose->input_size() < 1) return std::nullopt;
  auto perm = onnx_io::get_ints(*transpose, "perm", {});
  if (!perm || *perm != std::vector<int64_t>{0, 3, 1, 2}) return std::nullopt;
  std::string at = transpose->input(0);
  for (int n = 0; n < 4; ++n) {
    const onnx::NodeProto* slice = producer(scope, at, "Slice");
    if (slice == nullptr || slice->input_size() < 1) break;
    at = slice->input(0);
  }
  const onnx::NodeProto* pad = producer(scope, at, "Pad");
  const onnx::NodeProto* merge = pad == nullptr || pad->input_size() < 1 ? nullptr : producer(scope, pad->input(0), "Reshape");
  const onnx::NodeProto* insert = merge == nullptr ? nullptr : producer(scope, merge->input(0), "Pad");
  if (insert == nullptr || insert->input_size() < 1 || producer(scope, insert->input(0), "Reshape") == nullptr) return std::nullopt;
  auto p = parts::constant_zero_pads(*insert, scope, eval, 6);  // [N*C,H,1,W,1,1]: zeros after axes 2 and 4 only
  if (!p || (*p)[0] || (*p)[1] || (*p)[3] || (*p)[5] || (*p)[6] || (*p)[7] || (*p)[9] || (*p)[11]) return std::nullopt;
  if ((*p)[2] + (*p)[8] < 1 || (*p)[2] + (*p)[8] != (*p)[4] + (*p)[10]) return std::nullopt;
  // A one-channel Conv: one group (above), a [1, 1, kh, kw] weight.
  const auto weight = eval.evaluate(conv.input(1), scope);
  if (!weight || weight->dims.size() != 4 || weight->dims[0] != 1 || weight->dims[1] != 1) return std::nullopt;
  return 1 + (*p)[2] + (*p)[8];
}

std::optional<FormSelection> select_reshape_zero_insertion(const MatchContext& context, const onnx::NodeProto& conv,
                                                           const GraphScope& scope) {
  const onnx_io::ScopedTypes& types = context.types;
  ConstEvaluator& eval = context.eval;
  // Cheap and selective first (the row's root op and arity are checked already): Conv(Slice*(Pad(Reshape(Pad(Reshape(x)))))) in this graph.
  std::vector<const onnx::NodeProto*> slices;
  std::string at = conv.input(0);
  while (const onnx::NodeProto* slice = producer(scope, at, "Slice")) {
    if (slices.size() == 4 || slice->input_size() < 1) return std::nullopt;
    slices.push_back(slice);
    at = slice->input(0);
  }
  if (slices.empty()) {
    if (auto s = channels_in_batch_insertion(conv, scope, eval)) {
      FormSelection out;
      out.summary = parts::conv_summary(conv, scope, Form::kReshapeZeroInsertion);
      out.summary.stride = *s;
      out.summary.strides = {*s, *s};
      return out.fail(
          declined("upfirdn2d_native's layout (rosinality's StyleGAN2: the channels folded into the batch axis, zeros "
                   "inserted x" +
                   std::to_string(*s) +
                   " into [N*C,H,1,W,1,1], a one-channel Conv on [N*C,1,H,W]): "
                   "no form rewrites it"));
    }
  }
  const onnx::NodeProto* pad = producer(scope, at, "Pad");
  if (pad == nullptr || pad->input_size() < 1) return std::nullopt;
  const onnx::NodeProto* merge = producer(scope, pad->input(0), "Reshape");
  if (merge == nullptr) return std::nullopt;
  const onnx::NodeProto* insert = producer(scope, merge->input(0), "Pad");
  if (insert == nullptr || insert->input_size() < 1) return std::nullopt;
  const onnx::NodeProto* split = producer(scope, insert->input(0), "Reshape");
  if (split == nullptr || split->input(0).empty()) return std::nullopt;

  FormSelection out;
  out.summary = parts::conv_summary(conv, scope, Form::kReshapeZeroInsertion);
  NodeSummary& sum = out.summary;
  const std::string& x = split->input(0);

  auto tail = parts::read_conv_tail(conv, scope, eval, sum, /*any_group=*/true);
  if (!tail) return out.fail(tail.error());
  std::vector<std::pair<const onnx::NodeProto*, std::string>> chain{
      {split, "first Reshape"}, {insert, "zero-inserting Pad"}, {merge, "second Reshape"}, {pad, "Pad"}};
  for (const auto* slice : slices) chain.emplace_back(slice, "Slice");
  // Shape nodes may read the chain too (the Slices' ends): they read only its dims, which x's fix.
  for (const auto& [node, what] : chain) {
    int shape_readers = 0;
    for (const auto& n : scope.graph->node()) {
      if (n.op_type() == "Shape" && n.input_size() == 1 && n.input(0) == node->output(0)) ++shape_readers;
    }
    if (use_count(context.uses, node->output(0)) != 1 + shape_readers) return out.fail(declined(what + " output has another reader"));
  }

  auto zi = parts::reshape_insertion(*split, *insert, *merge, scope, eval, types, sum);
  if (!zi) return out.fail(zi.error());

  auto pads = parts::pad_amounts(*pad, scope, eval);
  if (!pads) return out.fail(pads.error());
  std::set<std::string> same{pad->output(0)};
  for (const auto* slice : slices) same.insert(slice->output(0));
  for (auto it = slices.rbegin(); it != slices.rend(); ++it) {
    if (auto why = slice_not_noop(**it, scope, eval, types, same); !why.empty()) return out.fail(declined(why));
  }

  auto deconv = parts::fold_zero_insertion(conv, scope, context.ir_version, types, x, *tail, *pads, *zi, sum);
  if (!deconv) return out.fail(deconv.error());

  return out.succeed(std::move(*deconv), parts::replaced_tensors(scope, x, chain, {conv.input(1)}));
}

}  // namespace

// Form `reshape_zero_insertion` (StyleGAN2-ADA's reference upfirdn2d):
//   Before:  r = Reshape(x, [N,C,H,1,W,1])
//            z = Pad(r, pads6)        constant 0 on the two singleton axes only: (jy, s-1-jy) and (jx, s-1-jx)
//            u = Reshape(z, [N,C,sH,sW])
//            p = Pad(u, pads)         constant 0
//            q = Slice(...(p))        any number (up to 4) of no-op Slices: steps 1, starts 0, ends at least
//                                     the dim, or the dim itself read from Shape of the sliced tensor
//            y = Conv(q, f[, B])      depthwise, stride 1, dilation 1; f may be computed (Tile, Expand, ...)
//   After:   y = ConvTranspose(x, w, B), w[t] = f[K-1-t], pads as for nearest_mask.
const FormRow& reshape_zero_insertion_form() {
  static const FormRow row = [] {
    FormRow row;
    row.form = Form::kReshapeZeroInsertion;
    row.name = "reshape_zero_insertion";
    row.described = "Reshape/Pad/Reshape zero insertion, Pad, Conv of any group (upfirdn2d)";
    // Its ops: the chain, the shape chains of its Reshapes and Slices (x.shape[i] * k) and its computed filter (Tile, Expand).
    row.ops = {"Reshape",   "Pad",     "Slice",  "Conv", "Constant", "Shape", "Gather",
               "Unsqueeze", "Squeeze", "Concat", "Mul",  "Expand",   "Tile",  "Cast"};
    row.recognise = select_reshape_zero_insertion;
    return row;
  }();
  return row;
}

}  // namespace dwdeconv::rewrite
