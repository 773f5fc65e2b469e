#include "core/polyphase.h"

#include <cassert>

namespace dwdeconv::core {
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

int64_t AxisPhase::kernel_tap(int64_t n) const {
  assert(n >= 0 && n < taps);
  return first_tap + stride * (taps - 1 - n);
}

std::vector<AxisPhase> plan_axis(const AxisGeometry& g) {
  assert(plannable(g) && g.stride >= 1);
  const int64_t s = g.stride;
  const int64_t q = *phase_growth(g);  // each phase yields H + q outputs
  std::vector<AxisPhase> phases;
  phases.reserve(static_cast<size_t>(s));
  for (int64_t a = 0; a < s; ++a) {
    AxisPhase p;
    p.phase = a;
    const int64_t shifted = a + g.pad_begin;            // output index a sits at a + Pb in the unpadded output
    p.first_tap = shifted - s * floor_div(shifted, s);  // r = (a + Pb) mod s
    const int64_t c = floor_div(shifted, s);            // input offset of tap r
    const int64_t span = g.kernel - p.first_tap;        // taps r, r+s, ... below k
    p.taps = span > 0 ? (span + s - 1) / s : 0;         // M = max(0, ceil((k - r) / s))
    p.pad_begin = (p.taps - 1) * g.dilation - c;        // d == 1 unless s == 1
    p.pad_end = c + q;
    p.stride = s;
    p.dilation = g.dilation;
    phases.push_back(p);
  }
  return phases;
}

DeconvPlan plan_deconv(const AxisGeometry& y, const AxisGeometry& x) {
  DeconvPlan plan{y, x, {}};
  const auto ys = plan_axis(y);
  const auto xs = plan_axis(x);
  for (const auto& py : ys) {
    for (const auto& px : xs) plan.phases.push_back({py, px});
  }
  return plan;
}

std::vector<int64_t> phase_tap_indices(const DeconvPlan& plan, const PhasePlan& phase) {
  std::vector<int64_t> indices;
  indices.reserve(static_cast<size_t>(phase.y.taps * phase.x.taps));
  for (int64_t ny = 0; ny < phase.y.taps; ++ny) {
    for (int64_t nx = 0; nx < phase.x.taps; ++nx) {
      indices.push_back(phase.y.kernel_tap(ny) * plan.x.kernel + phase.x.kernel_tap(nx));
    }
  }
  return indices;
}

std::vector<int64_t> phase_weight_indices(const DeconvPlan& plan, const PhasePlan& phase, int64_t in_channels, int64_t out_channels,
                                          int64_t groups) {
  const auto plane = phase_tap_indices(plan, phase);
  const int64_t plane_size = plan.y.kernel * plan.x.kernel;
  const int64_t out_per_group = out_channels / groups, in_per_group = in_channels / groups;
  std::vector<int64_t> indices;
  indices.reserve(plane.size() * static_cast<size_t>(out_channels * in_per_group));
  for (int64_t co = 0; co < out_channels; ++co) {
    for (int64_t i = 0; i < in_per_group; ++i) {
      const int64_t ci = (co / out_per_group) * in_per_group + i;
      const int64_t start = (ci * out_per_group + co % out_per_group) * plane_size;
      for (int64_t t : plane) indices.push_back(start + t);
    }
  }
  return indices;
}

}  // namespace dwdeconv::core
