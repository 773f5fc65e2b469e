// Recognisers: hand-written upsamplers that compute a depthwise ConvTranspose, each turned into the same
// DeconvMatch the matcher makes of a ConvTranspose node, so one planner and one emitter serve every form.
// See docs/design.md, "Hand-written upsamplers are ConvTransposes too".
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "rewrite/const_eval.h"
#include "rewrite/matcher.h"

namespace dwdeconv::rewrite {

// A recognised upsampler: the ConvTranspose it computes, and the tensors that only it may read. After the
// rewrite they are removed if nothing else reads them.
struct UpsamplerMatch {
  DeconvMatch deconv;
  // Tensors the rewrite may orphan, each with the graph that defines it.
  std::vector<std::pair<const GraphScope*, std::string>> replaced;
  // A ConvTranspose node the form folds in (zero_insertion); it must not also be rewritten on its own.
  const onnx::NodeProto* absorbs = nullptr;
};

// What a recogniser says about one Conv: nothing when the Conv does not start the form at all (no row in the
// plan), else the summary row and either the match or the reason it was kept.
struct UpsamplerOutcome {
  NodeSummary summary;
  core::Result<UpsamplerMatch> match = core::declined("not matched");
  const onnx::NodeProto* resize = nullptr;  // the nearest Resize the form starts from, if it has one
};

// Form `nearest_mask`:
//   Before:  u = Resize(x)           nearest, asymmetric, floor, scales [1,1,s,s] (s an integer >= 2)
//            m = Mul(u, mask)        mask: one non-zero `a` at offset (jy, jx) of every s x s cell, every channel
//            p = Pad(m, pads)        constant 0 (pads may be computed from constants, e.g. PyTorch's 8-op chain)
//            y = Conv(p, f[, B])     depthwise, stride 1, dilation 1, kernel K
//   After:   y = ConvTranspose(x, w, B) with w[t] = a * f[K-1-t], pads Pb = K-1-j-P, Pe = K+j-s-E per axis,
//            where P and E are the Pad's and the Conv's begin and end pads together.
// `uses` are count_uses of the model. Errors of kind kInvalidModel reject the model.
std::optional<UpsamplerOutcome> match_nearest_mask(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                                   const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                   const std::map<std::string, int>& uses);

// Form `zero_insertion` (MI-GAN's older code):
//   Before:  z = ConvTranspose(x, v)  depthwise, stride s, kernel k <= s, pads 0, no (or a zero) bias; v has one
//                                     non-zero tap a[c] per channel, at the same (jy, jx) in every channel
//            p = Pad(z, pads)         constant 0 (pads may be computed, e.g. PyTorch's 8-op chain)
//            y = Conv(p, f[, B])      depthwise, stride 1, dilation 1, kernel K
//   After:   y = ConvTranspose(x, w, B) with w[c,t] = a[c] * f[c,K-1-t] (a gain per channel folds into the
//            depthwise filter), pads as for nearest_mask with the end pads s - k shorter.
// The match's `absorbs` is the first ConvTranspose: the rewriter must not rewrite it on its own as well.
std::optional<UpsamplerOutcome> match_zero_insertion(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                                     const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                     const std::map<std::string, int>& uses);

// Form `upsample1d` (BigVGAN's anti-aliased UpSample1d, Mimi's ConvTrUpsample1d):
//   Before: [p = Pad(x, e)]          optional: edge or constant 0, on the length axis only (e_b + e_e samples)
//            u = ConvTranspose(p|x)  1-D, depthwise, stride s, as match_deconv takes it
//           [g = Mul(u, a)]          optional: one constant factor (no bias on the ConvTranspose)
//            y = Slice(u|g)          the length axis only, step 1: a crop of c_b samples at the begin, c_e at the end
//   After:   y = ConvTranspose(x, a*w) with pads P + c - s*e per end, each phase padding x with its edge (edge Pad)
//            when every phase's pads are within the Pad's e: the phases compute only the samples kept.
// Starts from the Slice; the match's `absorbs` is the ConvTranspose.
std::optional<UpsamplerOutcome> match_upsample1d(const onnx::NodeProto& slice, const GraphScope& scope, int64_t ir_version,
                                                 const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                 const std::map<std::string, int>& uses);

// Form `reshape_zero_insertion` (StyleGAN2-ADA's reference upfirdn2d):
//   Before:  r = Reshape(x, [N,C,H,1,W,1])
//            z = Pad(r, pads6)        constant 0 on the two singleton axes only: (jy, s-1-jy) and (jx, s-1-jx)
//            u = Reshape(z, [N,C,sH,sW])
//            p = Pad(u, pads)         constant 0
//            q = Slice(...(p))        any number (up to 4) of no-op Slices: steps 1, starts 0, ends at least
//                                     the dim, or the dim itself read from Shape of the sliced tensor
//            y = Conv(q, f[, B])      depthwise, stride 1, dilation 1; f may be computed (Tile, Expand, ...)
//   After:   y = ConvTranspose(x, w, B), w[t] = f[K-1-t], pads as for nearest_mask.
std::optional<UpsamplerOutcome> match_reshape_zero_insertion(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                                             const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                             const std::map<std::string, int>& uses);

// Form `nearest_conv` (the upsampling block of U-Nets, VAE decoders, FPNs):
//   Before:  u = Resize(x)           nearest, an integer factor s >= 2 on H and W (scales or sizes), coordinates
//                                    that make it x[floor(o/s)] exactly; u has no other reader
//           [v = Pad(u, p)]          optional: constant zeros (added to the Conv's pads), or reflect with p <= s-1
//                                    or edge (the Conv's pads then 0): x's edge samples, so the phases edge-pad x
//            y = Conv(u|v, f[, B])   stride 1, dilation 1, any group, kernel K, pads cb/ce with cb + ce == K - 1
//   After:   y = ConvTranspose(x, w, B) with group and channels of the Conv, k = K+s-1, w = flip(g),
//            g[m] = sum_{b<s} f[m-(s-1)+b] per axis, Pb = K-1-cb, Pe = K-1-ce.
// Arguments as for match_nearest_mask.
std::optional<UpsamplerOutcome> match_nearest_conv(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                                   const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                   const std::map<std::string, int>& uses);

// The integer factor s >= 2 of a nearest Resize that computes exactly u[o] = x[floor(o/s)] on H and W and copies
// N and C, or why it does not. Sizes count when `types` knows the input's H and W. `one_d`: on L of [N, C, L] alone.
core::Result<int64_t> nearest_resize_factor(const onnx::NodeProto& resize, const GraphScope& scope, ConstEvaluator& eval,
                                            const onnx_io::ScopedTypes& types, bool one_d = false);

}  // namespace dwdeconv::rewrite
