// Per-node fallback check: verifies one rewritten ConvTranspose on its own.
//
// The original ConvTranspose runs through XNNPACK's deconvolution, its replacement subgraph (the Pads, Convs,
// Concat and DepthToSpace that now produce the node's output) runs through XNNPACK too, and both are compared
// with core::conv_transpose2d_reference in double on the same seeded random input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "runtime_check/compare.h"

namespace dwdeconv::runtime_check {

struct NodeVerification {
  std::string node;                  // the original node, e.g. "ConvTranspose 'up1'"
  std::vector<int64_t> input_shape;  // X as fed to both graphs
  OutputComparison original;         // original node (XNNPACK) vs the double reference
  OutputComparison rewritten;        // replacement subgraph (XNNPACK) vs the double reference
  std::string original_placement;    // Executor::placement_summary() of each side
  std::string rewritten_placement;
  size_t replacement_nodes = 0;
  size_t rewritten_xnnpack_ops = 0;    // replacement nodes that ran on XNNPACK / on reference kernels
  size_t rewritten_reference_ops = 0;
  bool passed = false;               // both comparisons passed
  // Several lines: the node, each side's errors and placements, and the verdict.
  std::string summary() const;
};

// Finds the ConvTranspose producing `output_name` in `original` and its replacement in `rewritten`: the nodes
// that produce `output_name` there, walking back to the ConvTranspose's input name (weights may come from
// initializers, Constant or Identity nodes on either side). Errors when either side cannot be isolated, the
// node is not a 2-D ConvTranspose, or an executor fails; a numeric mismatch is a result with passed == false.
core::Result<NodeVerification> verify_node(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                           const std::string& output_name, const std::vector<int64_t>& input_shape,
                                           uint64_t seed, const Tolerances& tolerances);

}  // namespace dwdeconv::runtime_check
