// Shared fixtures of the rewrite tests: a one-node depthwise ConvTranspose model, rewriting a copy, and the
// two halves of every check: the structure of the polyphase form and the numbers through the naive executor.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include <onnx/onnx_pb.h>

#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"
#include "rewrite/rewriter.h"
#include "tests/support/model_builder.h"
#include "tests/support/naive_executor.h"

namespace dwdeconv::test {

// Max abs difference allowed between the original and the rewritten model. Both run in double on bit-equal
// weights, so only the summation order differs; a wrong tap or phase gives differences of order 0.1.
constexpr double kTolerance = 1e-9;

inline std::string type_name(int32_t dtype) {
  switch (dtype) {
    case onnx::TensorProto::FLOAT16: return "float16";
    case onnx::TensorProto::BFLOAT16: return "bfloat16";
    case onnx::TensorProto::DOUBLE: return "double";
    default: return "float";
  }
}

// One depthwise ConvTranspose named "up1": Y = ConvTranspose(X, W[, B]) with group = channels and `attrs`.
struct DeconvSpec {
  int64_t channels = 3;
  int64_t kh = 4, kw = 4;
  int64_t h = 5, w = 4;  // 0: symbolic, dim_param "H" / "W"
  std::string attrs = "strides=[2,2], pads=[1,1,1,1]";
  bool bias = false;
  int64_t opset = 13;
  int64_t ir_version = 8;
  int32_t dtype = onnx::TensorProto::FLOAT;
  bool raw = true;  // storage form of W and B
  uint32_t seed = 7;
};

inline std::string dims_text(const DeconvSpec& s) {
  return "[1," + std::to_string(s.channels) + "," + (s.h > 0 ? std::to_string(s.h) : "H") + "," + (s.w > 0 ? std::to_string(s.w) : "W") +
         "]";
}

inline onnx::ModelProto deconv_model(const DeconvSpec& s) {
  const std::string t = type_name(s.dtype);
  const std::string text = "<ir_version: " + std::to_string(s.ir_version) + ", opset_import: [\"\" : " + std::to_string(s.opset) +
                           "]>\ng (" + t + dims_text(s) + " X) => (" + t + "[1," + std::to_string(s.channels) +
                           ",OH,OW] Y) {\n  Y = ConvTranspose <group=" + std::to_string(s.channels) + ", " + s.attrs + "> (X, W" +
                           (s.bias ? ", B" : "") + ")\n}\n";
  onnx::ModelProto model = parse_model(text);
  set_random_initializer(*model.mutable_graph(), "W", s.dtype, {s.channels, 1, s.kh, s.kw}, s.seed, s.raw);
  if (s.bias) set_random_initializer(*model.mutable_graph(), "B", s.dtype, {s.channels}, s.seed + 1, s.raw);
  name_node(model, "Y", "up1");
  return model;
}

// The rewritten copy of a model and what the rewriter said about it.
struct Rewritten {
  onnx::ModelProto model;
  rewrite::RewriteResult result;
};

inline Rewritten rewrite_copy(const onnx::ModelProto& original, const rewrite::RewriteOptions& options = {}) {
  Rewritten out{original, {}};
  auto result = rewrite::rewrite_model(out.model, options);
  if (!result.ok()) FAIL("rewrite_model failed: " << result.error().message);
  out.result = std::move(*result);
  return out;
}

inline std::string serialized(const onnx::ModelProto& model) {
  auto bytes = onnx_io::serialize_model(model);
  REQUIRE(bytes.ok());
  return *bytes;
}

// Requires the one upsampler, of form `form`, kept with a reason holding `reason`, and the model unchanged.
// `model` with the kernel_shape of the node that writes `output` set to `kernel` (an invalid node, for near-misses).
inline onnx::ModelProto with_kernel_shape(onnx::ModelProto model, const std::string& output, std::vector<int64_t> kernel) {
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.output_size() == 0 || node.output(0) != output) continue;
    for (auto& a : *node.mutable_attribute()) {
      if (a.name() != "kernel_shape") continue;
      a.clear_ints();
      for (int64_t k : kernel) a.add_ints(k);
      return model;
    }
  }
  FAIL("no node writes " << output << " with a kernel_shape");
  return model;
}

// `model` with a string attribute `name` = `value` added to the node that writes `output`.
inline onnx::ModelProto with_string_attribute(onnx::ModelProto model, const std::string& output, const std::string& name,
                                              const std::string& value) {
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.output_size() == 0 || node.output(0) != output) continue;
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
    return model;
  }
  FAIL("no node writes " << output);
  return model;
}

inline void require_upsampler_kept(const onnx::ModelProto& original, const std::string& form, const std::string& reason,
                                   const rewrite::RewriteOptions& options = {}) {
  const auto out = rewrite_copy(original, options);
  REQUIRE(out.result.nodes.size() == 1);
  CAPTURE(out.result.nodes[0].reason);
  CHECK_FALSE(out.result.nodes[0].rewritten);
  CHECK(out.result.nodes[0].summary.form == form);
  CHECK_THAT(out.result.nodes[0].reason, Catch::Contains(reason));
  CHECK(out.result.rewritten == 0);
  CHECK(serialized(out.model) == serialized(original));
}

// Runs both models on `inputs` and returns max |before - after| over output `output`. Also requires the
// output to have `dims` (when given) and to be non-zero, so a vacuous comparison cannot pass.
inline double output_diff(const onnx::ModelProto& before, const onnx::ModelProto& after, const std::map<std::string, NaiveTensor>& inputs,
                          const std::string& output = "Y", const std::vector<int64_t>& dims = {}) {
  const NaiveTensor y0 = run_naive(before, inputs).at(output);
  const NaiveTensor y1 = run_naive(after, inputs).at(output);
  if (!dims.empty()) REQUIRE(y1.dims == dims);
  double largest = 0.0;
  for (double v : y0.data) largest = std::max(largest, std::abs(v));
  REQUIRE(largest > 1e-3);
  return max_abs_diff(y0, y1);
}

// Seeded input X for a DeconvSpec, with concrete sizes (h_sym / w_sym stand in for symbolic dims).
inline core::Tensor4 input_for(const DeconvSpec& s, int64_t h_sym = 5, int64_t w_sym = 3) {
  return random_tensor4(1, s.channels, s.h > 0 ? s.h : h_sym, s.w > 0 ? s.w : w_sym, s.seed + 100);
}

// Asserts that `graph` computes `output` in polyphase form for stride s >= 2: DepthToSpace(blocksize s, DCR)
// named `node_name` reads a Concat on axis 1 of s*s depthwise stride-1 Convs with non-negative pads. Returns
// the phase Convs in Concat order.
inline std::vector<const onnx::NodeProto*> require_polyphase(const onnx::GraphProto& graph, const std::string& output, int64_t s,
                                                             int64_t channels, int64_t opset, const std::string& node_name) {
  const onnx::NodeProto* d2s = find_producer(graph, output);
  REQUIRE(d2s != nullptr);
  REQUIRE(d2s->op_type() == "DepthToSpace");
  CHECK(d2s->name() == node_name);
  REQUIRE(find_attr(*d2s, "blocksize") != nullptr);
  CHECK(find_attr(*d2s, "blocksize")->i() == s);
  if (opset >= 11) {
    REQUIRE(find_attr(*d2s, "mode") != nullptr);
    CHECK(find_attr(*d2s, "mode")->s() == "DCR");
  } else {
    CHECK(find_attr(*d2s, "mode") == nullptr);
  }
  const onnx::NodeProto* concat = find_producer(graph, d2s->input(0));
  REQUIRE(concat != nullptr);
  REQUIRE(concat->op_type() == "Concat");
  REQUIRE(find_attr(*concat, "axis") != nullptr);
  CHECK(find_attr(*concat, "axis")->i() == 1);
  REQUIRE(concat->input_size() == s * s);
  std::vector<const onnx::NodeProto*> convs;
  for (const auto& in : concat->input()) {
    const onnx::NodeProto* conv = find_producer(graph, in);
    REQUIRE(conv != nullptr);
    REQUIRE(conv->op_type() == "Conv");
    REQUIRE(find_attr(*conv, "group") != nullptr);
    CHECK(find_attr(*conv, "group")->i() == channels);
    CHECK(attr_ints(*conv, "strides") == std::vector<int64_t>{1, 1});
    for (int64_t p : attr_ints(*conv, "pads")) CHECK(p >= 0);
    convs.push_back(conv);
  }
  return convs;
}

// Asserts that `graph` computes `output` as one stride-1 Conv followed by a nearest Resize by s (the nearest layout:
// every phase the same), the Resize named `node_name` with constant scales [1,1,s,s] and, from opset 11, asymmetric
// coordinates rounded down. Returns the Conv.
inline std::vector<const onnx::NodeProto*> require_conv_then_nearest(const onnx::GraphProto& graph, const std::string& output, int64_t s,
                                                                     int64_t channels, int64_t opset, const std::string& node_name) {
  const onnx::NodeProto* resize = find_producer(graph, output);
  REQUIRE(resize != nullptr);
  REQUIRE(resize->op_type() == "Resize");
  CHECK(resize->name() == node_name);
  REQUIRE(find_attr(*resize, "mode") != nullptr);
  CHECK(find_attr(*resize, "mode")->s() == "nearest");
  if (opset >= 11) {
    CHECK(find_attr(*resize, "coordinate_transformation_mode")->s() == "asymmetric");
    CHECK(find_attr(*resize, "nearest_mode")->s() == "floor");
  }
  const auto* scales = find_initializer(graph, resize->input(resize->input_size() - 1));
  REQUIRE(scales != nullptr);
  CHECK(values_of(*scales) == std::vector<double>{1, 1, static_cast<double>(s), static_cast<double>(s)});
  CHECK(count_ops(graph, "Concat") == 0);
  CHECK(count_ops(graph, "DepthToSpace") == 0);
  const onnx::NodeProto* conv = find_producer(graph, resize->input(0));
  REQUIRE(conv != nullptr);
  REQUIRE(conv->op_type() == "Conv");
  CHECK(find_attr(*conv, "group")->i() == channels);
  CHECK(attr_ints(*conv, "strides") == std::vector<int64_t>{1, 1});
  return {conv};
}

// The dims of the phase weight a Conv reads: an initializer in `graph` or a Constant node's value.
inline std::vector<int64_t> conv_weight_dims(const onnx::GraphProto& graph, const onnx::NodeProto& conv) {
  if (const auto* t = find_initializer(graph, conv.input(1))) return onnx_io::dims_of(*t);
  const auto* constant = find_producer(graph, conv.input(1));
  REQUIRE(constant != nullptr);
  REQUIRE(constant->op_type() == "Constant");
  return onnx_io::dims_of(find_attr(*constant, "value")->t());
}

}  // namespace dwdeconv::test
