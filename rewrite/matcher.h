// Matching a ConvTranspose node: the summary the plan shows and the DeconvMatch the emitter takes (any depthwise
// ConvTranspose whose output is a whole number of strides per input sample), or why it is kept or the model refused.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/geometry.h"
#include "core/result.h"
#include "onnx_io/shapes.h"
#include "rewrite/form_id.h"
#include "rewrite/graph_editor.h"

namespace dwdeconv::rewrite {

class ConstEvaluator;

// What the report says about a ConvTranspose, rewritten or not. Fields are filled as far as matching got, and the
// plan and the report show only those: 0 (channels, kernel, stride) and an empty optional mean not known.
struct NodeSummary {
  std::string name;        // the node's name, or its output's name when unnamed
  std::string graph_path;  // "main" or the path of the subgraph
  int64_t channels = 0;
  std::array<int64_t, 2> kernel{0, 0};
  int64_t stride = 0;  // the common stride; 0 until known equal
  std::array<int64_t, 2> strides{0, 0};
  std::optional<std::array<int64_t, 4>> pads;  // resolved [top, left, bottom, right]
  std::optional<std::array<int64_t, 2>> output_padding;
  std::optional<std::array<int64_t, 2>> dilations;  // set when some axis is dilated
  // A group-1 ConvTranspose whose weight is zero off the channel diagonal: rewritten as the depthwise one it computes.
  bool depthwise_in_value = false;
  // How the upsampler is written (rewrite/forms.h), or kNearestResize for a nearest Resize that starts no form.
  Form form = Form::kConvTranspose;
};

struct DeconvMatch;

// What the emitted upsampler's output is added to: a Conv split by its input channels (nearest_concat_conv), where
// each upsampled input's channels become phases and the others stay a Conv at full resolution, which adds the bias once.
struct ConvAddend {
  std::vector<DeconvMatch> upsampled;               // the other upsampled inputs' parts, each emitted as an upsampler of its own
  std::vector<std::string> inputs;                  // the channels not upsampled (none: no Conv), concatenated on axis 1 when several
  std::string pad_mode;                             // "reflect" or "edge": a Pad of `pad` before the Conv; "": none (zeros are its pads)
  std::array<int64_t, 4> pad{0, 0, 0, 0};           // that Pad's [top, left, bottom, right]
  std::array<int64_t, 4> conv_pads{0, 0, 0, 0};     // the Conv's own
  std::shared_ptr<const onnx::TensorProto> weight;  // [C_out, C_rest, Ky, Kx], named after the weight it is sliced from
  std::string bias;                                 // the split Conv's bias, or ""
};

// A ConvTranspose to emit, as a ConvTranspose node states it or as a recogniser derived it from a hand-written
// upsampler: everything the emitter needs, whatever the form. Depthwise unless a recogniser sets group and
// out_channels (nearest + Conv keeps the Conv's groups: dense, grouped or depthwise).
struct DeconvMatch {
  const onnx::NodeProto* node = nullptr;  // the node the emitted nodes replace (the ConvTranspose, or the Conv)
  const GraphScope* scope = nullptr;
  std::string name;          // the replaced node's name (may be empty); DepthToSpace keeps it
  std::string input;         // X
  std::string bias;          // B, or "" without a bias
  std::string output;        // Y, which the last emitted node writes
  int64_t channels = 0;      // input channels C_in
  int64_t group = 0;         // 0: depthwise, group = channels
  int64_t out_channels = 0;  // C_out; 0: channels
  core::AxisGeometry y;
  core::AxisGeometry x;
  // [C_in, C_out/group, ky, kx]. For a derived kernel: tensor points into derived_weight, name is the tensor it follows.
  ConstantSource weight;
  std::shared_ptr<const onnx::TensorProto> derived_weight;  // a recogniser's kernel, or a ConvTranspose's folded weight
  // A ConvTranspose weight that nodes compute from constants (FastDepth's Unpool: Expand(mask, Where(...))): the values
  // of that chain, node outputs and initializers, each with its graph, which the rewrite may orphan.
  std::vector<std::pair<const GraphScope*, std::string>> weight_chain;
  std::optional<onnx::TypeProto> input_type;  // X's type when shape inference knows it (of a 1-D node: as [N, C, 1, L])
  // A 1-D upsampler (rank-3 weight), matched as the 2-D one of x with a unit H axis (y: k 1, s 1): the emitter writes
  // Conv1d phases on x and the 1-D join (Emitter::interleave_1d).
  bool one_d = false;
  // The phases pad x by repeating its edge instead of with zeros: nearest + a reflect (or edge) Pad + Conv, where
  // the padded samples of the upsampled tensor are x's edge samples (see rewrite/form_nearest_conv.cpp).
  bool edge_padding = false;
  // Set: the emitted upsampler computes part of a sum, and the other parts are added to it into `output`.
  std::optional<ConvAddend> addend;
  // Samples at the end of H and W that the phases' join writes beyond y and a Slice (opset >= 10) crops: a stage of a
  // fir_pair whose output is no whole number of strides is emitted one stride-multiple longer (its end pad shorter).
  std::array<int64_t, 2> crop_end{0, 0};

  int64_t groups() const { return group != 0 ? group : channels; }
  int64_t outputs() const { return out_channels != 0 ? out_channels : channels; }
};

// The outcome of matching one node: the summary always, and the match or the reason it was kept.
struct MatchOutcome {
  NodeSummary summary;
  core::Result<DeconvMatch> match;
};

// Matches a default-domain ConvTranspose. An error of kind kInvalidModel means the node breaks the ONNX spec
// (stride 0, negative pads, group not dividing channels, ...) and the model must be refused.
// `types` are looked up in the node's scope (scope.index).
// `dense` also takes a dense (group 1) ConvTranspose, which is otherwise kept (see RewriteOptions::dense_conv_transpose).
// With `eval`, a weight that a chain of nodes computes from constants is folded (a derived weight), as the
// recognisers fold theirs.
MatchOutcome match_deconv(const onnx::NodeProto& node, const GraphScope& scope, int64_t ir_version, const onnx_io::ScopedTypes& types,
                          bool dense = false, ConstEvaluator* eval = nullptr);

}  // namespace dwdeconv::rewrite
