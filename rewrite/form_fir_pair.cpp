// Form `fir_pair`: StyleGAN3's reference upfirdn2d with a separable filter (filtered_lrelu's up path): zero insertion by
// Reshape / Pad / Reshape, a Pad, a crop by Slices, then a depthwise 1xK Conv and a depthwise Kx1 Conv. The zero rows
// that insertion puts between x's rows pass the 1xK Conv as zero rows, so the pair is two one-axis ConvTransposes: stride
// (1,s) with the 1xK kernel on x, then stride (s,1) with the Kx1 kernel. Emitted as two polyphase stages, the first costs
// 1/s^2 of the 1xK Conv's MACs and the second 1/s of the Kx1's. (One KxK ConvTranspose of the outer-product kernel
// would cost more than the original pair: K/s^2 * K taps per output instead of 2K.)
#include <algorithm>
#include <limits>
#include <optional>

#include "core/geometry.h"
#include "onnx_io/attributes.h"
#include "recogniser_parts.h"
#include "rewrite/forms.h"

namespace dwdeconv::rewrite {
namespace {

using core::declined;
using parts::join;
using parts::producer;
using parts::use_count;

// Slice ends at least this large keep the rest of an axis: PyTorch writes INT64_MAX for an open end.
constexpr int64_t kOpenEnd = std::numeric_limits<int64_t>::max() / 2;

// The one node of `scope` reading `name`, if exactly one node reads it once and nothing else does.
const onnx::NodeProto* sole_reader(const GraphScope& scope, const std::map<std::string, int>& uses, const std::string& name) {
  if (use_count(uses, name) != 1) return nullptr;
  for (const auto& node : scope.graph->node()) {
    if (std::count(node.input().begin(), node.input().end(), name) == 1) return &node;
  }
  return nullptr;
}

// The [top, left, bottom, right] that Slice `slice` of a 4-D tensor crops (upfirdn2d's negative padding), or why it
// is not a crop: starts at or after 0 with step 1, ends open, negative (from the end) or at a position below the
// dim shape inference knows; every bound constant.
core::Result<std::array<int64_t, 4>> slice_crop(const onnx::NodeProto& slice, const GraphScope& scope, ConstEvaluator& eval,
                                                const onnx_io::ScopedTypes& types) {
  if (slice.input_size() < 3) return declined("Slice in the attribute form (opset < 10)");
  std::array<std::vector<int64_t>, 4> bounds;  // starts, ends, axes, steps
  const char* what[] = {"starts", "ends", "axes", "steps"};
  for (int i = 0; i < 4; ++i) {
    if (slice.input_size() <= i + 1 || slice.input(i + 1).empty()) continue;
    auto v = eval.evaluate(slice.input(i + 1), scope);
    if (!v || !v->is_integer()) return declined(std::string("Slice ") + what[i] + " not constant");
    bounds[static_cast<size_t>(i)] = v->ints;
  }
  const auto& starts = bounds[0];
  const auto& ends = bounds[1];
  auto axes = bounds[2];
  auto steps = bounds[3];
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return declined("Slice starts, ends, axes and steps differ in length");
  }
  std::array<int64_t, 4> crop{0, 0, 0, 0};
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + 4 : axes[i];
    const auto dim = parts::known_dim(types, scope, slice.input(0), axis);
    const std::string at = "Slice on axis " + std::to_string(axes[i]);
    if (axis < 2 || axis > 3) {
      if (starts[i] == 0 && steps[i] == 1 && (ends[i] >= kOpenEnd || (dim && ends[i] >= *dim))) continue;
      return declined(at + " is not a no-op");
    }
    if (steps[i] != 1 || starts[i] < 0 || starts[i] > parts::kMaxPad) {
      return declined(at + " is not a crop (start " + std::to_string(starts[i]) + ", step " + std::to_string(steps[i]) + ")");
    }
    int64_t end_crop = 0;
    if (ends[i] >= kOpenEnd || (dim && ends[i] >= *dim)) {
      end_crop = 0;
    } else if (ends[i] < 0 && ends[i] >= -parts::kMaxPad) {
      end_crop = -ends[i];
    } else if (dim && ends[i] >= 0) {
      end_crop = *dim - ends[i];
    } else {
      return declined(at + " ends at " + std::to_string(ends[i]) + ", and the dim is not known");
    }
    crop[static_cast<size_t>(axis - 2)] += starts[i];
    crop[static_cast<size_t>(axis)] += end_crop;
  }
  return crop;
}

// One axis of the pair as a ConvTranspose stage, and what a Slice crops from the end of its join.
struct PairAxis {
  core::AxisGeometry geometry;
  int64_t crop_end = 0;
};

// One axis of the pair: zero insertion by s at offset j, P and E in total before and after it (negative: a crop), then
// a K-tap filter, as the ConvTranspose it is: k = K, Pb = K-1-j-P, Pe = K+j-s-E (rewrite/recogniser_parts.h). Its output
// is s*H + (P+E-(K-1)). When that excess is no whole number of strides (StyleGAN3's x4 layers: 4*H-38), the phases
// write up to s-1 samples more (Pe shorter) and a Slice after the join crops them.
core::Result<PairAxis> pair_axis(int64_t k, int64_t s, int64_t j, int64_t p, int64_t e, const char* axis, int64_t opset) {
  PairAxis out{{k, s, k - 1 - j - p, k + j - s - e, 0}, 0};
  core::AxisGeometry& g = out.geometry;
  const int64_t excess = p + e - (k - 1);
  out.crop_end = ((-excess) % s + s) % s;
  g.pad_end -= out.crop_end;
  if (g.pad_begin < 0 || g.pad_end < 0) {
    return declined(std::string("the equivalent ConvTranspose on ") + axis + " would have negative pads (" + std::to_string(g.pad_begin) +
                    ", " + std::to_string(g.pad_end) + ")");
  }
  if (out.crop_end != 0 && opset < 10) {
    return declined(std::string("output is ") + std::to_string(s) + "*" + axis + (excess < 0 ? "" : "+") + std::to_string(excess) +
                    " on that axis: the phases would need a crop after the join, and Slice takes its bounds as inputs only from opset 10");
  }
  if (!core::plannable(g)) return declined("output is " + core::describe_output_length(g, axis) + " on that axis");
  return out;
}

// The depthwise weight `w` ([C,1,ky,kx]) flipped on both axes: a Conv's filter as the ConvTranspose's kernel.
std::vector<double> flipped(const ConstTensor& w) {
  const int64_t channels = w.dims[0], ky = w.dims[2], kx = w.dims[3];
  std::vector<double> out(w.reals.size());
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t ty = 0; ty < ky; ++ty) {
      for (int64_t tx = 0; tx < kx; ++tx) {
        out[static_cast<size_t>((c * ky + ty) * kx + tx)] = w.reals[static_cast<size_t>((c * ky + (ky - 1 - ty)) * kx + (kx - 1 - tx))];
      }
    }
  }
  return out;
}

// The nodes of the pair's front: Conv(Slice*(Pad(Reshape(Pad(Reshape(x)))))), nearest the Conv first among the Slices.
struct Front {
  std::vector<const onnx::NodeProto*> slices;
  const onnx::NodeProto* pad = nullptr;
  const onnx::NodeProto* merge = nullptr;
  const onnx::NodeProto* insert = nullptr;
  const onnx::NodeProto* split = nullptr;
};

std::optional<Front> find_front(const GraphScope& scope, const onnx::NodeProto& conv) {
  Front f;
  std::string at = conv.input(0);
  while (const onnx::NodeProto* slice = producer(scope, at, "Slice")) {
    if (f.slices.size() == 4 || slice->input_size() < 1) return std::nullopt;
    f.slices.push_back(slice);
    at = slice->input(0);
  }
  f.pad = producer(scope, at, "Pad");
  if (f.pad == nullptr || f.pad->input_size() < 1) return std::nullopt;
  f.merge = producer(scope, f.pad->input(0), "Reshape");
  if (f.merge == nullptr) return std::nullopt;
  f.insert = producer(scope, f.merge->input(0), "Pad");
  if (f.insert == nullptr || f.insert->input_size() < 1) return std::nullopt;
  f.split = producer(scope, f.insert->input(0), "Reshape");
  if (f.split == nullptr || f.split->input(0).empty()) return std::nullopt;
  return f;
}

// Why the Conv's bias is not absent or all zero ("" when it is): the 1xK Conv's bias would land on the inserted zero rows.
std::string nonzero_bias(const onnx::NodeProto& conv, const GraphScope& scope, ConstEvaluator& eval) {
  if (conv.input_size() < 3 || conv.input(2).empty()) return "";
  auto b = eval.evaluate(conv.input(2), scope);
  if (!b) return "the 1xK Conv's bias is not constant: " + b.error().message;
  for (size_t i = 0; i < b->size(); ++i) {
    if (b->at(i) != 0.0) return "the 1xK Conv has a non-zero bias, which would land on the inserted zero rows";
  }
  return "";
}

// Stage 1 of a pair: x [N,C,H,W] -> [N,C,H,W'], the 1xK Conv's filter on W as a stride (1,s) ConvTranspose.
DeconvMatch first_stage(const MatchContext& context, const onnx::NodeProto& conv1, const GraphScope& scope, const std::string& x,
                        const parts::ConvTail& tail, const PairAxis& w) {
  const int64_t c = tail.channels, kx = tail.weight.dims[3];
  DeconvMatch d =
      parts::derived_match(conv1, scope, context.ir_version, context.types, x, tail.weight.data_type, {c, 1, 1, kx}, flipped(tail.weight));
  d.y = core::AxisGeometry{1, 1, 0, 0, 0};
  d.x = w.geometry;
  d.crop_end = {0, w.crop_end};
  return d;
}

// Stage 2: what stage 1 writes (`middle`, named afresh by the rewriter) -> [N,C,H',W'], the Kx1 Conv's filter on H as a
// stride (s,1) ConvTranspose; its input type is stage 1's output, W' where x's W is known.
DeconvMatch second_stage(const MatchContext& context, const onnx::NodeProto& conv2, const GraphScope& scope, const std::string& middle,
                         const parts::ConvTail& tail, const PairAxis& h, const DeconvMatch& first, const PairAxis& w) {
  const int64_t c = tail.channels, ky = tail.weight.dims[2];
  DeconvMatch d = parts::derived_match(conv2, scope, context.ir_version, context.types, middle, tail.weight.data_type, {c, 1, ky, 1},
                                       flipped(tail.weight));
  d.y = h.geometry;
  d.x = core::AxisGeometry{1, 1, 0, 0, 0};
  d.crop_end = {h.crop_end, 0};
  d.input_type = first.input_type;
  if (d.input_type && d.input_type->has_tensor_type() && d.input_type->tensor_type().has_shape() &&
      d.input_type->tensor_type().shape().dim_size() == 4) {
    auto* dim = d.input_type->mutable_tensor_type()->mutable_shape()->mutable_dim(3);
    const auto length = dim->has_dim_value() ? core::deconv_output_length(w.geometry, dim->dim_value()) : std::nullopt;
    dim->Clear();
    if (length) dim->set_dim_value(*length - w.crop_end);
  }
  return d;
}

std::optional<FormSelection> select_fir_pair(const MatchContext& context, const onnx::NodeProto& conv1, const GraphScope& scope) {
  const onnx_io::ScopedTypes& types = context.types;
  ConstEvaluator& eval = context.eval;
  // Cheap and selective first: the front, a Conv that alone reads conv1, zero insertion by s >= 2, then the kernels 1xK
  // and Kx1. Anything else is no pair (nullopt): reshape_zero_insertion then judges conv1 alone.
  const auto front = find_front(scope, conv1);
  if (!front) return std::nullopt;
  const onnx::NodeProto* conv2 = sole_reader(scope, context.uses, conv1.output(0));
  if (conv2 == nullptr || conv2->op_type() != "Conv" || !parts::default_domain(*conv2) || conv2->input_size() < 2 ||
      conv2->output_size() != 1 || conv2->input(0) != conv1.output(0)) {
    return std::nullopt;
  }
  NodeSummary scratch;
  // A zero insertion that inserts nothing (upfirdn2d's down path, up = 1) is no upsampler of this form either.
  auto zi = parts::reshape_insertion(*front->split, *front->insert, *front->merge, scope, eval, types, scratch);
  if (!zi) return std::nullopt;
  auto tail1 = parts::read_conv_tail(conv1, scope, eval, scratch);
  auto tail2 = parts::read_conv_tail(*conv2, scope, eval, scratch);
  if (!tail1 || !tail2 || tail1->weight.dims[2] != 1 || tail2->weight.dims[3] != 1 || tail1->weight.dims[3] < 2 ||
      tail2->weight.dims[2] < 2) {
    return std::nullopt;
  }

  FormSelection out;
  out.summary = parts::conv_summary(conv1, scope, Form::kNearestResize);  // the select step names the form
  NodeSummary& sum = out.summary;
  const int64_t ky = tail2->weight.dims[2], kx = tail1->weight.dims[3];
  sum.channels = tail1->channels;
  sum.kernel = {ky, kx};
  const std::string& x = front->split->input(0);
  if (tail2->channels != tail1->channels) {
    return out.fail(
        declined("the Kx1 Conv has " + std::to_string(tail2->channels) + " channels, the 1xK Conv " + std::to_string(tail1->channels)));
  }
  std::vector<std::pair<const onnx::NodeProto*, std::string>> chain{
      {front->split, "first Reshape"}, {front->insert, "zero-inserting Pad"}, {front->merge, "second Reshape"}, {front->pad, "Pad"}};
  for (const auto* slice : front->slices) chain.emplace_back(slice, "Slice");
  // Shape nodes may read the chain too (the crop's ends): they read only its dims, which x's fix.
  for (const auto& [node, what] : chain) {
    int shape_readers = 0;
    for (const auto& n : scope.graph->node()) {
      if (n.op_type() == "Shape" && n.input_size() == 1 && n.input(0) == node->output(0)) ++shape_readers;
    }
    if (use_count(context.uses, node->output(0)) != 1 + shape_readers) return out.fail(declined(what + " output has another reader"));
  }
  if (auto why = nonzero_bias(conv1, scope, eval); !why.empty()) return out.fail(declined(why));
  // The Kx1 Conv's own pads on W would add zero columns after the 1xK filter, not before it: no pad of the input.
  if (tail2->pads[1] != 0 || tail2->pads[3] != 0) {
    return out.fail(declined("the Kx1 Conv pads W (" + std::to_string(tail2->pads[1]) + ", " + std::to_string(tail2->pads[3]) +
                             "), after the 1xK filter"));
  }
  sum.stride = zi->s;
  sum.strides = {zi->s, zi->s};
  auto pads = parts::pad_amounts(*front->pad, scope, eval);
  if (!pads) return out.fail(pads.error());
  std::array<int64_t, 4> total = *pads;  // [top, left, bottom, right] before the filters, a crop negative
  for (const auto* slice : front->slices) {
    auto crop = slice_crop(*slice, scope, eval, types);
    if (!crop) return out.fail(crop.error());
    for (size_t i = 0; i < 4; ++i) total[i] -= (*crop)[i];
  }
  // Zero rows before the 1xK Conv, and its and the Kx1 Conv's pads on H, are all zero rows before the Kx1 filter.
  for (size_t i : {size_t{0}, size_t{2}}) total[i] += tail1->pads[i] + tail2->pads[i];
  for (size_t i : {size_t{1}, size_t{3}}) total[i] += tail1->pads[i];
  auto ay = pair_axis(ky, zi->s, zi->j[0], total[0], total[2], "H", eval.opset());
  if (!ay) return out.fail(ay.error());
  auto ax = pair_axis(kx, zi->s, zi->j[1], total[1], total[3], "W", eval.opset());
  if (!ax) return out.fail(ax.error());
  const core::AxisGeometry* gy = &ay->geometry;
  const core::AxisGeometry* gx = &ax->geometry;
  sum.pads = std::array<int64_t, 4>{gy->pad_begin, gx->pad_begin, gy->pad_end + ay->crop_end, gx->pad_end + ax->crop_end};
  sum.output_padding = std::array<int64_t, 2>{0, 0};
  for (const parts::ConvTail* tail : {&*tail1, &*tail2}) {
    if (auto why = parts::derived_overflow(flipped(tail->weight), tail->weight.data_type); !why.empty()) return out.fail(declined(why));
  }

  UpsamplerMatch m;
  m.deconv = first_stage(context, conv1, scope, x, *tail1, *ax);
  m.second = second_stage(context, *conv2, scope, conv1.output(0), *tail2, *ay, m.deconv, *ax);
  m.replaced = parts::replaced_tensors(scope, x, chain, {conv1.input(1), conv2->input(1)});
  out.match = std::move(m);
  return out;
}

}  // namespace

// Form `fir_pair` (StyleGAN3's filtered_lrelu up path, upfirdn2d's reference code with a 1-D filter f):
//   Before:  u = Reshape(Pad(Reshape(x, [N,C,H,1,W,1])), [N,C,sH,sW])   zero insertion by s (as reshape_zero_insertion)
//            p = Pad(u, pads)          constant 0, the positive pads
//            q = Slice(...(p))         up to 4 Slices cropping H and W (the negative pads), or none
//            v = Conv(q, f1)           depthwise, kernel 1xK, no bias (or a zero one)
//            y = Conv(v, f2[, B])      depthwise, kernel Kx1, no pads on W
//   After:   t = ConvTranspose(x, flip(f1))     stride (1,s), pads from W's pads and crops (the interleave join)
//            y = ConvTranspose(t, flip(f2), B)  stride (s,1), pads from H's
// each emitted as its phases. Kept whole unless both stages are rewritten. The row is named after the 1xK Conv.
const FormRow& fir_pair_form() {
  static const FormRow row = [] {
    FormRow row;
    row.name = "fir_pair";
    row.described = "Reshape/Pad/Reshape zero insertion, Pad, crop, a 1xK then a Kx1 depthwise Conv (StyleGAN3's upfirdn2d)";
    // Its ops: the chain, the constant chains of its pads, crops and filters (Slice, Unsqueeze, Expand, Tile of the taps).
    row.ops = {"Reshape", "Pad",    "Slice",     "Conv",    "Constant", "ConstantOfShape", "Concat", "Transpose", "Cast",
               "Shape",   "Gather", "Unsqueeze", "Squeeze", "Sub",      "Expand",          "Tile",   "Mul"};
    row.recognise = select_fir_pair;
    return row;
  }();
  return row;
}

}  // namespace dwdeconv::rewrite
