// Hand-written upsamplers in ONNX text, as PyTorch's exporter writes them (MI-GAN's nearest x mask form).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "rewrite_fixtures.h"

namespace dwdeconv::test {

// PyTorch's export of F.pad(x, torch_pads) pads, as the 8-op chain Constant -> ConstantOfShape -> Concat ->
// Reshape[-1,2] -> Slice(step -1) -> Transpose -> Reshape[-1] -> Cast writing `out`. torch_pads pairs run from
// the last axis backwards; `rank` is the padded tensor's. Tensor names start with `prefix`.
inline std::string pads_chain(const std::string& out, const std::string& prefix, const std::vector<int64_t>& torch_pads, size_t rank) {
  const std::string p = prefix;
  std::string values;
  for (size_t i = 0; i < torch_pads.size(); ++i) values += (i ? ", " : "") + std::to_string(torch_pads[i]);
  const std::string n = std::to_string(torch_pads.size());
  return "  " + p + "const = Constant <value = int64[" + n + "] {" + values + "}> ()\n" + "  " + p + "len = Constant <value = int64[1] {" +
         std::to_string(2 * rank - torch_pads.size()) + "}> ()\n" + "  " + p + "zeros = ConstantOfShape <value = int64[1] {0}> (" + p +
         "len)\n" + "  " + p + "cat = Concat <axis = 0> (" + p + "const, " + p + "zeros)\n" + "  " + p +
         "shape2 = Constant <value = int64[2] {-1, 2}> ()\n" + "  " + p + "pairs = Reshape (" + p + "cat, " + p + "shape2)\n" + "  " + p +
         "starts = Constant <value = int64[1] {-1}> ()\n" + "  " + p + "ends = Constant <value = int64[1] {-9223372036854775807}> ()\n" +
         "  " + p + "axes = Constant <value = int64[1] {0}> ()\n" + "  " + p + "steps = Constant <value = int64[1] {-1}> ()\n" + "  " + p +
         "rev = Slice (" + p + "pairs, " + p + "starts, " + p + "ends, " + p + "axes, " + p + "steps)\n" + "  " + p +
         "t = Transpose <perm = [1, 0]> (" + p + "rev)\n" + "  " + p + "shape1 = Constant <value = int64[1] {-1}> ()\n" + "  " + p +
         "flat = Reshape (" + p + "t, " + p + "shape1)\n" + "  " + out + " = Cast <to = 7> (" + p + "flat)\n";
}

// F.pad(x, [left, right, top, bottom]) of a 4-D tensor: ONNX's [0, 0, top, left, 0, 0, bottom, right].
inline std::string pads_chain(const std::string& out, const std::string& prefix, int64_t left, int64_t right, int64_t top, int64_t bottom) {
  return pads_chain(out, prefix, {left, right, top, bottom}, 4);
}

// What a hand-written upsampler (input X, output Y, its Conv named "up1") must become when rewritten.
struct ExpectedUpsampler {
  std::string form;
  int64_t s = 2, channels = 3, opset = 13, h = 5, w = 4;
  std::array<int64_t, 2> kernel{4, 4};
  std::array<int64_t, 4> pads{1, 1, 1, 1};
  std::vector<std::string> gone_ops;           // ops that must not be left in the graph
  std::vector<std::string> gone_initializers;  // initializers only the upsampler read
};

// Rewrites, and requires exactly one row: `e.form`, rewritten, with e's geometry. Its phase Convs read X
// (the low-resolution input), the hand-written nodes and constants are gone, the numbers equal the
// original's on a seeded input, and the rewrite is idempotent and deterministic.
inline Rewritten require_upsampler_rewritten(const onnx::ModelProto& original, const ExpectedUpsampler& e, uint32_t seed) {
  auto out = rewrite_copy(original);
  std::string rows;
  for (const auto& n : out.result.nodes)
    rows += std::string(rewrite::form_name(n.summary.form)) + " '" + n.summary.name + "': " + n.reason + "; ";
  CAPTURE(rows);
  REQUIRE(out.result.nodes.size() == 1);
  const auto& row = out.result.nodes[0];
  REQUIRE(row.rewritten);
  CHECK(row.summary.form == e.form);
  CHECK(row.summary.name == "up1");
  CHECK(row.summary.stride == e.s);
  CHECK(row.summary.kernel == e.kernel);
  CHECK(row.summary.pads == e.pads);
  CHECK(row.summary.channels == e.channels);
  const auto& g = out.model.graph();
  CHECK(checker_error(out.model).empty());
  for (const auto* conv : require_polyphase(g, "Y", e.s, e.channels, e.opset, "up1")) CHECK(conv->input(0) == "X");
  for (const auto& op : e.gone_ops) {
    CAPTURE(op);
    CHECK(count_ops(g, op) == 0);
  }
  for (const auto& init : e.gone_initializers) {
    CAPTURE(init);
    CHECK(find_initializer(g, init) == nullptr);
  }
  const auto x = random_tensor4(1, e.channels, e.h, e.w, seed);
  CHECK(output_diff(original, out.model, {{"X", x}}, "Y", {1, e.channels, e.s * e.h, e.s * e.w}) < kTolerance);
  CHECK(serialized(rewrite_copy(out.model).model) == serialized(out.model));
  CHECK(serialized(rewrite_copy(original).model) == serialized(out.model));
  return out;
}

// One nearest x mask upsampler (MI-GAN's form b), Y = Conv(Pad(Mul(Resize(X), mask)), W), named "up1".
struct MaskSpec {
  int64_t s = 2;
  int64_t k = 4;                       // Conv kernel K
  int64_t pad_begin = 2, pad_end = 1;  // the Pad's spatial pads (both axes)
  int64_t jy = 0, jx = 0;              // where the mask's non-zero sits in each s x s cell
  double gain = 1.0;                   // its value
  int64_t channels = 3, h = 5, w = 4;
  int64_t opset = 13;
  bool mask_identity = true;      // the Mul reads the mask through Identity
  bool pads_chain = true;         // the Pad's pads come from PyTorch's 8-op chain, else an initializer
  bool mask_per_channel = false;  // the mask is [1,C,sH,sW] instead of [1,1,sH,sW]
  std::string x_channels;         // X's channel dim when not C: "1" (a per-channel mask broadcasts X to C) or a symbol
  bool bias = false;
  // Near-miss switches, each of which must make the rewriter keep the upsampler.
  std::string resize_mode = "nearest";
  std::string pad_mode = "constant";
  int64_t conv_stride = 1;
  bool extra_mask_cells = false;   // a second non-zero in every cell
  bool mul_extra_reader = false;   // the Mul's output is also a graph output
  bool mask_extra_reader = false;  // the mask is also read by another node (fine: the mask is kept)
};

inline onnx::ModelProto mask_model(const MaskSpec& m) {
  const std::string c = std::to_string(m.channels), sh = std::to_string(m.s * m.h), sw = std::to_string(m.s * m.w);
  const int64_t oh = m.conv_stride == 1 ? m.s * m.h : (m.s * m.h + m.pad_begin + m.pad_end - m.k) / m.conv_stride + 1;
  const int64_t ow = m.conv_stride == 1 ? m.s * m.w : (m.s * m.w + m.pad_begin + m.pad_end - m.k) / m.conv_stride + 1;
  std::string outputs = "float[1," + c + "," + std::to_string(oh) + "," + std::to_string(ow) + "] Y";
  if (m.mul_extra_reader) outputs += ", float[1," + c + "," + sh + "," + sw + "] M";
  if (m.mask_extra_reader) outputs += ", float[1,1," + sh + "," + sw + "] MASK2";
  std::string body;
  // Resize takes (X, roi, scales) from opset 11 on; PyTorch passes an empty roi constant at 11 and 12.
  body += "  u = Resize <mode = \"" + m.resize_mode +
          "\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"> (X, roi, scales)\n";
  const std::string mask = m.mask_identity ? "mask_id" : "mask";
  if (m.mask_identity) body += "  mask_id = Identity (mask)\n";
  body += "  " + std::string(m.mul_extra_reader ? "M" : "m") + " = Mul (u, " + mask + ")\n";
  if (m.mask_extra_reader) body += "  MASK2 = Identity (mask)\n";
  if (m.pads_chain) body += pads_chain("pads", "p_", m.pad_begin, m.pad_end, m.pad_begin, m.pad_end);
  body += "  p = Pad <mode = \"" + m.pad_mode + "\"> (" + (m.mul_extra_reader ? "M" : "m") + ", pads)\n";
  body += "  Y = Conv <group = " + c + ", kernel_shape = [" + std::to_string(m.k) + ", " + std::to_string(m.k) + "], strides = [" +
          std::to_string(m.conv_stride) + ", " + std::to_string(m.conv_stride) + "]> (p, W" + (m.bias ? ", B" : "") + ")\n";
  onnx::ModelProto model = parse_model("<ir_version: 8, opset_import: [\"\" : " + std::to_string(m.opset) + "]>\ng (float[1," +
                                       (m.x_channels.empty() ? c : m.x_channels) + "," + std::to_string(m.h) + "," + std::to_string(m.w) +
                                       "] X) => (" + outputs + ") {\n" + body + "}\n");
  auto& g = *model.mutable_graph();
  *g.add_initializer() = onnx_io::make_tensor("roi", onnx::TensorProto::FLOAT, {0}, {}, true);
  const double s = static_cast<double>(m.s);
  *g.add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, {1, 1, s, s}, true);
  const int64_t planes = m.mask_per_channel ? m.channels : 1;
  std::vector<double> mask_values(static_cast<size_t>(planes * m.s * m.h * m.s * m.w), 0.0);
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t y = 0; y < m.s * m.h; ++y) {
      for (int64_t x = 0; x < m.s * m.w; ++x) {
        const bool tap = y % m.s == m.jy && x % m.s == m.jx;
        const bool extra = m.extra_mask_cells && y % m.s == (m.jy + 1) % m.s && x % m.s == m.jx;
        if (tap || extra) mask_values[static_cast<size_t>((p * m.s * m.h + y) * m.s * m.w + x)] = m.gain;
      }
    }
  }
  *g.add_initializer() = onnx_io::make_tensor("mask", onnx::TensorProto::FLOAT, {1, planes, m.s * m.h, m.s * m.w}, mask_values, true);
  if (!m.pads_chain) {
    *g.add_initializer() = onnx_io::make_int64_tensor("pads", {8}, {0, 0, m.pad_begin, m.pad_begin, 0, 0, m.pad_end, m.pad_end});
  }
  set_random_initializer(g, "W", onnx::TensorProto::FLOAT, {m.channels, 1, m.k, m.k}, 11);
  if (m.bias) set_random_initializer(g, "B", onnx::TensorProto::FLOAT, {m.channels}, 12);
  name_node(model, "Y", "up1");
  return model;
}

}  // namespace dwdeconv::test
