// Naive double-precision NCHW kernels, written straight from the ONNX operator definitions.
//
// They are slow on purpose: every output element is an explicit sum, so they are easy to trust. Tests and the
// verifier use them as the independent reference for both the original and the rewritten graph.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/polyphase.h"

namespace dwdeconv::core {

// A dense NCHW tensor of doubles.
struct Tensor4 {
  int64_t n = 0, c = 0, h = 0, w = 0;
  std::vector<double> data;

  Tensor4() = default;
  Tensor4(int64_t n_, int64_t c_, int64_t h_, int64_t w_) : n(n_), c(c_), h(h_), w(w_), data(static_cast<size_t>(n_ * c_ * h_ * w_), 0.0) {}

  double& at(int64_t in, int64_t ic, int64_t iy, int64_t ix) { return data[static_cast<size_t>(((in * c + ic) * h + iy) * w + ix)]; }
  double at(int64_t in, int64_t ic, int64_t iy, int64_t ix) const { return data[static_cast<size_t>(((in * c + ic) * h + iy) * w + ix)]; }
};

// Conv attributes. pads are [top, left, bottom, right] and may be negative here (a crop).
struct Conv2dParams {
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 4> pads{0, 0, 0, 0};
  std::array<int64_t, 2> dilations{1, 1};
  int64_t group = 1;
};

// ONNX Conv: x [N, C_in, H, W], w [C_out, C_in/group, kH, kW], bias [C_out] or empty.
Tensor4 conv2d_reference(const Tensor4& x, const Tensor4& w, const std::vector<double>& bias, const Conv2dParams& p);

// ConvTranspose attributes with pads already resolved ([top, left, bottom, right]).
struct ConvTranspose2dParams {
  std::array<int64_t, 2> strides{1, 1};
  std::array<int64_t, 4> pads{0, 0, 0, 0};
  std::array<int64_t, 2> output_padding{0, 0};
  std::array<int64_t, 2> dilations{1, 1};
  int64_t group = 1;
};

// ONNX ConvTranspose: x [N, C_in, H, W], w [C_in, C_out/group, kH, kW]. Output length per axis is
// s*(H-1) + op + (k-1)*d + 1 - Pb - Pe, and y[o] collects x[i]*w[t] for every i*s + t*d - Pb == o.
Tensor4 conv_transpose2d_reference(const Tensor4& x, const Tensor4& w, const std::vector<double>& bias, const ConvTranspose2dParams& p);

// ONNX Pad (constant mode) on H and W; negative pads remove elements.
Tensor4 pad2d_reference(const Tensor4& x, const std::array<int64_t, 4>& pads, double value = 0.0);

// ONNX Concat on axis 1.
Tensor4 concat_channels_reference(const std::vector<Tensor4>& parts);

// ONNX DepthToSpace. DCR: channel (by*b + bx)*C + c -> pixel (h*b + by, w*b + bx); CRD: c*b*b + by*b + bx.
Tensor4 depth_to_space_reference(const Tensor4& x, int64_t block, bool dcr);

// Phase outputs [N, C, H, W] in row-major (ay, ax) order interleaved into [N, C, s_y*H, s_x*W]: phase (ay, ax) pixel
// (h, w) lands at (h*s_y + ay, w*s_x + ax). With s_y == s_x it is Concat + DepthToSpace DCR.
Tensor4 interleave_reference(const std::vector<Tensor4>& phases, int64_t stride_y, int64_t stride_x);

// Runs a DeconvPlan the way the emitted graph does (crop Pad, phase Convs, then Concat + DepthToSpace DCR, or the
// per-axis interleave when the strides differ), with the phase kernels gathered by phase_tap_indices. w is the
// depthwise [C, 1, kH, kW] weight.
Tensor4 run_plan_reference(const DeconvPlan& plan, const Tensor4& x, const Tensor4& w, const std::vector<double>& bias);

}  // namespace dwdeconv::core
