#include "ops/ops.h"

#include <algorithm>

#include "ops/kernels.h"

namespace dwdeconv::ops {

using namespace detail;  // the kernels and helpers of reference_kernels.h

namespace {

const std::vector<std::string> kSupportedOps = {
    "Add", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "Constant", "ConstantOfShape", "Conv",
    "ConvTranspose", "DepthToSpace", "Div", "Equal", "Erf", "Exp", "Expand", "Flatten", "Gather", "Gemm",
    "GlobalAveragePool", "Identity", "InstanceNormalization", "LeakyRelu", "MatMul", "MaxPool", "Mul", "Neg", "Pad",
    "Pow", "ReduceMax", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Resize", "Shape", "Sigmoid", "Slice",
    "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Tanh", "Tile", "Transpose", "Unsqueeze", "Where"};

}  // namespace

const std::vector<std::string>& supported_ops() { return kSupportedOps; }

bool is_supported_op(const std::string& op_type) {
  return std::find(kSupportedOps.begin(), kSupportedOps.end(), op_type) != kSupportedOps.end();
}

std::vector<int64_t> int_values(const Tensor& tensor) {
  if (!tensor.is_float()) return tensor.i;
  std::vector<int64_t> v;
  for (float x : tensor.f) v.push_back(truncate_to_int64(x));  // defined for any float, unlike a cast
  return v;
}

namespace {

// dst[col][row] = src[row][col] for a rows x cols matrix, in square tiles so that both sides stream through the
// cache (a plain double loop walks one side with a stride and reloads each cache line per element when large).
void transpose_2d(const float* src, float* dst, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
    }
  }
}

}  // namespace

void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w) {
  // Per image, [C, H*W] -> [H*W, C].
  const int64_t hw = h * w;
  for (int64_t in = 0; in < n; ++in) transpose_2d(src + in * c * hw, dst + in * c * hw, c, hw);
}

void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t c, int64_t h, int64_t w) {
  // Per image, [H*W, C] -> [C, H*W].
  const int64_t hw = h * w;
  for (int64_t in = 0; in < n; ++in) transpose_2d(src + in * c * hw, dst + in * c * hw, hw, c);
}

core::Result<std::vector<int64_t>> broadcast_dims(const onnx::NodeProto& node, const std::vector<int64_t>& a,
                                                  const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t da = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    const int64_t db = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1) {
      return node_error(node, "shapes " + format_dims(a) + " and " + format_dims(b) + " do not broadcast");
    }
    out[k] = da == 1 ? db : da;
  }
  return out;
}

core::Status run_reference_node(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& in,
                                const std::vector<Tensor*>& out) {
  const std::string& op = node.op_type();
  if (!is_supported_op(op)) return node_error(node, "op " + op + " is not supported by the executor");
  if (out.empty() || out[0] == nullptr) return node_error(node, "has no output");
  Tensor& y = *out[0];
  if (op == "Constant") return run_constant(node, y);
  if (in.empty() || in[0] == nullptr) return node_error(node, "missing its first input");
  const Tensor& x = *in[0];
  auto need = [&](size_t k) -> core::Status {
    if (k >= in.size() || in[k] == nullptr) return node_error(node, "missing input " + std::to_string(k));
    return core::Ok{};
  };
  if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "Tanh" || op == "Identity" || op == "Neg" ||
      op == "Sqrt" || op == "Erf" || op == "Exp") {
    return run_unary(node, x, y);
  }
  if (op == "Clip") return run_clip(node, in, y);
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") { RC_CHECK(need(1)); return run_binary(node, x, *in[1], y); }
  if (op == "Pow") { RC_CHECK(need(1)); return run_pow(node, x, *in[1], y); }
  if (op == "Equal") { RC_CHECK(need(1)); return run_equal(node, x, *in[1], y); }
  if (op == "Where") { RC_CHECK(need(1)); RC_CHECK(need(2)); return run_where(node, x, *in[1], *in[2], y); }
  if (op == "Cast") return run_cast(node, x, y);
  if (op == "Reshape") { RC_CHECK(need(1)); return run_reshape(node, x, *in[1], y); }
  if (op == "Flatten") return run_flatten(node, x, y);
  if (op == "Transpose") return run_transpose(node, x, y);
  if (op == "Squeeze") return run_squeeze(node, in, y);
  if (op == "Unsqueeze") return run_unsqueeze(node, in, y);
  if (op == "Shape") return run_shape(node, x, y);
  if (op == "ConstantOfShape") return run_constant_of_shape(node, x, y);
  if (op == "Gather") { RC_CHECK(need(1)); return run_gather(node, x, *in[1], y); }
  if (op == "Slice") return run_slice(node, in, y);
  if (op == "Concat") return run_concat(node, in, y);
  if (op == "Pad") return run_pad(node, in, y);
  if (op == "DepthToSpace") return run_depth_to_space(node, x, y);
  if (op == "Expand") { RC_CHECK(need(1)); return run_expand(node, x, *in[1], y); }
  if (op == "Tile") return run_tile(node, opset, in, y);
  if (op == "Split") return run_split(node, in, out);
  if (op == "BatchNormalization") {
    for (size_t k = 1; k < out.size(); ++k) {
      if (out[k] != nullptr) return node_error(node, "training outputs (mean, var) are not supported");
    }
    return run_batch_norm(node, in, y);
  }
  if (op == "InstanceNormalization") return run_instance_norm(node, in, y);
  if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax") return run_reduce(node, opset, in, y);
  if (op == "Softmax") return run_softmax(node, opset, x, y);
  if (op == "Conv") return run_conv(node, in, y, false);
  if (op == "ConvTranspose") return run_conv(node, in, y, true);
  if (op == "MaxPool" || op == "AveragePool") {
    if (out.size() > 1 && out[1] != nullptr) return node_error(node, "the Indices output is not supported");
    return run_pool(node, x, y);
  }
  if (op == "GlobalAveragePool") return run_global_average_pool(node, x, y);
  if (op == "MatMul") { RC_CHECK(need(1)); return run_matmul(node, x, *in[1], y); }
  if (op == "Gemm") { RC_CHECK(need(1)); return run_gemm(node, in, y); }
  if (op == "Resize") return run_resize(node, opset, in, y);
  return node_error(node, "op " + op + " has no reference kernel");
}

}  // namespace dwdeconv::ops
