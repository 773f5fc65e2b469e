// Per-node fallback check: verifies one replaced upsampler on its own.
//
// The original's region (a ConvTranspose, run through XNNPACK's deconvolution, or a hand-written form such as
// nearest Resize x mask, Pad, Conv) and its replacement (the Pads, Convs, Concat and DepthToSpace that now produce
// the same output) both run through XNNPACK on the same seeded random input, and both are compared with an
// expected output computed another way: core::conv_transpose2d_reference in double for a lone ConvTranspose, the
// original region on the executor's plain reference kernels otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "onnx_io/shapes.h"
#include "runtime_check/compare.h"

namespace dwdeconv::runtime_check {

struct NodeVerification {
  std::string node;                  // the original node producing the output, e.g. "ConvTranspose 'up1'"
  std::vector<int64_t> input_shape;  // X as fed to both graphs
  std::string expected;              // what both are compared with, e.g. "the double-precision ConvTranspose"
  OutputComparison original;         // original region (XNNPACK) vs the expected output
  OutputComparison rewritten;        // replacement subgraph (XNNPACK) vs the expected output
  size_t original_nodes = 0;
  std::string original_placement;  // Executor::placement_summary() of each side
  std::string rewritten_placement;
  size_t replacement_nodes = 0;
  size_t rewritten_xnnpack_ops = 0;  // replacement nodes that ran on XNNPACK / on reference kernels
  size_t rewritten_reference_ops = 0;
  // Model runs over every executor the check created: one each, the run creating it (Executor::last_outputs()).
  size_t runs = 0;
  bool passed = false;  // both comparisons passed
  // Several lines: the node, each side's errors and placements, and the verdict.
  std::string summary() const;
};

// Isolates in each model the nodes that compute `output_name` from `input_name` and constants (weights may come
// from initializers, Constant or Identity nodes and constant chains on either side), runs both on a random input of
// `input_shape` and compares them with the expected output (see above). Errors when either side cannot be isolated,
// the original's node producing `output_name` is no 2-D Conv or ConvTranspose, an executor fails, or a value of
// either side's run holds inf or NaN (Executor::first_non_finite(), kCannotVerify); a numeric mismatch is a result
// with passed == false. `model_types` are the original's types as its graph inputs declare
// them (onnx_io::infer_types, before any --input-shape): when they let `input_name` take other sizes than
// `input_shape`, an original region whose output size a constant fixes (Resize by sizes, a Slice ending at a
// literal, ...) is an error (kCannotVerify) naming the node, since one size cannot show that the two sides agree at
// every other.
core::Result<NodeVerification> verify_node(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                           const std::string& output_name, const std::string& input_name,
                                           const std::vector<int64_t>& input_shape, const onnx_io::ScopedTypes& model_types, uint64_t seed,
                                           const Tolerances& tolerances);

}  // namespace dwdeconv::runtime_check
