// The seed generator's model builders: one per upsampler form the tool rewrites, with the knobs its seeds turn.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

namespace dwdeconv::fuzz {

std::string str(int64_t v);
std::string header(int64_t opset, int64_t ir = 8);

// --- conv_transpose --------------------------------------------------------------------------------------

// Y = ConvTranspose <group, attrs> (X, W[, B]) named "up1", weight [cin, cout/group, kh, kw].
struct Deconv {
  int64_t c = 3, m = 1, group = 3, kh = 4, kw = 4, h = 5, w = 4;
  std::string attrs = "strides = [2, 2], pads = [1, 1, 1, 1]";
  int64_t opset = 13, ir = 8;
  std::string type = "float";
  int32_t dtype = onnx::TensorProto::FLOAT;
  bool bias = false, symbolic = false, raw = true;
};

onnx::ModelProto deconv(const Deconv& d);

// --- nearest_mask: Resize, Mul by a one-per-cell mask, Pad, depthwise Conv ---------------------------------

struct Mask {
  int64_t s = 2, k = 4, pad_begin = 2, pad_end = 1, jy = 0, jx = 0, c = 3, h = 5, w = 4, opset = 13;
  double gain = 1.0;
  bool per_channel = false, extra_cell = false;
  std::string resize_mode = "nearest", pad_mode = "constant";
  int64_t conv_stride = 1;
};

onnx::ModelProto mask_model(const Mask& m);

// --- zero_insertion: one-tap depthwise ConvTranspose (kernel <= stride), Pad, depthwise Conv ------------------

struct ZeroInsertion {
  int64_t s = 2, k = 2, ty = 0, tx = 0, conv_k = 4, pad_begin = 2, pad_end = 1, c = 3, h = 5, w = 4, opset = 13;
  bool second_tap = false, ct_bias = false;
};

onnx::ModelProto zero_insertion_model(const ZeroInsertion& m);

// --- reshape_zero_insertion: StyleGAN2-ADA's upfirdn2d with constant Reshape targets ------------------------

struct Upfirdn {
  int64_t s = 2, before = 0, k = 4, pad_begin = 2, pad_end = 1, c = 3, h = 5, w = 4, opset = 13;
  bool slices = true, wrong_split = false;
  bool shape_ends = false;  // the Slices' ends read from Shape(p), as a dynamic export has them; else INT64_MAX
  std::string pad_mode = "constant";
};

onnx::ModelProto upfirdn_model(const Upfirdn& m);

// --- nearest_conv: nearest Resize by s, then a stride-1 Conv of any group -----------------------------------

struct NearestConv {
  int64_t s = 2, k = 3, cin = 4, cout = 4, group = 4, h = 3, w = 4, opset = 13;
  std::string pads = "pads = [1, 1, 1, 1]";
  std::string mode = "nearest", coordinate = "asymmetric", rounding = "floor";
  std::vector<double> scales;  // default {1, 1, s, s}
  bool by_sizes = false, bias = false, weight_input = false;
  int64_t conv_stride = 1, conv_dilation = 1;
};

onnx::ModelProto nearest_conv_model(const NearestConv& m);

// --- spec corners and hostile models ----------------------------------------------------------------------

onnx::ModelProto text_model(const std::string& text);

// A model from ONNX text whose initializers are named with their dims: {"W", {3, 1, 4, 4}}.
onnx::ModelProto with_weights(onnx::ModelProto model, const std::vector<std::pair<std::string, std::vector<int64_t>>>& weights);

}  // namespace dwdeconv::fuzz
