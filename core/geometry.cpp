#include "core/geometry.h"

namespace dwdeconv::core {

int64_t deconv_output_length(const AxisGeometry& g, int64_t input_length) {
  return g.stride * (input_length - 1) + g.output_padding + g.kernel - g.pad_begin - g.pad_end;
}

int64_t upscale_excess(const AxisGeometry& g) {
  // s*(H-1) + op + k - Pb - Pe - s*H  ==  k + op - Pb - Pe - s
  return g.kernel + g.output_padding - g.pad_begin - g.pad_end - g.stride;
}

std::string describe_output_length(const AxisGeometry& g, const std::string& axis) {
  const int64_t excess = upscale_excess(g);
  std::string text = std::to_string(g.stride) + "*" + axis;
  if (excess > 0) text += "+" + std::to_string(excess);
  if (excess < 0) text += std::to_string(excess);
  return text;
}

std::optional<AutoPad> parse_auto_pad(const std::string& text) {
  if (text.empty() || text == "NOTSET") return AutoPad::kNotSet;
  if (text == "VALID") return AutoPad::kValid;
  if (text == "SAME_UPPER") return AutoPad::kSameUpper;
  if (text == "SAME_LOWER") return AutoPad::kSameLower;
  return std::nullopt;
}

Result<AxisGeometry> resolve_axis(int64_t kernel, int64_t stride, int64_t output_padding, const AxisPadSpec& spec) {
  AxisGeometry g{kernel, stride, 0, 0, output_padding};
  const bool same = spec.auto_pad == AutoPad::kSameUpper || spec.auto_pad == AutoPad::kSameLower;

  std::optional<int64_t> total;  // begin + end, when ONNX derives the pads itself
  if (spec.output_size) {
    if (!spec.input_size) return declined("output_shape is set but the input's spatial size is unknown");
    total = stride * (*spec.input_size - 1) + output_padding + kernel - *spec.output_size;
  } else if (same) {
    total = output_padding + kernel - stride;  // out = H*s, and H cancels
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
