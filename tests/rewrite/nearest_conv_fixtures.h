// Nearest Resize by an integer factor, then a stride-1 Conv (depthwise, dense or grouped), in ONNX text as
// exporters write it: the `nearest_conv` form.
#pragma once

#include <string>
#include <vector>

#include "rewrite_fixtures.h"

namespace dwdeconv::test {

// Y = Conv(Resize(X), W[, B]), the Conv named "up1".
struct NearestConvSpec {
  int64_t s = 2;
  int64_t ky = 3, kx = 3;
  std::array<int64_t, 4> pads{1, 1, 1, 1};  // the Conv's [top, left, bottom, right]
  std::string auto_pad;                     // when set, written instead of pads
  int64_t c_in = 4, c_out = 4, group = 4;   // depthwise by default
  int64_t h = 3, w = 4;                     // 0: symbolic
  int64_t opset = 13;
  bool bias = false;
  // The Resize as written. PyTorch's nn.Upsample(mode='nearest') exports asymmetric / floor.
  std::string mode = "nearest";
  std::string coordinate = "asymmetric";  // "" leaves the attribute out (its default, or opset 10 which has none)
  std::string rounding = "floor";
  std::vector<double> scales;  // default {1, 1, s, s}
  bool by_sizes = false;       // sizes [1, C, sH, sW] instead of scales (opset 11+)
  std::string resize_extra;    // more Resize attributes, e.g. "axes = [2, 3]"
  // A Pad between the Resize and the Conv ("" for none): mode constant, reflect or edge, on H and W.
  std::string pad_mode;
  std::array<int64_t, 4> pad_amounts{1, 1, 1, 1};  // [top, left, bottom, right]
  // Near-miss switches.
  int64_t conv_stride = 1, conv_dilation = 1;
  bool resize_extra_reader = false;  // the Resize output is a graph output too
  bool weight_input = false;         // W is a graph input, not a constant
  uint32_t seed = 5;
};

// Values that are multiples of 1/16 in [-1, 1]: sums of a few of them are exact in float, so the derived kernel
// equals the exact box sum and the naive comparison can stay at 1e-9.
inline std::vector<double> dyadic_values(size_t count, uint32_t seed) {
  std::vector<double> v = random_values(count, seed);
  for (double& x : v) x = std::round(x * 16.0) / 16.0;
  return v;
}

inline onnx::ModelProto nearest_conv_model(const NearestConvSpec& m) {
  const std::string ci = std::to_string(m.c_in), co = std::to_string(m.c_out);
  const std::string hh = m.h > 0 ? std::to_string(m.h) : "H", ww = m.w > 0 ? std::to_string(m.w) : "W";
  std::vector<double> scales = m.scales.empty() ? std::vector<double>{1, 1, double(m.s), double(m.s)} : m.scales;
  std::string attrs = "mode = \"" + m.mode + "\"";
  if (!m.coordinate.empty()) attrs += ", coordinate_transformation_mode = \"" + m.coordinate + "\"";
  if (!m.rounding.empty()) attrs += ", nearest_mode = \"" + m.rounding + "\"";
  if (!m.resize_extra.empty()) attrs += ", " + m.resize_extra;
  std::string resize_inputs;
  if (m.opset < 11) {
    resize_inputs = "X, scales";
  } else if (m.by_sizes) {
    resize_inputs = "X, , , sizes";
  } else {
    resize_inputs = m.opset < 13 ? "X, roi, scales" : "X, , scales";  // roi an empty constant at 11 and 12
  }
  std::string conv_attrs = "group = " + std::to_string(m.group) + ", kernel_shape = [" + std::to_string(m.ky) + ", " +
                           std::to_string(m.kx) + "], strides = [" + std::to_string(m.conv_stride) + ", " + std::to_string(m.conv_stride) +
                           "], dilations = [" + std::to_string(m.conv_dilation) + ", " + std::to_string(m.conv_dilation) + "]";
  if (!m.auto_pad.empty()) {
    conv_attrs += ", auto_pad = \"" + m.auto_pad + "\"";
  } else {
    conv_attrs += ", pads = [" + std::to_string(m.pads[0]) + ", " + std::to_string(m.pads[1]) + ", " + std::to_string(m.pads[2]) + ", " +
                  std::to_string(m.pads[3]) + "]";
  }
  const std::string u = m.resize_extra_reader ? "U" : "u";
  std::string inputs = "float[1," + ci + "," + hh + "," + ww + "] X";
  if (m.weight_input)
    inputs += ", float[" + co + "," + std::to_string(m.c_in / m.group) + "," + std::to_string(m.ky) + "," + std::to_string(m.kx) + "] W";
  std::string outputs = "float[1," + co + ",OH,OW] Y";
  if (m.resize_extra_reader) outputs += ", float[1," + ci + ",UH,UW] U";
  std::string pad;  // the Pad node and what the Conv reads
  const std::vector<int64_t> full_pads{0, 0, m.pad_amounts[0], m.pad_amounts[1], 0, 0, m.pad_amounts[2], m.pad_amounts[3]};
  if (!m.pad_mode.empty()) {
    std::string list;
    for (int64_t p : full_pads) list += (list.empty() ? "" : ", ") + std::to_string(p);
    pad = m.opset < 11 ? "  v = Pad <mode = \"" + m.pad_mode + "\", pads = [" + list + "]> (" + u + ")\n"
                       : "  v = Pad <mode = \"" + m.pad_mode + "\"> (" + u + ", padsP)\n";
  }
  const std::string text = "<ir_version: 8, opset_import: [\"\" : " + std::to_string(m.opset) + "]>\ng (" + inputs + ") => (" + outputs +
                           ") {\n  " + u + " = Resize <" + attrs + "> (" + resize_inputs + ")\n" + pad + "  Y = Conv <" + conv_attrs +
                           "> (" + (m.pad_mode.empty() ? u : std::string("v")) + ", W" + (m.bias ? ", B" : "") + ")\n}\n";
  onnx::ModelProto model = parse_model(text);
  auto& g = *model.mutable_graph();
  if (m.opset >= 11 && m.opset < 13 && !m.by_sizes)
    *g.add_initializer() = onnx_io::make_tensor("roi", onnx::TensorProto::FLOAT, {0}, {}, true);
  if (m.by_sizes) {
    *g.add_initializer() =
        onnx_io::make_int64_tensor("sizes", {4}, {1, m.c_in, m.s * std::max<int64_t>(m.h, 1), m.s * std::max<int64_t>(m.w, 1)});
  } else {
    *g.add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, scales, true);
  }
  const std::vector<int64_t> w_dims{m.c_out, m.c_in / m.group, m.ky, m.kx};
  if (!m.weight_input) {
    *g.add_initializer() =
        onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, w_dims,
                             dyadic_values(static_cast<size_t>(m.c_out * (m.c_in / m.group) * m.ky * m.kx), m.seed), true);
  }
  if (!m.pad_mode.empty() && m.opset >= 11) *g.add_initializer() = onnx_io::make_int64_tensor("padsP", {8}, full_pads);
  if (m.bias)
    *g.add_initializer() =
        onnx_io::make_tensor("B", onnx::TensorProto::FLOAT, {m.c_out}, dyadic_values(static_cast<size_t>(m.c_out), m.seed + 1), true);
  name_node(model, "Y", "up1");
  return model;
}

// Every upsampler form this tool knows, so the tests do not depend on which ones the default picks.
inline rewrite::RewriteOptions all_forms() {
  rewrite::RewriteOptions options;
  options.forms = {rewrite::Form::kConvTranspose, rewrite::Form::kNearestMask, rewrite::Form::kNearestConv};
  return options;
}

}  // namespace dwdeconv::test
