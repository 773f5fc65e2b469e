#include "core/geometry.h"

namespace dwdeconv::core {

namespace {

// a + b - c - d - e without overflow, or nullopt: hostile pads and strides are int64 attributes.
std::optional<int64_t> sum_checked(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r) || __builtin_sub_overflow(r, c, &r) || __builtin_sub_overflow(r, d, &r) ||
      __builtin_sub_overflow(r, e, &r)) {
    return std::nullopt;
  }
  return r;
}

}  // namespace

std::optional<int64_t> AxisGeometry::effective_kernel() const {
  int64_t span = 0;
  if (__builtin_mul_overflow(kernel - 1, dilation, &span) || __builtin_add_overflow(span, 1, &span)) return std::nullopt;
  return span;
}

std::optional<int64_t> deconv_output_length(const AxisGeometry& g, int64_t input_length) {
  int64_t span = 0, k_op = 0;
  const auto k_eff = g.effective_kernel();
  if (!k_eff || __builtin_mul_overflow(g.stride, input_length - 1, &span) || __builtin_add_overflow(g.output_padding, *k_eff, &k_op)) {
    return std::nullopt;
  }
  return sum_checked(span, k_op, g.pad_begin, g.pad_end, 0);
}

std::optional<int64_t> upscale_excess(const AxisGeometry& g) {
  // s*(H-1) + op + k_eff - Pb - Pe - s*H  ==  k_eff + op - Pb - Pe - s
  int64_t k_op = 0;
  const auto k_eff = g.effective_kernel();
  if (!k_eff || __builtin_add_overflow(*k_eff, g.output_padding, &k_op)) return std::nullopt;
  return sum_checked(k_op, 0, g.pad_begin, g.pad_end, g.stride);
}

std::optional<int64_t> phase_growth(const AxisGeometry& g) {
  const auto excess = upscale_excess(g);
  if (!excess || g.stride < 1 || *excess % g.stride != 0) return std::nullopt;
  return *excess / g.stride;
}

bool plannable(const AxisGeometry& g) { return phase_growth(g).has_value() && (g.dilation == 1 || g.stride == 1); }

std::string describe_output_length(const AxisGeometry& g, const std::string& axis) {
  const auto excess = upscale_excess(g);
  std::string text = std::to_string(g.stride) + "*" + axis;
  if (!excess) return text + " off by more than int64 holds";
  if (*excess > 0) text += "+" + std::to_string(*excess);
  if (*excess < 0) text += std::to_string(*excess);
  return text;
}

std::optional<AutoPad> parse_auto_pad(const std::string& text) {
  if (text.empty() || text == "NOTSET") return AutoPad::kNotSet;
  if (text == "VALID") return AutoPad::kValid;
  if (text == "SAME_UPPER") return AutoPad::kSameUpper;
  if (text == "SAME_LOWER") return AutoPad::kSameLower;
  return std::nullopt;
}

Result<AxisGeometry> resolve_axis(int64_t kernel, int64_t stride, int64_t output_padding, const AxisPadSpec& spec, int64_t dilation) {
  AxisGeometry g{kernel, stride, 0, 0, output_padding, dilation};
  const auto k_eff = g.effective_kernel();
  if (!k_eff) return declined("kernel " + std::to_string(kernel) + " with dilation " + std::to_string(dilation) + " overflows int64");
  const bool same = spec.auto_pad == AutoPad::kSameUpper || spec.auto_pad == AutoPad::kSameLower;

  std::optional<int64_t> total;  // begin + end, when ONNX derives the pads itself
  if (spec.output_size) {
    if (!spec.input_size) return declined("output_shape is set but the input's spatial size is unknown");
    total = stride * (*spec.input_size - 1) + output_padding + *k_eff - *spec.output_size;
  } else if (same) {
    total = output_padding + *k_eff - stride;  // out = H*s, and H cancels
  } else if (spec.auto_pad == AutoPad::kNotSet) {
    g.pad_begin = spec.explicit_begin;
    g.pad_end = spec.explicit_end;
  }  // VALID: zero pads

  if (total) {
    if (*total < 0) return declined("resolved total padding " + std::to_string(*total) + " is negative");
    const int64_t half = *total / 2;
    const bool upper = spec.auto_pad == AutoPad::kSameUpper;
    g.pad_begin = upper ? half : *total - half;
    g.pad_end = upper ? *total - half : half;
  }
  return g;
}

}  // namespace dwdeconv::core
