// A small fluent builder for the example models: seeded random weights and one call per layer.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace dwdeconv::examples {

class ModelBuilder {
 public:
  // A model with opset `opset`, IR 8, and weights drawn from a generator seeded with `seed`.
  ModelBuilder(const std::string& graph_name, int64_t opset, uint32_t seed);

  // Graph input / output of FLOAT type; a dim that starts with a digit is fixed, anything else symbolic.
  void input(const std::string& name, const std::vector<std::string>& dims);
  void output(const std::string& name, const std::vector<std::string>& dims);

  // A FLOAT initializer (raw_data) with given values, or uniform random in [-scale, scale].
  std::string constant(const std::string& name, const std::vector<int64_t>& dims, const std::vector<double>& values);
  std::string random(const std::string& name, const std::vector<int64_t>& dims, double scale);
  std::string int64s(const std::string& name, const std::vector<int64_t>& values);

  // Adds a node; returns it so attributes can be set with the helpers below.
  onnx::NodeProto& node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs, const std::string& output);

  // Conv with a fresh random weight [cout, cin/group, k, k] and bias; pads are [t, l, b, r].
  std::string conv(const std::string& name, const std::string& x, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                   const std::vector<int64_t>& pads, int64_t group);
  // Depthwise Conv or ConvTranspose with a given per-channel kernel plane (k x k) replicated for c channels.
  std::string depthwise_conv(const std::string& name, const std::string& x, int64_t c, const std::vector<double>& plane, int64_t k,
                             int64_t stride, const std::vector<int64_t>& pads);
  std::string depthwise_deconv(const std::string& name, const std::string& x, int64_t c, const std::vector<double>& plane, int64_t k,
                               int64_t stride, const std::vector<int64_t>& pads);

  onnx::ModelProto& model() { return model_; }

 private:
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }
  std::mt19937 rng_;
  onnx::ModelProto model_;
};

void set_int(onnx::NodeProto& node, const std::string& name, int64_t value);
void set_ints(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& values);
void set_float(onnx::NodeProto& node, const std::string& name, float value);
void set_string(onnx::NodeProto& node, const std::string& name, const std::string& value);

}  // namespace dwdeconv::examples
