#include "core/reference.h"

#include <algorithm>
#include <cassert>

namespace dwdeconv::core {

Tensor4 conv2d_reference(const Tensor4& x, const Tensor4& w, const std::vector<double>& bias, const Conv2dParams& p) {
  const int64_t group = p.group;
  assert(x.c == w.c * group && w.n % group == 0);
  const int64_t in_per_group = w.c;
  const int64_t out_per_group = w.n / group;
  const int64_t kh_eff = (w.h - 1) * p.dilations[0] + 1;
  const int64_t kw_eff = (w.w - 1) * p.dilations[1] + 1;
  const int64_t oh = (x.h + p.pads[0] + p.pads[2] - kh_eff) / p.strides[0] + 1;
  const int64_t ow = (x.w + p.pads[1] + p.pads[3] - kw_eff) / p.strides[1] + 1;
  Tensor4 y(x.n, w.n, oh, ow);
  for (int64_t n = 0; n < x.n; ++n) {
    for (int64_t oc = 0; oc < w.n; ++oc) {
      const int64_t g = oc / out_per_group;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = bias.empty() ? 0.0 : bias[static_cast<size_t>(oc)];
          for (int64_t ic = 0; ic < in_per_group; ++ic) {
            for (int64_t ky = 0; ky < w.h; ++ky) {
              const int64_t iy = oy * p.strides[0] + ky * p.dilations[0] - p.pads[0];
              if (iy < 0 || iy >= x.h) continue;
              for (int64_t kx = 0; kx < w.w; ++kx) {
                const int64_t ix = ox * p.strides[1] + kx * p.dilations[1] - p.pads[1];
                if (ix < 0 || ix >= x.w) continue;
                sum += x.at(n, g * in_per_group + ic, iy, ix) * w.at(oc, ic, ky, kx);
              }
            }
          }
          y.at(n, oc, oy, ox) = sum;
        }
      }
    }
  }
  return y;
}

Tensor4 conv_transpose2d_reference(const Tensor4& x, const Tensor4& w, const std::vector<double>& bias, const ConvTranspose2dParams& p) {
  const int64_t group = p.group;
  assert(x.c == w.n && w.n % group == 0);
  const int64_t in_per_group = w.n / group;
  const int64_t out_per_group = w.c;
  const int64_t oc_total = out_per_group * group;
  const int64_t oh = p.strides[0] * (x.h - 1) + p.output_padding[0] + (w.h - 1) * p.dilations[0] + 1 - p.pads[0] - p.pads[2];
  const int64_t ow = p.strides[1] * (x.w - 1) + p.output_padding[1] + (w.w - 1) * p.dilations[1] + 1 - p.pads[1] - p.pads[3];
  Tensor4 y(x.n, oc_total, oh, ow);
  for (int64_t n = 0; n < x.n; ++n) {
    for (int64_t oc = 0; oc < oc_total; ++oc) {
      const int64_t g = oc / out_per_group;
      const int64_t oc_in_group = oc % out_per_group;
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = bias.empty() ? 0.0 : bias[static_cast<size_t>(oc)];
          for (int64_t icg = 0; icg < in_per_group; ++icg) {
            const int64_t ic = g * in_per_group + icg;
            // The scatter: input iy with tap ky lands on output iy*s + ky*d - Pb, so output oy collects, per tap, the
            // one iy = (oy + Pb - ky*d) / s when that divides and is inside x. Taps from the last down visit iy in
            // ascending order, the order of a walk over every (iy, ky).
            for (int64_t ky = w.h - 1; ky >= 0; --ky) {
              const int64_t ty = oy + p.pads[0] - ky * p.dilations[0];
              if (ty < 0 || ty % p.strides[0] != 0 || ty / p.strides[0] >= x.h) continue;
              const int64_t iy = ty / p.strides[0];
              for (int64_t kx = w.w - 1; kx >= 0; --kx) {
                const int64_t tx = ox + p.pads[1] - kx * p.dilations[1];
                if (tx < 0 || tx % p.strides[1] != 0 || tx / p.strides[1] >= x.w) continue;
                sum += x.at(n, ic, iy, tx / p.strides[1]) * w.at(ic, oc_in_group, ky, kx);
              }
            }
          }
          y.at(n, oc, oy, ox) = sum;
        }
      }
    }
  }
  return y;
}

Tensor4 pad2d_reference(const Tensor4& x, const std::array<int64_t, 4>& pads, double value) {
  const int64_t oh = x.h + pads[0] + pads[2];
  const int64_t ow = x.w + pads[1] + pads[3];
  Tensor4 y(x.n, x.c, oh, ow);
  for (int64_t n = 0; n < x.n; ++n) {
    for (int64_t c = 0; c < x.c; ++c) {
      for (int64_t oy = 0; oy < oh; ++oy) {
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t iy = oy - pads[0];
          const int64_t ix = ox - pads[1];
          const bool inside = iy >= 0 && iy < x.h && ix >= 0 && ix < x.w;
          y.at(n, c, oy, ox) = inside ? x.at(n, c, iy, ix) : value;
        }
      }
    }
  }
  return y;
}

Tensor4 concat_channels_reference(const std::vector<Tensor4>& parts) {
  assert(!parts.empty());
  int64_t channels = 0;
  for (const auto& t : parts) channels += t.c;
  const auto& first = parts.front();
  Tensor4 y(first.n, channels, first.h, first.w);
  for (int64_t n = 0; n < first.n; ++n) {
    int64_t offset = 0;
    for (const auto& t : parts) {
      assert(t.n == first.n && t.h == first.h && t.w == first.w);
      for (int64_t c = 0; c < t.c; ++c) {
        for (int64_t iy = 0; iy < t.h; ++iy) {
          for (int64_t ix = 0; ix < t.w; ++ix) y.at(n, offset + c, iy, ix) = t.at(n, c, iy, ix);
        }
      }
      offset += t.c;
    }
  }
  return y;
}

Tensor4 depth_to_space_reference(const Tensor4& x, int64_t block, bool dcr) {
  assert(x.c % (block * block) == 0);
  const int64_t c_out = x.c / (block * block);
  Tensor4 y(x.n, c_out, x.h * block, x.w * block);
  for (int64_t n = 0; n < x.n; ++n) {
    for (int64_t c = 0; c < c_out; ++c) {
      for (int64_t by = 0; by < block; ++by) {
        for (int64_t bx = 0; bx < block; ++bx) {
          const int64_t ic = dcr ? (by * block + bx) * c_out + c : (c * block + by) * block + bx;
          for (int64_t iy = 0; iy < x.h; ++iy) {
            for (int64_t ix = 0; ix < x.w; ++ix) y.at(n, c, iy * block + by, ix * block + bx) = x.at(n, ic, iy, ix);
          }
        }
      }
    }
  }
  return y;
}

Tensor4 run_plan_reference(const DeconvPlan& plan, const Tensor4& x, const Tensor4& w, const std::vector<double>& bias) {
  const int64_t channels = w.n;
  // Every phase yields H + q rows and W + q columns (phase_growth).
  const int64_t out_h = x.h + *phase_growth(plan.y), out_w = x.w + *phase_growth(plan.x);
  std::vector<Tensor4> phase_outputs;
  for (const auto& phase : plan.phases) {
    if (phase.bias_only()) {
      Tensor4 out(x.n, channels, out_h, out_w);
      for (int64_t n = 0; n < x.n; ++n) {
        for (int64_t c = 0; c < channels; ++c) {
          for (int64_t i = 0; i < out_h * out_w; ++i) {
            out.data[static_cast<size_t>((n * channels + c) * out_h * out_w + i)] = bias.empty() ? 0.0 : bias[static_cast<size_t>(c)];
          }
        }
      }
      phase_outputs.push_back(std::move(out));
      continue;
    }
    // Gather the phase kernel [C, 1, My, Mx] from the original [C, 1, kH, kW].
    Tensor4 kernel(channels, 1, phase.y.taps, phase.x.taps);
    const auto indices = phase_weight_indices(plan, phase, channels);
    for (size_t i = 0; i < indices.size(); ++i) kernel.data[i] = w.data[static_cast<size_t>(indices[i])];
    // Negative pads crop through Pad; the rest become Conv pads, as the emitter does by default.
    const std::array<int64_t, 4> all{phase.y.pad_begin, phase.x.pad_begin, phase.y.pad_end, phase.x.pad_end};
    std::array<int64_t, 4> crop{}, pads{};
    for (size_t i = 0; i < 4; ++i) {
      crop[i] = std::min<int64_t>(all[i], 0);
      pads[i] = std::max<int64_t>(all[i], 0);
    }
    const Tensor4 cropped = phase.needs_crop() ? pad2d_reference(x, crop) : x;
    Conv2dParams conv;
    conv.group = channels;
    conv.pads = pads;
    conv.dilations = {phase.y.dilation, phase.x.dilation};
    phase_outputs.push_back(conv2d_reference(cropped, kernel, bias, conv));
  }
  if (plan.phases.size() == 1) return std::move(phase_outputs.front());
  if (plan.y.stride != plan.x.stride) return interleave_reference(phase_outputs, plan.y.stride, plan.x.stride);
  return depth_to_space_reference(concat_channels_reference(phase_outputs), plan.y.stride, /*dcr=*/true);
}

Tensor4 interleave_reference(const std::vector<Tensor4>& phases, int64_t stride_y, int64_t stride_x) {
  assert(static_cast<int64_t>(phases.size()) == stride_y * stride_x);
  const Tensor4& first = phases.front();
  Tensor4 y(first.n, first.c, first.h * stride_y, first.w * stride_x);
  for (int64_t ay = 0; ay < stride_y; ++ay) {
    for (int64_t ax = 0; ax < stride_x; ++ax) {
      const Tensor4& p = phases[static_cast<size_t>(ay * stride_x + ax)];
      for (int64_t n = 0; n < p.n; ++n) {
        for (int64_t c = 0; c < p.c; ++c) {
          for (int64_t h = 0; h < p.h; ++h) {
            for (int64_t w = 0; w < p.w; ++w) y.at(n, c, h * stride_y + ay, w * stride_x + ax) = p.at(n, c, h, w);
          }
        }
      }
    }
  }
  return y;
}

}  // namespace dwdeconv::core
