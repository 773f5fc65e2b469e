#include "rewrite/forms.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "recogniser_parts.h"

namespace dwdeconv::rewrite {

using core::declined;
using parts::default_domain;
using parts::join;
using parts::number;
using parts::producer;
using parts::use_count;

namespace {

// Where the one non-zero of every s x s cell of the mask is, and its value.
struct MaskTap {
  int64_t jy = 0, jx = 0;
  double gain = 0;
};

// The mask test: a constant that is s-periodic in both spatial axes with exactly one non-zero per s x s cell,
// the same in every channel (or broadcast over channels).
core::Result<MaskTap> mask_tap(const ConstTensor& mask, int64_t s, int64_t channels) {
  if (mask.is_integer()) return declined("mask is not a float tensor");
  const size_t rank = mask.dims.size();
  if (rank < 2 || rank > 4) return declined("mask has rank " + std::to_string(rank) + ", wants [1,1,sH,sW] or [1,C,sH,sW]");
  const int64_t mh = mask.dims[rank - 2], mw = mask.dims[rank - 1];
  if (mh % s != 0 || mw % s != 0 || mh == 0 || mw == 0) {
    return declined("mask is " + std::to_string(mh) + "x" + std::to_string(mw) + ", not a whole number of " + std::to_string(s) + "x" +
                    std::to_string(s) + " cells");
  }
  // Leading dims may only broadcast over the batch (1) and repeat a plane per channel (1 or C).
  if (rank == 4 && mask.dims[0] != 1) return declined("mask has batch dim " + std::to_string(mask.dims[0]) + ", not 1");
  if (rank >= 3 && mask.dims[rank - 3] != 1 && mask.dims[rank - 3] != channels) {
    return declined("mask has " + std::to_string(mask.dims[rank - 3]) + " channels, not 1 or " + std::to_string(channels));
  }
  const int64_t plane = mh * mw;
  const auto planes = static_cast<int64_t>(mask.size()) / plane;
  for (int64_t p = 1; p < planes; ++p) {
    for (int64_t i = 0; i < plane; ++i) {
      if (mask.reals[static_cast<size_t>(p * plane + i)] != mask.reals[static_cast<size_t>(i)]) {
        return declined("mask differs between channels");
      }
    }
  }
  std::optional<MaskTap> tap;
  for (int64_t cy = 0; cy < mh; cy += s) {
    for (int64_t cx = 0; cx < mw; cx += s) {
      int64_t count = 0;
      MaskTap here;
      for (int64_t jy = 0; jy < s; ++jy) {
        for (int64_t jx = 0; jx < s; ++jx) {
          const double v = mask.reals[static_cast<size_t>((cy + jy) * mw + cx + jx)];
          if (v != 0.0) {
            ++count;
            here = {jy, jx, v};
          }
        }
      }
      if (count != 1) {
        return declined("mask has " + std::to_string(count) + " non-zeros per " + std::to_string(s) + "x" + std::to_string(s) + " cell");
      }
      if (!tap) {
        tap = here;
      } else if (tap->jy != here.jy || tap->jx != here.jx) {
        return declined("mask's non-zero moves between " + std::to_string(s) + "x" + std::to_string(s) + " cells");
      } else if (tap->gain != here.gain) {
        return declined("mask's non-zero value differs between cells (" + number(tap->gain) + " and " + number(here.gain) + ")");
      }
    }
  }
  return *tap;
}

std::optional<FormSelection> select_nearest_mask(const MatchContext& context, const onnx::NodeProto& conv, const GraphScope& scope) {
  const onnx_io::ScopedTypes& types = context.types;
  ConstEvaluator& eval = context.eval;
  // Cheap and selective first (the row's root op and arity are checked already): the four ops in a chain, in this graph.
  const onnx::NodeProto* pad = producer(scope, conv.input(0), "Pad");
  if (pad == nullptr || pad->input_size() < 1) return std::nullopt;
  const onnx::NodeProto* mul = producer(scope, pad->input(0), "Mul");
  if (mul == nullptr || mul->input_size() != 2) return std::nullopt;
  int upsampled = 0;
  const onnx::NodeProto* resize = producer(scope, mul->input(0), "Resize");
  if (resize == nullptr) {
    upsampled = 1;
    resize = producer(scope, mul->input(1), "Resize");
  }
  if (resize == nullptr || resize->input_size() < 2 || resize->input(0).empty()) return std::nullopt;

  FormSelection out;
  out.summary = parts::conv_summary(conv, scope, Form::kNearestMask);
  out.resize = resize;
  NodeSummary& sum = out.summary;
  const std::string& x = resize->input(0);

  // The Conv: depthwise, stride 1, dilation 1, with a constant [C,1,Ky,Kx] weight.
  auto tail = parts::read_conv_tail(conv, scope, eval, sum);
  if (!tail) return out.fail(tail.error());

  // Every intermediate must feed only the next step, or the high-resolution tensors stay and nothing is saved.
  for (const auto& [node, what] : {std::pair<const onnx::NodeProto*, const char*>{resize, "Resize"}, {mul, "Mul"}, {pad, "Pad"}}) {
    if (use_count(context.uses, node->output(0)) != 1) return out.fail(declined(std::string(what) + " output has another reader"));
  }

  auto s = parts::nearest_resize_factor(*resize, scope, eval, types);
  if (!s) return out.fail(s.error());
  sum.stride = *s;
  sum.strides = {*s, *s};
  auto pads = parts::pad_amounts(*pad, scope, eval);
  if (!pads) return out.fail(pads.error());
  auto mask = eval.evaluate_flagged(mul->input(1 - upsampled), scope);
  if (!mask) return out.fail(declined("mask not constant: " + mask.error().message));
  // Its zeros decide where the taps are: a value a runtime may round to another zero pattern decides nothing.
  if (auto ok = decidable(*mask, "the mask is"); !ok) return out.fail(ok.error());
  auto tap = mask_tap(*mask, *s, tail->channels);
  if (!tap) return out.fail(tap.error());
  // A mask with a plane per channel also broadcasts a one-channel x up to C, which the ConvTranspose, reading
  // x itself, would not: x must be known to have the C channels.
  if (const size_t rank = mask->dims.size(); rank >= 3 && mask->dims[rank - 3] != 1) {
    const auto c = parts::known_dim(types, scope, x, 1);
    if (c != tail->channels) {
      return out.fail(declined("mask has " + std::to_string(mask->dims[rank - 3]) + " channels, '" + x + "' has " +
                               (c ? std::to_string(*c) : std::string("a channel count that is not known"))));
    }
  }

  parts::ZeroInsertion zi;
  zi.s = *s;
  zi.j = {tap->jy, tap->jx};
  zi.gains = {tap->gain};
  auto deconv = parts::fold_zero_insertion(conv, scope, context.ir_version, types, x, *tail, *pads, zi, sum);
  if (!deconv) return out.fail(deconv.error());
  // What only this upsampler reads: the three intermediate nodes and every constant chain feeding them.
  return out.succeed(std::move(*deconv), parts::replaced_tensors(scope, x, {pad, mul, resize}, {conv.input(1)}));
}

}  // namespace

// Form `nearest_mask`:
//   Before:  u = Resize(x)           nearest, asymmetric, floor, scales [1,1,s,s] (s an integer >= 2)
//            m = Mul(u, mask)        mask: one non-zero `a` at offset (jy, jx) of every s x s cell, every channel
//            p = Pad(m, pads)        constant 0 (pads may be computed from constants, e.g. PyTorch's 8-op chain)
//            y = Conv(p, f[, B])     depthwise, stride 1, dilation 1, kernel K
//   After:   y = ConvTranspose(x, w, B) with w[t] = a * f[K-1-t], pads Pb = K-1-j-P, Pe = K+j-s-E per axis,
//            where P and E are the Pad's and the Conv's begin and end pads together.
const FormRow& nearest_mask_form() {
  static const FormRow row = [] {
    FormRow row;
    row.form = Form::kNearestMask;
    row.name = "nearest_mask";
    row.described = "nearest Resize times a mask, Pad, depthwise Conv (MI-GAN's form b)";
    // Its ops: the chain, and the constant chains of its mask and of the pads PyTorch computes (the 8-op F.pad chain).
    row.ops = {"Resize", "Mul", "Pad", "Conv", "Constant", "ConstantOfShape", "Concat", "Reshape", "Slice", "Transpose", "Cast"};
    row.recognise = select_nearest_mask;
    row.min_opset = 10;  // Resize
    row.has_resize = true;
    return row;
  }();
  return row;
}

}  // namespace dwdeconv::rewrite
