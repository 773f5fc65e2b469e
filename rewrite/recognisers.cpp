#include "rewrite/recognisers.h"

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

core::Result<int64_t> nearest_resize_factor(const onnx::NodeProto& resize, const GraphScope& scope, ConstEvaluator& eval,
                                            const onnx_io::ScopedTypes& types, bool one_d) {
  // Opset 10 takes (X, scales) and has no coordinate attributes: it replicates, x[floor(o/s)]. From opset 11 on
  // it takes (X, roi, scales, sizes), with half_pixel and round_prefer_floor as the defaults.
  const bool opset10 = resize.input_size() == 2;
  auto mode = onnx_io::get_string(resize, "mode", "nearest");
  auto ctm = onnx_io::get_string(resize, "coordinate_transformation_mode", opset10 ? "asymmetric" : "half_pixel");
  auto rounding = onnx_io::get_string(resize, "nearest_mode", opset10 ? "floor" : "round_prefer_floor");
  auto policy = onnx_io::get_string(resize, "keep_aspect_ratio_policy", "stretch");
  for (const auto* r : {&mode, &ctm, &rounding, &policy}) {
    if (!*r) return r->error();
  }
  if (*mode != "nearest") return declined("Resize mode " + *mode);
  if (onnx_io::find_attribute(resize, "axes") != nullptr) return declined("Resize with axes");
  if (resize.input_size() < 2 || resize.input(0).empty()) return declined("Resize without scales");

  // The per-axis factors, from the scales or else from the sizes and the input's known shape.
  const int scales_at = opset10 ? 1 : 2;
  const bool has_sizes = !opset10 && resize.input_size() > 3 && !resize.input(3).empty();
  std::vector<double> factors;
  if (resize.input_size() > scales_at && !resize.input(scales_at).empty()) {
    auto scales = eval.evaluate_flagged(resize.input(scales_at), scope);
    if (!scales) return declined("Resize scales not constant: " + scales.error().message);
    if (auto ok = decidable(*scales, "Resize scales are"); !ok) return ok.error();
    for (size_t i = 0; i < scales->size(); ++i) factors.push_back(scales->at(i));
  }
  if (!factors.empty() && has_sizes) return declined("Resize with both scales and sizes");
  if (factors.empty() && has_sizes) {
    if (*policy != "stretch") return declined("Resize by sizes with keep_aspect_ratio_policy " + *policy);
    auto sizes = eval.evaluate_flagged(resize.input(3), scope);
    if (!sizes) return declined("Resize sizes not constant: " + sizes.error().message);
    if (auto ok = decidable(*sizes, "Resize sizes are"); !ok) return ok.error();
    const auto* type = types.find(scope.index, resize.input(0));
    std::vector<int64_t> dims;
    if (type != nullptr && type->has_tensor_type() && type->tensor_type().has_shape()) {
      for (const auto& d : type->tensor_type().shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : 0);
    }
    if (dims.size() != sizes->size() || std::count(dims.begin(), dims.end(), 0) != 0) {
      return declined("Resize by sizes of an input whose shape is not known");
    }
    for (size_t i = 0; i < dims.size(); ++i) factors.push_back(sizes->at(i) / static_cast<double>(dims[i]));
  }
  if (factors.empty()) return declined("Resize without scales or sizes");
  const std::string text = std::string("Resize scales are not ") + (one_d ? "[1,1,s]" : "[1,1,s,s]") + " with an integer s >= 2";
  if (one_d) {
    // [1, 1, s] on [N, C, L]: the same test on L alone, as [1, 1, s, s].
    if (factors.size() != 3) return declined(text);
    factors = {factors[0], factors[1], factors[2], factors[2]};
  }
  if (factors.size() != 4) return declined(text);
  const double s = factors[2];
  if (factors[0] != 1.0 || factors[1] != 1.0 || factors[3] != s || s != std::floor(s) || s < 2 || s > 1024) {
    return declined(text + " (" + number(factors[0]) + "," + number(factors[1]) + "," + number(factors[2]) + "," + number(factors[3]) +
                    ")");
  }

  // Output o = h*s + a with a in [0, s) must read x[h]. Per coordinate mode, its source coordinate is
  //   asymmetric                       h + a/s                  floor: h; round_prefer_floor: h only for s == 2 (a tie)
  //   half_pixel, pytorch_half_pixel,  h + (a+0.5)/s - 0.5,     within (h-0.5, h+0.5): both round_prefer modes give h
  //   half_pixel_symmetric             (the same, as s*H is exactly the output size)
  //   tf_half_pixel_for_nn             h + (a+0.5)/s,           within (h, h+1): floor gives h
  // align_corners depends on H, tf_crop_and_resize on the roi: never replication for every input size.
  const std::string& c = *ctm;
  const std::string& r = *rounding;
  const bool exact = (c == "asymmetric" && (r == "floor" || (r == "round_prefer_floor" && s == 2))) ||
                     ((c == "half_pixel" || c == "pytorch_half_pixel" || c == "half_pixel_symmetric") &&
                      (r == "round_prefer_floor" || r == "round_prefer_ceil")) ||
                     (c == "tf_half_pixel_for_nn" && r == "floor");
  if (!exact) {
    return declined("Resize coordinate_transformation_mode " + c + " with nearest_mode " + r + " is not x[floor(o/" + number(s) + ")]");
  }
  return static_cast<int64_t>(s);
}

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
  out.summary = parts::conv_summary(conv, scope, Form::kNearestMask);
  out.resize = resize;
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

  auto s = nearest_resize_factor(*resize, scope, eval, types);
  if (!s) return fail(s.error());
  sum.stride = *s;
  sum.strides = {*s, *s};
  auto pads = parts::pad_amounts(*pad, scope, eval);
  if (!pads) return fail(pads.error());
  auto mask = eval.evaluate_flagged(mul->input(1 - upsampled), scope);
  if (!mask) return fail(declined("mask not constant: " + mask.error().message));
  // Its zeros decide where the taps are: a value a runtime may round to another zero pattern decides nothing.
  if (auto ok = decidable(*mask, "the mask is"); !ok) return fail(ok.error());
  auto tap = mask_tap(*mask, *s, tail->channels);
  if (!tap) return fail(tap.error());
  // A mask with a plane per channel also broadcasts a one-channel x up to C, which the ConvTranspose, reading
  // x itself, would not: x must be known to have the C channels.
  if (const size_t rank = mask->dims.size(); rank >= 3 && mask->dims[rank - 3] != 1) {
    const auto c = parts::known_dim(types, scope, x, 1);
    if (c != tail->channels) {
      return fail(declined("mask has " + std::to_string(mask->dims[rank - 3]) + " channels, '" + x + "' has " +
                           (c ? std::to_string(*c) : std::string("a channel count that is not known"))));
    }
  }

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
