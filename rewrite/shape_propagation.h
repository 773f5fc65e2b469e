// The shapes the rewrite relies on, computed from the graph inputs: ONNX shape inference per op (libonnx), run again
// each time the tool's own folder (ConstEvaluator, on the op library's kernels) has evaluated more of the small
// tensors a model computes its shapes with: PyTorch's pads chains, Shape -> Gather -> Mul -> Concat into a Resize's
// sizes, the shape of a ConstantOfShape or an Expand. libonnx 1.12 evaluates few of them (no Div, Floor, Equal, Where,
// Range, ConstantOfShape or Reshape; Pad's pads and Resize's sizes only when they are literal), so without this every
// dim behind the first such chain is unknown.
//
// Before:  x [1,8,16,16] -> Shape -> Gather(2) -> Mul(2) -> Unsqueeze -> Concat -> Resize(x, sizes) -> ?
// After:   the chain folded to a Constant [1,8,32,32] in a skeleton copy, inference run again: [1,8,32,32]
//
// Declared value_info and graph output shapes are never used (infer_types drops them); where one disagrees with a
// computed shape, a warning names both. Symbolic dims stay symbolic. A Loop body's loop-carried inputs are of unknown
// dims but on the axes the body keeps. Where libonnx infers an op unlike the ONNX spec (rewrite/shape_rules.h), the
// spec's shape is used, or none where the spec and ONNX Runtime differ.
//
// Cost: each value is computed once and only if it could be kept (at most kMaxPropagatedElements); a round tries
// only the nodes whose inputs changed; all rounds run in one child process; at most 2^22 nodes are inferred in all.
#pragma once

#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "onnx_io/shapes.h"

namespace dwdeconv::rewrite {

struct PropagatedTypes {
  onnx_io::ScopedTypes types;         // numbered as onnx_io::infer_types numbers them
  std::vector<std::string> warnings;  // a declared shape that disagrees with the computed one, per value
  int rounds = 0;                     // inference runs it took to reach the fixpoint
  // Each node whose output type libonnx 1.12 infers unlike the ONNX spec (rewrite/shape_rules.h), naming both: the
  // dims they differ on are unknown in `types` (a runtime computes one or the other), and so is everything computed
  // from them. Each is in `warnings` too.
  std::vector<std::string> spec_overrides;
};

// The most elements a folded value may have to be handed to inference as a constant: shape tensors, pads, scales
// and sizes are a few; a mask or a weight is left to inference, which types it from its (now known) shape inputs.
constexpr int64_t kMaxPropagatedElements = 4096;

// Types of every value of `model` (every graph), as far as inference and the folder know them at their fixpoint.
PropagatedTypes propagate_types(const onnx::ModelProto& model);

}  // namespace dwdeconv::rewrite
