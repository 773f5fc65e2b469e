// Output shapes as the ONNX spec and ONNX Runtime compute them, for the op families where libonnx 1.12's inference
// computes another (tests/e2e/check_shape_rules_ort.py finds them, op by op against ONNX Runtime):
//   - ceil_mode pools: the last window must start inside the input or its left padding (libonnx drops that rule);
//   - ConvTranspose with auto_pad SAME_*: out = in * stride, output_padding not added (libonnx adds it);
//   - Slice with a negative step and an end beyond the dim (libonnx clamps it to the dim, not to dim - 1);
//   - opsets newer than libonnx's 17 schemas (AveragePool's dilations, LpPool's ceil_mode), which it reads with the
//     older schema and so without the new attribute.
// Where libonnx and these rules give a dim different values, shape propagation (rewrite/shape_propagation.h) leaves it
// unknown: a runtime's kernel computes the spec's, but its optimiser may fold a Shape of the tensor from ONNX's own
// inference (ONNX Runtime does), so no rewrite may decide on either.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <onnx/onnx_pb.h>

namespace dwdeconv::rewrite {

// The value of a node's input `k` when it is a constant (Slice's starts, ends, axes and steps), else nullopt.
using ConstantInput = std::function<std::optional<std::vector<int64_t>>(int k)>;

// The spec's output types of `node` at default-domain `opset`, from the types of its inputs (nullptr where not known)
// and its constant inputs: each output dim is known (a value), copied from an input dim (batch and channels, a
// symbol stays the symbol), or left unknown where it depends on what is not known or the runtimes may differ.
// nullopt when `node` is not of a family this file computes, or not even the output rank is known.
std::optional<std::vector<onnx::TypeProto>> spec_output_types(const onnx::NodeProto& node, int64_t opset,
                                                              const std::vector<const onnx::TypeProto*>& inputs,
                                                              const ConstantInput& constant);

// Whether `inferred` claims a dim (a value) that `spec` does not hold there, or a rank that it does not have: where
// the inferred type must not be relied on.
bool contradicts(const onnx::TypeProto& inferred, const onnx::TypeProto& spec);

}  // namespace dwdeconv::rewrite
