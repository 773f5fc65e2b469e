// Emission: turns a matched ConvTranspose and its core::DeconvPlan into ONNX nodes for the model's opset.
//
// Before:  y = ConvTranspose(x, W, B)            group=C, strides=[s,s], pads=[t,l,b,r], output_padding=[oy,ox]
//                                                 (or a recogniser's equivalent, with any group g and C_out)
// After:   x_crop = Pad(x, [0,0,cy,cx,0,0,0,0])   only for phases whose window starts inside x (cy, cx < 0)
//          y_p    = Conv(x | x_crop, W_p, B)      one per phase p = ay*s + ax with non-zero taps; group=g,
//                                                 kernel [My,Mx], W_p [C_out, C_in/g, My, Mx]
//          zeros  = ConstantOfShape(Shape(x))     only when k < s: the phases without taps read x's shape, not its
//          y_b    = Conv(zeros, 0_1x1, B)         values, and share y_b (zeros itself without a bias when
//                                                 C_out == C_in); a phase whose taps are all zero is a Conv on x
//                                                 like the others, so inf and NaN in x reach it as in the original
//          y_cat  = Concat(y_0 .. y_{s*s-1})      axis=1, row-major (ay, ax) order
//          y      = DepthToSpace(y_cat)           blocksize=s, mode=DCR (attribute from opset 11 on)
// or, for runtimes whose converters take only CRD (PhaseLayout):
//          y_crd  = Gather(y_cat, perm)           axis=1, perm[c*s*s + p] = p*C + c (channel-major)
//          y      = DepthToSpace(y_crd)           blocksize=s, mode=CRD
// or, when every phase computes the same (PhaseLayout::kNearest):
//          y_0    = Conv(x, W_0, B)               the one phase, on x
//          y      = Resize(y_0, scales [1,1,s,s]) nearest, asymmetric, floor (Resize-10: its only behaviour)
// or, for an input of batch 1:
//          y_b    = Concat(y_0 .. y_{s*s-1})      axis=0: [s*s, C, H, W]
//          y_t    = Transpose(y_b)                perm [1,0,2,3]: [C, s*s, H, W], phases per channel (CRD order)
//          y_d    = DepthToSpace(y_t)             blocksize=s, mode=CRD: [C, 1, sH, sW]
//          y      = Transpose(y_d)                perm [1,0,2,3]: [1, C, sH, sW]
// With s == 1 the single Conv writes y itself (a stride-1 ConvTranspose, dilated or not: the kernel flipped, dilations kept).
// Strides that differ per axis join by the interleave (PhaseLayout::kInterleave). Every phase yields H + q by W + q
// when the output is s*(H + q) (core::phase_growth); a negative phase pad is a crop by Pad. A 1-D ConvTranspose
// [N, C, L] is rewritten in 1-D: Conv1d phases, each Unsqueezed to [N, C, L', 1], a Concat on axis 3 and a Reshape to
// [N, C, L'*s] (written out where the extents are known). When the match pads with x's edge (nearest + reflect Pad + Conv),
// every phase's padding is a Pad with mode edge and its Conv has no pads.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/polyphase.h"
#include "rewrite/defaults.h"
#include "rewrite/graph_editor.h"
#include "rewrite/matcher.h"

namespace dwdeconv::rewrite {

// How the s*s phase outputs become the upsampled output. A target picks it per node (rewrite/targets.h).
enum class PhaseLayout {
  kDcr,        // Concat(axis=1) in phase-major order, DepthToSpace DCR: the order XNNPACK and TFLite run natively
  kGatherCrd,  // Concat(axis=1), Gather(axis=1) into channel-major order, DepthToSpace CRD: converts with onnx2torch
  kBatchCrd,   // N = 1 only: Concat(axis=0), Transpose, DepthToSpace CRD, Transpose: converts too, without a Gather
  // Every phase computes the same (a 1x1 Conv after a nearest Resize, a ConvTranspose with kernel = stride and the same
  // tap everywhere): the one phase's Conv on x, then a nearest Resize by s. No Concat, no DepthToSpace, 1/s^2 of the
  // phases' work. The emitter chooses it whatever the target's join (Emitter::layout_for).
  kNearest,
  // Strides that differ per axis (s_y != s_x), where DepthToSpace, one block size for both axes, cannot join: each row
  // of phases stacked on a new last axis and flattened into W (Unsqueeze, Concat axis 4, Reshape [0,0,0,-1]), then the
  // rows side by side on W and reshaped into H (Concat axis 3, Reshape [0,0,-1,W'']). The emitter chooses it whatever
  // the target's join (Emitter::layout_for).
  kInterleave,
  // Stride 1 on both axes: the one phase is the node's output, nothing to join (the emitter chooses it).
  kSingle,
};

// "dcr", "gather_crd", "batch_crd", "nearest", "interleave", "single": how the plan and the report name a layout.
const char* phase_layout_name(PhaseLayout layout);

// The extent of axis `axis` of m's 4-D input when shape inference knows it.
std::optional<int64_t> known_dim(const DeconvMatch& m, int axis);

// Whether shape inference knows m's input to have batch 1 (what kBatchCrd needs).
bool known_batch_of_one(const DeconvMatch& m);

struct EmitOptions {
  bool explicit_pad = false;               // every phase pad as a Pad node instead of folding non-negative pads into Conv
  int64_t max_phases = kDefaultMaxPhases;  // a node of stride s emits s*s phases; more than this keeps it
  // A 1-D phase's edge padding as a Concat of x's first and last samples (Slices) around x instead of an edge Pad:
  // onnx2tf writes an edge Pad as one MIRROR_PAD per sample, outside LiteRT's XNNPACK delegate (Target::edge_as_slices).
  // Up to 16 samples a side; more are an edge Pad.
  bool edge_as_slices = false;
  // A phase's crop (its negative pads; not edge padding) as a Slice of x instead of a Pad with negative pads, then a Pad
  // of the positive rest where --explicit-pad leaves one: MNN 3.6 crashes on, or computes wrongly, a negative Pad before
  // a Conv (Target::crop_as_slice). Before opset 10 the Slice takes its bounds as attributes.
  bool crop_as_slice = false;
  // A 1-D join that merges [N, C, L', s] by Flatten(axis 2) and Unsqueeze(0), not by Reshape: onnx2torch makes a
  // Reshape a module that reads its shape as a tensor, which torch.export refuses (Target::flatten_1d_join). Exact only
  // at batch 1, so a 1-D node whose batch is not known to be 1 is kept (keep_reason).
  bool flatten_1d_join = false;
};

// Emits replacements for matched nodes of one model. Phase weights are shared between nodes exactly when
// (source weight, geometry of both axes, phase) are equal, and they are stored the way the source is: an
// initializer in the source's graph, or a Constant node right after the source Constant.
class Emitter {
 public:
  Emitter(onnx::ModelProto& model, NameAllocator& names, EmitOptions options);

  // Why m must be kept although it matched, or "" when it can be emitted: more than options.max_phases
  // phases, or phases without taps at an opset without ConstantOfShape. Reads only the match, so it is cheap.
  // With `layout`, also: a CRD DepthToSpace before opset 11 (no mode attribute), and kBatchCrd for an input whose
  // batch is not known to be 1.
  std::string keep_reason(const DeconvMatch& m, PhaseLayout layout = PhaseLayout::kDcr) const;

  // The layout m is emitted in when the target joins phases with `join`: kNearest when every phase of m computes the
  // same (the same taps, pads and weights), kInterleave when its strides differ per axis, kSingle for stride 1, else
  // `join`.
  PhaseLayout layout_for(const DeconvMatch& m, PhaseLayout join) const;

  // The nodes that replace m.node, in order, ending in the phase outputs' `layout`. New initializers and value_info
  // are added to the graphs now.
  core::Result<std::vector<onnx::NodeProto>> emit(const DeconvMatch& m, PhaseLayout layout = PhaseLayout::kDcr);

  // Every phase weight emitted, by name, with the name of the weight it was gathered from; the save uses it to
  // store a phase weight wherever its source was stored (inline or external data).
  const std::map<std::string, std::string>& derived_tensors() const { return derived_; }

  // Constant nodes to insert right after a source Constant node (phase weights of Constant-held weights).
  const std::map<const onnx::NodeProto*, std::vector<onnx::NodeProto>>& constants_after() const { return constants_after_; }

 private:
  // emit() for a match with an addend (rewrite/emitter_split.cpp): its phases, joined, plus the Conv of the rest.
  core::Result<std::vector<onnx::NodeProto>> emit_split(const DeconvMatch& m, PhaseLayout layout);
  // The Conv of the split Conv's channels that are not upsampled (their Concat and Pad first), appended to `nodes`;
  // returns its output.
  std::string rest_conv(const DeconvMatch& m, const std::string& base, std::vector<onnx::NodeProto>& nodes);
  // emit() of a match with a crop_end: the phases and join into a longer tensor of their own, then the Slice into y.
  core::Result<std::vector<onnx::NodeProto>> emit_cropped(const DeconvMatch& m, PhaseLayout layout);
  core::Result<std::string> phase_weight(const DeconvMatch& m, const core::DeconvPlan& plan, size_t phase_index);
  // A [C,1,1,1] zero kernel, one per source weight, stored the way the weight is.
  std::string zero_kernel(const DeconvMatch& m);
  // A phase that reads nothing: zeros with the shape of `like`, made from its shape alone (Shape, then
  // ConstantOfShape, opset 9+), so no value of `like`, inf or NaN included, can reach them.
  std::string zeros_like(const DeconvMatch& m, const std::string& like, const std::string& base, std::vector<onnx::NodeProto>& nodes);
  // The output of every phase without taps: bias[c] at every pixel of x's shape, or zeros without a bias.
  std::string bias_only_phase(const DeconvMatch& m, const std::string& base, const std::string& bias, std::vector<onnx::NodeProto>& nodes);
  // Stores a derived tensor where `src` is stored: an initializer in its graph, or a Constant after its Constant.
  void store_like_source(const ConstantSource& src, onnx::TensorProto tensor);
  std::string pad_node(const DeconvMatch& m, const std::string& base, const std::array<int64_t, 4>& pads,
                       std::vector<onnx::NodeProto>& nodes);
  // Whether every phase of `plan` has phase 0's taps, pads and weights (then m is a Conv followed by a nearest Resize).
  bool equal_phases(const DeconvMatch& m, const core::DeconvPlan& plan) const;
  // The nearest Resize by s of `input` into m.output, for the model's opset (10: Resize(X, scales); 11 and 12: with an
  // empty roi; 13 on: roi omitted), named after the node.
  onnx::NodeProto nearest_resize(const DeconvMatch& m, const std::string& base, const std::string& input, int64_t sy, int64_t sx);
  // An Unsqueeze or Squeeze (`op`) of `input` on `axis`, for the model's opset (axes an attribute before 13, an input
  // from 13 on).
  onnx::NodeProto axes_node(const DeconvMatch& m, const std::string& op, const std::string& name, const std::string& input,
                            const std::string& output, int64_t axis);
  // A Reshape of `input` into `output` by a constant shape (an int64 initializer named after the node).
  onnx::NodeProto reshape(const DeconvMatch& m, const std::string& name, const std::string& input, const std::string& output,
                          const std::vector<int64_t>& shape);
  // The kInterleave join of the phase outputs (row-major (ay, ax)) into m.output, named after the node.
  void interleave(const DeconvMatch& m, const std::string& base, const std::vector<std::string>& phases,
                  const std::array<int64_t, 4>& growth, std::vector<onnx::NodeProto>& nodes);
  // The join of a 1-D node's s phases (kInterleave with one row): Unsqueeze each to [N, C, L', 1], Concat on that
  // axis, Reshape to [N, C, L'*s].
  void interleave_1d(const DeconvMatch& m, const std::string& base, const std::vector<std::string>& phases,
                     const std::array<int64_t, 4>& growth, std::vector<onnx::NodeProto>& nodes);
  // The Concat join of the phase outputs (row-major) into m.output for kDcr, kGatherCrd and kBatchCrd: Concat, then
  // DepthToSpace (DCR), a Gather to CRD's channel order and DepthToSpace (CRD), or the batch-axis CRD join.
  void concat_join(const DeconvMatch& m, const std::string& base, const std::vector<std::string>& phase_outputs,
                   const std::array<int64_t, 4>& growth, PhaseLayout layout, std::vector<onnx::NodeProto>& nodes);
  void add_initializer(const GraphScope& scope, onnx::TensorProto tensor);
  // A value_info for `name`: m's input type with `channels`, each spatial extent grown by its pads, W times width_factor
  // (of a 1-D node: [N, C, L'], its input type read as [N, C, 1, L]).
  void add_value_info(const DeconvMatch& m, const std::string& name, int64_t channels, const std::array<int64_t, 4>& pads,
                      int64_t width_factor = 1);

  onnx::ModelProto& model_;
  NameAllocator& names_;
  EmitOptions options_;
  int64_t opset_;
  std::map<std::string, std::string> phase_weights_;  // key -> tensor name, see phase_weight()
  std::map<const onnx::NodeProto*, std::vector<onnx::NodeProto>> constants_after_;
  std::map<std::string, std::string> derived_;
  // Per 1-D node (its output): the Slices of x's first and last sample that edge_as_slices concatenates.
  std::map<std::string, std::pair<std::string, std::string>> edge_slices_;
  // Per 1-D node, edge sample and count: that sample repeated (a Concat of two inputs each, see pad_node()).
  std::map<std::tuple<std::string, std::string, int64_t>, std::string> edge_repeats_;
};

}  // namespace dwdeconv::rewrite
