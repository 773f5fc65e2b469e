// Conv and ConvTranspose on XNNPACK's convolution2d / deconvolution2d (NHWC f32).
#include <algorithm>
#include <array>
#include <cassert>

#include "internal.h"
#include "ops/ops.h"
#include "step.h"

namespace dwdeconv::runtime_check::detail {

// Tap counts this XNNPACK (Debian 0.0~git20220216, x86-64) has depthwise microkernels for. A depthwise Conv with
// any other count (1x2, 2x3, 4x4, or 1x1 with padding) falls back to a grouped GEMM per channel, 25 to 70 times
// slower (measured, C=64, 64x64). Newer XNNPACK runs every count on its multipass depthwise microkernels.
constexpr std::array<int64_t, 4> kDwconvTaps = {3, 4, 9, 25};

namespace {

// The smallest kernel [kh', kw'] >= [kh, kw] whose tap count has a depthwise microkernel, or {kh, kw} when
// [kh, kw] already has one or nothing up to 25 taps does. A 1x1 kernel without padding is left alone (XNNPACK
// runs it as a per-channel multiply-add).
std::array<int64_t, 2> dwconv_kernel(int64_t kh, int64_t kw, bool padded) {
  const auto has_kernel = [](int64_t taps) { return std::find(kDwconvTaps.begin(), kDwconvTaps.end(), taps) != kDwconvTaps.end(); };
  if (has_kernel(kh * kw) || (kh * kw == 1 && !padded)) return {kh, kw};
  std::array<int64_t, 2> best = {kh, kw};
  for (int64_t h = kh; h <= kDwconvTaps.back(); ++h) {
    for (int64_t w = kw; h * w <= kDwconvTaps.back(); ++w) {
      if (has_kernel(h * w) && (best == std::array<int64_t, 2>{kh, kw} || h * w < best[0] * best[1])) best = {h, w};
    }
  }
  return best;
}

}  // namespace

class ConvStep : public XnnStep {
 public:
  ConvStep(const onnx::NodeProto& node, bool transpose, int x, int w, int b, int y)
      : XnnStep(node, "xnn_setup_(de)convolution2d_nhwc_f32"), transpose_(transpose), x_(x), w_(w), b_(b) {
    y_ = y;
  }

  // zero_extend: a depthwise Conv whose tap count has no XNNPACK depthwise microkernel runs with its kernel
  // zero-extended at the bottom/right to one that has (dwconv_kernel), and its end pads grown to match, so the
  // output is unchanged (except that 0 * inf in the extra taps turns an infinite input into NaN).
  core::Status plan(Values& v, bool zero_extend) {
    const Tensor& x = v.peek(x_);
    const Tensor& w = v.peek(w_);
    if (transpose_) {
      RC_ASSIGN(g_, resolve_conv_transpose(node_, x.dims, w.dims));
    } else {
      RC_ASSIGN(g_, resolve_conv(node_, x.dims, w.dims));
    }
    adjustment_ = {0, 0};
    for (size_t a = 0; a < 2; ++a) {
      if (transpose_) {
        // A negative end pad (output_shape past the natural size) is extra output at the end: XNNPACK's adjustment.
        adjustment_[a] = g_.output_padding[a] + std::max<int64_t>(0, -g_.pads_end[a]);
        if (adjustment_[a] >= g_.strides[a]) return node_error(node_, "output_padding plus extra output reaches the stride");
      }
      if (g_.pads_begin[a] < 0 || (!transpose_ && g_.pads_end[a] < 0)) return node_error(node_, "negative begin pads");
    }
    add_input(v, x_, Layout::kNhwc);
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
    return std::to_string(g_.kernel[0]) + "x" + std::to_string(g_.kernel[1]) + " kernel zero-extended to " + std::to_string(kernel_[0]) +
           "x" + std::to_string(kernel_[1]) + " for an XNNPACK depthwise microkernel";
  }

  bool transpose() const { return transpose_; }

  // x, and the weights and bias as stored (a graph input or computed weights are read on every run, see prepare()).
  void accesses(const Values& v, std::vector<Access>& out) const override {
    out.push_back(Access{x_, Layout::kNhwc, false});
    out.push_back(Access{w_, v.layout(w_), false});
    if (b_ >= 0) out.push_back(Access{b_, v.layout(b_), false});
    out.push_back(Access{target_ < 0 ? y_ : target_, Layout::kNhwc, true});
  }
  // Constant weights and bias are packed by XNNPACK at creation; prepare() reads them again only when they are not.
  bool packed_copy_of(const Values& v, int id) const override {
    const bool constant = v.constant(w_) && (b_ < 0 || v.constant(b_));
    return constant && (id == w_ || (b_ >= 0 && id == b_));
  }
  bool has_output_range() const { return min_ != kNoMin || max_ != kNoMax; }

  core::Status fuse_activation(Values& v, int y, float lo, float hi) {
    y_ = y;
    min_ = lo;
    max_ = hi;
    invalidate_setup();
    return create(v);
  }

  core::Status write_into(Values& v, int target, const std::vector<int64_t>& target_dims, int64_t offset) {
    assert(!transpose_);  // only the convolution path passes the target's pixel stride to XNNPACK
    target_ = target;
    target_dims_ = target_dims;
    target_offset_ = offset;
    invalidate_setup();
    return create(v);
  }

 protected:
  core::Status prepare(Values& v) override {
    // Weights that are not constant (a graph input) are repacked whenever they change.
    if (!v.constant(w_) || (b_ >= 0 && !v.constant(b_))) {
      const uint64_t stamp = v.slots[static_cast<size_t>(w_)].version + (b_ >= 0 ? v.slots[static_cast<size_t>(b_)].version << 32 : 0);
      if (stamp != weights_stamp_) {
        RC_CHECK(create(v));
        weights_stamp_ = stamp;
        invalidate_setup();
      }
    }
    return core::Ok{};
  }

  float* output(Values& v, int32_t dtype) override {
    if (target_ < 0) return XnnStep::output(v, dtype);
    // Fused: the Concat step marks the target written. Its storage was sized at creation (or placed in the arena).
    Tensor& target = v.slots[static_cast<size_t>(target_)].t;
    assert(target.dims == target_dims_);
    if (target.f.size() != static_cast<size_t>(target.numel())) target.reshape(dtype, target_dims_);
    return target.f.data() + target_offset_;
  }

  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    const Input& in = inputs_[0];
    if (transpose_) {
      return xnn_setup_deconvolution2d_nhwc_f32(ops_[0].get(), static_cast<size_t>(in.dims[0]), static_cast<size_t>(in.dims[2]),
                                                static_cast<size_t>(in.dims[3]), static_cast<uint32_t>(adjustment_[0]),
                                                static_cast<uint32_t>(adjustment_[1]), x[0], y, threadpool);
    }
    return xnn_setup_convolution2d_nhwc_f32(ops_[0].get(), static_cast<size_t>(in.dims[0]), static_cast<size_t>(in.dims[2]),
                                            static_cast<size_t>(in.dims[3]), x[0], y, threadpool);
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
    if (b_ >= 0) bias.assign(v.peek(b_).f.begin(), v.peek(b_).f.end());
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
          static_cast<size_t>(cig), static_cast<size_t>(cog), static_cast<size_t>(cig * groups), static_cast<size_t>(cog * groups),
          packed_.data(), bias.empty() ? nullptr : bias.data(), min_, max_, 0, &raw);
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
          static_cast<uint32_t>(g_.pads_end[0] + extra_bottom), static_cast<uint32_t>(g_.pads_begin[1]), static_cast<uint32_t>(xkh),
          static_cast<uint32_t>(xkw), static_cast<uint32_t>(g_.strides[0]), static_cast<uint32_t>(g_.strides[1]),
          static_cast<uint32_t>(g_.dilations[0]), static_cast<uint32_t>(g_.dilations[1]), static_cast<uint32_t>(groups),
          static_cast<size_t>(cig), static_cast<size_t>(cog), static_cast<size_t>(cig * groups), static_cast<size_t>(output_pixel_stride),
          packed_.data(), bias.empty() ? nullptr : bias.data(), min_, max_, 0, &raw);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_convolution2d_nhwc_f32", status);
    }
    ops_.clear();
    add_operator(raw);
    // XNNPACK packed its own copy at creation and never reads this one again: keeping it held every Conv's weights
    // twice (214 MB of 1.3 GB at Stable Diffusion's VAE decoder).
    std::vector<float>().swap(packed_);
    return core::Ok{};
  }

  bool transpose_;
  int x_, w_, b_;
  ConvGeometry g_;
  std::array<int64_t, 2> kernel_{};      // the kernel XNNPACK runs (a zero-extended depthwise kernel, see plan())
  std::array<int64_t, 2> adjustment_{};  // deconvolution: output_padding plus any extra end output
  std::vector<float> packed_;            // the weights in XNNPACK's order, only while create() hands them over
  uint64_t weights_stamp_ = ~uint64_t{0};
  float min_ = kNoMin, max_ = kNoMax;  // output range: a fused Relu or Clip (fuse_activation)
  int target_ = -1;                    // fused: the Concat output slot this Conv writes into (-1: its own output y_)
  std::vector<int64_t> target_dims_;
  int64_t target_offset_ = 0;  // first channel of this Conv's slice in the target
};

core::Result<Built> make_conv_step(const NodeIo& io, Values& v, bool zero_extend_depthwise, ConvStep** conv) {
  const Tensor& x = v.peek(io.input(0));
  if (x.dims.size() != 4) return declined("only 2-D convolutions run on XNNPACK");
  if (io.input(1) < 0 || !v.peek(io.input(1)).is_float()) return declined("missing W");
  auto step = std::make_unique<ConvStep>(io.node, io.node.op_type() == "ConvTranspose", io.input(0), io.input(1), io.input(2), io.out[0]);
  auto planned = step->plan(v, zero_extend_depthwise);
  if (!planned.ok()) return declined(planned.error().message);
  std::string note = step->kernel_note();
  *conv = step.get();
  return built(std::move(step), std::move(note));
}

bool is_transpose(const ConvStep& conv) { return conv.transpose(); }

bool has_output_range(const ConvStep& conv) { return conv.has_output_range(); }

core::Status fuse_activation(ConvStep& conv, Values& v, int y, float lo, float hi) { return conv.fuse_activation(v, y, lo, hi); }

core::Status write_into(ConvStep& conv, Values& v, int target, const std::vector<int64_t>& target_dims, int64_t offset) {
  return conv.write_into(v, target, target_dims, offset);
}

}  // namespace dwdeconv::runtime_check::detail
