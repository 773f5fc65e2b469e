// The seed generator's model builders (fuzz_seed_models.h): ONNX text and seeded weights for each form.
#include "tests/fuzz/fuzz_seed_models.h"

#include "onnx_io/tensor.h"
#include "tests/support/model_builder.h"

namespace dwdeconv::fuzz {

std::string str(int64_t v) { return std::to_string(v); }

std::string header(int64_t opset, int64_t ir) { return "<ir_version: " + str(ir) + ", opset_import: [\"\" : " + str(opset) + "]>\n"; }

namespace {

std::vector<double> one_tap_planes(int64_t channels, int64_t k, int64_t ty, int64_t tx) {
  std::vector<double> v(static_cast<size_t>(channels * k * k), 0.0);
  for (int64_t c = 0; c < channels; ++c) v[static_cast<size_t>((c * k + ty) * k + tx)] = 1.0;
  return v;
}

}  // namespace

// --- conv_transpose --------------------------------------------------------------------------------------

onnx::ModelProto deconv(const Deconv& d) {
  const std::string hh = d.symbolic ? "H" : str(d.h), ww = d.symbolic ? "W" : str(d.w);
  auto model = test::parse_model(header(d.opset, d.ir) + "g (" + d.type + "[1," + str(d.c) + "," + hh + "," + ww + "] X) => (" + d.type +
                                 "[1," + str(d.m * d.group) + ",?,?] Y) {\n  Y = ConvTranspose <group = " + str(d.group) +
                                 (d.attrs.empty() ? "" : ", " + d.attrs) + "> (X, W" + (d.bias ? ", B" : "") + ")\n}\n");
  auto& g = *model.mutable_graph();
  test::set_random_initializer(g, "W", d.dtype, {d.c, d.m, d.kh, d.kw}, 1, d.raw);
  if (d.bias) test::set_random_initializer(g, "B", d.dtype, {d.m * d.group}, 2, d.raw);
  test::name_node(model, "Y", "up1");
  return model;
}

// --- nearest_mask: Resize, Mul by a one-per-cell mask, Pad, depthwise Conv ---------------------------------

onnx::ModelProto mask_model(const Mask& m) {
  const std::string c = str(m.c);
  const std::string resize_in = m.opset >= 13 ? "X, , scales" : "X, roi, scales";
  const std::string body =
      "  u = Resize <mode = \"" + m.resize_mode + "\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"> (" +
      resize_in + ")\n  mk = Mul (u, mask)\n  p = Pad <mode = \"" + m.pad_mode + "\"> (mk, pads)\n  Y = Conv <group = " + c +
      ", kernel_shape = [" + str(m.k) + ", " + str(m.k) + "], strides = [" + str(m.conv_stride) + ", " + str(m.conv_stride) + "]> (p, W)\n";
  auto model = test::parse_model(header(m.opset) + "g (float[1," + c + "," + str(m.h) + "," + str(m.w) + "] X) => (float[1," + c +
                                 ",?,?] Y) {\n" + body + "}\n");
  auto& g = *model.mutable_graph();
  if (m.opset < 13) *g.add_initializer() = onnx_io::make_tensor("roi", onnx::TensorProto::FLOAT, {0}, {}, true);
  const double s = static_cast<double>(m.s);
  *g.add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, {1, 1, s, s}, true);
  const int64_t planes = m.per_channel ? m.c : 1, mh = m.s * m.h, mw = m.s * m.w;
  std::vector<double> mask(static_cast<size_t>(planes * mh * mw), 0.0);
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t y = 0; y < mh; ++y) {
      for (int64_t x = 0; x < mw; ++x) {
        const bool tap = y % m.s == m.jy && x % m.s == m.jx;
        const bool extra = m.extra_cell && y % m.s == (m.jy + 1) % m.s && x % m.s == m.jx;
        if (tap || extra) mask[static_cast<size_t>((p * mh + y) * mw + x)] = m.gain;
      }
    }
  }
  *g.add_initializer() = onnx_io::make_tensor("mask", onnx::TensorProto::FLOAT, {1, planes, mh, mw}, mask, true);
  *g.add_initializer() = onnx_io::make_int64_tensor("pads", {8}, {0, 0, m.pad_begin, m.pad_begin, 0, 0, m.pad_end, m.pad_end});
  test::set_random_initializer(g, "W", onnx::TensorProto::FLOAT, {m.c, 1, m.k, m.k}, 11);
  test::name_node(model, "Y", "up1");
  return model;
}

// --- zero_insertion: one-tap depthwise ConvTranspose (kernel <= stride), Pad, depthwise Conv ------------------

onnx::ModelProto zero_insertion_model(const ZeroInsertion& m) {
  const std::string c = str(m.c), s = str(m.s), k = str(m.k), kk = str(m.conv_k);
  const std::string body = "  z = ConvTranspose <group = " + c + ", strides = [" + s + ", " + s + "], kernel_shape = [" + k + ", " + k +
                           "]> (X, V" + (m.ct_bias ? ", VB" : "") +
                           ")\n  p = Pad <mode = \"constant\"> (z, pads)\n  Y = Conv <group = " + c + ", kernel_shape = [" + kk + ", " +
                           kk + "]> (p, W)\n";
  auto model = test::parse_model(header(m.opset) + "g (float[1," + c + "," + str(m.h) + "," + str(m.w) + "] X) => (float[1," + c +
                                 ",?,?] Y) {\n" + body + "}\n");
  auto& g = *model.mutable_graph();
  auto taps = one_tap_planes(m.c, m.k, m.ty, m.tx);
  if (m.second_tap) taps[static_cast<size_t>(((m.ty + 1) % m.k) * m.k + m.tx)] = 1.0;
  *g.add_initializer() = onnx_io::make_tensor("V", onnx::TensorProto::FLOAT, {m.c, 1, m.k, m.k}, taps, true);
  if (m.ct_bias)
    *g.add_initializer() =
        onnx_io::make_tensor("VB", onnx::TensorProto::FLOAT, {m.c}, std::vector<double>(static_cast<size_t>(m.c), 0.5), true);
  *g.add_initializer() = onnx_io::make_int64_tensor("pads", {8}, {0, 0, m.pad_begin, m.pad_begin, 0, 0, m.pad_end, m.pad_end});
  test::set_random_initializer(g, "W", onnx::TensorProto::FLOAT, {m.c, 1, m.conv_k, m.conv_k}, 31);
  test::name_node(model, "Y", "up1");
  test::name_node(model, "z", "ins");
  return model;
}

// --- reshape_zero_insertion: StyleGAN2-ADA's upfirdn2d with constant Reshape targets ------------------------

onnx::ModelProto upfirdn_model(const Upfirdn& m) {
  const std::string c = str(m.c), h = str(m.h), w = str(m.w);
  std::string body = m.wrong_split ? "  split_shape = Constant <value = int64[6] {1, " + c + ", 1, " + h + ", " + w + ", 1}> ()\n"
                                   : "  split_shape = Constant <value = int64[6] {1, " + c + ", " + h + ", 1, " + w + ", 1}> ()\n";
  body += "  merge_shape = Constant <value = int64[4] {1, " + c + ", " + str(m.s * m.h) + ", " + str(m.s * m.w) + "}> ()\n";
  body += "  r = Reshape (X, split_shape)\n  z = Pad <mode = \"constant\"> (r, ipads)\n  u = Reshape (z, merge_shape)\n";
  body += "  p = Pad <mode = \"" + m.pad_mode + "\"> (u, pads)\n";
  std::string conv_in = "p";
  if (m.slices) {
    // x[:, :, 0:, 0:] or x[:, :, 0:x.shape[2], 0:x.shape[3]], as PyTorch exports them.
    body += "  one = Constant <value = int64[1] {1}> ()\n";
    for (int axis = 2; axis < 4; ++axis) {
      const std::string a = str(axis);
      if (m.shape_ends) {
        body += "  ps" + a + " = Shape (p)\n  pi" + a + " = Constant <value = int64[1] {" + a + "}> ()\n";
        body += "  pe" + a + " = Gather <axis = 0> (ps" + a + ", pi" + a + ")\n";
      } else {
        body += "  pe" + a + " = Constant <value = int64[1] {9223372036854775807}> ()\n";
      }
      body += "  st" + a + " = Constant <value = int64[1] {0}> ()\n  ax" + a + " = Constant <value = int64[1] {" + a + "}> ()\n";
    }
    body += "  q2 = Slice (p, st2, pe2, ax2, one)\n  q3 = Slice (q2, st3, pe3, ax3, one)\n";
    conv_in = "q3";
  }
  body += "  Y = Conv <group = " + c + ", kernel_shape = [" + str(m.k) + ", " + str(m.k) + "]> (" + conv_in + ", Wt)\n";
  auto model =
      test::parse_model(header(m.opset) + "g (float[1," + c + "," + h + "," + w + "] X) => (float[1," + c + ",?,?] Y) {\n" + body + "}\n");
  auto& g = *model.mutable_graph();
  // Pads of the 6-D [N,C,H,1,W,1]: zeros before and after the two singletons.
  *g.add_initializer() =
      onnx_io::make_int64_tensor("ipads", {12}, {0, 0, 0, m.before, 0, m.before, 0, 0, 0, m.s - 1 - m.before, 0, m.s - 1 - m.before});
  *g.add_initializer() = onnx_io::make_int64_tensor("pads", {8}, {0, 0, m.pad_begin, m.pad_begin, 0, 0, m.pad_end, m.pad_end});
  test::set_random_initializer(g, "Wt", onnx::TensorProto::FLOAT, {m.c, 1, m.k, m.k}, 51);
  test::name_node(model, "Y", "up1");
  return model;
}

// --- nearest_conv: nearest Resize by s, then a stride-1 Conv of any group -----------------------------------

onnx::ModelProto nearest_conv_model(const NearestConv& m) {
  const std::vector<double> scales = m.scales.empty() ? std::vector<double>{1, 1, double(m.s), double(m.s)} : m.scales;
  std::string attrs = "mode = \"" + m.mode + "\"";
  if (!m.coordinate.empty()) attrs += ", coordinate_transformation_mode = \"" + m.coordinate + "\"";
  if (!m.rounding.empty()) attrs += ", nearest_mode = \"" + m.rounding + "\"";
  const std::string resize_in = m.opset < 11 ? "X, scales" : m.by_sizes ? "X, , , sizes" : m.opset < 13 ? "X, roi, scales" : "X, , scales";
  const std::string conv_attrs = "group = " + str(m.group) + ", kernel_shape = [" + str(m.k) + ", " + str(m.k) + "], strides = [" +
                                 str(m.conv_stride) + ", " + str(m.conv_stride) + "], dilations = [" + str(m.conv_dilation) + ", " +
                                 str(m.conv_dilation) + "], " + m.pads;
  std::string inputs = "float[1," + str(m.cin) + "," + str(m.h) + "," + str(m.w) + "] X";
  if (m.weight_input) inputs += ", float[" + str(m.cout) + "," + str(m.cin / m.group) + "," + str(m.k) + "," + str(m.k) + "] W";
  auto model = test::parse_model(header(m.opset) + "g (" + inputs + ") => (float[1," + str(m.cout) + ",?,?] Y) {\n  u = Resize <" + attrs +
                                 "> (" + resize_in + ")\n  Y = Conv <" + conv_attrs + "> (u, W" + (m.bias ? ", B" : "") + ")\n}\n");
  auto& g = *model.mutable_graph();
  if (m.opset >= 11 && m.opset < 13 && !m.by_sizes)
    *g.add_initializer() = onnx_io::make_tensor("roi", onnx::TensorProto::FLOAT, {0}, {}, true);
  if (m.by_sizes) {
    *g.add_initializer() = onnx_io::make_int64_tensor("sizes", {4}, {1, m.cin, m.s * m.h, m.s * m.w});
  } else {
    *g.add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, scales, true);
  }
  if (!m.weight_input) test::set_random_initializer(g, "W", onnx::TensorProto::FLOAT, {m.cout, m.cin / m.group, m.k, m.k}, 61);
  if (m.bias) test::set_random_initializer(g, "B", onnx::TensorProto::FLOAT, {m.cout}, 62);
  test::name_node(model, "Y", "up1");
  return model;
}

// --- spec corners and hostile models ----------------------------------------------------------------------

onnx::ModelProto text_model(const std::string& text) { return test::parse_model(text); }

// A model from ONNX text whose initializers are named with their dims: {"W", {3, 1, 4, 4}}.
onnx::ModelProto with_weights(onnx::ModelProto model, const std::vector<std::pair<std::string, std::vector<int64_t>>>& weights) {
  uint32_t seed = 70;
  for (const auto& [name, dims] : weights)
    test::set_random_initializer(*model.mutable_graph(), name, onnx::TensorProto::FLOAT, dims, seed++);
  return model;
}

}  // namespace dwdeconv::fuzz
