// The polyphase plan: a depthwise ConvTranspose whose output is s*(H + q) on each axis as s*s stride-1 correlations.
//
// For output o = h*s + a (phase a in [0, s)) on one axis, h in [0, H + q):
//   r = (a + Pb) mod s,  c = floor((a + Pb) / s),  M = max(0, ceil((k - r) / s))
//   g[n] = w[r + s*(M-1-n)]                        (every s-th tap, flipped)
//   y[h*s + a] = bias + sum_n x[h + c - (M-1) + n] * g[n]
// i.e. a stride-1 correlation with g over x padded by begin = M-1-c (negative: crop) and end = c + q (negative: crop).
// q = 0 is a clean xs upscale; q != 0 an output a whole number of strides longer or shorter (phase_growth). With
// stride 1 the one phase is the kernel flipped, dilation kept: begin = (k-1)*d - Pb, end = (k-1)*d + op - Pe.
#pragma once

#include <cstdint>
#include <vector>

#include "core/geometry.h"

namespace dwdeconv::core {

// One output phase of one axis.
struct AxisPhase {
  int64_t phase = 0;      // a: output positions h*s + a
  int64_t first_tap = 0;  // r: the kernel tap that lands on phase a with the smallest input offset
  int64_t taps = 0;       // M: taps of the phase kernel; 0 means the phase sees only the bias
  int64_t pad_begin = 0;  // (M-1)*d - c; negative means the phase starts |pad_begin| elements into x (a crop)
  int64_t pad_end = 0;    // c + q; negative means the phase ends |pad_end| elements before x does (a crop)
  int64_t stride = 1;     // s, the distance between the phase's taps in the original kernel
  int64_t dilation = 1;   // d, the distance between the phase's taps on x (only with s == 1)

  // Index into the original kernel axis of phase tap n (the flip is here).
  int64_t kernel_tap(int64_t n) const;
};

// Every phase of one axis, a = 0..s-1. Requires plannable(g).
std::vector<AxisPhase> plan_axis(const AxisGeometry& g);

// One 2-D phase (ay, ax), the product of the two axis phases.
struct PhasePlan {
  AxisPhase y;
  AxisPhase x;

  bool bias_only() const { return y.taps == 0 || x.taps == 0; }
  bool needs_crop() const { return y.pad_begin < 0 || x.pad_begin < 0 || y.pad_end < 0 || x.pad_end < 0; }
};

// The whole rewrite of one node. Phases are in row-major (ay, ax) order: the Concat's channel order, which
// DepthToSpace in DCR mode turns into pixel (h*s + ay, w*s + ax) when both axes have stride s. With strides that
// differ per axis (s_y != s_x) there are s_y*s_x phases in the same order, and the join interleaves them per axis.
struct DeconvPlan {
  AxisGeometry y;
  AxisGeometry x;
  std::vector<PhasePlan> phases;
};

// Plans a node whose axes are both plannable; their strides may differ.
DeconvPlan plan_deconv(const AxisGeometry& y, const AxisGeometry& x);

// Flat indices into one [kH, kW] kernel plane, in the phase kernel's row-major [My, Mx] order. Gathering
// these for every channel turns a [C,1,kH,kW] weight into the phase's [C,1,My,Mx] weight.
std::vector<int64_t> phase_tap_indices(const DeconvPlan& plan, const PhasePlan& phase);

// Flat indices into a ConvTranspose weight [C_in, C_out/g, kH, kW] for the whole phase weight in Conv layout
// [C_out, C_in/g, My, Mx]: output channel co of group co / (C_out/g) reads input channels (co / (C_out/g)) *
// C_in/g + i. Depthwise (C_in = C_out = g = C) this is [C,1,kH,kW] -> [C,1,My,Mx].
std::vector<int64_t> phase_weight_indices(const DeconvPlan& plan, const PhasePlan& phase, int64_t in_channels, int64_t out_channels,
                                          int64_t groups);

// The depthwise case: C_in = C_out = groups = `channels`.
inline std::vector<int64_t> phase_weight_indices(const DeconvPlan& plan, const PhasePlan& phase, int64_t channels) {
  return phase_weight_indices(plan, phase, channels, channels, channels);
}

}  // namespace dwdeconv::core
