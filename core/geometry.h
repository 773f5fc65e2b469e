// Per-axis geometry of a ConvTranspose, and the ONNX rules that resolve its padding.
//
// Pure integer arithmetic: no ONNX, no protobuf. See docs/design.md, "The polyphase identity".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"

namespace dwdeconv::core {

// One spatial axis of a ConvTranspose with dilation 1, with its pads already resolved.
struct AxisGeometry {
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t pad_begin = 0;
  int64_t pad_end = 0;
  int64_t output_padding = 0;

  bool operator==(const AxisGeometry& o) const {
    return kernel == o.kernel && stride == o.stride && pad_begin == o.pad_begin && pad_end == o.pad_end &&
           output_padding == o.output_padding;
  }
};

// L = s*(H-1) + op + k - Pb - Pe, the ONNX output length for input length H.
std::optional<int64_t> deconv_output_length(const AxisGeometry& g, int64_t input_length);  // nullopt: overflows int64

// L - s*H. It does not depend on H, so a node is a clean upscale (excess 0) whatever its input size.
std::optional<int64_t> upscale_excess(const AxisGeometry& g);  // nullopt: overflows int64

inline bool is_clean_upscale(const AxisGeometry& g) { return upscale_excess(g) == std::optional<int64_t>(0); }

// Human-readable output length, e.g. "2*H+1"; `axis` names H or W.
std::string describe_output_length(const AxisGeometry& g, const std::string& axis);

enum class AutoPad { kNotSet, kValid, kSameUpper, kSameLower };

// Parses the ONNX auto_pad string; nullopt for an unknown value.
std::optional<AutoPad> parse_auto_pad(const std::string& text);

// Everything ONNX lets a ConvTranspose say about one axis's padding.
struct AxisPadSpec {
  AutoPad auto_pad = AutoPad::kNotSet;
  int64_t explicit_begin = 0;  // from `pads`
  int64_t explicit_end = 0;
  std::optional<int64_t> output_size;  // from `output_shape`, which overrides `pads`
  std::optional<int64_t> input_size;   // known input length, if any
};

// Resolves begin/end pads following the ConvTranspose schema text:
//   output_shape given: total = s*(H-1) + op + k - out; SAME_UPPER puts total/2 at the begin, anything else
//   puts total - total/2 at the begin.  SAME_* alone: out = H*s, so total = op + k - s.  VALID: 0, 0.
// Declines (kDeclined) when the pads cannot be known or come out negative.
Result<AxisGeometry> resolve_axis(int64_t kernel, int64_t stride, int64_t output_padding, const AxisPadSpec& spec);

}  // namespace dwdeconv::core
