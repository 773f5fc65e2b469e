// Recognisers of the two zero-insertion forms: a one-tap ConvTranspose (zero_insertion), and StyleGAN2-ADA's
// Reshape / Pad / Reshape (reshape_zero_insertion). Both end in a constant-zero Pad and a depthwise stride-1
// Conv, which parts::fold_zero_insertion turns into the ConvTranspose they compute.
#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "rewrite/recogniser_parts.h"
#include "rewrite/recognisers.h"

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

// The one non-zero tap of a zero-insertion kernel and its gain per channel.
struct InsertionTap {
  int64_t ty = 0, tx = 0;
  std::vector<double> gains;
};

// The zero-insertion test of a depthwise ConvTranspose weight [C,1,ky,kx]: exactly one non-zero per channel,
// at the same tap in every channel. Gains may differ: a depthwise Conv folds a per-channel gain into its filter.
core::Result<InsertionTap> insertion_tap(const ConstTensor& v) {
  const int64_t channels = v.dims[0], ky = v.dims[2], kx = v.dims[3];
  InsertionTap tap;
  for (int64_t c = 0; c < channels; ++c) {
    int64_t count = 0, at = 0;
    for (int64_t t = 0; t < ky * kx; ++t) {
      if (v.reals[static_cast<size_t>(c * ky * kx + t)] != 0.0) {
        ++count;
        at = t;
      }
    }
    if (count != 1) {
      return declined("ConvTranspose weight has " + std::to_string(count) + " non-zero taps in channel " + std::to_string(c) +
                      ", wants 1 (zero insertion)");
    }
    if (c == 0) {
      tap.ty = at / kx;
      tap.tx = at % kx;
    } else if (tap.ty != at / kx || tap.tx != at % kx) {
      return declined("ConvTranspose weight's non-zero tap moves between channels");
    }
    tap.gains.push_back(v.reals[static_cast<size_t>(c * ky * kx + at)]);
  }
  return tap;
}

// The stride of a ConvTranspose that only inserts zeros: stride s on both axes, dilation 1, pads and
// output_padding 0, no output_shape. Errors of a malformed attribute come back as they are.
core::Result<int64_t> insertion_stride(const onnx::NodeProto& ct) {
  auto strides = onnx_io::get_ints(ct, "strides", {});
  auto dilations = onnx_io::get_ints(ct, "dilations", {});
  auto pads = onnx_io::get_ints(ct, "pads", {});
  auto output_padding = onnx_io::get_ints(ct, "output_padding", {});
  auto output_shape = onnx_io::get_ints(ct, "output_shape", {});
  auto auto_pad = onnx_io::get_string(ct, "auto_pad", "NOTSET");
  for (const auto* r : {&strides, &dilations, &pads, &output_padding, &output_shape}) {
    if (!*r) return r->error();
  }
  if (!auto_pad) return auto_pad.error();
  if (strides->size() != 2 || (*strides)[0] != (*strides)[1] || (*strides)[0] < 2) {
    return declined("ConvTranspose strides " + join(*strides) + " are not [s,s] with s >= 2");
  }
  for (int64_t d : *dilations) {
    if (d != 1) return declined("ConvTranspose dilation " + std::to_string(d));
  }
  if (*auto_pad != "NOTSET" && *auto_pad != "VALID") return declined("ConvTranspose auto_pad " + *auto_pad);
  for (int64_t p : *pads) {
    if (p != 0) return declined("ConvTranspose pads " + join(*pads) + " are not 0");
  }
  for (int64_t p : *output_padding) {
    if (p != 0) return declined("ConvTranspose output_padding " + join(*output_padding) + " is not 0");
  }
  if (!output_shape->empty()) return declined("ConvTranspose has an output_shape");
  return (*strides)[0];
}

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

// The elements of a 1-D (or scalar) int64 shape tensor: folded where the evaluator can, else followed through
// the ops PyTorch writes for `x.shape[i] * k`: Gather(Shape(t), i), Shape(t) with start/end, Unsqueeze,
// Squeeze, Reshape, Identity, Cast to an integer, Concat, Mul by a constant, and Add or Sub of 0.
core::Result<std::vector<SymDim>> shape_elements(const std::string& name, const GraphScope& scope, ConstEvaluator& eval,
                                                 const onnx_io::ScopedTypes& types, int depth = 0) {
  auto folded = eval.evaluate(name, scope);
  if (folded) {
    if (!folded->is_integer()) return declined("'" + name + "' is not an integer tensor");
    std::vector<SymDim> out;
    for (int64_t v : folded->ints) out.push_back({v, "", -1, 1});
    return out;
  }
  if (depth > 16) return folded.error();
  const onnx::NodeProto* node = nullptr;
  for (const auto& n : scope.graph->node()) {
    if (n.output_size() == 1 && n.output(0) == name && parts::default_domain(n)) node = &n;
  }
  if (node == nullptr || node->input_size() < 1) return folded.error();
  const std::string& op = node->op_type();
  // A Cast keeps a dim only to another integer type wide enough for it (to bool, H becomes 1).
  const auto to = onnx_io::get_int(*node, "to", 0);
  const bool keeps = op != "Cast" || (to && (*to == onnx::TensorProto::INT64 || *to == onnx::TensorProto::INT32));
  if ((op == "Identity" || op == "Cast" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape") && keeps) {
    return shape_elements(node->input(0), scope, eval, types, depth + 1);  // a scalar or a 1-D list stays one list
  }
  if (op == "Concat") {
    std::vector<SymDim> out;
    for (const auto& in : node->input()) {
      auto part = shape_elements(in, scope, eval, types, depth + 1);
      if (!part) return part.error();
      out.insert(out.end(), part->begin(), part->end());
    }
    return out;
  }
  if (op == "Shape" || op == "Gather") {
    const onnx::NodeProto* shape = op == "Shape" ? node : producer(scope, node->input(0), "Shape");
    if (shape == nullptr) return folded.error();
    auto rank = known_rank(types, scope, shape->input(0));
    const bool whole = onnx_io::find_attribute(*shape, "start") == nullptr && onnx_io::find_attribute(*shape, "end") == nullptr;
    if (!rank && whole && op == "Gather") rank = int64_t{1} << 20;  // non-negative indices need no rank
    if (!rank) return declined("the rank of '" + shape->input(0) + "' is not known");
    auto start = onnx_io::get_int(*shape, "start", 0);
    auto end = onnx_io::get_int(*shape, "end", *rank);
    if (!start || !end) return declined("Shape start or end is not an int");
    const auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + *rank : v, 0, *rank); };
    std::vector<SymDim> dims;
    const int64_t first = clamp(*start), count = std::max<int64_t>(0, clamp(*end) - first);
    auto dim = [&](int64_t i) { return SymDim{std::nullopt, shape->input(0), first + i, 1}; };
    if (op == "Shape") {
      std::vector<SymDim> dims;
      for (int64_t i = 0; i < count; ++i) dims.push_back(dim(i));
      return dims;
    }
    auto axis = onnx_io::get_int(*node, "axis", 0);
    if (node->input_size() != 2 || !axis || *axis != 0) return declined(onnx_io::describe_node(*node) + " is not a Gather of a shape");
    auto index = eval.evaluate(node->input(1), scope);
    if (!index || !index->is_integer()) return declined(onnx_io::describe_node(*node) + ": indices not constant");
    std::vector<SymDim> out;
    for (int64_t i : index->ints) {
      const int64_t at = i < 0 ? i + count : i;
      if (at < 0 || at >= count) return declined(onnx_io::describe_node(*node) + ": index " + std::to_string(i) + " out of range");
      out.push_back(dim(at));
    }
    return out;
  }
  if ((op == "Add" || op == "Sub") && node->input_size() == 2) {  // x.shape[2] - 0, as PyTorch writes a crop of 0
    auto b = eval.evaluate(node->input(1), scope);
    if (b && b->is_integer() && b->size() == 1 && b->ints[0] == 0) return shape_elements(node->input(0), scope, eval, types, depth + 1);
  }
  if (op == "Mul" && node->input_size() == 2) {
    auto a = shape_elements(node->input(0), scope, eval, types, depth + 1);
    auto b = shape_elements(node->input(1), scope, eval, types, depth + 1);
    if (!a || !b) return (a ? b : a).error();
    if (a->size() == 1 && b->size() == 1) {
      SymDim x = (*a)[0], y = (*b)[0];
      if (x.value && !y.value) std::swap(x, y);
      if (x.value && y.value) return std::vector<SymDim>{{*x.value * *y.value, "", -1, 1}};
      if (!x.value && y.value) {
        x.factor *= *y.value;
        return std::vector<SymDim>{x};
      }
    }
  }
  return folded.error();
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
    if (starts->ints[i] != 0 || steps[i] != 1) return "Slice on axis " + std::to_string(axes[i]) + " is not a no-op (start " +
                                                       std::to_string(starts->ints[i]) + ", step " + std::to_string(steps[i]) + ")";
    const SymDim& e = (*ends)[i];
    const auto dim = known_dim(types, scope, slice.input(0), axis);
    const bool whole = e.value ? (*e.value >= kLargeEnd || (dim && *e.value >= *dim))
                               : (same.count(e.of) > 0 && e.axis == axis && e.factor == 1);
    if (!whole) return "Slice on axis " + std::to_string(axes[i]) + " crops";
  }
  return "";
}

}  // namespace

std::optional<UpsamplerOutcome> match_zero_insertion(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                                     const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                     const std::map<std::string, int>& uses) {
  // Cheap and selective first: Conv(Pad(ConvTranspose(x))) in this graph.
  if (conv.op_type() != "Conv" || !parts::default_domain(conv) || conv.input_size() < 2 || conv.output_size() != 1) return std::nullopt;
  const onnx::NodeProto* pad = producer(scope, conv.input(0), "Pad");
  if (pad == nullptr || pad->input_size() < 1) return std::nullopt;
  const onnx::NodeProto* ct = producer(scope, pad->input(0), "ConvTranspose");
  if (ct == nullptr || ct->input_size() < 2 || ct->input(0).empty() || ct->input(1).empty()) return std::nullopt;

  UpsamplerOutcome out;
  out.summary = parts::conv_summary(conv, scope, "zero_insertion");
  NodeSummary& sum = out.summary;
  auto fail = [&out](core::Error e) -> std::optional<UpsamplerOutcome> {
    out.match = std::move(e);
    return out;
  };
  const std::string& x = ct->input(0);

  auto tail = parts::read_conv_tail(conv, scope, eval, sum);
  if (!tail) return fail(tail.error());
  // The ConvTranspose stays whenever anything else reads its output, so folding would save nothing.
  for (const auto& [node, what] : {std::pair<const onnx::NodeProto*, const char*>{ct, "ConvTranspose"}, {pad, "Pad"}}) {
    if (use_count(uses, node->output(0)) != 1) return fail(declined(std::string(what) + " output has another reader"));
  }

  auto s = insertion_stride(*ct);
  if (!s) return fail(s.error());
  sum.stride = *s;
  sum.strides = {*s, *s};
  auto group = onnx_io::get_int(*ct, "group", 1);
  if (!group) return fail(group.error());
  auto v = eval.evaluate(ct->input(1), scope);
  if (!v) return fail(declined("ConvTranspose weight not constant: " + v.error().message));
  if (v->dims.size() != 4 || v->dims[0] != tail->channels || v->dims[1] != 1 || *group != tail->channels) {
    return fail(declined("ConvTranspose is not depthwise over the Conv's " + std::to_string(tail->channels) + " channels: group " +
                         std::to_string(*group) + ", weight " + join(v->dims)));
  }
  if (v->is_integer()) return fail(declined("ConvTranspose weight is not a float tensor"));
  // A kernel_shape that disagrees makes the node invalid; left to the ConvTranspose's own row to say so.
  auto kernel_shape = onnx_io::get_ints(*ct, "kernel_shape", {});
  if (!kernel_shape) return fail(kernel_shape.error());
  if (!kernel_shape->empty() && *kernel_shape != std::vector<int64_t>{v->dims[2], v->dims[3]}) {
    return fail(declined("ConvTranspose kernel_shape " + join(*kernel_shape) + " disagrees with its weight " + join(v->dims)));
  }
  if (v->dims[2] > *s || v->dims[3] > *s) {
    return fail(declined("ConvTranspose kernel " + std::to_string(v->dims[2]) + "x" + std::to_string(v->dims[3]) +
                         " is larger than its stride " + std::to_string(*s)));
  }
  // A bias lands on the inserted zeros too, so it is no longer zero insertion; an all-zero one is harmless.
  if (ct->input_size() > 2 && !ct->input(2).empty()) {
    auto b = eval.evaluate(ct->input(2), scope);
    if (!b) return fail(declined("ConvTranspose bias not constant: " + b.error().message));
    for (size_t i = 0; i < b->size(); ++i) {
      if (b->at(i) != 0.0) return fail(declined("ConvTranspose has a non-zero bias"));
    }
  }
  auto tap = insertion_tap(*v);
  if (!tap) return fail(tap.error());
  auto pads = parts::pad_amounts(*pad, scope, eval);
  if (!pads) return fail(pads.error());

  parts::ZeroInsertion zi;
  zi.s = *s;
  zi.j = {tap->ty, tap->tx};
  zi.gains = std::move(tap->gains);
  // A kernel k < s makes the ConvTranspose's output s*(H-1)+k long: s-k short of s*H at the end.
  zi.deficit = {*s - v->dims[2], *s - v->dims[3]};
  auto deconv = parts::fold_zero_insertion(conv, scope, ir_version, types, x, *tail, *pads, zi, sum);
  if (!deconv) return fail(deconv.error());

  UpsamplerMatch m;
  m.deconv = std::move(*deconv);
  m.absorbs = ct;
  std::set<std::pair<size_t, std::string>> seen;
  for (const auto* node : {pad, ct}) {
    m.replaced.emplace_back(&scope, node->output(0));
    seen.insert({scope.index, node->output(0)});
  }
  for (const auto* node : {pad, ct}) {
    for (const auto& in : node->input()) parts::collect_upstream(in, scope, x, seen, m.replaced);
  }
  parts::collect_upstream(conv.input(1), scope, x, seen, m.replaced);
  out.match = std::move(m);
  return out;
}

std::optional<UpsamplerOutcome> match_reshape_zero_insertion(const onnx::NodeProto& conv, const GraphScope& scope,
                                                             int64_t ir_version, const onnx_io::ScopedTypes& types,
                                                             ConstEvaluator& eval, const std::map<std::string, int>& uses) {
  // Cheap and selective first: Conv(Slice*(Pad(Reshape(Pad(Reshape(x)))))) in this graph.
  if (conv.op_type() != "Conv" || !parts::default_domain(conv) || conv.input_size() < 2 || conv.output_size() != 1) return std::nullopt;
  std::vector<const onnx::NodeProto*> slices;
  std::string at = conv.input(0);
  while (const onnx::NodeProto* slice = producer(scope, at, "Slice")) {
    if (slices.size() == 4 || slice->input_size() < 1) return std::nullopt;
    slices.push_back(slice);
    at = slice->input(0);
  }
  const onnx::NodeProto* pad = producer(scope, at, "Pad");
  if (pad == nullptr || pad->input_size() < 1) return std::nullopt;
  const onnx::NodeProto* merge = producer(scope, pad->input(0), "Reshape");
  if (merge == nullptr) return std::nullopt;
  const onnx::NodeProto* insert = producer(scope, merge->input(0), "Pad");
  if (insert == nullptr || insert->input_size() < 1) return std::nullopt;
  const onnx::NodeProto* split = producer(scope, insert->input(0), "Reshape");
  if (split == nullptr || split->input(0).empty()) return std::nullopt;

  UpsamplerOutcome out;
  out.summary = parts::conv_summary(conv, scope, "reshape_zero_insertion");
  NodeSummary& sum = out.summary;
  auto fail = [&out](core::Error e) -> std::optional<UpsamplerOutcome> {
    out.match = std::move(e);
    return out;
  };
  const std::string& x = split->input(0);

  auto tail = parts::read_conv_tail(conv, scope, eval, sum);
  if (!tail) return fail(tail.error());
  std::vector<std::pair<const onnx::NodeProto*, std::string>> chain{{split, "first Reshape"}, {insert, "zero-inserting Pad"},
                                                                    {merge, "second Reshape"}, {pad, "Pad"}};
  for (const auto* slice : slices) chain.emplace_back(slice, "Slice");
  // Shape nodes may read the chain too (the Slices' ends): they read only its dims, which x's fix.
  for (const auto& [node, what] : chain) {
    int shape_readers = 0;
    for (const auto& n : scope.graph->node()) {
      if (n.op_type() == "Shape" && n.input_size() == 1 && n.input(0) == node->output(0)) ++shape_readers;
    }
    if (use_count(uses, node->output(0)) != 1 + shape_readers) return fail(declined(what + " output has another reader"));
  }

  // The zero insertion: pads only on the singleton axes 3 and 5 of [N,C,H,1,W,1], jy + (s-1-jy) zeros around H's.
  auto p6 = parts::constant_zero_pads(*insert, scope, eval, 6);
  if (!p6) return fail(p6.error());
  const auto& p = *p6;
  if (p[0] || p[1] || p[2] || p[4] || p[6] || p[7] || p[8] || p[10]) {
    return fail(declined("zero-inserting Pad pads " + join(p) + " pad an axis other than the singletons of [N,C,H,1,W,1]"));
  }
  const int64_t sy = 1 + p[3] + p[9], sx = 1 + p[5] + p[11];
  if (sy != sx) return fail(declined("zero insertion factors differ per axis (" + std::to_string(sy) + " vs " + std::to_string(sx) + ")"));
  if (sy < 2) return fail(declined("zero-inserting Pad inserts no zeros"));
  const int64_t s = sy;
  sum.stride = s;
  sum.strides = {s, s};

  // The Reshapes: x [N,C,H,W] -> [N,C,H,1,W,1], and the padded [N,C,H,s,W,s] -> [N,C,sH,sW].
  const std::vector<WantDim> x_dims{{0, 1}, {1, 1}, {2, 1}, {3, 1}};
  const std::vector<WantDim> split_dims{{0, 1}, {1, 1}, {2, 1}, {-1, 1}, {3, 1}, {-1, 1}};
  auto split_ok = reshape_gives(*split, scope, eval, types, x, split_dims, x_dims);
  if (!split_ok) return fail(split_ok.error());
  if (!*split_ok) return fail(declined("first Reshape does not give [N,C,H,1,W,1] of its input"));
  const std::vector<WantDim> padded_dims{{0, 1}, {1, 1}, {2, 1}, {-1, s}, {3, 1}, {-1, s}};
  auto merge_ok = reshape_gives(*merge, scope, eval, types, x, {{0, 1}, {1, 1}, {2, s}, {3, s}}, padded_dims);
  if (!merge_ok) return fail(merge_ok.error());
  if (!*merge_ok) return fail(declined("second Reshape does not give [N,C," + std::to_string(s) + "H," + std::to_string(s) + "W]"));

  auto pads = parts::pad_amounts(*pad, scope, eval);
  if (!pads) return fail(pads.error());
  std::set<std::string> same{pad->output(0)};
  for (const auto* slice : slices) same.insert(slice->output(0));
  for (auto it = slices.rbegin(); it != slices.rend(); ++it) {
    if (auto why = slice_not_noop(**it, scope, eval, types, same); !why.empty()) return fail(declined(why));
  }

  parts::ZeroInsertion zi;
  zi.s = s;
  zi.j = {p[3], p[5]};
  zi.gains = {1.0};
  auto deconv = parts::fold_zero_insertion(conv, scope, ir_version, types, x, *tail, *pads, zi, sum);
  if (!deconv) return fail(deconv.error());

  UpsamplerMatch m;
  m.deconv = std::move(*deconv);
  std::set<std::pair<size_t, std::string>> seen;
  for (const auto& [node, what] : chain) {
    m.replaced.emplace_back(&scope, node->output(0));
    seen.insert({scope.index, node->output(0)});
  }
  for (const auto& [node, what] : chain) {
    for (const auto& in : node->input()) parts::collect_upstream(in, scope, x, seen, m.replaced);
  }
  parts::collect_upstream(conv.input(1), scope, x, seen, m.replaced);
  out.match = std::move(m);
  return out;
}

}  // namespace dwdeconv::rewrite
