// The naive executor's op kernels (naive_ops.cpp), and the node readers they share with its graph walk.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "tests/support/naive_executor.h"

namespace dwdeconv::test::naive {

using Env = std::map<std::string, NaiveTensor>;

[[noreturn]] inline void fail(const onnx::NodeProto& node, const std::string& what) {
  throw std::runtime_error("naive executor: " + node.op_type() + " '" + (node.name().empty() ? node.output(0) : node.name()) +
                           "': " + what);
}

inline const onnx::AttributeProto* attr(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

// The optional input i, or nullptr when absent or empty.
inline const NaiveTensor* optional_input(const onnx::NodeProto& node, const Env& env, int i) {
  if (i >= node.input_size() || node.input(i).empty()) return nullptr;
  auto it = env.find(node.input(i));
  if (it == env.end()) fail(node, "input '" + node.input(i) + "' is not defined");
  return &it->second;
}

inline const NaiveTensor& input(const onnx::NodeProto& node, const Env& env, int i) {
  const NaiveTensor* t = optional_input(node, env, i);
  if (t == nullptr) fail(node, "missing input " + std::to_string(i));
  return *t;
}

// The kernels, one per op (Mul and Sub, Expand and Tile share one); run_node (naive_executor.cpp) calls them.
NaiveTensor run_conv(const onnx::NodeProto& node, const Env& env);
NaiveTensor run_conv_transpose(const onnx::NodeProto& node, const Env& env);
NaiveTensor run_pad(const onnx::NodeProto& node, const Env& env, int64_t opset);
NaiveTensor run_unsqueeze(const onnx::NodeProto& node, const Env& env);
NaiveTensor run_squeeze(const onnx::NodeProto& node, const Env& env);
NaiveTensor run_expand_or_tile(const onnx::NodeProto& node, const Env& env, bool tile);
NaiveTensor run_gather(const onnx::NodeProto& node, const Env& env);
// Mul, Sub (`subtract`) or Add (the node's op), broadcasting numpy-style.
NaiveTensor run_mul(const onnx::NodeProto& node, const Env& env, bool subtract = false);
NaiveTensor run_resize(const onnx::NodeProto& node, const Env& env);
NaiveTensor run_reshape(const onnx::NodeProto& node, const Env& env);
NaiveTensor run_slice(const onnx::NodeProto& node, const Env& env);
NaiveTensor run_transpose(const onnx::NodeProto& node, const Env& env);
NaiveTensor run_concat(const onnx::NodeProto& node, const Env& env);
NaiveTensor run_depth_to_space(const onnx::NodeProto& node, const Env& env, int64_t opset);

}  // namespace dwdeconv::test::naive
