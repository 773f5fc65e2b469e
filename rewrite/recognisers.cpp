#include "rewrite/recognisers.h"

#include <cmath>
#include <set>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "rewrite/recogniser_parts.h"

namespace dwdeconv::rewrite {
namespace {

using core::declined;
using parts::default_domain;
using parts::join;
using parts::number;
using parts::producer;
using parts::use_count;

// The Resize's factor s, or why it is not a nearest integer upscale of H and W alone.
core::Result<int64_t> resize_factor(const onnx::NodeProto& resize, const GraphScope& scope, ConstEvaluator& eval) {
  auto mode = onnx_io::get_string(resize, "mode", "nearest");
  auto ctm = onnx_io::get_string(resize, "coordinate_transformation_mode", "half_pixel");
  auto rounding = onnx_io::get_string(resize, "nearest_mode", "round_prefer_floor");
  for (const auto* r : {&mode, &ctm, &rounding}) {
    if (!*r) return r->error();
  }
  if (*mode != "nearest") return declined("Resize mode " + *mode);
  // x[floor(o / s)] is exactly what asymmetric coordinates with floor rounding give (PyTorch's export).
  if (*ctm != "asymmetric") return declined("Resize coordinate_transformation_mode " + *ctm + " (wants asymmetric)");
  if (*rounding != "floor") return declined("Resize nearest_mode " + *rounding + " (wants floor)");
  if (onnx_io::find_attribute(resize, "axes") != nullptr) return declined("Resize with axes");
  // Opset 10 takes (X, scales); from 11 on (X, roi, scales, sizes).
  const int scales_at = resize.input_size() == 2 ? 1 : 2;
  if (resize.input_size() > 3 && !resize.input(3).empty()) return declined("Resize by sizes, not scales");
  if (resize.input_size() <= scales_at || resize.input(scales_at).empty()) return declined("Resize without scales");
  auto scales = eval.evaluate(resize.input(scales_at), scope);
  if (!scales) return declined("Resize scales not constant: " + scales.error().message);
  const std::string text = "Resize scales are not [1,1,s,s] with an integer s >= 2";
  if (scales->size() != 4) return declined(text);
  const double s = scales->at(2);
  if (scales->at(0) != 1.0 || scales->at(1) != 1.0 || scales->at(3) != s || s != std::floor(s) || s < 2 || s > 1024) {
    return declined(text + " (" + number(scales->at(0)) + "," + number(scales->at(1)) + "," + number(scales->at(2)) + "," +
                    number(scales->at(3)) + ")");
  }
  return static_cast<int64_t>(s);
}

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

}  // namespace

std::optional<UpsamplerOutcome> match_nearest_mask(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                                   const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                   const std::map<std::string, int>& uses) {
  // Cheap and selective first: the four ops in a chain, in this graph.
  if (conv.op_type() != "Conv" || !default_domain(conv) || conv.input_size() < 2 || conv.output_size() != 1) return std::nullopt;
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

  UpsamplerOutcome out;
  out.summary = parts::conv_summary(conv, scope, "nearest_mask");
  NodeSummary& sum = out.summary;
  auto fail = [&out](core::Error e) -> std::optional<UpsamplerOutcome> {
    out.match = std::move(e);
    return out;
  };
  const std::string& x = resize->input(0);

  // The Conv: depthwise, stride 1, dilation 1, with a constant [C,1,Ky,Kx] weight.
  auto tail = parts::read_conv_tail(conv, scope, eval, sum);
  if (!tail) return fail(tail.error());

  // Every intermediate must feed only the next step, or the high-resolution tensors stay and nothing is saved.
  for (const auto& [node, what] : {std::pair<const onnx::NodeProto*, const char*>{resize, "Resize"}, {mul, "Mul"}, {pad, "Pad"}}) {
    if (use_count(uses, node->output(0)) != 1) return fail(declined(std::string(what) + " output has another reader"));
  }

  auto s = resize_factor(*resize, scope, eval);
  if (!s) return fail(s.error());
  sum.stride = *s;
  sum.strides = {*s, *s};
  auto pads = parts::pad_amounts(*pad, scope, eval);
  if (!pads) return fail(pads.error());
  auto mask = eval.evaluate(mul->input(1 - upsampled), scope);
  if (!mask) return fail(declined("mask not constant: " + mask.error().message));
  auto tap = mask_tap(*mask, *s, tail->channels);
  if (!tap) return fail(tap.error());

  parts::ZeroInsertion zi;
  zi.s = *s;
  zi.j = {tap->jy, tap->jx};
  zi.gains = {tap->gain};
  auto deconv = parts::fold_zero_insertion(conv, scope, ir_version, types, x, *tail, *pads, zi, sum);
  if (!deconv) return fail(deconv.error());
  UpsamplerMatch m;
  m.deconv = std::move(*deconv);

  // What only this upsampler reads: the three intermediate nodes and every constant chain feeding them.
  std::set<std::pair<size_t, std::string>> seen;
  for (const auto* node : {pad, mul, resize}) {
    m.replaced.emplace_back(&scope, node->output(0));
    seen.insert({scope.index, node->output(0)});
  }
  for (const auto* node : {pad, mul, resize}) {
    for (const auto& in : node->input()) parts::collect_upstream(in, scope, x, seen, m.replaced);
  }
  parts::collect_upstream(conv.input(1), scope, x, seen, m.replaced);
  out.match = std::move(m);
  return out;
}

}  // namespace dwdeconv::rewrite
