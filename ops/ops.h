// Plain C++ kernels for every op the executor supports, and the ONNX attribute rules shared with the XNNPACK
// steps (conv/pool padding, ConvTranspose output_shape). Used by the executor (runtime_check/) and the constant folder (rewrite/).
//
// Kernels work on logical-order (NCHW) tensors in float or int64 and are written for clarity, not speed; the
// executor runs an op here only when XNNPACK has no operator for it (or for its dtype or attributes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "ops/tensor.h"

namespace dwdeconv::ops {

// The default-domain op types the executor runs. Any other op is an error at creation naming node and op.
const std::vector<std::string>& supported_ops();
bool is_supported_op(const std::string& op_type);

// Runs `node` (of a model importing `opset`). A missing optional input is nullptr. Each output is resized in
// place, reusing its storage when the element count is unchanged.
core::Status run_reference_node(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& inputs,
                                const std::vector<Tensor*>& outputs);

// Resolved geometry of a Conv or ConvTranspose over `spatial` axes (pads may come out negative only for a
// ConvTranspose whose output_shape is larger than its natural size).
struct ConvGeometry {
  size_t spatial = 0;
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, output_padding, output_size;
  int64_t group = 1;
};

// ONNX Conv: x [N, C, spatial...], w [C_out, C_in/group, k...]. auto_pad SAME_* gives out = ceil(in/s).
core::Result<ConvGeometry> resolve_conv(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims,
                                        const std::vector<int64_t>& w_dims);

// ONNX ConvTranspose: x [N, C_in, spatial...], w [C_in, C_out/group, k...]. With output_shape (or auto_pad
// SAME_*, which means out = in*s): total = s*(in-1) + op + (k-1)*d + 1 - out, SAME_UPPER puts total/2 at the
// begin, anything else puts total - total/2 at the begin (the spec's own formula).
core::Result<ConvGeometry> resolve_conv_transpose(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims,
                                                  const std::vector<int64_t>& w_dims);

// MaxPool / AveragePool geometry, including ceil_mode (a last window starting in the end padding is dropped).
struct PoolGeometry {
  size_t spatial = 0;
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end, output_size;
  bool count_include_pad = false;
};
core::Result<PoolGeometry> resolve_pool(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims);

// numpy broadcast of two shapes; an error names the node when they do not broadcast.
core::Result<std::vector<int64_t>> broadcast_dims(const onnx::NodeProto& node, const std::vector<int64_t>& a,
                                                  const std::vector<int64_t>& b);

// Resize's output size and per-axis scale (out/in when sizes are given), from its inputs for `opset`.
struct ResizeGeometry {
  std::vector<int64_t> output_dims;
  std::vector<double> scales;
  std::vector<double> roi;  // [starts..., ends...] or empty
};
core::Result<ResizeGeometry> resolve_resize(const onnx::NodeProto& node, int64_t opset,
                                            const std::vector<const Tensor*>& inputs);

// For a nearest Resize: per axis, the input index each output index reads, exactly as run_resize maps it (-1 where
// tf_crop_and_resize writes extrapolation_value). Lets a faster kernel prove it computes the same thing. Error
// unless mode is nearest.
core::Result<std::vector<std::vector<int64_t>>> nearest_resize_sources(const onnx::NodeProto& node, int64_t opset,
                                                                       const std::vector<const Tensor*>& inputs);

// Reads an int64 tensor's values as a vector (for pads, shapes, axes inputs).
std::vector<int64_t> int_values(const Tensor& tensor);

// Converts between NCHW and NHWC storage of a rank-4 tensor with logical dims [N, C, H, W].
void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w);
void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w);

}  // namespace dwdeconv::ops
