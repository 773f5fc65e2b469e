// Elementwise steps: Relu, LeakyRelu, Sigmoid, HardSwish, Clip, Neg, Sqrt and Pow by 2; PRelu by a constant slope;
// Add, Sub, Mul and Div; Softmax over rows; inference BatchNormalization.
#include <algorithm>
#include <cmath>

#include "internal.h"
#include "onnx_io/attributes.h"
#include "ops/ops.h"
#include "step.h"

namespace dwdeconv::runtime_check::detail {
namespace {

// Relu, LeakyRelu, Sigmoid, HardSwish, Clip, Neg, Sqrt and Pow by 2 (square) as one flat [numel, 1] batch, in
// whatever layout the input has.
class UnaryStep : public XnnStep {
 public:
  UnaryStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup (unary)") { y_ = y; }

  core::Status plan(Values& v, int x, float lo, float hi) {
    const std::string& op = node_.op_type();
    xnn_operator_t raw = nullptr;
    xnn_status status;
    if (op == "LeakyRelu") {
      const auto* a = onnx_io::find_attribute(node_, "alpha");
      status = xnn_create_leaky_relu_nc_f32(1, 1, 1, a != nullptr ? a->f() : 0.01f, 0, &raw);
    } else if (op == "Sigmoid") {
      status = xnn_create_sigmoid_nc_f32(1, 1, 1, 0, &raw);
    } else if (op == "HardSwish") {
      status = xnn_create_hardswish_nc_f32(1, 1, 1, 0, &raw);
    } else if (op == "Neg") {
      status = xnn_create_negate_nc_f32(1, 1, 1, 0, &raw);
    } else if (op == "Sqrt") {
      status = xnn_create_square_root_nc_f32(1, 1, 1, 0, &raw);
    } else if (op == "Pow") {
      status = xnn_create_square_nc_f32(1, 1, 1, 0, &raw);
    } else {
      status = xnn_create_clamp_nc_f32(1, 1, 1, lo, hi, 0, &raw);
    }
    if (status != xnn_status_success) return xnn_failure(node_, ("xnn_create for " + op).c_str(), status);
    add_operator(raw);
    y_layout_ = v.layout(x);
    add_input(v, x, y_layout_);
    y_dims_ = v.peek(x).dims;
    return core::Ok{};
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    const std::string& op = node_.op_type();
    size_t n = 1;
    for (int64_t d : y_dims_) n *= static_cast<size_t>(d);
    if (op == "LeakyRelu") return xnn_setup_leaky_relu_nc_f32(ops_[0].get(), n, x[0], y, threadpool);
    if (op == "Sigmoid") return xnn_setup_sigmoid_nc_f32(ops_[0].get(), n, x[0], y, threadpool);
    if (op == "HardSwish") return xnn_setup_hardswish_nc_f32(ops_[0].get(), n, x[0], y, threadpool);
    if (op == "Neg") return xnn_setup_negate_nc_f32(ops_[0].get(), n, x[0], y, threadpool);
    if (op == "Sqrt") return xnn_setup_square_root_nc_f32(ops_[0].get(), n, x[0], y, threadpool);
    if (op == "Pow") return xnn_setup_square_nc_f32(ops_[0].get(), n, x[0], y, threadpool);
    return xnn_setup_clamp_nc_f32(ops_[0].get(), n, x[0], y, threadpool);
  }
};

// PRelu by a constant slope that varies along at most one axis, the innermost in storage: rows of `channels`
// elements, each multiplied where negative by the slope of its position in the row (XNNPACK packs the slopes at
// creation). A one-element slope is one channel.
class PReluStep : public XnnStep {
 public:
  PReluStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup_prelu_nc_f32") { y_ = y; }

  core::Status plan(Values& v, int x, Layout layout, const std::vector<float>& slopes) {
    xnn_operator_t raw = nullptr;
    const size_t channels = slopes.size();
    const xnn_status status = xnn_create_prelu_nc_f32(channels, channels, channels, slopes.data(), 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_prelu_nc_f32", status);
    add_operator(raw);
    y_layout_ = layout;
    add_input(v, x, layout);
    y_dims_ = v.peek(x).dims;
    rows_ = static_cast<size_t>(v.peek(x).numel()) / channels;
    return core::Ok{};
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    return xnn_setup_prelu_nc_f32(ops_[0].get(), rows_, x[0], y, threadpool);
  }

 private:
  size_t rows_ = 0;
};

// Softmax over rows of `channels` contiguous elements, in ONNX order (an NHWC value is read NCHW).
class SoftmaxStep : public XnnStep {
 public:
  SoftmaxStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup_softmax_nc_f32") {
    y_ = y;
    y_layout_ = Layout::kNchw;
  }

  core::Status plan(Values& v, int x, size_t channels) {
    xnn_operator_t raw = nullptr;
    const xnn_status status = xnn_create_softmax_nc_f32(channels, channels, channels, 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_softmax_nc_f32", status);
    add_operator(raw);
    add_input(v, x, Layout::kNchw);
    y_dims_ = v.peek(x).dims;
    rows_ = static_cast<size_t>(v.peek(x).numel()) / channels;
    return core::Ok{};
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    return xnn_setup_softmax_nc_f32(ops_[0].get(), rows_, x[0], y, threadpool);
  }

 private:
  size_t rows_ = 0;
};

// True when a tensor padded to [1.., C, H, W] has the same bytes in NCHW and NHWC order (C == 1 or H == W == 1).
bool same_bytes_in_nhwc(const std::vector<int64_t>& dims) {
  if (dims.size() > 4) return false;
  std::vector<int64_t> padded(4 - dims.size(), 1);
  padded.insert(padded.end(), dims.begin(), dims.end());
  return padded[0] == 1 && (padded[1] == 1 || (padded[2] == 1 && padded[3] == 1));
}

// Add, Sub, Mul, Div on float with numpy broadcasting (XNNPACK's *_nd_f32, up to 6 dims).
class BinaryStep : public XnnStep {
 public:
  BinaryStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup (binary)") { y_ = y; }

  core::Status plan(Values& v, int a_id, int b_id) {
    const Tensor& a = v.peek(a_id);
    const Tensor& b = v.peek(b_id);
    RC_ASSIGN(y_dims_, broadcast_dims(node_, a.dims, b.dims));
    if (y_dims_.size() > XNN_MAX_TENSOR_DIMS || a.numel() == 0 || b.numel() == 0) return node_error(node_, "rank or size");
    // Work in NHWC when the rank-4 operands are NHWC and the other operand has the same bytes either way.
    const Layout la = v.layout(a_id), lb = v.layout(b_id);
    y_layout_ = Layout::kNchw;
    if (la == Layout::kNhwc || lb == Layout::kNhwc) {
      const bool a_ok = la == Layout::kNhwc || same_bytes_in_nhwc(a.dims);
      const bool b_ok = lb == Layout::kNhwc || same_bytes_in_nhwc(b.dims);
      if (a_ok && b_ok && y_dims_.size() == 4) y_layout_ = Layout::kNhwc;
    }
    a_shape_ = operand_shape(a.dims);
    b_shape_ = operand_shape(b.dims);
    const std::string& op = node_.op_type();
    xnn_operator_t raw = nullptr;
    xnn_status status;
    if (op == "Add") status = xnn_create_add_nd_f32(kNoMin, kNoMax, 0, &raw);
    else if (op == "Sub") status = xnn_create_subtract_nd_f32(kNoMin, kNoMax, 0, &raw);
    else if (op == "Mul") status = xnn_create_multiply_nd_f32(kNoMin, kNoMax, 0, &raw);
    else status = xnn_create_divide_nd_f32(kNoMin, kNoMax, 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, ("xnn_create for " + op).c_str(), status);
    add_operator(raw);
    add_input(v, a_id, y_layout_);
    add_input(v, b_id, y_layout_);
    return core::Ok{};
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    const std::string& op = node_.op_type();
    auto setup = op == "Add"   ? xnn_setup_add_nd_f32
                 : op == "Sub" ? xnn_setup_subtract_nd_f32
                 : op == "Mul" ? xnn_setup_multiply_nd_f32
                               : xnn_setup_divide_nd_f32;
    return setup(ops_[0].get(), a_shape_.size(), a_shape_.data(), b_shape_.size(), b_shape_.data(), x[0], x[1], y, threadpool);
  }

 private:
  // An operand's storage dims in this step's layout (a low-rank operand is padded to rank 4 first).
  std::vector<size_t> operand_shape(const std::vector<int64_t>& dims) const {
    if (y_layout_ == Layout::kNchw) return storage_shape(dims, Layout::kNchw);
    std::vector<int64_t> padded(4 - std::min<size_t>(4, dims.size()), 1);
    padded.insert(padded.end(), dims.begin(), dims.end());
    return storage_shape(padded, Layout::kNhwc);
  }

  std::vector<size_t> a_shape_, b_shape_;
};

// BatchNormalization (inference) as a per-channel affine map in either layout.
class BatchNormStep : public Step {
 public:
  BatchNormStep(const onnx::NodeProto& node, int x, std::vector<int> params, int y)
      : node_(node), x_(x), params_(std::move(params)), y_(y) {}

  core::Status run(Values& v) override {
    const Layout layout = v.layout(x_);
    const Tensor& x = v.read(x_, layout);
    const int64_t c = x.dims[1];
    scale_.resize(static_cast<size_t>(c));
    shift_.resize(static_cast<size_t>(c));
    const auto* eps_attr = onnx_io::find_attribute(node_, "epsilon");
    const double epsilon = eps_attr != nullptr ? eps_attr->f() : 1e-5;
    const Tensor& gamma = v.peek(params_[0]);
    const Tensor& beta = v.peek(params_[1]);
    const Tensor& mean = v.peek(params_[2]);
    const Tensor& var = v.peek(params_[3]);
    for (int64_t k = 0; k < c; ++k) {
      const double s = gamma.get(k) / std::sqrt(var.get(k) + epsilon);
      scale_[static_cast<size_t>(k)] = static_cast<float>(s);
      shift_[static_cast<size_t>(k)] = static_cast<float>(beta.get(k) - mean.get(k) * s);
    }
    Tensor& y = v.write(y_, layout, x.dtype, x.dims);
    int64_t inner = 1;
    for (size_t a = 2; a < x.dims.size(); ++a) inner *= x.dims[a];
    const int64_t total = x.numel();
    for (int64_t k = 0; k < total; ++k) {
      // NCHW: channel (k / inner) % C; NHWC: k % C.
      const auto ch = static_cast<size_t>(layout == Layout::kNhwc ? k % c : (k / inner) % c);
      y.f[static_cast<size_t>(k)] = x.f[static_cast<size_t>(k)] * scale_[ch] + shift_[ch];
    }
    return core::Ok{};
  }

  void accesses(const Values& v, std::vector<Access>& out) const override {
    out.push_back(Access{x_, v.layout(x_), false});
    for (int id : params_) out.push_back(Access{id, v.layout(id), false});
    out.push_back(Access{y_, v.layout(x_), true});
  }

 private:
  onnx::NodeProto node_;
  int x_;
  std::vector<int> params_;
  int y_;
  std::vector<float> scale_, shift_;
};

}  // namespace

ClampRange clamp_range(const NodeIo& io, const Values& v) {
  ClampRange r;
  if (io.node.op_type() == "Relu") {
    r.lo = 0.0f;
    return r;
  }
  if (onnx_io::find_attribute(io.node, "min") != nullptr || onnx_io::find_attribute(io.node, "max") != nullptr) {
    r.lo = attr_float_or(io.node, "min", -std::numeric_limits<float>::max());
    r.hi = attr_float_or(io.node, "max", std::numeric_limits<float>::max());
  }
  for (size_t k = 1; k < 3; ++k) {
    if (io.input(k) < 0) continue;
    if (!v.constant(io.input(k))) return ClampRange{kNoMin, kNoMax, "non-constant bounds"};
    if (v.peek(io.input(k)).numel() > 0) (k == 1 ? r.lo : r.hi) = static_cast<float>(v.peek(io.input(k)).get(0));
  }
  if (!(r.lo < r.hi)) return ClampRange{kNoMin, kNoMax, "min >= max"};
  return r;
}

core::Result<Built> make_unary_step(const NodeIo& io, Values& v) {
  const std::string& op = io.node.op_type();
  ClampRange range;
  if (op == "Relu" || op == "Clip") range = clamp_range(io, v);
  if (!range.declined.empty()) return declined(range.declined);
  if (v.peek(io.input(0)).numel() == 0) return declined("empty tensor");
  auto step = std::make_unique<UnaryStep>(io.node, io.out[0]);
  RC_CHECK(step->plan(v, io.input(0), range.lo, range.hi));
  return built(std::move(step));
}

core::Result<Built> make_pow_step(const NodeIo& io, Values& v) {
  // Only x^2, XNNPACK's square, with the same bits as the reference (x * x rounded once to f32).
  const int e = io.input(1);
  if (e < 0 || !v.constant(e) || !v.peek(e).is_float()) return declined("the exponent is not a float constant");
  const Tensor& exponent = v.peek(e);
  if (exponent.numel() != 1 || exponent.dims.size() > v.peek(io.input(0)).dims.size() || exponent.f[0] != 2.0f) {
    return declined("only a constant exponent of 2 runs on XNNPACK (square)");
  }
  return make_unary_step(io, v);
}

core::Result<Built> make_prelu_step(const NodeIo& io, Values& v) {
  const int x_id = io.input(0), slope_id = io.input(1);
  if (slope_id < 0 || !v.constant(slope_id)) return declined("the slope is not a constant");
  const Tensor& x = v.peek(x_id);
  const Tensor& slope = v.peek(slope_id);
  if (!slope.is_float() || x.numel() == 0 || slope.numel() == 0) return declined("the slope is not float, or a tensor is empty");
  RC_ASSIGN(const auto out_dims, broadcast_dims(io.node, x.dims, slope.dims));
  if (out_dims != x.dims) return declined("the slope does not broadcast to X");  // the reference kernel says why
  // The one axis of x along which the slope varies (right-aligned; -1 when it is one value).
  const size_t offset = x.dims.size() - slope.dims.size();
  int64_t varying = -1;
  for (size_t a = 0; a < slope.dims.size(); ++a) {
    if (slope.dims[a] == 1) continue;
    if (varying >= 0) return declined("the slope varies along more than one axis");
    varying = static_cast<int64_t>(offset + a);
  }
  const auto rank = static_cast<int64_t>(x.dims.size());
  // Per channel of a rank-4 x: rows are NHWC pixels. Along the last axis: rows are ONNX-order rows.
  Layout layout = v.layout(x_id);
  if (varying == 1 && rank == 4) layout = Layout::kNhwc;
  else if (varying == rank - 1) layout = Layout::kNchw;
  else if (varying >= 0) return declined("the slope varies along an axis that is not innermost in either layout");
  const std::vector<float> slopes(slope.f.begin(), slope.f.end());  // in the order of that one axis
  auto step = std::make_unique<PReluStep>(io.node, io.out[0]);
  RC_CHECK(step->plan(v, x_id, layout, slopes));
  return built(std::move(step));
}

core::Result<Built> make_softmax_step(const NodeIo& io, Values& v) {
  const Tensor& x = v.peek(io.input(0));
  const auto rank = static_cast<int64_t>(x.dims.size());
  RC_ASSIGN(int64_t axis, onnx_io::get_int(io.node, "axis", io.opset < 13 ? 1 : -1));
  if (rank == 0 || !normalize_axis(axis, rank)) return declined("axis out of range");
  // From opset 13 one axis, which must be the last; before, every axis from `axis` on, coerced into one row.
  if (io.opset >= 13 && axis != rank - 1) return declined("not the innermost axis");
  int64_t channels = 1;
  for (int64_t a = axis; a < rank; ++a) channels *= x.dims[static_cast<size_t>(a)];
  if (channels == 0 || x.numel() == 0) return declined("empty tensor");
  auto step = std::make_unique<SoftmaxStep>(io.node, io.out[0]);
  RC_CHECK(step->plan(v, io.input(0), static_cast<size_t>(channels)));
  return built(std::move(step));
}

core::Result<Built> make_binary_step(const NodeIo& io, Values& v) {
  if (io.input(1) < 0 || !v.peek(io.input(1)).is_float()) return declined("integer data");
  auto step = std::make_unique<BinaryStep>(io.node, io.out[0]);
  auto planned = step->plan(v, io.input(0), io.input(1));
  if (!planned.ok()) return declined(planned.error().message);
  return built(std::move(step));
}

std::unique_ptr<Step> make_batch_norm_step(const NodeIo& io, const Values& v) {
  const auto& in = io.in;
  const auto& out = io.out;
  const auto training = onnx_io::get_int(io.node, "training_mode", 0);
  if (in.size() >= 5 && v.peek(in[0]).is_float() && v.peek(in[0]).dims.size() >= 2 &&
      std::all_of(in.begin() + 1, in.begin() + 5, [](int id) { return id >= 0; }) &&
      (out.size() < 2 || std::all_of(out.begin() + 1, out.end(), [](int id) { return id < 0; })) && training.ok() &&
      training.value() == 0) {
    return std::make_unique<BatchNormStep>(io.node, in[0], std::vector<int>(in.begin() + 1, in.begin() + 5), out[0]);
  }
  return nullptr;
}

}  // namespace dwdeconv::runtime_check::detail
