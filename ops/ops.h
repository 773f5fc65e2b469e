// The op library: ONNX op semantics written once, for the executor (runtime_check/, which runs a node here when
// XNNPACK has no operator for it, and checks against these kernels) and for the constant folder (rewrite/). One
// table holds, per op, the versions and attributes its kernel implements; a node outside that is refused with a
// reason, never run as if the attribute were absent. Also the ONNX attribute rules shared with the XNNPACK steps
// (conv/pool padding, ConvTranspose output_shape, Resize geometry).
//
// Kernels work on logical-order (NCHW) tensors in float or int64 and are written for clarity, not speed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/reference.h"
#include "core/result.h"
#include "ops/tensor.h"

namespace dwdeconv::ops {

// The most elements a kernel creates by default (8 GiB of float): a hostile shape or attribute gets an error naming
// the node instead of an allocation failure.
constexpr int64_t kMaxReferenceElements = int64_t{1} << 31;

// The newest opset whose op versions the table knows (ONNX 1.23's schemas). A model importing a newer one is not
// run: one of its ops may have a version the table has never seen.
constexpr int64_t kKnownThroughOpset = 28;

// What a kernel runs with: the model's default-domain opset, and the most elements a value it creates may have.
struct OpContext {
  int64_t opset = 0;
  int64_t max_elements = kMaxReferenceElements;
};

using Inputs = std::vector<const Tensor*>;  // a missing optional input is nullptr
using Outputs = std::vector<Tensor*>;       // an output nobody reads may be nullptr
// A kernel: computes every non-null output, resizing it in place (storage is reused when the element count is
// unchanged).
using KernelFunction = core::Status(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out);

// One attribute a kernel reads, and the values it implements. An empty list takes every value of the type. An absent
// attribute takes its default, so a list must hold the op's defaults (the schema sweep test checks this).
struct AttributeSpec {
  std::string name;
  std::vector<std::string> strings;  // STRING attributes
  std::vector<int64_t> ints;         // INT attributes
};

// What the kernel of one op implements.
struct OpSpec {
  std::string op_type;
  // Every version of the op (its schemas' since_version) through kKnownThroughOpset, oldest first: a node in a
  // model importing opset o has the newest version <= o.
  std::vector<int64_t> versions;
  int64_t first_implemented = 1;          // versions from this one on are implemented; older ones are refused
  size_t required_inputs = 1;             // inputs that must be present
  size_t max_inputs = 1;                  // inputs the kernel reads; a node with a later non-empty input is refused
  size_t max_outputs = 1;                 // outputs the kernel computes; a later output that is read is refused
  std::vector<AttributeSpec> attributes;  // every attribute the kernel reads; any other on a node is refused
  // Attributes of the op's schemas that the kernel does not implement (a node setting one is refused, as any
  // unlisted attribute is). Listed so that the schema sweep test can tell a decision from an oversight.
  std::vector<std::string> refused;
  KernelFunction* kernel = nullptr;
  // The newest version implemented (0: every version from first_implemented on). Newer ones are refused, e.g. a
  // version ONNX deprecated (Upsample-10), which runtimes refuse too.
  int64_t last_implemented = 0;
};

// The table, one entry per default-domain op, by op type.
const std::vector<OpSpec>& op_table();
const OpSpec* find_op(const std::string& op_type);

// The default-domain op types the table runs.
const std::vector<std::string>& supported_ops();
bool is_supported_op(const std::string& op_type);

// The version of `spec`'s op that a model importing `opset` uses (0 when the op does not exist there yet).
int64_t op_version(const OpSpec& spec, int64_t opset);

// Why `node`, in a model importing `opset`, is outside what its kernel implements: another domain, an op not in
// the table, an opset newer than kKnownThroughOpset, a version not implemented, too many inputs, an attribute or
// attribute value the kernel does not implement ("Resize 'r': attribute antialias = 1 is not implemented (only 0)").
// An output beyond the kernel's counts when it is named. Empty when the kernel implements the node.
std::string unsupported_reason(const onnx::NodeProto& node, int64_t opset);

// Why attribute `a` is outside `implemented` (its name is not listed, or its value is not among the listed values),
// or "" when it is inside.
std::string attribute_outside(const std::vector<AttributeSpec>& implemented, const onnx::AttributeProto& a);

// Runs `node`: refuses it (kInvalidModel naming the node and unsupported_reason) unless its kernel implements it,
// then computes every non-null output.
core::Status run_reference_node(const onnx::NodeProto& node, const OpContext& ctx, const Inputs& inputs, const Outputs& outputs);

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

// The 2-D parameters of the double-precision reference (core/reference.h) for a resolved ConvTranspose: a 1-D one as
// the 2-D one with a unit H axis (stride and dilation 1, no pads or output padding there).
core::ConvTranspose2dParams conv_transpose2d_params(const ConvGeometry& g);

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

// Resize's output size and per-axis scale (out/in when sizes are given), from its inputs for `opset`; also Upsample's,
// from its `scales` attribute (Upsample-7) or input (Upsample-9), each of which must be >= 1.
struct ResizeGeometry {
  std::vector<int64_t> output_dims;
  std::vector<double> scales;
  std::vector<double> roi;  // [starts..., ends...] or empty
};
core::Result<ResizeGeometry> resolve_resize(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& inputs);

// For a nearest Resize or Upsample: per axis, the input index each output index reads, exactly as run_resize maps it (-1 where
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
