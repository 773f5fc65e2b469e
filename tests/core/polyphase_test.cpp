#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "core/polyphase.h"
#include "core/reference.h"

using namespace dwdeconv::core;

namespace {

Tensor4 random_tensor(int64_t n, int64_t c, int64_t h, int64_t w, std::mt19937& rng) {
  Tensor4 t(n, c, h, w);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (auto& v : t.data) v = dist(rng);
  return t;
}

double max_abs_diff(const Tensor4& a, const Tensor4& b) {
  REQUIRE(a.n == b.n);
  REQUIRE(a.c == b.c);
  REQUIRE(a.h == b.h);
  REQUIRE(a.w == b.w);
  double worst = 0;
  for (size_t i = 0; i < a.data.size(); ++i) worst = std::max(worst, std::abs(a.data[i] - b.data[i]));
  return worst;
}

// Every clean axis configuration with k <= 9, s <= 4, op < s, and every split of the total padding (so
// begin != end is covered).
std::vector<AxisGeometry> clean_axes() {
  std::vector<AxisGeometry> axes;
  for (int64_t s = 1; s <= 4; ++s) {
    for (int64_t k = 1; k <= 9; ++k) {
      for (int64_t op = 0; op < s; ++op) {
        const int64_t total = k + op - s;  // Pb + Pe for a clean upscale
        for (int64_t pb = 0; pb <= total; ++pb) axes.push_back({k, s, pb, total - pb, op});
      }
    }
  }
  return axes;
}

ConvTranspose2dParams deconv_params(const AxisGeometry& y, const AxisGeometry& x, int64_t channels) {
  ConvTranspose2dParams p;
  p.strides = {y.stride, x.stride};
  p.pads = {y.pad_begin, x.pad_begin, y.pad_end, x.pad_end};
  p.output_padding = {y.output_padding, x.output_padding};
  p.group = channels;
  return p;
}

}  // namespace

TEST_CASE("phase plan equals a naive ConvTranspose for every clean configuration", "[core][polyphase]") {
  const auto axes = clean_axes();
  REQUIRE(axes.size() == 365);  // sum over (s, k, op) of max(0, k + op - s + 1)
  std::mt19937 rng(20261129);
  size_t checked = 0, with_crop = 0, with_bias_only = 0, rectangular = 0, asymmetric = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const AxisGeometry& gy = axes[i];
    // Pair each y axis with another configuration of the same stride, so kernels are rectangular and the
    // pads differ per axis; every configuration also appears as x.
    std::vector<size_t> same_stride;
    for (size_t j = 0; j < axes.size(); ++j) {
      if (axes[j].stride == gy.stride) same_stride.push_back(j);
    }
    const AxisGeometry& gx = axes[same_stride[(i * 7 + 3) % same_stride.size()]];
    for (int64_t h : {1, 2, 5}) {
      const int64_t w_in = h == 5 ? 3 : h + 1;
      const int64_t channels = 2;
      const Tensor4 x = random_tensor(1, channels, h, w_in, rng);
      const Tensor4 w = random_tensor(channels, 1, gy.kernel, gx.kernel, rng);
      const std::vector<double> bias{0.25, -0.5};
      const DeconvPlan plan = plan_deconv(gy, gx);
      REQUIRE(plan.phases.size() == static_cast<size_t>(gy.stride * gy.stride));

      const Tensor4 expected = conv_transpose2d_reference(x, w, bias, deconv_params(gy, gx, channels));
      const Tensor4 actual = run_plan_reference(plan, x, w, bias);
      INFO("y: k=" << gy.kernel << " s=" << gy.stride << " pads=" << gy.pad_begin << "," << gy.pad_end << " op=" << gy.output_padding
                   << "; x: k=" << gx.kernel << " pads=" << gx.pad_begin << "," << gx.pad_end << " op=" << gx.output_padding
                   << "; H=" << h);
      REQUIRE(expected.h == gy.stride * h);
      REQUIRE(max_abs_diff(expected, actual) < 1e-12);
      ++checked;
      for (const auto& phase : plan.phases) {
        with_crop += phase.needs_crop();
        with_bias_only += phase.bias_only();
      }
    }
    rectangular += gy.kernel != gx.kernel;
    asymmetric += gy.pad_begin != gy.pad_end;
  }
  // The sweep really reaches the corners it claims to cover.
  CHECK(checked == axes.size() * 3);
  CHECK(with_crop > 0);
  CHECK(with_bias_only > 0);
  CHECK(rectangular > 100);
  CHECK(asymmetric > 100);
}

TEST_CASE("k4 s2 p1 phases take every other tap, flipped", "[core][polyphase]") {
  const auto phases = plan_axis({4, 2, 1, 1, 0});
  REQUIRE(phases.size() == 2);
  // a=0: r = 1, c = 0, M = 2 -> taps w[3], w[1]; pads begin 1, end 0.
  CHECK(phases[0].first_tap == 1);
  CHECK(phases[0].taps == 2);
  CHECK(phases[0].kernel_tap(0) == 3);
  CHECK(phases[0].kernel_tap(1) == 1);
  CHECK(phases[0].pad_begin == 1);
  CHECK(phases[0].pad_end == 0);
  // a=1: r = 0, c = 1, M = 2 -> taps w[2], w[0]; pads begin 0, end 1.
  CHECK(phases[1].kernel_tap(0) == 2);
  CHECK(phases[1].kernel_tap(1) == 0);
  CHECK(phases[1].pad_begin == 0);
  CHECK(phases[1].pad_end == 1);
}

TEST_CASE("stride 1 is a single flipped kernel with pads k-1-Pb and Pb", "[core][polyphase]") {
  const auto phases = plan_axis({3, 1, 2, 0, 0});
  REQUIRE(phases.size() == 1);
  CHECK(phases[0].taps == 3);
  CHECK(phases[0].kernel_tap(0) == 2);
  CHECK(phases[0].kernel_tap(2) == 0);
  CHECK(phases[0].pad_begin == 0);
  CHECK(phases[0].pad_end == 2);
}

TEST_CASE("crop and bias-only phases appear where the design says", "[core][polyphase]") {
  // k=1 < s=3, op=2, pads 0/0: phases 1 and 2 have no taps.
  const auto short_kernel = plan_axis({1, 3, 0, 0, 2});
  CHECK(short_kernel[0].taps == 1);
  CHECK(short_kernel[1].taps == 0);
  CHECK(short_kernel[2].taps == 0);
  // k=3, s=3, op=2, pads 1/1: phase 2 has r = 0, c = 1, M = 1 -> begin pad -1, a crop.
  const auto crop = plan_axis({3, 3, 1, 1, 2});
  CHECK(crop[2].pad_begin == -1);
  CHECK(crop[2].pad_end == 1);
  // s == 2 with k >= 2 and symmetric pads never crops.
  for (int64_t k = 2; k <= 9; ++k) {
    for (int64_t op = 0; op < 2; ++op) {
      const int64_t total = k + op - 2;
      if (total % 2 != 0) continue;
      for (const auto& p : plan_axis({k, 2, total / 2, total / 2, op})) CHECK(p.pad_begin >= 0);
    }
  }
}

TEST_CASE("the DCR channel order matters: CRD would give a different tensor", "[core][polyphase]") {
  // Guards the reference itself: if depth_to_space ignored the mode, the sweep above could hide a wrong order.
  std::mt19937 rng(7);
  const Tensor4 x = random_tensor(1, 8, 2, 2, rng);
  const Tensor4 dcr = depth_to_space_reference(x, 2, true);
  const Tensor4 crd = depth_to_space_reference(x, 2, false);
  CHECK(max_abs_diff(dcr, crd) > 0.1);
  // DCR: channel (by*2 + bx)*C + c lands at (2h + by, 2w + bx).
  CHECK(dcr.at(0, 1, 1, 0) == x.at(0, (1 * 2 + 0) * 2 + 1, 0, 0));
}

TEST_CASE("phase weight indices walk each channel's plane", "[core][polyphase]") {
  const DeconvPlan plan = plan_deconv({4, 2, 1, 1, 0}, {2, 2, 0, 0, 0});
  const auto& phase = plan.phases[1];  // (ay=0, ax=1)
  const auto plane = phase_tap_indices(plan, phase);
  // y taps {3, 1}; x: a=1, r=1, M=1 -> tap 1.
  REQUIRE(plane == std::vector<int64_t>{3 * 2 + 1, 1 * 2 + 1});
  const auto all = phase_weight_indices(plan, phase, 3);
  REQUIRE(all.size() == 6);
  CHECK(all[2] == 8 + 7);  // channel 1 starts at 1*kH*kW = 8
}

namespace {

// Every axis whose output is s*(H + q) with q != 0 (k <= 9, s <= 4, op < s), and every stride-1 axis with
// dilation 2..5 (k <= 5): the lengths a clean upscale misses, FCN's uncropped k4 s2 (2H+2) and GTCRN's dilated
// stride-1 decoder among them.
std::vector<AxisGeometry> grown_axes() {
  std::vector<AxisGeometry> axes;
  for (int64_t s = 1; s <= 4; ++s) {
    for (int64_t k = 1; k <= 9; ++k) {
      for (int64_t op = 0; op < s; ++op) {
        for (int64_t pb = 0; pb <= k; ++pb) {
          for (int64_t pe = 0; pe <= k; ++pe) {
            const AxisGeometry g{k, s, pb, pe, op};
            const auto q = phase_growth(g);
            if (q && *q != 0 && *q >= -2) axes.push_back(g);
          }
        }
      }
    }
  }
  for (int64_t d = 2; d <= 5; ++d) {
    for (int64_t k = 2; k <= 5; ++k) {
      const int64_t k_eff = (k - 1) * d + 1;
      for (int64_t pb = 0; pb <= k_eff; pb += 2) {
        for (int64_t pe = 0; pe <= k_eff; pe += 3) {
          for (int64_t op = 0; op < d; op += d - 1) {
            const AxisGeometry g{k, 1, pb, pe, op, d};
            if (*phase_growth(g) >= -2) axes.push_back(g);  // the test's 4x5 input keeps a positive output
          }
        }
      }
    }
  }
  return axes;
}

}  // namespace

TEST_CASE("phase plan equals a naive ConvTranspose when the output is s*(H+q), and for dilated stride 1", "[core][polyphase]") {
  const auto axes = grown_axes();
  std::mt19937 rng(20261203);
  size_t checked = 0, grown = 0, shrunk = 0, dilated = 0, end_crops = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const AxisGeometry& gy = axes[i];
    REQUIRE(plannable(gy));
    // x: a clean axis of the same stride, or another grown one, so the two axes' growth differs.
    const AxisGeometry gx = i % 2 == 0 ? AxisGeometry{gy.stride + 1, gy.stride, 1, 0, 0} : axes[(i * 5 + 1) % axes.size()];
    if (gx.stride != gy.stride) continue;
    const int64_t qy = *phase_growth(gy), qx = *phase_growth(gx);
    const int64_t h = 5, w_in = 4;  // large enough that H + q > 0 for q >= -2 and every dilated kernel
    const int64_t channels = 2;
    const Tensor4 x = random_tensor(1, channels, h, w_in, rng);
    const Tensor4 w = random_tensor(channels, 1, gy.kernel, gx.kernel, rng);
    const std::vector<double> bias{0.5, -0.25};
    ConvTranspose2dParams p = deconv_params(gy, gx, channels);
    p.dilations = {gy.dilation, gx.dilation};
    const Tensor4 expected = conv_transpose2d_reference(x, w, bias, p);
    const DeconvPlan plan = plan_deconv(gy, gx);
    const Tensor4 actual = run_plan_reference(plan, x, w, bias);
    INFO("y: k=" << gy.kernel << " s=" << gy.stride << " d=" << gy.dilation << " pads=" << gy.pad_begin << "," << gy.pad_end
                 << " op=" << gy.output_padding << " q=" << qy << "; x: k=" << gx.kernel << " d=" << gx.dilation << " pads=" << gx.pad_begin
                 << "," << gx.pad_end << " q=" << qx);
    REQUIRE(expected.h == gy.stride * (h + qy));
    REQUIRE(expected.w == gx.stride * (w_in + qx));
    REQUIRE(max_abs_diff(expected, actual) < 1e-12);
    ++checked;
    grown += qy > 0;
    shrunk += qy < 0;
    dilated += gy.dilation > 1;
    for (const auto& phase : plan.phases) end_crops += phase.y.pad_end < 0 || phase.x.pad_end < 0;
  }
  CHECK(checked > 400);
  CHECK(grown > 100);
  CHECK(shrunk > 50);
  CHECK(dilated > 50);
  CHECK(end_crops > 0);
}

TEST_CASE("FCN's uncropped k4 s2 and GTCRN's dilated stride 1 plan as the design says", "[core][polyphase]") {
  // k4 s2 p0: 2H+2, q = 1. Phase 0: r = 0, c = 0, M = 2 -> begin 1, end 1 (H + 1 outputs).
  const AxisGeometry fcn{4, 2, 0, 0, 0};
  REQUIRE(phase_growth(fcn) == std::optional<int64_t>(1));
  const auto phases = plan_axis(fcn);
  CHECK(phases[0].pad_begin == 1);
  CHECK(phases[0].pad_end == 1);
  // k3 s1 d5, pads 10/10 (GTCRN's time axis): one flipped phase, pads (k-1)*d - Pb = 0 at both ends: T - 10.
  const AxisGeometry gtcrn{3, 1, 10, 10, 0, 5};
  REQUIRE(phase_growth(gtcrn) == std::optional<int64_t>(-10));
  const auto one = plan_axis(gtcrn);
  REQUIRE(one.size() == 1);
  CHECK(one[0].kernel_tap(0) == 2);
  CHECK(one[0].dilation == 5);
  CHECK(one[0].pad_begin == 0);
  CHECK(one[0].pad_end == 0);
  // Not plannable: 2H+1 (the excess is not a whole stride), and dilation with stride 2.
  CHECK_FALSE(plannable({3, 2, 0, 0, 0}));
  CHECK_FALSE(plannable({3, 2, 1, 1, 1, 2}));
}

TEST_CASE("phase plan equals a naive ConvTranspose when the strides differ per axis", "[core][polyphase]") {
  // DeepFilterNet's (1,3) s(1,2) p(0,1) op(0,1), MobileStyleGAN's IDWT (2,1)/(1,2), and every pairing of a clean or
  // grown axis of stride s_y with one of another stride s_x.
  std::vector<AxisGeometry> axes = clean_axes();
  for (const auto& g : grown_axes()) {
    if (g.dilation == 1) axes.push_back(g);
  }
  std::mt19937 rng(20261204);
  size_t checked = 0, with_one = 0;
  for (size_t i = 0; i < axes.size(); i += 3) {
    const AxisGeometry& gy = axes[i];
    const AxisGeometry& gx = axes[(i * 11 + 5) % axes.size()];
    if (gx.stride == gy.stride) continue;
    const int64_t h = 4, w_in = 3, channels = 2;
    const Tensor4 x = random_tensor(1, channels, h, w_in, rng);
    const Tensor4 w = random_tensor(channels, 1, gy.kernel, gx.kernel, rng);
    const std::vector<double> bias{-0.5, 0.75};
    const Tensor4 expected = conv_transpose2d_reference(x, w, bias, deconv_params(gy, gx, channels));
    const DeconvPlan plan = plan_deconv(gy, gx);
    REQUIRE(plan.phases.size() == static_cast<size_t>(gy.stride * gx.stride));
    INFO("y: k=" << gy.kernel << " s=" << gy.stride << " pads=" << gy.pad_begin << "," << gy.pad_end << " op=" << gy.output_padding
                 << "; x: k=" << gx.kernel << " s=" << gx.stride << " pads=" << gx.pad_begin << "," << gx.pad_end
                 << " op=" << gx.output_padding);
    REQUIRE(max_abs_diff(expected, run_plan_reference(plan, x, w, bias)) < 1e-12);
    ++checked;
    with_one += gy.stride == 1 || gx.stride == 1;
  }
  CHECK(checked > 150);
  CHECK(with_one > 30);
  // DeepFilterNet3's ERB decoder layer on its own: kernel (1,3), stride (1,2), padding (0,1), output_padding (0,1).
  const AxisGeometry time{1, 1, 0, 0, 0}, freq{3, 2, 1, 1, 1};
  const Tensor4 x = random_tensor(1, 3, 5, 4, rng);
  const Tensor4 w = random_tensor(3, 1, 1, 3, rng);
  const Tensor4 expected = conv_transpose2d_reference(x, w, {}, deconv_params(time, freq, 3));
  REQUIRE(expected.h == 5);
  REQUIRE(expected.w == 8);
  CHECK(max_abs_diff(expected, run_plan_reference(plan_deconv(time, freq), x, w, {})) < 1e-12);
}
