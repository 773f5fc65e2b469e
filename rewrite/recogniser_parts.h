// Pieces the recognisers share (internal to rewrite/): finding producers, counting readers, collecting what a
// form replaces, reading constant-zero Pads, and the common tail of every zero-insertion form: constant zero
// padding, then a depthwise stride-1 Conv, folded into one ConvTranspose. See docs/design.md, "Hand-written upsamplers are ConvTransposes
// too".
#pragma once

#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "rewrite/const_eval.h"
#include "rewrite/matcher.h"

namespace dwdeconv::rewrite::parts {

// Larger pads cannot give a clean upscale with a kernel this tool folds; bounding them keeps sums exact.
constexpr int64_t kMaxPad = int64_t{1} << 30;

bool default_domain(const onnx::NodeProto& node);

// The node of `scope`'s own graph that outputs `name`, if it has op `op` and one output; nullptr otherwise.
const onnx::NodeProto* producer(const GraphScope& scope, const std::string& name, const std::string& op);

std::string join(const std::vector<int64_t>& v);
// `v` as core::shortest_number spells it: a scale of 2.0000002 is not shown as 2.
std::string number(double v);

// The known extent of dim `axis` of `name` in `scope`, if shape inference knows it.
std::optional<int64_t> known_dim(const onnx_io::ScopedTypes& types, const GraphScope& scope, const std::string& name, int64_t axis);

// How many times `name` is read (0 when never).
int use_count(const std::map<std::string, int>& uses, const std::string& name);

// Every tensor `name` is computed from, itself included, as `scope` sees it: node outputs and initializers,
// walking to enclosing graphs. It stops at `stop` (the upsampler's input) and at a Shape's input, whose values
// the constant never read.
void collect_upstream(const std::string& name, const GraphScope& scope, const std::string& stop,
                      std::set<std::pair<size_t, std::string>>& seen, std::vector<std::pair<const GraphScope*, std::string>>& out);

// The tensors a form's region replaces (UpsamplerMatch::replaced): the outputs of `nodes`, then every tensor the
// inputs of `walk` (`nodes` when empty) are computed from, then those `also` are, each once and none past `x`.
std::vector<std::pair<const GraphScope*, std::string>> replaced_tensors(const GraphScope& scope, const std::string& x,
                                                                        const std::vector<const onnx::NodeProto*>& nodes,
                                                                        const std::vector<std::string>& also,
                                                                        const std::vector<const onnx::NodeProto*>& walk = {});

// The same for a chain of (node, what messages call it), as the zero insertion forms collect theirs.
template <typename What>
std::vector<std::pair<const GraphScope*, std::string>> replaced_tensors(const GraphScope& scope, const std::string& x,
                                                                        const std::vector<std::pair<const onnx::NodeProto*, What>>& chain,
                                                                        const std::vector<std::string>& also) {
  std::vector<const onnx::NodeProto*> nodes;
  for (const auto& link : chain) nodes.push_back(link.first);
  return replaced_tensors(scope, x, nodes, also);
}

// The integer factor s >= 2 of a nearest Resize that computes exactly u[o] = x[floor(o/s)] on H and W and copies
// N and C, or why it does not. Sizes count when `types` knows the input's H and W. `one_d`: on L of [N, C, L] alone.
core::Result<int64_t> nearest_resize_factor(const onnx::NodeProto& resize, const GraphScope& scope, ConstEvaluator& eval,
                                            const onnx_io::ScopedTypes& types, bool one_d = false);

// The full pads of a constant-zero Pad of a rank-`rank` tensor ([begins..., ends...], none negative), or why
// it is not one: another mode, a non-zero value, pads that are not constant, crop, or are out of range.
core::Result<std::vector<int64_t>> constant_zero_pads(const onnx::NodeProto& pad, const GraphScope& scope, ConstEvaluator& eval,
                                                      size_t rank);

// A Pad of H and W of a 4-D tensor: its mode (constant with value 0, reflect or edge) and [top, left, bottom, right],
// none negative; or why it is not one.
struct SpatialPad {
  std::string mode;
  std::array<int64_t, 4> pads{0, 0, 0, 0};
};
// `one_d`: of a 3-D tensor [N, C, L], as [0, left, 0, right].
core::Result<SpatialPad> spatial_pad(const onnx::NodeProto& pad, const GraphScope& scope, ConstEvaluator& eval, bool one_d = false);

// The Pad's spatial [top, left, bottom, right] for a 4-D tensor, or why it is not a constant-zero pad of H and W.
core::Result<std::array<int64_t, 4>> pad_amounts(const onnx::NodeProto& pad, const GraphScope& scope, ConstEvaluator& eval);

// Why a Conv with both an auto_pad other than NOTSET and a pads attribute is kept ("" otherwise): the spec
// forbids the pair, ONNX Runtime refuses such a node, and which one wins is not the tool's to guess.
std::string auto_pad_conflict(const onnx::NodeProto& conv);

// Why a Conv whose kernel_shape disagrees with its weight's [.., .., Ky, Kx] is kept ("" when it agrees or is
// absent): such a Conv is invalid, and which of the two a runtime would follow is not the tool's to guess.
std::string kernel_shape_conflict(const onnx::NodeProto& conv, const std::vector<int64_t>& weight_dims);

// The Conv that ends every zero-insertion form: stride 1, dilation 1, a constant [C_out, C_in/group, Ky, Kx] float
// weight; depthwise ([C,1,Ky,Kx], group C), or with `any_group` also dense (zero insertion then a dense Conv is a dense
// ConvTranspose: FastDepth's UpConv); a grouped Conv is declined (not measured), though the fold computes it. read_conv_tail fills
// summary.channels (C_in) and summary.kernel as far as it gets.
struct ConvTail {
  ConstTensor weight;
  int64_t channels = 0;      // C_in, the channels zero insertion runs on
  int64_t out_channels = 0;  // C_out
  int64_t group = 0;
  std::array<int64_t, 4> pads{0, 0, 0, 0};  // the Conv's own [top, left, bottom, right]

  bool depthwise() const { return group == channels && out_channels == channels; }
};
core::Result<ConvTail> read_conv_tail(const onnx::NodeProto& conv, const GraphScope& scope, ConstEvaluator& eval, NodeSummary& summary,
                                      bool any_group = false);

// Zero insertion by s: z[i*s + j] = gain[c] * x[i] per axis, all other z are 0, over a length of s*H - deficit
// (a ConvTranspose with kernel k < s stops s - k short of s*H).
struct ZeroInsertion {
  int64_t s = 2;
  std::array<int64_t, 2> j{0, 0};        // offset of the sample in each s-cell, per axis (y, x)
  std::vector<double> gains;             // one per channel, or a single gain for every channel
  std::array<int64_t, 2> deficit{0, 0};  // per axis
};

// The zero insertion that StyleGAN's reference upfirdn2d writes as r = Reshape(x, [N,C,H,1,W,1]), z = Pad(r) on the two
// singleton axes, Reshape(z, [N,C,sH,sW]) (x is split's input): its s and offsets j, gain 1; or why the three nodes are
// not one. Fills summary.stride (rewrite/form_reshape_zero_insertion.cpp).
core::Result<ZeroInsertion> reshape_insertion(const onnx::NodeProto& split, const onnx::NodeProto& insert, const onnx::NodeProto& merge,
                                              const GraphScope& scope, ConstEvaluator& eval, const onnx_io::ScopedTypes& types,
                                              NodeSummary& summary);

// The ConvTranspose that zero insertion `zi` of `x`, then the Pad `pads` ([top, left, bottom, right]) and the
// Conv `conv` with `tail`, compute: w[ci,co',t] = gain[ci] * f[co,ci',K-1-t] (co' and ci' within the group of ci),
// Pb = K-1-j-P, Pe = K+j-s-E per axis; of the Conv's groups and output channels.
// Declines unless the result is a clean xs upscale with non-negative pads. Fills summary.stride and pads.
core::Result<DeconvMatch> fold_zero_insertion(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                              const onnx_io::ScopedTypes& types, const std::string& x, const ConvTail& tail,
                                              const std::array<int64_t, 4>& pads, const ZeroInsertion& zi, NodeSummary& summary);

// Why the derived kernel `values` cannot be stored as `data_type`, or "" when it can: a finite value that rounds
// to an infinity there (a box sum or gain x tap past 65504 in float16, past 3.4e38 in float32). Stored, it would
// give inf or NaN where the original computes finite values.
std::string derived_overflow(const std::vector<double>& values, int32_t data_type);

// The DeconvMatch replacing Conv `conv` (its name, output and bias) by a ConvTranspose of `x` with the derived
// kernel `values` of `dims` ([C_in, C_out/group, ky, kx], element type `data_type`), stored where the Conv's
// weight is. The geometry, and group and out_channels when not depthwise, are the caller's to set.
DeconvMatch derived_match(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version, const onnx_io::ScopedTypes& types,
                          const std::string& x, int32_t data_type, const std::vector<int64_t>& dims, const std::vector<double>& values);

// The type of the 1-D tensor `name` ([N, C, L]) as a 1-D match reads it, [N, C, 1, L]; nullopt when its shape is not
// known to have rank 3.
std::optional<onnx::TypeProto> one_d_type(const onnx_io::ScopedTypes& types, const GraphScope& scope, const std::string& name);

// A new summary row for a hand-written upsampler named after its Conv.
NodeSummary conv_summary(const onnx::NodeProto& conv, const GraphScope& scope, Form form);

}  // namespace dwdeconv::rewrite::parts
