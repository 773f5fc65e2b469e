// Per-axis geometry of a ConvTranspose, and the ONNX rules that resolve its padding.
//
// Pure integer arithmetic: no ONNX, no protobuf. See docs/design.md, "The polyphase identity".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"

namespace dwdeconv::core {

// One spatial axis of a ConvTranspose, with its pads already resolved.
struct AxisGeometry {
  int64_t kernel = 1;
  int64_t stride = 1;
  int64_t pad_begin = 0;
  int64_t pad_end = 0;
  int64_t output_padding = 0;
  int64_t dilation = 1;

  // The kernel's extent on the input grid, (k-1)*d + 1; nullopt: overflows int64.
  std::optional<int64_t> effective_kernel() const;

  bool operator==(const AxisGeometry& o) const {
    return kernel == o.kernel && stride == o.stride && pad_begin == o.pad_begin && pad_end == o.pad_end &&
           output_padding == o.output_padding && dilation == o.dilation;
  }
};

// L = s*(H-1) + op + (k-1)*d + 1 - Pb - Pe, the ONNX output length for input length H.
std::optional<int64_t> deconv_output_length(const AxisGeometry& g, int64_t input_length);  // nullopt: overflows int64

// L - s*H. It does not depend on H, so a node is a clean upscale (excess 0) whatever its input size.
std::optional<int64_t> upscale_excess(const AxisGeometry& g);  // nullopt: overflows int64

inline bool is_clean_upscale(const AxisGeometry& g) { return upscale_excess(g) == std::optional<int64_t>(0); }

// q when the output is s*(H + q) for every H: the excess is a whole number of strides, so each of the s phases yields
// H + q outputs and they interleave into exactly L. 0 for a clean upscale; FCN's uncropped k4 s2 gives 1 (2H+2), a
// stride-1 ConvTranspose any excess. nullopt when the excess is not a multiple of s (2H+1) or overflows.
std::optional<int64_t> phase_growth(const AxisGeometry& g);

// Whether core::plan_axis takes the axis: its output is s*(H + q) (phase_growth), and a dilated kernel has stride 1
// (dilation and stride together spread one phase's taps over two lattices; not planned).
bool plannable(const AxisGeometry& g);

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
//   output_shape given: total = s*(H-1) + op + k_eff - out (k_eff = (k-1)*d + 1); SAME_UPPER puts total/2 at the begin,
//   anything else puts total - total/2 at the begin.  SAME_* alone: out = H*s, so total = op + k_eff - s.  VALID: 0, 0.
// Declines (kDeclined) when the pads cannot be known or come out negative.
Result<AxisGeometry> resolve_axis(int64_t kernel, int64_t stride, int64_t output_padding, const AxisPadSpec& spec, int64_t dilation = 1);

}  // namespace dwdeconv::core
