#include "runtime_check/executor.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include <pthreadpool.h>
#include <xnnpack.h>

#include "onnx_io/attributes.h"
#include "onnx_io/model_io.h"
#include "runtime_check/internal.h"
#include "runtime_check/reference_ops.h"
#include "runtime_check/tensor_io.h"

namespace dwdeconv::runtime_check {

using detail::node_error;

const char* placement_name(Placement placement) {
  switch (placement) {
    case Placement::kXnnpack: return "xnnpack";
    case Placement::kReference: return "reference";
    case Placement::kFolded: return "folded";
  }
  return "?";
}

namespace {

using XnnOperator = std::unique_ptr<xnn_operator, decltype(&xnn_delete_operator)>;
using ThreadPool = std::unique_ptr<pthreadpool, decltype(&pthreadpool_destroy)>;

constexpr float kNoMin = -std::numeric_limits<float>::infinity();
constexpr float kNoMax = std::numeric_limits<float>::infinity();

core::Status ensure_xnnpack_initialized() {
  static const xnn_status status = xnn_initialize(nullptr);
  if (status != xnn_status_success) {
    return core::invalid_model("xnn_initialize failed with status " + std::to_string(static_cast<int>(status)));
  }
  return core::Ok{};
}

// Storage order of a rank-4 float value. Dims are always logical [N, C, H, W].
enum class Layout { kNchw, kNhwc };

struct Slot {
  Tensor t;
  Layout layout = Layout::kNchw;
  bool defined = false;
  bool constant = false;
  uint64_t version = 0;
  Tensor converted;  // `t` in the other layout, valid while converted_version == version
  uint64_t converted_version = ~uint64_t{0};
};

bool layout_applies(const Tensor& t) { return t.is_float() && t.dims.size() == 4; }

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point start, Clock::time_point stop) {
  return std::chrono::duration<double, std::milli>(stop - start).count();
}

// The graph's values, indexed by slot id. The vector is sized once, so Tensor storage pointers stay put.
class Values {
 public:
  std::vector<Slot> slots;
  pthreadpool_t threadpool = nullptr;
  bool time_conversions = false;  // profiling: add each conversion's time to conversion_ms
  double conversion_ms = 0;

  // The value stored in `want` order (a cached conversion when the producer wrote the other one).
  const Tensor& read(int id, Layout want) {
    Slot& s = slots[static_cast<size_t>(id)];
    if (!layout_applies(s.t) || s.layout == want) return s.t;
    if (s.converted_version != s.version) {
      const Clock::time_point start = time_conversions ? Clock::now() : Clock::time_point{};
      const auto& d = s.t.dims;
      s.converted.reshape(s.t.dtype, d);
      if (want == Layout::kNhwc) nchw_to_nhwc(s.t.f.data(), s.converted.f.data(), d[0], d[1], d[2], d[3]);
      else nhwc_to_nchw(s.t.f.data(), s.converted.f.data(), d[0], d[1], d[2], d[3]);
      s.converted_version = s.version;
      if (time_conversions) conversion_ms += ms_between(start, Clock::now());
    }
    return s.converted;
  }
  Layout layout(int id) const {
    const Slot& s = slots[static_cast<size_t>(id)];
    return layout_applies(s.t) ? s.layout : Layout::kNchw;
  }
  const Tensor& peek(int id) const { return slots[static_cast<size_t>(id)].t; }
  bool constant(int id) const { return id >= 0 && slots[static_cast<size_t>(id)].constant; }
  // Storage for a new value of `id`; reuses the buffer when the size is unchanged.
  Tensor& write(int id, Layout layout, int32_t dtype, const std::vector<int64_t>& dims) {
    Slot& s = slots[static_cast<size_t>(id)];
    s.layout = layout;
    s.t.reshape(dtype, dims);
    s.defined = true;
    ++s.version;
    return s.t;
  }
  void touch(int id, Layout layout) {
    Slot& s = slots[static_cast<size_t>(id)];
    s.layout = layout;
    s.defined = true;
    ++s.version;
  }
};

class Step {
 public:
  virtual ~Step() = default;
  virtual core::Status run(Values& v) = 0;
};

core::Error xnn_failure(const onnx::NodeProto& node, const char* call, xnn_status status) {
  return node_error(node, std::string(call) + " failed with XNNPACK status " + std::to_string(static_cast<int>(status)));
}

// ---------------------------------------------------------------- reference step

class ReferenceStep : public Step {
 public:
  ReferenceStep(const onnx::NodeProto& node, int64_t opset, std::vector<int> in, std::vector<int> out,
                bool layout_preserving)
      : node_(node), opset_(opset), in_(std::move(in)), out_(std::move(out)), preserving_(layout_preserving) {}

  core::Status run(Values& v) override {
    // Elementwise ops with one data input keep the producer's layout; everything else reads NCHW.
    const Layout layout = preserving_ && in_[0] >= 0 ? v.layout(in_[0]) : Layout::kNchw;
    std::vector<const Tensor*> inputs;
    for (int id : in_) inputs.push_back(id < 0 ? nullptr : &v.read(id, inputs.empty() ? layout : Layout::kNchw));
    std::vector<Tensor*> outputs;
    for (int id : out_) outputs.push_back(id < 0 ? nullptr : &v.slots[static_cast<size_t>(id)].t);
    RC_CHECK(run_reference_node(node_, opset_, inputs, outputs));
    for (int id : out_) {
      if (id >= 0) v.touch(id, layout);
    }
    return core::Ok{};
  }

 private:
  onnx::NodeProto node_;
  int64_t opset_;
  std::vector<int> in_, out_;
  bool preserving_;
};

// Calls setup only when the bound pointers change (they stay put across runs, so normally once).
struct SetupCache {
  std::vector<const void*> pointers;
  bool changed(std::vector<const void*> now) {
    if (now == pointers) return false;
    pointers = std::move(now);
    return true;
  }
};

core::Status check_dims(const onnx::NodeProto& node, const Tensor& t, const std::vector<int64_t>& want) {
  if (t.dims != want) {
    return node_error(node, "input is " + format_dims(t.dims) + " but the plan was made for " + format_dims(want));
  }
  return core::Ok{};
}

// ---------------------------------------------------------------- Conv / ConvTranspose

// Tap counts this XNNPACK (Debian 0.0~git20220216, x86-64) has depthwise microkernels for. A depthwise Conv with
// any other count (1x2, 2x3, 4x4, or 1x1 with padding) falls back to a grouped GEMM per channel, 25 to 70 times
// slower (measured, C=64, 64x64). Newer XNNPACK runs every count on its multipass depthwise microkernels.
constexpr std::array<int64_t, 4> kDwconvTaps = {3, 4, 9, 25};

// The smallest kernel [kh', kw'] >= [kh, kw] whose tap count has a depthwise microkernel, or {kh, kw} when
// [kh, kw] already has one or nothing up to 25 taps does. A 1x1 kernel without padding is left alone (XNNPACK
// runs it as a per-channel multiply-add).
std::array<int64_t, 2> dwconv_kernel(int64_t kh, int64_t kw, bool padded) {
  const auto has_kernel = [](int64_t taps) {
    return std::find(kDwconvTaps.begin(), kDwconvTaps.end(), taps) != kDwconvTaps.end();
  };
  if (has_kernel(kh * kw) || (kh * kw == 1 && !padded)) return {kh, kw};
  std::array<int64_t, 2> best = {kh, kw};
  for (int64_t h = kh; h <= kDwconvTaps.back(); ++h) {
    for (int64_t w = kw; h * w <= kDwconvTaps.back(); ++w) {
      if (has_kernel(h * w) && (best == std::array<int64_t, 2>{kh, kw} || h * w < best[0] * best[1])) best = {h, w};
    }
  }
  return best;
}

class ConvStep : public Step {
 public:
  ConvStep(const onnx::NodeProto& node, bool transpose, int x, int w, int b, int y)
      : node_(node), transpose_(transpose), x_(x), w_(w), b_(b), y_(y) {}

  // zero_extend: a depthwise Conv whose tap count has no XNNPACK depthwise microkernel runs with its kernel
  // zero-extended at the bottom/right to one that has (dwconv_kernel), and its end pads grown to match, so the
  // output is unchanged (except that 0 * inf in the extra taps turns an infinite input into NaN).
  core::Status plan(Values& v, bool zero_extend) {
    const Tensor& x = v.peek(x_);
    const Tensor& w = v.peek(w_);
    x_dims_ = x.dims;
    w_dims_ = w.dims;
    if (transpose_) { RC_ASSIGN(g_, resolve_conv_transpose(node_, x.dims, w.dims)); }
    else { RC_ASSIGN(g_, resolve_conv(node_, x.dims, w.dims)); }
    adjustment_ = {0, 0};
    for (size_t a = 0; a < 2; ++a) {
      if (transpose_) {
        // A negative end pad (output_shape past the natural size) is extra output at the end: XNNPACK's adjustment.
        adjustment_[a] = g_.output_padding[a] + std::max<int64_t>(0, -g_.pads_end[a]);
        if (adjustment_[a] >= g_.strides[a]) return node_error(node_, "output_padding plus extra output reaches the stride");
      }
      if (g_.pads_begin[a] < 0 || (!transpose_ && g_.pads_end[a] < 0)) return node_error(node_, "negative begin pads");
    }
    y_dims_ = {x.dims[0], transpose_ ? w.dims[1] * g_.group : w.dims[0], g_.output_size[0], g_.output_size[1]};
    kernel_ = {g_.kernel[0], g_.kernel[1]};
    const bool depthwise = !transpose_ && w.dims[1] == 1 && w.dims[0] == g_.group && g_.group > 1;
    if (zero_extend && depthwise) {
      const bool padded = g_.pads_begin[0] != 0 || g_.pads_begin[1] != 0 || g_.pads_end[0] != 0 || g_.pads_end[1] != 0;
      kernel_ = dwconv_kernel(g_.kernel[0], g_.kernel[1], padded);
    }
    return create(v);
  }

  // "1x2 kernel zero-extended to 1x3 ..." when plan() extended the kernel; empty otherwise.
  std::string kernel_note() const {
    if (kernel_[0] == g_.kernel[0] && kernel_[1] == g_.kernel[1]) return {};
    return std::to_string(g_.kernel[0]) + "x" + std::to_string(g_.kernel[1]) + " kernel zero-extended to " +
           std::to_string(kernel_[0]) + "x" + std::to_string(kernel_[1]) + " for an XNNPACK depthwise microkernel";
  }

  bool transpose() const { return transpose_; }

  // From now on writes channels [offset, offset + C_out) of `target` (NHWC, logical dims `target_dims`) instead
  // of its own output: XNNPACK's output pixel stride becomes target_dims[1] and the output pointer moves by
  // `offset`. The caller sizes `target` before the next run() and guarantees nothing else reads this Conv's output.
  core::Status write_into(Values& v, int target, const std::vector<int64_t>& target_dims, int64_t offset) {
    assert(!transpose_);  // only the convolution path passes the target's pixel stride to XNNPACK
    target_ = target;
    target_dims_ = target_dims;
    target_offset_ = offset;
    cache_ = {};
    return create(v);
  }

  core::Status run(Values& v) override {
    const Tensor& x = v.read(x_, Layout::kNhwc);
    RC_CHECK(check_dims(node_, x, x_dims_));
    // Weights that are not constant (a graph input) are repacked whenever they change.
    if (!v.constant(w_) || (b_ >= 0 && !v.constant(b_))) {
      const uint64_t stamp = v.slots[static_cast<size_t>(w_)].version + (b_ >= 0 ? v.slots[static_cast<size_t>(b_)].version << 32 : 0);
      if (stamp != weights_stamp_) {
        RC_CHECK(create(v));
        weights_stamp_ = stamp;
        cache_ = {};
      }
    }
    float* y_data = nullptr;
    if (target_ < 0) {
      y_data = v.write(y_, Layout::kNhwc, x.dtype, y_dims_).f.data();
    } else {
      // Fused: the Concat step sized the target and marks it written.
      Tensor& target = v.slots[static_cast<size_t>(target_)].t;
      assert(target.dims == target_dims_ && target.f.size() == static_cast<size_t>(target.numel()));
      y_data = target.f.data() + target_offset_;
    }
    if (cache_.changed({x.f.data(), y_data, op_.get()})) {
      xnn_status status;
      if (transpose_) {
        status = xnn_setup_deconvolution2d_nhwc_f32(op_.get(), static_cast<size_t>(x_dims_[0]), static_cast<size_t>(x_dims_[2]),
                                                    static_cast<size_t>(x_dims_[3]), static_cast<uint32_t>(adjustment_[0]),
                                                    static_cast<uint32_t>(adjustment_[1]), x.f.data(), y_data,
                                                    v.threadpool);
      } else {
        status = xnn_setup_convolution2d_nhwc_f32(op_.get(), static_cast<size_t>(x_dims_[0]), static_cast<size_t>(x_dims_[2]),
                                                  static_cast<size_t>(x_dims_[3]), x.f.data(), y_data, v.threadpool);
      }
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_setup_(de)convolution2d_nhwc_f32", status);
    }
    const xnn_status status = xnn_run_operator(op_.get(), v.threadpool);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_run_operator", status);
    return core::Ok{};
  }

 private:
  core::Status create(Values& v) {
    const Tensor& w = v.peek(w_);
    const int64_t groups = g_.group;
    const int64_t kh = g_.kernel[0], kw = g_.kernel[1];
    // The kernel XNNPACK gets (kernel_ >= [kh, kw], see plan()); the extra end pads keep the output size.
    const int64_t xkh = kernel_[0], xkw = kernel_[1];
    const int64_t extra_bottom = (xkh - kh) * g_.dilations[0], extra_right = (xkw - kw) * g_.dilations[1];
    std::vector<float> bias;
    if (b_ >= 0) bias = v.peek(b_).f;
    xnn_operator_t raw = nullptr;
    xnn_status status;
    if (transpose_) {
      const int64_t cig = w.dims[0] / groups, cog = w.dims[1];
      // ONNX [C_in, C_out/g, kH, kW] -> XNNPACK [g, C_out/g, kH, kW, C_in/g]
      packed_.assign(w.f.size(), 0.0f);
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t oc = 0; oc < cog; ++oc)
          for (int64_t ky = 0; ky < kh; ++ky)
            for (int64_t kx = 0; kx < kw; ++kx)
              for (int64_t ic = 0; ic < cig; ++ic) {
                packed_[static_cast<size_t>((((g * cog + oc) * kh + ky) * kw + kx) * cig + ic)] =
                    w.f[static_cast<size_t>((((g * cig + ic) * cog + oc) * kh + ky) * kw + kx)];
              }
      status = xnn_create_deconvolution2d_nhwc_f32(
          static_cast<uint32_t>(g_.pads_begin[0]), static_cast<uint32_t>(std::max<int64_t>(0, g_.pads_end[1])),
          static_cast<uint32_t>(std::max<int64_t>(0, g_.pads_end[0])), static_cast<uint32_t>(g_.pads_begin[1]), static_cast<uint32_t>(kh),
          static_cast<uint32_t>(kw), static_cast<uint32_t>(g_.strides[0]), static_cast<uint32_t>(g_.strides[1]),
          static_cast<uint32_t>(g_.dilations[0]), static_cast<uint32_t>(g_.dilations[1]), static_cast<uint32_t>(groups),
          static_cast<size_t>(cig), static_cast<size_t>(cog), static_cast<size_t>(cig * groups),
          static_cast<size_t>(cog * groups), packed_.data(), bias.empty() ? nullptr : bias.data(), kNoMin, kNoMax, 0, &raw);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_deconvolution2d_nhwc_f32", status);
    } else {
      const int64_t cog = w.dims[0] / groups, cig = w.dims[1];
      // Output pixels are C_out apart, or the target's channel count apart when writing into a Concat's slice.
      const int64_t output_pixel_stride = target_ < 0 ? cog * groups : target_dims_[1];
      // ONNX [C_out, C_in/g, kH, kW] -> XNNPACK [g, C_out/g, kH', kW', C_in/g] (the same bytes when C_in/g == 1 and
      // the kernel is not extended; extended taps stay zero)
      packed_.assign(static_cast<size_t>(cog * groups * xkh * xkw * cig), 0.0f);
      for (int64_t oc = 0; oc < cog * groups; ++oc)
        for (int64_t ky = 0; ky < kh; ++ky)
          for (int64_t kx = 0; kx < kw; ++kx)
            for (int64_t ic = 0; ic < cig; ++ic) {
              packed_[static_cast<size_t>(((oc * xkh + ky) * xkw + kx) * cig + ic)] =
                  w.f[static_cast<size_t>(((oc * cig + ic) * kh + ky) * kw + kx)];
            }
      status = xnn_create_convolution2d_nhwc_f32(
          static_cast<uint32_t>(g_.pads_begin[0]), static_cast<uint32_t>(g_.pads_end[1] + extra_right),
          static_cast<uint32_t>(g_.pads_end[0] + extra_bottom), static_cast<uint32_t>(g_.pads_begin[1]),
          static_cast<uint32_t>(xkh), static_cast<uint32_t>(xkw), static_cast<uint32_t>(g_.strides[0]),
          static_cast<uint32_t>(g_.strides[1]),
          static_cast<uint32_t>(g_.dilations[0]), static_cast<uint32_t>(g_.dilations[1]), static_cast<uint32_t>(groups),
          static_cast<size_t>(cig), static_cast<size_t>(cog), static_cast<size_t>(cig * groups),
          static_cast<size_t>(output_pixel_stride), packed_.data(), bias.empty() ? nullptr : bias.data(), kNoMin, kNoMax, 0,
          &raw);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_convolution2d_nhwc_f32", status);
    }
    op_ = XnnOperator(raw, &xnn_delete_operator);
    return core::Ok{};
  }

  onnx::NodeProto node_;
  bool transpose_;
  int x_, w_, b_, y_;
  ConvGeometry g_;
  std::array<int64_t, 2> kernel_{};      // the kernel XNNPACK runs (a zero-extended depthwise kernel, see plan())
  std::array<int64_t, 2> adjustment_{};  // deconvolution: output_padding plus any extra end output
  std::vector<int64_t> x_dims_, w_dims_, y_dims_;
  std::vector<float> packed_;
  XnnOperator op_{nullptr, &xnn_delete_operator};
  uint64_t weights_stamp_ = ~uint64_t{0};
  SetupCache cache_;
  int target_ = -1;  // fused: the Concat output slot this Conv writes into (-1: its own output y_)
  std::vector<int64_t> target_dims_;
  int64_t target_offset_ = 0;  // first channel of this Conv's slice in the target
};

// ---------------------------------------------------------------- elementwise

// Relu, LeakyRelu, Sigmoid and Clip as one flat [numel, 1] batch, in whatever layout the input has.
class UnaryStep : public Step {
 public:
  UnaryStep(const onnx::NodeProto& node, int x, int y) : node_(node), x_(x), y_(y) {}

  core::Status plan(Values& v, float lo, float hi) {
    const std::string& op = node_.op_type();
    xnn_operator_t raw = nullptr;
    xnn_status status;
    if (op == "LeakyRelu") {
      const auto* a = onnx_io::find_attribute(node_, "alpha");
      status = xnn_create_leaky_relu_nc_f32(1, 1, 1, a != nullptr ? a->f() : 0.01f, 0, &raw);
    } else if (op == "Sigmoid") {
      status = xnn_create_sigmoid_nc_f32(1, 1, 1, 0, &raw);
    } else {
      status = xnn_create_clamp_nc_f32(1, 1, 1, lo, hi, 0, &raw);
    }
    if (status != xnn_status_success) return xnn_failure(node_, ("xnn_create for " + op).c_str(), status);
    op_ = XnnOperator(raw, &xnn_delete_operator);
    dims_ = v.peek(x_).dims;
    return core::Ok{};
  }

  core::Status run(Values& v) override {
    const Layout layout = v.layout(x_);
    const Tensor& x = v.read(x_, layout);
    RC_CHECK(check_dims(node_, x, dims_));
    Tensor& y = v.write(y_, layout, x.dtype, x.dims);
    if (cache_.changed({x.f.data(), y.f.data()})) {
      const std::string& op = node_.op_type();
      const auto n = static_cast<size_t>(x.numel());
      xnn_status status;
      if (op == "LeakyRelu") status = xnn_setup_leaky_relu_nc_f32(op_.get(), n, x.f.data(), y.f.data(), v.threadpool);
      else if (op == "Sigmoid") status = xnn_setup_sigmoid_nc_f32(op_.get(), n, x.f.data(), y.f.data(), v.threadpool);
      else status = xnn_setup_clamp_nc_f32(op_.get(), n, x.f.data(), y.f.data(), v.threadpool);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_setup (unary)", status);
    }
    const xnn_status status = xnn_run_operator(op_.get(), v.threadpool);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_run_operator", status);
    return core::Ok{};
  }

 private:
  onnx::NodeProto node_;
  int x_, y_;
  std::vector<int64_t> dims_;
  XnnOperator op_{nullptr, &xnn_delete_operator};
  SetupCache cache_;
};

// The dims a value has in storage: NHWC permutes [N, C, H, W] to [N, H, W, C].
std::vector<size_t> storage_shape(const std::vector<int64_t>& dims, Layout layout) {
  std::vector<size_t> s;
  for (int64_t d : dims) s.push_back(static_cast<size_t>(d));
  if (layout == Layout::kNhwc) s = {s[0], s[2], s[3], s[1]};
  if (s.empty()) s.push_back(1);
  return s;
}

// True when a tensor padded to [1.., C, H, W] has the same bytes in NCHW and NHWC order (C == 1 or H == W == 1).
bool same_bytes_in_nhwc(const std::vector<int64_t>& dims) {
  if (dims.size() > 4) return false;
  std::vector<int64_t> padded(4 - dims.size(), 1);
  padded.insert(padded.end(), dims.begin(), dims.end());
  return padded[0] == 1 && (padded[1] == 1 || (padded[2] == 1 && padded[3] == 1));
}

// Add, Sub, Mul, Div on float with numpy broadcasting (XNNPACK's *_nd_f32, up to 6 dims).
class BinaryStep : public Step {
 public:
  BinaryStep(const onnx::NodeProto& node, int a, int b, int y) : node_(node), a_(a), b_(b), y_(y) {}

  core::Status plan(Values& v) {
    const Tensor& a = v.peek(a_);
    const Tensor& b = v.peek(b_);
    a_dims_ = a.dims;
    b_dims_ = b.dims;
    RC_ASSIGN(y_dims_, broadcast_dims(node_, a.dims, b.dims));
    if (y_dims_.size() > XNN_MAX_TENSOR_DIMS || a.numel() == 0 || b.numel() == 0) return node_error(node_, "rank or size");
    // Work in NHWC when the rank-4 operands are NHWC and the other operand has the same bytes either way.
    const Layout la = v.layout(a_), lb = v.layout(b_);
    layout_ = Layout::kNchw;
    if (la == Layout::kNhwc || lb == Layout::kNhwc) {
      const bool a_ok = la == Layout::kNhwc || same_bytes_in_nhwc(a.dims);
      const bool b_ok = lb == Layout::kNhwc || same_bytes_in_nhwc(b.dims);
      if (a_ok && b_ok && y_dims_.size() == 4) layout_ = Layout::kNhwc;
    }
    a_shape_ = operand_shape(a.dims, v.layout(a_));
    b_shape_ = operand_shape(b.dims, v.layout(b_));
    const std::string& op = node_.op_type();
    xnn_operator_t raw = nullptr;
    xnn_status status;
    if (op == "Add") status = xnn_create_add_nd_f32(kNoMin, kNoMax, 0, &raw);
    else if (op == "Sub") status = xnn_create_subtract_nd_f32(kNoMin, kNoMax, 0, &raw);
    else if (op == "Mul") status = xnn_create_multiply_nd_f32(kNoMin, kNoMax, 0, &raw);
    else status = xnn_create_divide_nd_f32(kNoMin, kNoMax, 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, ("xnn_create for " + op).c_str(), status);
    op_ = XnnOperator(raw, &xnn_delete_operator);
    return core::Ok{};
  }

  core::Status run(Values& v) override {
    const Tensor& a = v.read(a_, layout_);
    const Tensor& b = v.read(b_, layout_);
    RC_CHECK(check_dims(node_, a, a_dims_));
    RC_CHECK(check_dims(node_, b, b_dims_));
    Tensor& y = v.write(y_, layout_, a.dtype, y_dims_);
    if (cache_.changed({a.f.data(), b.f.data(), y.f.data()})) {
      const std::string& op = node_.op_type();
      auto setup = op == "Add" ? xnn_setup_add_nd_f32
                   : op == "Sub" ? xnn_setup_subtract_nd_f32
                   : op == "Mul" ? xnn_setup_multiply_nd_f32
                                 : xnn_setup_divide_nd_f32;
      const xnn_status status = setup(op_.get(), a_shape_.size(), a_shape_.data(), b_shape_.size(), b_shape_.data(),
                                      a.f.data(), b.f.data(), y.f.data(), v.threadpool);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_setup (binary)", status);
    }
    const xnn_status status = xnn_run_operator(op_.get(), v.threadpool);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_run_operator", status);
    return core::Ok{};
  }

 private:
  // An operand's storage dims in this step's layout (a low-rank operand is padded to rank 4 first).
  std::vector<size_t> operand_shape(const std::vector<int64_t>& dims, Layout) const {
    if (layout_ == Layout::kNchw) return storage_shape(dims, Layout::kNchw);
    std::vector<int64_t> padded(4 - std::min<size_t>(4, dims.size()), 1);
    padded.insert(padded.end(), dims.begin(), dims.end());
    return storage_shape(padded, Layout::kNhwc);
  }

  onnx::NodeProto node_;
  int a_, b_, y_;
  Layout layout_ = Layout::kNchw;
  std::vector<int64_t> a_dims_, b_dims_, y_dims_;
  std::vector<size_t> a_shape_, b_shape_;
  XnnOperator op_{nullptr, &xnn_delete_operator};
  SetupCache cache_;
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

 private:
  onnx::NodeProto node_;
  int x_;
  std::vector<int> params_;
  int y_;
  std::vector<float> scale_, shift_;
};

// ---------------------------------------------------------------- data movement

// Constant-mode Pad with non-negative pads on XNNPACK's constant_pad_nd_x32, in the input's layout.
class PadStep : public Step {
 public:
  PadStep(const onnx::NodeProto& node, int x, int y) : node_(node), x_(x), y_(y) {}

  core::Status plan(Values& v, const std::vector<int64_t>& begin, const std::vector<int64_t>& end, float value) {
    const Tensor& x = v.peek(x_);
    x_dims_ = x.dims;
    if (x.dims.empty() || x.dims.size() > XNN_MAX_TENSOR_DIMS || x.numel() == 0) return node_error(node_, "rank or size");
    layout_ = v.layout(x_);
    for (size_t a = 0; a < x.dims.size(); ++a) y_dims_.push_back(x.dims[a] + begin[a] + end[a]);
    std::vector<size_t> b, e;
    for (size_t a = 0; a < begin.size(); ++a) { b.push_back(static_cast<size_t>(begin[a])); e.push_back(static_cast<size_t>(end[a])); }
    if (layout_ == Layout::kNhwc) {
      b = {b[0], b[2], b[3], b[1]};
      e = {e[0], e[2], e[3], e[1]};
    }
    pre_ = b;
    post_ = e;
    shape_ = storage_shape(x.dims, layout_);
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    xnn_operator_t raw = nullptr;
    const xnn_status status = xnn_create_constant_pad_nd_x32(&bits, 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_constant_pad_nd_x32", status);
    op_ = XnnOperator(raw, &xnn_delete_operator);
    return core::Ok{};
  }

  core::Status run(Values& v) override {
    const Tensor& x = v.read(x_, layout_);
    RC_CHECK(check_dims(node_, x, x_dims_));
    Tensor& y = v.write(y_, layout_, x.dtype, y_dims_);
    if (cache_.changed({x.f.data(), y.f.data()})) {
      const xnn_status status = xnn_setup_constant_pad_nd_x32(op_.get(), shape_.size(), shape_.data(), pre_.data(),
                                                              post_.data(), x.f.data(), y.f.data(), v.threadpool);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_setup_constant_pad_nd_x32", status);
    }
    const xnn_status status = xnn_run_operator(op_.get(), v.threadpool);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_run_operator", status);
    return core::Ok{};
  }

 private:
  onnx::NodeProto node_;
  int x_, y_;
  Layout layout_ = Layout::kNchw;
  std::vector<int64_t> x_dims_, y_dims_;
  std::vector<size_t> shape_, pre_, post_;
  XnnOperator op_{nullptr, &xnn_delete_operator};
  SetupCache cache_;
};

// Concat on the channel axis of NHWC values: one strided copy_nc_x32 per input, each writing its channel slice
// (pixel stride C_total, offset = channels before it) of the output.
class ConcatChannelsStep : public Step {
 public:
  ConcatChannelsStep(const onnx::NodeProto& node, std::vector<int> in, int y) : node_(node), in_(std::move(in)), y_(y) {}

  core::Status plan(Values& v) {
    const Tensor& first = v.peek(in_[0]);
    y_dims_ = first.dims;
    y_dims_[1] = 0;
    for (int id : in_) {
      const Tensor& t = v.peek(id);
      if (!t.is_float() || t.dims.size() != 4 || t.dims[0] != first.dims[0] || t.dims[2] != first.dims[2] ||
          t.dims[3] != first.dims[3]) {
        return node_error(node_, "inputs differ outside the channel axis");
      }
      in_dims_.push_back(t.dims);
      offsets_.push_back(y_dims_[1]);
      y_dims_[1] += t.dims[1];
    }
    for (int id : in_) {
      const auto c = static_cast<size_t>(v.peek(id).dims[1]);
      xnn_operator_t raw = nullptr;
      const xnn_status status = xnn_create_copy_nc_x32(c, c, static_cast<size_t>(y_dims_[1]), 0, &raw);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_copy_nc_x32", status);
      ops_.emplace_back(raw, &xnn_delete_operator);
    }
    return core::Ok{};
  }

  core::Status run(Values& v) override {
    std::vector<const Tensor*> xs;
    std::vector<const void*> pointers;
    for (size_t k = 0; k < in_.size(); ++k) {
      xs.push_back(&v.read(in_[k], Layout::kNhwc));
      RC_CHECK(check_dims(node_, *xs.back(), in_dims_[k]));
      pointers.push_back(xs.back()->f.data());
    }
    Tensor& y = v.write(y_, Layout::kNhwc, xs[0]->dtype, y_dims_);
    pointers.push_back(y.f.data());
    const auto pixels = static_cast<size_t>(y_dims_[0] * y_dims_[2] * y_dims_[3]);
    const bool setup = cache_.changed(pointers);
    for (size_t k = 0; k < in_.size(); ++k) {
      if (setup) {
        const xnn_status status = xnn_setup_copy_nc_x32(ops_[k].get(), pixels, xs[k]->f.data(),
                                                        y.f.data() + offsets_[k], v.threadpool);
        if (status != xnn_status_success) return xnn_failure(node_, "xnn_setup_copy_nc_x32", status);
      }
      const xnn_status status = xnn_run_operator(ops_[k].get(), v.threadpool);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_run_operator", status);
    }
    return core::Ok{};
  }

 private:
  onnx::NodeProto node_;
  std::vector<int> in_;
  int y_;
  std::vector<std::vector<int64_t>> in_dims_;
  std::vector<int64_t> offsets_, y_dims_;
  std::vector<XnnOperator> ops_;
  SetupCache cache_;
};

// A channel Concat whose every input is written into its slice by the Conv producing it (ConvStep::write_into):
// nothing is left to copy, so run() only marks the output as written.
class FusedConcatStep : public Step {
 public:
  explicit FusedConcatStep(int y) : y_(y) {}
  core::Status run(Values& v) override {
    v.touch(y_, Layout::kNhwc);
    return core::Ok{};
  }

 private:
  int y_;
};

// DepthToSpace in DCR order (XNNPACK's order): NHWC [N, H, W, b*b*C] -> [N, H*b, W*b, C].
class DepthToSpaceStep : public Step {
 public:
  DepthToSpaceStep(const onnx::NodeProto& node, int x, int y) : node_(node), x_(x), y_(y) {}

  core::Status plan(Values& v, int64_t block) {
    const Tensor& x = v.peek(x_);
    x_dims_ = x.dims;
    const int64_t c = x.dims[1] / (block * block);
    y_dims_ = {x.dims[0], c, x.dims[2] * block, x.dims[3] * block};
    xnn_operator_t raw = nullptr;
    const xnn_status status = xnn_create_depth_to_space_nhwc_x32(static_cast<size_t>(c), static_cast<size_t>(x.dims[1]),
                                                                 static_cast<size_t>(c), static_cast<uint32_t>(block), 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_depth_to_space_nhwc_x32", status);
    op_ = XnnOperator(raw, &xnn_delete_operator);
    return core::Ok{};
  }

  core::Status run(Values& v) override {
    const Tensor& x = v.read(x_, Layout::kNhwc);
    RC_CHECK(check_dims(node_, x, x_dims_));
    Tensor& y = v.write(y_, Layout::kNhwc, x.dtype, y_dims_);
    if (cache_.changed({x.f.data(), y.f.data()})) {
      const xnn_status status = xnn_setup_depth_to_space_nhwc_x32(op_.get(), static_cast<size_t>(x_dims_[0]),
                                                                  static_cast<size_t>(x_dims_[2]), static_cast<size_t>(x_dims_[3]),
                                                                  x.f.data(), y.f.data(), v.threadpool);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_setup_depth_to_space_nhwc_x32", status);
    }
    const xnn_status status = xnn_run_operator(op_.get(), v.threadpool);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_run_operator", status);
    return core::Ok{};
  }

 private:
  onnx::NodeProto node_;
  int x_, y_;
  std::vector<int64_t> x_dims_, y_dims_;
  XnnOperator op_{nullptr, &xnn_delete_operator};
  SetupCache cache_;
};

// ---------------------------------------------------------------- pooling, resize, fully connected

// MaxPool / AveragePool (2-D), GlobalAveragePool and bilinear Resize: NHWC in, NHWC out, one input.
class SpatialStep : public Step {
 public:
  enum class Kind { kMaxPool, kAveragePool, kGlobalAveragePool, kResizeBilinear };

  SpatialStep(const onnx::NodeProto& node, Kind kind, int x, int y) : node_(node), kind_(kind), x_(x), y_(y) {}

  core::Status plan(Values& v, std::vector<int64_t> y_dims, xnn_operator_t raw) {
    x_dims_ = v.peek(x_).dims;
    y_dims_ = std::move(y_dims);
    op_ = XnnOperator(raw, &xnn_delete_operator);
    return core::Ok{};
  }

  core::Status run(Values& v) override {
    const Tensor& x = v.read(x_, Layout::kNhwc);
    RC_CHECK(check_dims(node_, x, x_dims_));
    Tensor& y = v.write(y_, Layout::kNhwc, x.dtype, y_dims_);
    if (cache_.changed({x.f.data(), y.f.data()})) {
      const auto n = static_cast<size_t>(x_dims_[0]), h = static_cast<size_t>(x_dims_[2]), w = static_cast<size_t>(x_dims_[3]);
      xnn_status status = xnn_status_success;
      switch (kind_) {
        case Kind::kMaxPool:
          status = xnn_setup_max_pooling2d_nhwc_f32(op_.get(), n, h, w, x.f.data(), y.f.data(), v.threadpool);
          break;
        case Kind::kAveragePool:
          status = xnn_setup_average_pooling2d_nhwc_f32(op_.get(), n, h, w, x.f.data(), y.f.data(), v.threadpool);
          break;
        case Kind::kGlobalAveragePool:
          status = xnn_setup_global_average_pooling_nwc_f32(op_.get(), n, h * w, x.f.data(), y.f.data(), v.threadpool);
          break;
        case Kind::kResizeBilinear:
          status = xnn_setup_resize_bilinear2d_nhwc_f32(op_.get(), n, h, w, static_cast<size_t>(y_dims_[2]),
                                                        static_cast<size_t>(y_dims_[3]), x.f.data(), y.f.data(), v.threadpool);
          break;
      }
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_setup (pooling/resize)", status);
    }
    const xnn_status status = xnn_run_operator(op_.get(), v.threadpool);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_run_operator", status);
    return core::Ok{};
  }

 private:
  onnx::NodeProto node_;
  Kind kind_;
  int x_, y_;
  std::vector<int64_t> x_dims_, y_dims_;
  XnnOperator op_{nullptr, &xnn_delete_operator};
  SetupCache cache_;
};

// MatMul / Gemm with a constant B: XNNPACK fully_connected_nc_f32 over the rows of A.
class FullyConnectedStep : public Step {
 public:
  FullyConnectedStep(const onnx::NodeProto& node, int a, int y) : node_(node), a_(a), y_(y) {}

  core::Status plan(Values& v, const Tensor& b, bool b_is_k_by_n, std::vector<float> bias) {
    const Tensor& a = v.peek(a_);
    a_dims_ = a.dims;
    const int64_t k = a.dims.back();
    const int64_t n = b_is_k_by_n ? b.dims[1] : b.dims[0];
    y_dims_ = a.dims;
    y_dims_.back() = n;
    rows_ = static_cast<size_t>(a.numel() / std::max<int64_t>(k, 1));
    weights_ = b.f;
    bias_ = std::move(bias);
    xnn_operator_t raw = nullptr;
    // B [K, N] is XNNPACK's transposed-weights form; B [N, K] (Gemm transB=1) is its native form.
    const xnn_status status = xnn_create_fully_connected_nc_f32(
        static_cast<size_t>(k), static_cast<size_t>(n), static_cast<size_t>(k), static_cast<size_t>(n), weights_.data(),
        bias_.empty() ? nullptr : bias_.data(), kNoMin, kNoMax, b_is_k_by_n ? XNN_FLAG_TRANSPOSE_WEIGHTS : 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_fully_connected_nc_f32", status);
    op_ = XnnOperator(raw, &xnn_delete_operator);
    return core::Ok{};
  }

  core::Status run(Values& v) override {
    const Tensor& a = v.read(a_, Layout::kNchw);
    RC_CHECK(check_dims(node_, a, a_dims_));
    Tensor& y = v.write(y_, Layout::kNchw, a.dtype, y_dims_);
    if (cache_.changed({a.f.data(), y.f.data()})) {
      const xnn_status status = xnn_setup_fully_connected_nc_f32(op_.get(), rows_, a.f.data(), y.f.data(), v.threadpool);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_setup_fully_connected_nc_f32", status);
    }
    const xnn_status status = xnn_run_operator(op_.get(), v.threadpool);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_run_operator", status);
    return core::Ok{};
  }

 private:
  onnx::NodeProto node_;
  int a_, y_;
  std::vector<int64_t> a_dims_, y_dims_;
  size_t rows_ = 0;
  std::vector<float> weights_, bias_;
  XnnOperator op_{nullptr, &xnn_delete_operator};
  SetupCache cache_;
};

// ---------------------------------------------------------------- nearest upsample

constexpr const char* kNearestUpsampleNote = "optimized nearest upsample";

// One nearest upsample over the storage [outer, h, w, inner]: NHWC is [N, H, W, C], NCHW is [N*C, H, W, 1].
struct NearestUpsampleJob {
  const float* x = nullptr;
  float* y = nullptr;
  size_t h = 0, w = 0, inner = 0;  // input rows per image, pixels per row, floats per pixel
  size_t fh = 1, fw = 1;           // integer factors on H and W
};

// Writes the fh output rows of input row `row` (in [0, outer * h)): the first by replicating each pixel fw
// times, the others as copies of the first.
void nearest_upsample_row(void* context, size_t row) {
  const auto& job = *static_cast<const NearestUpsampleJob*>(context);
  const size_t out_row = job.w * job.fw * job.inner;  // floats per output row
  const float* src = job.x + row * job.w * job.inner;
  float* dst = job.y + row * job.fh * out_row;          // image * h * fh + iy * fh == row * fh
  if (job.fw == 1) {
    std::memcpy(dst, src, out_row * sizeof(float));
  } else if (job.inner == 1) {
    for (size_t ix = 0; ix < job.w; ++ix) {
      for (size_t k = 0; k < job.fw; ++k) dst[ix * job.fw + k] = src[ix];
    }
  } else {
    const size_t pixel_bytes = job.inner * sizeof(float);
    for (size_t ix = 0; ix < job.w; ++ix) {
      for (size_t k = 0; k < job.fw; ++k) std::memcpy(dst + (ix * job.fw + k) * job.inner, src + ix * job.inner, pixel_bytes);
    }
  }
  for (size_t r = 1; r < job.fh; ++r) std::memcpy(dst + r * out_row, dst, out_row * sizeof(float));
}

// Before: Resize(mode=nearest) whose every output pixel (y, x) reads input (y / fh, x / fw), e.g. 2x with
//         asymmetric/floor or half_pixel/round_prefer_floor (checked index by index against the reference mapping).
// After:  row and pixel replication with memcpy, in the input's layout (no conversion around it), split by input
//         rows over the threadpool. Exact: it only copies values.
class NearestUpsampleStep : public Step {
 public:
  NearestUpsampleStep(const onnx::NodeProto& node, int x, int y, int64_t fh, int64_t fw)
      : node_(node), x_(x), y_(y), fh_(fh), fw_(fw) {}

  void plan(Values& v) {
    x_dims_ = v.peek(x_).dims;
    y_dims_ = {x_dims_[0], x_dims_[1], x_dims_[2] * fh_, x_dims_[3] * fw_};
  }

  // "optimized nearest upsample (2x2 replication, NHWC)", with the layout the step saw at creation.
  std::string note(const Values& v) const {
    return std::string(kNearestUpsampleNote) + " (" + std::to_string(fh_) + "x" + std::to_string(fw_) + " replication, " +
           (v.layout(x_) == Layout::kNhwc ? "NHWC" : "NCHW") + ")";
  }

  core::Status run(Values& v) override {
    const Layout layout = v.layout(x_);
    const Tensor& x = v.read(x_, layout);
    RC_CHECK(check_dims(node_, x, x_dims_));
    Tensor& y = v.write(y_, layout, x.dtype, y_dims_);
    const auto n = static_cast<size_t>(x_dims_[0]), c = static_cast<size_t>(x_dims_[1]);
    NearestUpsampleJob job;
    job.x = x.f.data();
    job.y = y.f.data();
    job.h = static_cast<size_t>(x_dims_[2]);
    job.w = static_cast<size_t>(x_dims_[3]);
    job.inner = layout == Layout::kNhwc ? c : 1;
    job.fh = static_cast<size_t>(fh_);
    job.fw = static_cast<size_t>(fw_);
    const size_t outer = layout == Layout::kNhwc ? n : n * c;
    pthreadpool_parallelize_1d(v.threadpool, &nearest_upsample_row, &job, outer * job.h, 0);
    return core::Ok{};
  }

 private:
  onnx::NodeProto node_;
  int x_, y_;
  int64_t fh_, fw_;
  std::vector<int64_t> x_dims_, y_dims_;
};

// A NearestUpsampleStep for `node` when it is a rank-4 float nearest Resize with constant parameters that keeps N
// and C and maps output (y, x) to input (y / fh, x / fw) for integer fh, fw; null otherwise (the reference step
// then runs it, and reports any error in the node).
std::unique_ptr<NearestUpsampleStep> try_nearest_upsample(const onnx::NodeProto& node, int64_t opset,
                                                          const std::vector<int>& in, const std::vector<int>& out,
                                                          Values& v) {
  std::unique_ptr<NearestUpsampleStep> none;
  const auto mode = onnx_io::get_string(node, "mode", "nearest");
  if (!mode.ok() || mode.value() != "nearest" || in.empty() || in[0] < 0 || out.empty() || out[0] < 0) return none;
  for (size_t k = 1; k < out.size(); ++k) {
    if (out[k] >= 0) return none;
  }
  const Tensor& x = v.peek(in[0]);
  if (!x.is_float() || x.dims.size() != 4 || x.numel() == 0) return none;
  for (size_t k = 1; k < in.size(); ++k) {
    if (in[k] >= 0 && !v.constant(in[k])) return none;
  }
  std::vector<const Tensor*> inputs;
  for (int id : in) inputs.push_back(id < 0 ? nullptr : &v.peek(id));
  auto sources = nearest_resize_sources(node, opset, inputs);
  if (!sources.ok()) return none;
  // Output index o of each axis must read o / factor (factor 1 on N and C).
  std::array<int64_t, 4> factor{};
  for (size_t a = 0; a < 4; ++a) {
    const auto& axis = sources.value()[a];
    const auto extent = static_cast<int64_t>(axis.size());
    if (extent == 0 || extent % x.dims[a] != 0) return none;
    factor[a] = extent / x.dims[a];
    for (int64_t o = 0; o < extent; ++o) {
      if (axis[static_cast<size_t>(o)] != o / factor[a]) return none;
    }
  }
  if (factor[0] != 1 || factor[1] != 1) return none;
  auto step = std::make_unique<NearestUpsampleStep>(node, in[0], out[0], factor[2], factor[3]);
  step->plan(v);
  return step;
}

// ---------------------------------------------------------------- step selection

struct Built {
  std::unique_ptr<Step> step;
  std::string declined;  // why XNNPACK was not used; empty when it was
  std::string note;      // how the step differs from the node as written (NodePlacement::note)
};

float attr_float_or(const onnx::NodeProto& node, const std::string& name, float fallback) {
  const auto* a = onnx_io::find_attribute(node, name);
  return a != nullptr && a->type() == onnx::AttributeProto::FLOAT ? a->f() : fallback;
}

// Tries to build an XNNPACK step for `node`; returns a null step with a reason when XNNPACK cannot run it.
core::Result<Built> build_xnnpack_step(const onnx::NodeProto& node, int64_t opset, const std::vector<int>& in,
                                       const std::vector<int>& out, Values& v, const ExecutorOptions& options) {
  const std::string& op = node.op_type();
  auto declined = [](std::string why) { return Built{nullptr, std::move(why), {}}; };
  static const std::unordered_set<std::string> kXnnpackOps = {
      "Conv", "ConvTranspose", "Relu", "LeakyRelu", "Sigmoid", "Clip", "Add", "Sub", "Mul", "Div", "Pad", "Concat",
      "DepthToSpace", "MaxPool", "AveragePool", "GlobalAveragePool", "Resize", "MatMul", "Gemm"};
  if (kXnnpackOps.count(op) == 0) return declined("");  // no XNNPACK operator for this op
  auto input = [&](size_t k) -> int { return k < in.size() ? in[k] : -1; };
  if (input(0) < 0) return declined("no data input");
  const Tensor& x = v.peek(input(0));
  if (!x.is_float()) return declined("integer data");
  for (size_t k = 1; k < out.size(); ++k) {
    if (out[k] >= 0) return declined("extra outputs");
  }
  auto built = [](std::unique_ptr<Step> step) { return Built{std::move(step), {}, {}}; };

  if (op == "Conv" || op == "ConvTranspose") {
    if (x.dims.size() != 4) return declined("only 2-D convolutions run on XNNPACK");
    if (input(1) < 0 || !v.peek(input(1)).is_float()) return declined("missing W");
    auto step = std::make_unique<ConvStep>(node, op == "ConvTranspose", input(0), input(1), input(2), out[0]);
    auto planned = step->plan(v, options.zero_extend_depthwise);
    if (!planned.ok()) return declined(planned.error().message);
    std::string note = step->kernel_note();
    return Built{std::move(step), {}, std::move(note)};
  }
  if (op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "Clip") {
    float lo = op == "Relu" ? 0.0f : kNoMin, hi = kNoMax;
    if (op == "Clip") {
      if (onnx_io::find_attribute(node, "min") != nullptr || onnx_io::find_attribute(node, "max") != nullptr) {
        lo = attr_float_or(node, "min", -std::numeric_limits<float>::max());
        hi = attr_float_or(node, "max", std::numeric_limits<float>::max());
      }
      for (size_t k = 1; k < 3; ++k) {
        if (input(k) < 0) continue;
        if (!v.constant(input(k))) return declined("non-constant bounds");
        if (v.peek(input(k)).numel() > 0) (k == 1 ? lo : hi) = static_cast<float>(v.peek(input(k)).get(0));
      }
      if (!(lo < hi)) return declined("min >= max");
    }
    if (x.numel() == 0) return declined("empty tensor");
    auto step = std::make_unique<UnaryStep>(node, input(0), out[0]);
    RC_CHECK(step->plan(v, lo, hi));
    return built(std::move(step));
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    if (input(1) < 0 || !v.peek(input(1)).is_float()) return declined("integer data");
    auto step = std::make_unique<BinaryStep>(node, input(0), input(1), out[0]);
    auto planned = step->plan(v);
    if (!planned.ok()) return declined(planned.error().message);
    return built(std::move(step));
  }
  if (op == "Pad") {
    RC_ASSIGN(const std::string mode, onnx_io::get_string(node, "mode", "constant"));
    if (mode != "constant") return declined("mode " + mode);
    const auto rank = x.dims.size();
    std::vector<int64_t> pads, axes;
    float value = 0.0f;
    if (onnx_io::find_attribute(node, "pads") != nullptr) {
      RC_ASSIGN(pads, onnx_io::get_ints(node, "pads", {}));
      value = attr_float_or(node, "value", 0.0f);
    } else {
      for (size_t k = 1; k < 4; ++k) {
        if (input(k) >= 0 && !v.constant(input(k))) return declined("non-constant pads");
      }
      if (input(1) < 0) return declined("no pads");
      pads = int_values(v.peek(input(1)));
      if (input(2) >= 0 && v.peek(input(2)).numel() > 0) value = static_cast<float>(v.peek(input(2)).get(0));
      if (input(3) >= 0) axes = int_values(v.peek(input(3)));
    }
    std::vector<int64_t> begin(rank, 0), end(rank, 0);
    if (axes.empty()) {
      if (pads.size() != 2 * rank) return declined("pads length");
      for (size_t a = 0; a < rank; ++a) { begin[a] = pads[a]; end[a] = pads[a + rank]; }
    } else {
      if (pads.size() != 2 * axes.size()) return declined("pads length");
      for (size_t k = 0; k < axes.size(); ++k) {
        int64_t a = axes[k];
        if (!detail::normalize_axis(a, static_cast<int64_t>(rank))) return declined("axis");
        begin[static_cast<size_t>(a)] = pads[k];
        end[static_cast<size_t>(a)] = pads[k + axes.size()];
      }
    }
    for (size_t a = 0; a < rank; ++a) {
      if (begin[a] < 0 || end[a] < 0) return declined("negative pads (a crop) have no XNNPACK operator");
    }
    auto step = std::make_unique<PadStep>(node, input(0), out[0]);
    auto planned = step->plan(v, begin, end, value);
    if (!planned.ok()) return declined(planned.error().message);
    return built(std::move(step));
  }
  if (op == "Concat") {
    RC_ASSIGN(int64_t axis, onnx_io::get_int(node, "axis", 0));
    if (x.dims.size() != 4 || !detail::normalize_axis(axis, 4) || axis != 1) return declined("not the channel axis of a rank-4 tensor");
    if (v.layout(input(0)) != Layout::kNhwc) return declined("inputs are NCHW (a plain block copy)");
    for (int id : in) {
      if (id < 0) return declined("missing input");
    }
    auto step = std::make_unique<ConcatChannelsStep>(node, in, out[0]);
    auto planned = step->plan(v);
    if (!planned.ok()) return declined(planned.error().message);
    return built(std::move(step));
  }
  if (op == "DepthToSpace") {
    RC_ASSIGN(const std::string mode, onnx_io::get_string(node, "mode", "DCR"));
    if (mode != "DCR") return declined("CRD order has no XNNPACK operator");
    RC_ASSIGN(const int64_t block, onnx_io::get_int(node, "blocksize", 0));
    if (x.dims.size() != 4 || block <= 0 || x.dims[1] % (block * block) != 0) return declined("shape");
    auto step = std::make_unique<DepthToSpaceStep>(node, input(0), out[0]);
    RC_CHECK(step->plan(v, block));
    return built(std::move(step));
  }
  if (op == "MaxPool" || op == "AveragePool") {
    if (x.dims.size() != 4) return declined("only 2-D pooling runs on XNNPACK");
    RC_ASSIGN(const PoolGeometry g, resolve_pool(node, x.dims));
    if (op == "AveragePool" && g.count_include_pad) return declined("count_include_pad=1");
    std::array<int64_t, 2> end_pad{};
    for (size_t a = 0; a < 2; ++a) {
      const int64_t eff = (g.kernel[a] - 1) * g.dilations[a] + 1;
      // Extra end padding makes XNNPACK's floor formula give the ceil_mode size (padding never wins a max and is
      // not counted by the average).
      end_pad[a] = std::max(g.pads_end[a], (g.output_size[a] - 1) * g.strides[a] + eff - x.dims[2 + a] - g.pads_begin[a]);
      if (g.pads_begin[a] < 0 || end_pad[a] < 0) return declined("negative pads");
      if (op == "AveragePool" && g.dilations[a] != 1) return declined("dilated average pooling");
    }
    const auto c = static_cast<size_t>(x.dims[1]);
    xnn_operator_t raw = nullptr;
    xnn_status status;
    if (op == "MaxPool") {
      status = xnn_create_max_pooling2d_nhwc_f32(
          static_cast<uint32_t>(g.pads_begin[0]), static_cast<uint32_t>(end_pad[1]), static_cast<uint32_t>(end_pad[0]),
          static_cast<uint32_t>(g.pads_begin[1]), static_cast<uint32_t>(g.kernel[0]), static_cast<uint32_t>(g.kernel[1]),
          static_cast<uint32_t>(g.strides[0]), static_cast<uint32_t>(g.strides[1]), static_cast<uint32_t>(g.dilations[0]),
          static_cast<uint32_t>(g.dilations[1]), c, c, c, kNoMin, kNoMax, 0, &raw);
    } else {
      status = xnn_create_average_pooling2d_nhwc_f32(
          static_cast<uint32_t>(g.pads_begin[0]), static_cast<uint32_t>(end_pad[1]), static_cast<uint32_t>(end_pad[0]),
          static_cast<uint32_t>(g.pads_begin[1]), static_cast<uint32_t>(g.kernel[0]), static_cast<uint32_t>(g.kernel[1]),
          static_cast<uint32_t>(g.strides[0]), static_cast<uint32_t>(g.strides[1]), c, c, c, kNoMin, kNoMax, 0, &raw);
    }
    if (status != xnn_status_success) return declined("XNNPACK refused the pooling parameters (status " + std::to_string(static_cast<int>(status)) + ")");
    auto step = std::make_unique<SpatialStep>(
        node, op == "MaxPool" ? SpatialStep::Kind::kMaxPool : SpatialStep::Kind::kAveragePool, input(0), out[0]);
    RC_CHECK(step->plan(v, {x.dims[0], x.dims[1], g.output_size[0], g.output_size[1]}, raw));
    return built(std::move(step));
  }
  if (op == "GlobalAveragePool") {
    if (x.dims.size() != 4 || x.numel() == 0) return declined("only rank 4");
    const auto c = static_cast<size_t>(x.dims[1]);
    xnn_operator_t raw = nullptr;
    const xnn_status status = xnn_create_global_average_pooling_nwc_f32(c, c, c, kNoMin, kNoMax, 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node, "xnn_create_global_average_pooling_nwc_f32", status);
    auto step = std::make_unique<SpatialStep>(node, SpatialStep::Kind::kGlobalAveragePool, input(0), out[0]);
    RC_CHECK(step->plan(v, {x.dims[0], x.dims[1], 1, 1}, raw));
    return built(std::move(step));
  }
  if (op == "Resize") {
    RC_ASSIGN(const std::string mode, onnx_io::get_string(node, "mode", "nearest"));
    RC_ASSIGN(const std::string coordinate, onnx_io::get_string(node, "coordinate_transformation_mode",
                                                                opset < 11 ? "asymmetric" : "half_pixel"));
    if (mode != "linear") return declined("only bilinear resize runs on XNNPACK");
    if (x.dims.size() != 4) return declined("rank");
    for (size_t k = 1; k < in.size(); ++k) {
      if (in[k] >= 0 && !v.constant(in[k])) return declined("non-constant scales or sizes");
    }
    std::vector<const Tensor*> inputs;
    for (int id : in) inputs.push_back(id < 0 ? nullptr : &v.peek(id));
    RC_ASSIGN(const ResizeGeometry g, resolve_resize(node, opset, inputs));
    if (g.output_dims[0] != x.dims[0] || g.output_dims[1] != x.dims[1]) return declined("resizes N or C");
    for (size_t a = 2; a < 4; ++a) {
      // XNNPACK derives the scale from the sizes; ONNX uses the given scale, so they must agree.
      if (static_cast<double>(g.output_dims[a]) != g.scales[a] * static_cast<double>(x.dims[a])) return declined("scale is not out/in");
      if (coordinate == "pytorch_half_pixel" && g.output_dims[a] == 1) return declined("pytorch_half_pixel with size 1");
    }
    uint32_t flags = 0;
    if (coordinate == "align_corners") flags = XNN_FLAG_ALIGN_CORNERS;
    else if (coordinate == "asymmetric") flags = XNN_FLAG_TENSORFLOW_LEGACY_MODE;
    else if (coordinate != "half_pixel" && coordinate != "pytorch_half_pixel") return declined("coordinate mode " + coordinate);
    const auto c = static_cast<size_t>(x.dims[1]);
    xnn_operator_t raw = nullptr;
    const xnn_status status = xnn_create_resize_bilinear2d_nhwc_f32(c, c, c, flags, &raw);
    if (status != xnn_status_success) return xnn_failure(node, "xnn_create_resize_bilinear2d_nhwc_f32", status);
    auto step = std::make_unique<SpatialStep>(node, SpatialStep::Kind::kResizeBilinear, input(0), out[0]);
    RC_CHECK(step->plan(v, g.output_dims, raw));
    return built(std::move(step));
  }
  if (op == "MatMul" || op == "Gemm") {
    if (input(1) < 0 || !v.constant(input(1))) return declined("B is not constant");
    const Tensor& b = v.peek(input(1));
    if (b.dims.size() != 2 || x.dims.size() < 2 || !b.is_float()) return declined("shapes");
    bool k_by_n = true;
    std::vector<float> bias;
    if (op == "Gemm") {
      RC_ASSIGN(const int64_t trans_a, onnx_io::get_int(node, "transA", 0));
      RC_ASSIGN(const int64_t trans_b, onnx_io::get_int(node, "transB", 0));
      if (trans_a != 0 || attr_float_or(node, "alpha", 1.0f) != 1.0f) return declined("transA or alpha");
      k_by_n = trans_b == 0;
      const int64_t n = k_by_n ? b.dims[1] : b.dims[0];
      if (input(2) >= 0) {
        const Tensor& c = v.peek(input(2));
        if (!v.constant(input(2)) || !c.is_float()) return declined("C is not constant");
        const float beta = attr_float_or(node, "beta", 1.0f);
        if (c.numel() == n && (c.dims.size() == 1 || (c.dims.size() == 2 && c.dims[0] == 1))) {
          for (float value : c.f) bias.push_back(beta * value);
        } else if (c.numel() == 1) {
          bias.assign(static_cast<size_t>(n), beta * c.f[0]);
        } else {
          return declined("C is not a row vector");
        }
      }
    }
    if (x.dims.back() != (k_by_n ? b.dims[0] : b.dims[1])) return declined("inner dimensions differ");
    auto step = std::make_unique<FullyConnectedStep>(node, input(0), out[0]);
    RC_CHECK(step->plan(v, b, k_by_n, std::move(bias)));
    return built(std::move(step));
  }
  return declined("");
}

constexpr const char* kFusedConcatNote = "fused: input Convs write into its channel slices";

// A Conv step already built, with the index of its node's placement.
struct ConvProducer {
  ConvStep* step = nullptr;
  size_t placement = 0;
};

// Before: y_k = Conv(...) for each k;  y = Concat(y_0 .. y_n, axis=1)   (one strided copy per input)
// After:  each Conv writes channels [offset_k, offset_k + C_k) of y;  Concat does nothing
// Applies when every Concat input comes from an XNNPACK Conv (not ConvTranspose) and is read by nothing else (not
// another node, not twice by this Concat, not a graph output). Returns null, changing nothing, when it does not.
// Re-runs the redirected Convs once, so y holds the creation-time values like every other planned step's output.
core::Result<std::unique_ptr<Step>> try_fuse_concat(const onnx::NodeProto& node, const std::vector<int>& in,
                                                    const std::vector<int>& out,
                                                    const std::unordered_map<int, ConvProducer>& conv_producers,
                                                    const std::unordered_map<std::string, int>& readers, Values& v,
                                                    std::vector<NodePlacement>& placements) {
  const auto axis_attr = onnx_io::get_int(node, "axis", 0);
  if (!axis_attr.ok() || in.empty() || out.empty() || out[0] < 0) return std::unique_ptr<Step>{};
  for (size_t k = 1; k < out.size(); ++k) {
    if (out[k] >= 0) return std::unique_ptr<Step>{};
  }
  int64_t axis = axis_attr.value();
  if (!detail::normalize_axis(axis, 4) || axis != 1) return std::unique_ptr<Step>{};
  std::vector<ConvProducer> producers;
  for (size_t k = 0; k < in.size(); ++k) {
    const auto found = conv_producers.find(in[k]);
    const auto read = readers.find(node.input(static_cast<int>(k)));
    if (in[k] < 0 || found == conv_producers.end() || found->second.step->transpose()) return std::unique_ptr<Step>{};
    if (read == readers.end() || read->second != 1) return std::unique_ptr<Step>{};
    const Tensor& t = v.peek(in[k]);
    const Tensor& first = v.peek(in[0]);
    if (!t.is_float() || t.dims.size() != 4 || t.dtype != first.dtype || t.dims[0] != first.dims[0] ||
        t.dims[2] != first.dims[2] || t.dims[3] != first.dims[3]) {
      return std::unique_ptr<Step>{};
    }
    producers.push_back(found->second);
  }
  std::vector<int64_t> y_dims = v.peek(in[0]).dims;
  y_dims[1] = 0;
  for (int id : in) y_dims[1] += v.peek(id).dims[1];
  v.write(out[0], Layout::kNhwc, v.peek(in[0]).dtype, y_dims);
  int64_t offset = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t channels = v.peek(in[k]).dims[1];
    RC_CHECK(producers[k].step->write_into(v, out[0], y_dims, offset));
    RC_CHECK(producers[k].step->run(v));
    placements[producers[k].placement].fusion = "fused: writes into " + onnx_io::describe_node(node) + " channels [" +
                                                std::to_string(offset) + ", " + std::to_string(offset + channels) + ")";
    offset += channels;
    std::vector<float>().swap(v.slots[static_cast<size_t>(in[k])].t.f);  // never written or read again
  }
  std::unique_ptr<Step> step = std::make_unique<FusedConcatStep>(out[0]);
  return step;
}

bool layout_preserving(const std::string& op) {
  return op == "Relu" || op == "LeakyRelu" || op == "Sigmoid" || op == "Tanh" || op == "Clip" || op == "Identity";
}

}  // namespace

// ---------------------------------------------------------------- Executor

struct Executor::Impl {
  Values values;
  ThreadPool threadpool{nullptr, &pthreadpool_destroy};
  std::vector<std::unique_ptr<Step>> steps;
  std::vector<size_t> step_node;  // per step, the index of its node in placements
  std::vector<NodePlacement> placements;
  std::vector<NamedTensor> creation_inputs;
  std::vector<std::pair<std::string, int>> inputs;   // graph inputs (name, slot)
  std::vector<std::pair<std::string, int>> outputs;  // graph outputs (name, slot)
  std::unordered_map<std::string, int> slot_of;

  // Profiling (ExecutorProfile): per step, its own time and its input conversions, summed over profiled runs.
  bool profiling = false;
  size_t profiled_runs = 0;
  double profiled_ms = 0;
  std::vector<double> step_ms, step_convert_ms;

  core::Status load_inputs(const std::vector<NamedTensor>& given, bool check_against_creation);
  core::Status run_steps();
  void add_step(std::unique_ptr<Step> step) {
    steps.push_back(std::move(step));
    step_node.push_back(placements.size());  // its placement is pushed next
  }
};

core::Status Executor::Impl::run_steps() {
  if (!profiling) {
    for (auto& step : steps) RC_CHECK(step->run(values));
    return core::Ok{};
  }
  step_ms.resize(steps.size(), 0.0);
  step_convert_ms.resize(steps.size(), 0.0);
  for (size_t k = 0; k < steps.size(); ++k) {
    const double converted_before = values.conversion_ms;
    const Clock::time_point start = Clock::now();
    RC_CHECK(steps[k]->run(values));
    const double wall = ms_between(start, Clock::now());
    const double converting = values.conversion_ms - converted_before;
    step_ms[k] += wall - converting;
    step_convert_ms[k] += converting;
  }
  return core::Ok{};
}

core::Status Executor::Impl::load_inputs(const std::vector<NamedTensor>& given, bool check_against_creation) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const auto& [name, id] = inputs[k];
    const NamedTensor* found = nullptr;
    for (const auto& g : given) {
      if (g.name == name) found = &g;
    }
    if (found == nullptr) return core::invalid_model("no value given for graph input '" + name + "'");
    const Tensor& t = found->tensor;
    if (check_against_creation) {
      const Tensor& want = creation_inputs[k].tensor;
      if (t.dims != want.dims || t.is_float() != want.is_float()) {
        return core::invalid_model("input '" + name + "' is " + describe_tensor(t) + " but the executor was planned for " +
                                   describe_tensor(want));
      }
    }
    Tensor& dst = values.write(id, Layout::kNchw, t.dtype, t.dims);
    if (t.dtype == onnx::TensorProto::FLOAT || t.dtype == onnx::TensorProto::DOUBLE) {
      std::copy(t.f.begin(), t.f.end(), dst.f.begin());  // already what f32 holds
    } else if (t.is_float()) {
      for (size_t e = 0; e < t.f.size(); ++e) dst.f[e] = round_to_type(t.f[e], t.dtype);
    } else {
      std::copy(t.i.begin(), t.i.end(), dst.i.begin());
    }
  }
  return core::Ok{};
}

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;
Executor::~Executor() = default;

core::Result<Executor> Executor::create(const onnx::ModelProto& model, const ExecutorOptions& options) {
  const onnx::NodeProto* planning = nullptr;
  try {
    return plan(model, options, planning);
  } catch (const TensorSizeError& e) {
    // A value too large to hold (Tensor::reshape checks every one): refused with its node, never a crash.
    if (planning == nullptr) return core::invalid_model(e.what());
    return node_error(*planning, std::string("a value of ") + e.what());
  }
}

core::Result<Executor> Executor::plan(const onnx::ModelProto& model, const ExecutorOptions& options,
                                      const onnx::NodeProto*& planning) {
  RC_CHECK(ensure_xnnpack_initialized());
  auto impl = std::make_unique<Impl>();
  const onnx::GraphProto& graph = model.graph();
  const int64_t opset = onnx_io::default_opset(model);

  // Every value gets a slot up front, so slot storage never moves.
  auto& slot_of = impl->slot_of;
  auto add_slot = [&](const std::string& name) {
    if (!name.empty() && slot_of.find(name) == slot_of.end()) slot_of.emplace(name, static_cast<int>(slot_of.size()));
  };
  std::unordered_set<std::string> initializer_names;
  for (const auto& init : graph.initializer()) {
    add_slot(init.name());
    initializer_names.insert(init.name());
  }
  for (const auto& in : graph.input()) add_slot(in.name());
  for (const auto& node : graph.node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx") {
      return node_error(node, "op " + node.domain() + "::" + node.op_type() + " is not supported by the executor");
    }
    if (!is_supported_op(node.op_type())) {
      return node_error(node, "op " + node.op_type() + " is not supported by the executor");
    }
    for (const auto& name : node.output()) add_slot(name);
  }
  impl->values.slots.resize(slot_of.size());
  Values& v = impl->values;

  // How many times each value is read (a graph output counts as a read), for fusion.
  std::unordered_map<std::string, int> readers;
  for (const auto& node : graph.node()) {
    for (const auto& name : node.input()) ++readers[name];
  }
  for (const auto& o : graph.output()) ++readers[o.name()];
  std::unordered_map<int, ConvProducer> conv_producers;  // by output slot

  if (options.threads > 1) {
    impl->threadpool = ThreadPool(pthreadpool_create(options.threads), &pthreadpool_destroy);
    if (!impl->threadpool) return core::invalid_model("pthreadpool_create failed");
  }
  v.threadpool = impl->threadpool.get();

  for (const auto& init : graph.initializer()) {
    RC_ASSIGN(Tensor t, tensor_from_proto(init, "initializer '" + init.name() + "'"));
    Slot& s = v.slots[static_cast<size_t>(slot_of.at(init.name()))];
    s.t = std::move(t);
    s.defined = s.constant = true;
  }

  // Creation inputs: explicit ones, the rest seeded random.
  std::map<std::string, std::vector<int64_t>> shapes = options.input_shapes;
  for (const auto& given : options.inputs) shapes[given.name] = given.tensor.dims;
  onnx::ModelProto inputs_only;
  for (const auto& in : graph.input()) {
    if (initializer_names.count(in.name()) == 0) *inputs_only.mutable_graph()->add_input() = in;
  }
  RC_ASSIGN(auto random, make_random_inputs(inputs_only, shapes, options.seed));
  for (auto& r : random) {
    for (const auto& given : options.inputs) {
      if (given.name == r.name) r.tensor = given.tensor;
    }
    impl->inputs.emplace_back(r.name, slot_of.at(r.name));
  }
  impl->creation_inputs = std::move(random);
  RC_CHECK(impl->load_inputs(impl->creation_inputs, false));

  // Plan: fold constants, build a step per remaining node and run it once to fix shapes.
  for (const auto& node : graph.node()) {
    planning = &node;
    std::vector<int> in, out;
    bool all_constant = true;
    for (const auto& name : node.input()) {
      if (name.empty()) { in.push_back(-1); continue; }
      const auto it = slot_of.find(name);
      if (it == slot_of.end() || !v.slots[static_cast<size_t>(it->second)].defined) {
        return node_error(node, "input '" + name + "' is not produced by any earlier node, initializer or graph input");
      }
      in.push_back(it->second);
      all_constant = all_constant && v.constant(it->second);
    }
    for (const auto& name : node.output()) out.push_back(name.empty() ? -1 : slot_of.at(name));
    NodePlacement placement{onnx_io::describe_node(node), node.op_type(), Placement::kReference, {}, {}, {}};
    const bool shape_only = node.op_type() == "Shape";  // input dims are fixed at creation
    if (all_constant || shape_only) {
      std::vector<const Tensor*> inputs;
      for (int id : in) inputs.push_back(id < 0 ? nullptr : &v.read(id, Layout::kNchw));
      std::vector<Tensor*> outputs;
      for (int id : out) outputs.push_back(id < 0 ? nullptr : &v.slots[static_cast<size_t>(id)].t);
      RC_CHECK(run_reference_node(node, opset, inputs, outputs));
      for (int id : out) {
        if (id < 0) continue;
        v.touch(id, Layout::kNchw);
        v.slots[static_cast<size_t>(id)].constant = true;
      }
      placement.placement = Placement::kFolded;
      impl->placements.push_back(std::move(placement));
      continue;
    }
    std::unique_ptr<Step> step;
    if (options.use_xnnpack && options.fuse_concat && node.op_type() == "Concat") {
      RC_ASSIGN(auto fused, try_fuse_concat(node, in, out, conv_producers, readers, v, impl->placements));
      if (fused) {
        placement.placement = Placement::kXnnpack;
        placement.fusion = kFusedConcatNote;
        RC_CHECK(fused->run(v));
        impl->add_step(std::move(fused));
        impl->placements.push_back(std::move(placement));
        continue;
      }
    }
    if (options.use_xnnpack) {
      RC_ASSIGN(Built built, build_xnnpack_step(node, opset, in, out, v, options));
      step = std::move(built.step);
      placement.reason = std::move(built.declined);
      placement.note = std::move(built.note);
      if (auto* conv = dynamic_cast<ConvStep*>(step.get()); conv != nullptr && !out.empty() && out[0] >= 0) {
        conv_producers[out[0]] = ConvProducer{conv, impl->placements.size()};
      }
    } else {
      placement.reason = "XNNPACK disabled";
    }
    if (step) {
      placement.placement = Placement::kXnnpack;
    } else {
      const bool preserving = layout_preserving(node.op_type());
      std::unique_ptr<NearestUpsampleStep> upsample;
      if (options.use_xnnpack && node.op_type() == "Resize") upsample = try_nearest_upsample(node, opset, in, out, v);
      if (upsample) {
        placement.note = upsample->note(v);
        step = std::move(upsample);
      } else if (node.op_type() == "BatchNormalization" && in.size() >= 5 && v.peek(in[0]).is_float() &&
          v.peek(in[0]).dims.size() >= 2 && std::all_of(in.begin() + 1, in.begin() + 5, [](int id) { return id >= 0; }) &&
          (out.size() < 2 || std::all_of(out.begin() + 1, out.end(), [](int id) { return id < 0; })) &&
          onnx_io::get_int(node, "training_mode", 0).ok() && onnx_io::get_int(node, "training_mode", 0).value() == 0) {
        step = std::make_unique<BatchNormStep>(node, in[0], std::vector<int>(in.begin() + 1, in.begin() + 5), out[0]);
      } else {
        step = std::make_unique<ReferenceStep>(node, opset, in, out, preserving);
      }
    }
    RC_CHECK(step->run(v));
    impl->add_step(std::move(step));
    impl->placements.push_back(std::move(placement));
  }

  planning = nullptr;
  for (const auto& out : graph.output()) {
    const auto it = slot_of.find(out.name());
    if (it == slot_of.end() || !v.slots[static_cast<size_t>(it->second)].defined) {
      return core::invalid_model("graph output '" + out.name() + "' is never produced");
    }
    impl->outputs.emplace_back(out.name(), it->second);
  }
  // Profiling starts now, so the creation run (first touches, one-time setup) is never counted.
  impl->profiling = options.profile;
  impl->values.time_conversions = options.profile;
  return Executor(std::move(impl));
}

core::Result<std::vector<NamedTensor>> Executor::run(const std::vector<NamedTensor>& inputs) {
  const Clock::time_point start = impl_->profiling ? Clock::now() : Clock::time_point{};
  RC_CHECK(impl_->load_inputs(inputs, true));
  RC_CHECK(impl_->run_steps());
  std::vector<NamedTensor> result;
  for (const auto& [name, id] : impl_->outputs) {
    NamedTensor t{name, impl_->values.read(id, Layout::kNchw)};
    if (t.tensor.dtype == onnx::TensorProto::FLOAT16 || t.tensor.dtype == onnx::TensorProto::BFLOAT16) {
      for (float& x : t.tensor.f) x = round_to_type(x, t.tensor.dtype);
    }
    result.push_back(std::move(t));
  }
  if (impl_->profiling) {
    impl_->profiled_ms += ms_between(start, Clock::now());
    ++impl_->profiled_runs;
  }
  return result;
}

core::Status Executor::run_steps() {
  const Clock::time_point start = impl_->profiling ? Clock::now() : Clock::time_point{};
  RC_CHECK(impl_->run_steps());
  if (impl_->profiling) {
    impl_->profiled_ms += ms_between(start, Clock::now());
    ++impl_->profiled_runs;
  }
  return core::Ok{};
}

void Executor::set_profiling(bool on) {
  impl_->profiling = on;
  impl_->values.time_conversions = on;
}

void Executor::reset_profile() {
  impl_->profiled_runs = 0;
  impl_->profiled_ms = 0;
  impl_->step_ms.assign(impl_->steps.size(), 0.0);
  impl_->step_convert_ms.assign(impl_->steps.size(), 0.0);
}

ExecutorProfile Executor::profile(size_t top_nodes) const {
  const Impl& impl = *impl_;
  ExecutorProfile p;
  p.runs = impl.profiled_runs;
  p.total_ms = impl.profiled_ms;
  const auto share = [&](double ms) { return p.total_ms > 0 ? ms / p.total_ms : 0.0; };
  std::map<std::string, OpTime> by_op;
  OpTime conversion{kLayoutConversionRow, 0, 0, 0};
  double in_steps = 0;
  std::vector<NodeTime> nodes;
  for (size_t k = 0; k < impl.steps.size(); ++k) {
    const NodePlacement& placement = impl.placements[impl.step_node[k]];
    const double ms = k < impl.step_ms.size() ? impl.step_ms[k] : 0.0;
    const double convert_ms = k < impl.step_convert_ms.size() ? impl.step_convert_ms[k] : 0.0;
    OpTime& op = by_op[placement.op_type];
    op.op_type = placement.op_type;
    op.ms += ms;
    ++op.nodes;
    if (convert_ms > 0) {
      conversion.ms += convert_ms;
      ++conversion.nodes;
    }
    in_steps += ms + convert_ms;
    nodes.push_back(NodeTime{placement.node, placement.op_type, placement.placement, ms, convert_ms, share(ms)});
  }
  for (auto& [name, op] : by_op) p.by_op.push_back(op);
  if (conversion.nodes > 0) p.by_op.push_back(conversion);
  // What run() did outside the steps: the clock's total minus every step's wall time.
  if (p.runs > 0) p.by_op.push_back(OpTime{kGraphIoRow, std::max(0.0, p.total_ms - in_steps), 0, 0});
  for (auto& op : p.by_op) op.share = share(op.ms);
  const auto slower = [](const auto& a, const auto& b) { return a.ms > b.ms; };
  std::stable_sort(p.by_op.begin(), p.by_op.end(), slower);
  std::stable_sort(nodes.begin(), nodes.end(), slower);
  if (nodes.size() > top_nodes) nodes.resize(top_nodes);
  p.top_nodes = std::move(nodes);
  return p;
}

const std::vector<NamedTensor>& Executor::creation_inputs() const { return impl_->creation_inputs; }

const std::vector<NodePlacement>& Executor::placements() const { return impl_->placements; }

size_t Executor::count(Placement placement) const {
  return static_cast<size_t>(std::count_if(impl_->placements.begin(), impl_->placements.end(),
                                           [&](const NodePlacement& p) { return p.placement == placement; }));
}

size_t Executor::count(const std::string& op_type, Placement placement) const {
  return static_cast<size_t>(std::count_if(impl_->placements.begin(), impl_->placements.end(), [&](const NodePlacement& p) {
    return p.placement == placement && p.op_type == op_type;
  }));
}

size_t Executor::count_fused(const std::string& op_type) const {
  return static_cast<size_t>(std::count_if(impl_->placements.begin(), impl_->placements.end(), [&](const NodePlacement& p) {
    return !p.fusion.empty() && p.op_type == op_type;
  }));
}

std::string describe_placement(const NodePlacement& placement) {
  std::string text = placement_name(placement.placement);
  std::string details = placement.fusion;
  if (!placement.note.empty()) details += (details.empty() ? "" : "; ") + placement.note;
  if (!details.empty()) text += " (" + details + ")";
  return text;
}

std::string Executor::placement_summary() const {
  std::string text;
  for (Placement p : {Placement::kXnnpack, Placement::kReference, Placement::kFolded}) {
    std::map<std::string, size_t> by_op;
    for (const auto& n : impl_->placements) {
      if (n.placement == p) ++by_op[n.op_type];
    }
    if (!text.empty()) text += "; ";
    text += std::string(placement_name(p)) + " " + std::to_string(count(p));
    if (by_op.empty()) continue;
    text += " (";
    bool first = true;
    for (const auto& [op, n] : by_op) {
      text += (first ? "" : ", ") + op + " " + std::to_string(n);
      first = false;
    }
    text += ")";
  }
  if (const size_t fused = count_fused("Concat"); fused > 0) {
    text += "; fused " + std::to_string(fused) + " (Concat " + std::to_string(fused) + ": input Convs write into its channel slices)";
  }
  const auto noted = [&](const char* what) {
    return static_cast<size_t>(std::count_if(impl_->placements.begin(), impl_->placements.end(), [&](const NodePlacement& p) {
      return p.note.find(what) != std::string::npos;
    }));
  };
  if (const size_t extended = noted("zero-extended"); extended > 0) {
    text += "; zero-extended depthwise kernels " + std::to_string(extended);
  }
  if (const size_t upsamples = noted(kNearestUpsampleNote); upsamples > 0) {
    text += "; " + std::string(kNearestUpsampleNote) + " " + std::to_string(upsamples);
  }
  return text;
}

}  // namespace dwdeconv::runtime_check
