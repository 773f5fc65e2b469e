// The helpers of ops.h that are not kernels: value reading, layout conversion, broadcasting.
#include "ops/ops.h"

#include <algorithm>

#include "ops/kernels.h"

namespace dwdeconv::ops {

using namespace detail;  // the kernels and helpers of reference_kernels.h

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

}  // namespace dwdeconv::ops
