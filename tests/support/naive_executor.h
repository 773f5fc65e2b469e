// A naive, double-precision ONNX executor for tests.
//
// It walks a graph in node order and evaluates each node with the obvious loops (core/reference.h), so that the
// original and the rewritten model can be compared on the same inputs. It knows only the ops the rewrite
// reads or emits: ConvTranspose, Conv, Pad, Concat, DepthToSpace, Shape, ConstantOfShape, Relu, Identity,
// Constant, If and Loop, and what hand-written upsamplers use: Resize (nearest, by scales or sizes), Mul,
// Reshape, Slice, Transpose and Cast, and for StyleGAN2-ADA's zero insertion: Pad of any rank, Unsqueeze,
// Expand, Tile, Sub and Gather of a shape. Anything else, or an attribute value it does not implement, throws std::runtime_error
// naming the node.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/reference.h"

namespace dwdeconv::test {

// A dense tensor of any rank, as doubles. Scalars have empty dims.
struct NaiveTensor {
  std::vector<int64_t> dims;
  std::vector<double> data;

  NaiveTensor() = default;
  NaiveTensor(std::vector<int64_t> dims_, std::vector<double> data_) : dims(std::move(dims_)), data(std::move(data_)) {}
  NaiveTensor(const core::Tensor4& t);  // NOLINT(google-explicit-constructor): tests pass Tensor4 inputs directly

  // The tensor as NCHW; throws unless the rank is 4.
  core::Tensor4 as_tensor4() const;
};

// A scalar BOOL value, e.g. an If condition fed as a graph input.
NaiveTensor bool_scalar(bool value);

// Runs the model's main graph on `inputs` (graph inputs that are not initializers) and returns every graph
// output by name. Initializers that are also graph inputs take the fed value when one is given.
std::map<std::string, NaiveTensor> run_naive(const onnx::ModelProto& model, const std::map<std::string, NaiveTensor>& inputs);

// ONNX ConvTranspose pads for one axis, straight from the operator's schema text:
//   output_shape given: total = s*(H-1) + op + ((k-1)*d+1) - out; SAME_UPPER puts total/2 at the begin,
//   anything else puts total - total/2 at the begin (total/2 rounds down, as in ONNX's Python reference).
//   auto_pad SAME_* alone means out = H*s. output_size < 0 means no output_shape.
// Returns {begin, end}. Written independently of core/geometry.h on purpose.
std::pair<int64_t, int64_t> naive_deconv_pads(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, int64_t output_padding,
                                              const std::string& auto_pad, int64_t explicit_begin, int64_t explicit_end,
                                              int64_t output_size);

}  // namespace dwdeconv::test
