// Normalization and reduction reference kernels.
#include <algorithm>
#include <cmath>

#include "runtime_check/reference_kernels.h"

namespace dwdeconv::runtime_check::detail {

core::Status run_batch_norm(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, Tensor& y) {
  RC_ASSIGN(const int64_t training, attr_int(node, "training_mode", 0));
  if (training != 0) return node_error(node, "training_mode=1 is not supported");
  if (in.size() < 5 || std::any_of(in.begin(), in.begin() + 5, [](const Tensor* t) { return t == nullptr; })) {
    return node_error(node, "needs X, scale, B, mean and var");
  }
  const Tensor& x = *in[0];
  const float epsilon = attr_float(node, "epsilon", 1e-5f);
  if (x.dims.size() < 2) return node_error(node, "input rank below 2");
  const int64_t c = x.dims[1];
  int64_t inner = 1;
  for (size_t a = 2; a < x.dims.size(); ++a) inner *= x.dims[a];
  y.reshape(x.dtype, x.dims);
  for (int64_t k = 0; k < x.numel(); ++k) {
    const int64_t ch = (k / inner) % c;
    const double scale = in[1]->get(ch) / std::sqrt(in[4]->get(ch) + epsilon);
    y.f[static_cast<size_t>(k)] = static_cast<float>((x.f[static_cast<size_t>(k)] - in[3]->get(ch)) * scale + in[2]->get(ch));
  }
  return core::Ok{};
}

}  // namespace dwdeconv::runtime_check::detail
