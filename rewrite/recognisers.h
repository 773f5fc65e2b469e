// Recognisers: hand-written upsamplers that compute a depthwise ConvTranspose, each turned into the same
// DeconvMatch the matcher makes of a ConvTranspose node, so one planner and one emitter serve every form.
// See ../shared/DESIGN.md, "Hand-written upsamplers are ConvTransposes too".
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

// The forms --forms can name, in the order the README lists them.
inline const std::vector<std::string>& known_forms() {
  static const std::vector<std::string> forms{"conv_transpose", "nearest_mask", "nearest_conv"};
  return forms;
}

// The forms rewritten when --forms is not given: every form that measured faster on XNNPACK at the layer level
// (README, "Upsampler forms"). The one place that decides it.
inline const std::set<std::string>& default_forms() {
  static const std::set<std::string> forms{"conv_transpose", "nearest_mask", "nearest_conv"};
  return forms;
}

// A recognised upsampler: the ConvTranspose it computes, and the tensors that only it may read. After the
// rewrite they are removed if nothing else reads them.
struct UpsamplerMatch {
  DeconvMatch deconv;
  // Tensors the rewrite may orphan, each with the graph that defines it.
  std::vector<std::pair<const GraphScope*, std::string>> replaced;
};

// What a recogniser says about one Conv: nothing when the Conv does not start the form at all (no row in the
// plan), else the summary row and either the match or the reason it was kept.
struct UpsamplerOutcome {
  NodeSummary summary;
  core::Result<UpsamplerMatch> match = core::declined("not matched");
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

// Form `nearest_conv` (the upsampling block of U-Nets, VAE decoders, FPNs):
//   Before:  u = Resize(x)           nearest, an integer factor s >= 2 on H and W (scales or sizes), coordinates
//                                    that make it x[floor(o/s)] exactly; u has no other reader
//            y = Conv(u, f[, B])     stride 1, dilation 1, any group, kernel K, pads cb/ce with cb + ce == K - 1
//   After:   y = ConvTranspose(x, w, B) with group and channels of the Conv, k = K+s-1, w = flip(g),
//            g[m] = sum_{b<s} f[m-(s-1)+b] per axis, Pb = K-1-cb, Pe = K-1-ce.
// Arguments as for match_nearest_mask.
std::optional<UpsamplerOutcome> match_nearest_conv(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                                   const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                   const std::map<std::string, int>& uses);

// Pieces the recognisers share (recognisers.cpp).

// The node of `scope`'s own graph that outputs `name`, if it has op `op` (default domain, one output); else nullptr.
const onnx::NodeProto* producer(const GraphScope& scope, const std::string& name, const std::string& op);

// How many readers count_uses found for `name` (0 when none).
int use_count(const std::map<std::string, int>& uses, const std::string& name);

// Appends to `out` every tensor `name` is computed from, itself included, as `scope` sees it, stopping at `stop`
// (the upsampler's input) and at a Shape's input. `seen` holds (scope index, name) pairs already listed.
void collect_upstream(const std::string& name, const GraphScope& scope, const std::string& stop,
                      std::set<std::pair<size_t, std::string>>& seen,
                      std::vector<std::pair<const GraphScope*, std::string>>& out);

// The integer factor s >= 2 of a nearest Resize that computes exactly u[o] = x[floor(o/s)] on H and W and copies
// N and C, or why it does not. Sizes count when `types` knows the input's H and W.
core::Result<int64_t> nearest_resize_factor(const onnx::NodeProto& resize, const GraphScope& scope, ConstEvaluator& eval,
                                            const onnx_io::ScopedTypes& types);

}  // namespace dwdeconv::rewrite
