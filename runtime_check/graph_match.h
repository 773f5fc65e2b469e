// Structural match of a model and its rewrite, for per-node verification.
//
// Per-node mode checks each replaced upsampler numerically on its own, and nothing else, so it may pass only when
// everything else is the same in both models. An upsampler is a region of nodes that ends at an output name y both
// models compute (a ConvTranspose's, or the Conv's of a hand-written form such as nearest Resize x mask, Pad, Conv)
// and reads one activation x plus constants. In the original the region is what the rewritten model no longer has,
// back from y; in the rewritten model it is what computes y from x and constants. Every node outside the regions
// must be in both models with the same op, domain, attributes (subgraphs included), inputs and outputs; the
// initializers those nodes read must hold the same values; the graph inputs and outputs, the opset imports and the
// model's functions must be the same; and every subgraph must match node for node.
//
// Each region must be affine in x, so that the numeric check on small random inputs speaks for every input, where
// e.g. a Clip(-1, 1) would pass unseen; and the rewritten region must read from outside itself exactly the
// original's x, the node's bias and constants (not, say, a Clip(x) both models compute). In the rewritten model
// only the ops the emitter writes may appear, in its forms (Pad with constant zero or edge padding, Conv with
// constant weights and stride 1 (dilated only when it writes y), Concat on axis 0, 1, 3 or 4, DCR or CRD DepthToSpace, Gather by constant
// indices, Transpose, Unsqueeze, Squeeze, Reshape by a constant shape, Shape, ConstantOfShape of zeros, Constant). In the original only the
// ops of the upsampler forms the rewrite recognises (Resize, Mul, Pad, Conv, ConvTranspose, Identity, Reshape, Slice and the constant-chain
// ops ConstantOfShape, Concat, Transpose, Cast, Unsqueeze, Squeeze, Expand, Tile, Gather, Shape, Constant), each reading x's values as its
// data only (input 0; Mul either input, not both; Concat any), and casting them only to f32 or f64.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/region.h"

namespace dwdeconv::runtime_check {

// A replaced upsampler: a Conv or ConvTranspose of the original's main graph whose output y (`output`) the rewritten
// model computes with another op. The region's values (x as `input`, y as `output`, the bias) are the rewrite's
// record (core::ReplacedRegion); beside them, what checking it on its own needs.
struct Replacement : core::ReplacedRegion {
  const onnx::NodeProto* node = nullptr;  // the original's node producing y
  std::string label;                      // describe_node(*node)
  // Why the region cannot be checked on its own, e.g. it reads two activations (then `input` is ""); "" when it can.
  std::string problem;
};

// The replaced upsamplers, in the original's graph order. Each region is found by walking back from y through the
// original's nodes whose outputs the rewritten model does not define, stopping at values both models define; of
// those, every one that is not computed from constants alone (Shape counts as constant) is an activation input.
std::vector<Replacement> find_replacements(const onnx::ModelProto& original, const onnx::ModelProto& rewritten);

// The replaced upsamplers as the rewriter recorded them (rewrite::NodeReport::region, main graph only), in the
// original's graph order: what the tool knows it replaced, not what a diff of the graphs suggests. A region whose
// output the original's main graph does not compute gets a `problem`.
std::vector<Replacement> replacements_from_record(const onnx::ModelProto& original, const std::vector<core::ReplacedRegion>& regions);

// "" when `recorded` and `found` (find_replacements() of the same two models) name the same upsamplers with the same
// input (or `found` names none for it: the graphs alone cannot tell), else a phrase saying where the record and the
// graphs disagree. The graph matching confirms the record.
std::string record_difference(const std::vector<Replacement>& recorded, const std::vector<Replacement>& found);

// The first difference between the main graphs' inputs (before IR 4, those that are no initializer) or outputs,
// matched by name: a name only one model has, or one whose declared type (element type and dims) differs; "" when
// there is none. Checked before any runtime runs either model: a model fed or read differently from the original
// is another model, whatever its outputs on one input are.
std::string interface_difference(const onnx::ModelProto& original, const onnx::ModelProto& rewritten);

// "" when both models list their graph inputs and outputs in the same order, else a note saying which are listed
// in another order. Not a difference (everything is matched by name), but a caller that indexes them may care.
std::string interface_order_note(const onnx::ModelProto& original, const onnx::ModelProto& rewritten);

// The first difference between `original` and `rewritten` outside the regions of `replaced`, as a phrase naming the
// node or tensor and what differs; or a region that cannot be checked (its problem, a rewritten node the rewrite
// does not emit, an original node outside the upsampler forms); "" when there is none. Node names and doc strings
// are not compared.
std::string difference_outside_replacements(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                            const std::vector<Replacement>& replaced);

}  // namespace dwdeconv::runtime_check
