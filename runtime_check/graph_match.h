// Structural match of a model and its rewrite, for per-node verification.
//
// Per-node mode checks each rewritten ConvTranspose numerically on its own, and nothing else, so it may pass only
// when everything else is the same in both models. In the rewritten model each replaced ConvTranspose is a region
// of nodes that ends at the ConvTranspose's output name (DepthToSpace keeps it) and reads its input X and
// constants. Every node outside those regions must be in both models with the same op, domain, attributes
// (subgraphs included), inputs and outputs; the initializers those nodes read must hold the same values; the
// graph inputs and outputs, the opset imports and the model's functions must be the same; and every subgraph
// must match node for node. Inside a region only the ops the emitter writes may appear, in its forms (Pad with
// constant zero padding, Conv with constant weights and stride and dilation 1, Concat on axis 1, DCR
// DepthToSpace, Shape, ConstantOfShape of zeros, Constant): these are affine in X, so the numeric check on small
// random inputs speaks for every input, where e.g. a Clip(-1, 1) would pass unseen.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace dwdeconv::runtime_check {

// The first difference between `original` and `rewritten` outside the regions that replace `replaced` (ConvTranspose
// nodes of the original's main graph whose outputs the rewritten model computes some other way), as a phrase naming
// the node or tensor and what differs, or naming a region node the rewrite does not emit; "" when there is none. Node names and doc strings are not compared.
std::string difference_outside_replacements(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                            const std::vector<const onnx::NodeProto*>& replaced);

}  // namespace dwdeconv::runtime_check
