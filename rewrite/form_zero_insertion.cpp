// Form `zero_insertion`: a one-tap ConvTranspose (zero insertion), an optional constant-zero Pad and a stride-1 Conv of any
// group (depthwise, or dense as FastDepth's UpConv), which parts::fold_zero_insertion turns into the ConvTranspose they
// compute: dense phases on the low-resolution input, about 1/s^2 of the Conv's MACs.
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

std::optional<FormSelection> select_zero_insertion(const MatchContext& context, const onnx::NodeProto& conv, const GraphScope& scope) {
  const onnx_io::ScopedTypes& types = context.types;
  ConstEvaluator& eval = context.eval;
  // Cheap and selective first (the row's root op and arity are checked already): Conv(Pad(ConvTranspose(x))), or Conv(ConvTranspose(x))
  // with the Conv's own pads (FastDepth's Unpool before a dense 5x5 Conv), in this graph.
  const onnx::NodeProto* pad = producer(scope, conv.input(0), "Pad");
  if (pad != nullptr && pad->input_size() < 1) return std::nullopt;
  const onnx::NodeProto* ct = producer(scope, pad != nullptr ? pad->input(0) : conv.input(0), "ConvTranspose");
  if (ct == nullptr || ct->input_size() < 2 || ct->input(0).empty() || ct->input(1).empty()) return std::nullopt;

  FormSelection out;
  out.summary = parts::conv_summary(conv, scope, Form::kZeroInsertion);
  NodeSummary& sum = out.summary;
  // Without a Pad the form is any Conv reading a ConvTranspose (a decoder's refining Conv, say): a near-miss there is no
  // upsampler of this form, so it gets no row, and the ConvTranspose is matched on its own.
  auto fail = [&out, pad](core::Error e) -> std::optional<FormSelection> {
    if (pad == nullptr && e.kind != core::ErrorKind::kInvalidModel) return std::nullopt;
    return out.fail(std::move(e));
  };
  const std::string& x = ct->input(0);

  auto tail = parts::read_conv_tail(conv, scope, eval, sum, /*any_group=*/true);
  if (!tail) return fail(tail.error());
  // The ConvTranspose stays whenever anything else reads its output, so folding would save nothing.
  std::vector<std::pair<const onnx::NodeProto*, const char*>> chain{{ct, "ConvTranspose"}};
  if (pad != nullptr) chain.emplace_back(pad, "Pad");
  for (const auto& [node, what] : chain) {
    if (use_count(context.uses, node->output(0)) != 1) return fail(declined(std::string(what) + " output has another reader"));
  }

  auto s = insertion_stride(*ct);
  if (!s) return fail(s.error());
  sum.stride = *s;
  sum.strides = {*s, *s};
  auto group = onnx_io::get_int(*ct, "group", 1);
  if (!group) return fail(group.error());
  auto v = eval.evaluate_flagged(ct->input(1), scope);
  if (!v) return fail(declined("ConvTranspose weight not constant: " + v.error().message));
  // Its zeros decide the form (one tap per channel): a value a runtime may round to other zeros decides nothing.
  if (auto ok = decidable(*v, "ConvTranspose weight is"); !ok) return fail(ok.error());
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
  auto pads = pad != nullptr ? parts::pad_amounts(*pad, scope, eval) : core::Result<std::array<int64_t, 4>>(std::array<int64_t, 4>{});
  if (!pads) return fail(pads.error());

  parts::ZeroInsertion zi;
  zi.s = *s;
  zi.j = {tap->ty, tap->tx};
  zi.gains = std::move(tap->gains);
  // A kernel k < s makes the ConvTranspose's output s*(H-1)+k long: s-k short of s*H at the end.
  zi.deficit = {*s - v->dims[2], *s - v->dims[3]};
  auto deconv = parts::fold_zero_insertion(conv, scope, context.ir_version, types, x, *tail, *pads, zi, sum);
  if (!deconv) return fail(deconv.error());

  return out.succeed(std::move(*deconv), parts::replaced_tensors(scope, x, chain, {conv.input(1)}), ct);
}

}  // namespace

// Form `zero_insertion` (MI-GAN's older code):
//   Before:  z = ConvTranspose(x, v)  depthwise, stride s, kernel k <= s, pads 0, no (or a zero) bias; v has one
//                                     non-zero tap a[c] per channel, at the same (jy, jx) in every channel
//            p = Pad(z, pads)         constant 0 (pads may be computed, e.g. PyTorch's 8-op chain)
//            y = Conv(p, f[, B])      depthwise, stride 1, dilation 1, kernel K
//   After:   y = ConvTranspose(x, w, B) with w[c,t] = a[c] * f[c,K-1-t] (a gain per channel folds into the
//            depthwise filter), pads as for nearest_mask with the end pads s - k shorter.
// The match's `absorbs` is the first ConvTranspose: the rewriter must not rewrite it on its own as well.
const FormRow& zero_insertion_form() {
  static const FormRow row = [] {
    FormRow row;
    row.form = Form::kZeroInsertion;
    row.name = "zero_insertion";
    row.described = "a one-tap ConvTranspose, optional Pad, Conv of any group (MI-GAN's older code, FastDepth's UpConv)";
    // Its ops: the chain, and the constant chains of its pads (the 8-op F.pad chain) and its weights.
    row.ops = {"ConvTranspose", "Pad",     "Conv",  "Identity",  "Constant", "ConstantOfShape",
               "Concat",        "Reshape", "Slice", "Transpose", "Cast"};
    row.recognise = select_zero_insertion;
    row.absorbs_conv_transpose = true;
    return row;
  }();
  return row;
}

}  // namespace dwdeconv::rewrite
