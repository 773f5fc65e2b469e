#include "tests/support/model_builder.h"

#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>

#include <onnx/checker.h>
#include <onnx/defs/parser.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx_io/tensor.h"

namespace dwdeconv::test {
namespace {

void for_each_graph(const onnx::GraphProto& graph, const std::function<void(const onnx::GraphProto&)>& fn) {
  fn(graph);
  for (const auto& node : graph.node()) {
    for (const auto& a : node.attribute()) {
      if (a.has_g()) for_each_graph(a.g(), fn);
      for (const auto& g : a.graphs()) for_each_graph(g, fn);
    }
  }
}

bool name_in(onnx::GraphProto& graph, const std::string& output, const std::string& name) {
  for (auto& node : *graph.mutable_node()) {
    for (const auto& out : node.output()) {
      if (out == output) {
        node.set_name(name);
        return true;
      }
    }
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_g() && name_in(*a.mutable_g(), output, name)) return true;
    }
  }
  return false;
}

}  // namespace

onnx::ModelProto parse_model(const std::string& text) {
  onnx::ModelProto model;
  const auto status = onnx::OnnxParser::Parse(model, text.c_str());
  if (!status.IsOK()) throw std::runtime_error("ONNX text does not parse: " + status.ErrorMessage() + "\n" + text);
  return model;
}

std::vector<double> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> values(count);
  for (auto& v : values) v = dist(rng);
  return values;
}

core::Tensor4 random_tensor4(int64_t n, int64_t c, int64_t h, int64_t w, uint32_t seed) {
  core::Tensor4 t(n, c, h, w);
  t.data = random_values(t.data.size(), seed);
  return t;
}

onnx::TensorProto& set_random_initializer(onnx::GraphProto& graph, const std::string& name, int32_t data_type,
                                          const std::vector<int64_t>& dims, uint32_t seed, bool raw) {
  size_t count = 1;
  for (int64_t d : dims) count *= static_cast<size_t>(d);
  onnx::TensorProto tensor = onnx_io::make_tensor(name, data_type, dims, random_values(count, seed), raw);
  onnx::TensorProto* slot = nullptr;
  for (int i = 0; i < graph.initializer_size() && slot == nullptr; ++i) {
    if (graph.initializer(i).name() == name) slot = graph.mutable_initializer(i);
  }
  if (slot == nullptr) slot = graph.add_initializer();
  *slot = std::move(tensor);
  return *slot;
}

void name_node(onnx::ModelProto& model, const std::string& output, const std::string& name) {
  if (!name_in(*model.mutable_graph(), output, name)) throw std::runtime_error("no node produces '" + output + "'");
}

int count_ops(const onnx::GraphProto& graph, const std::string& op_type) {
  int n = 0;
  for (const auto& node : graph.node()) n += node.op_type() == op_type ? 1 : 0;
  return n;
}

int count_ops_everywhere(const onnx::ModelProto& model, const std::string& op_type) {
  int n = 0;
  for_each_graph(model.graph(), [&](const onnx::GraphProto& g) { n += count_ops(g, op_type); });
  return n;
}

std::vector<std::string> op_types(const onnx::GraphProto& graph) {
  std::vector<std::string> ops;
  for (const auto& node : graph.node()) ops.push_back(node.op_type());
  return ops;
}

const onnx::TensorProto* find_initializer(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto& t : graph.initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

const onnx::NodeProto* find_producer(const onnx::GraphProto& graph, const std::string& output) {
  for (const auto& node : graph.node()) {
    for (const auto& out : node.output()) {
      if (out == output) return &node;
    }
  }
  return nullptr;
}

const onnx::ValueInfoProto* find_value_info(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto& vi : graph.value_info()) {
    if (vi.name() == name) return &vi;
  }
  return nullptr;
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

std::vector<const onnx::NodeProto*> nodes_of(const onnx::GraphProto& graph, const std::string& op_type) {
  std::vector<const onnx::NodeProto*> nodes;
  for (const auto& node : graph.node()) {
    if (node.op_type() == op_type) nodes.push_back(&node);
  }
  return nodes;
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& node, const std::string& name) {
  const auto* a = find_attr(node, name);
  return a == nullptr ? std::vector<int64_t>{} : std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::vector<double> values_of(const onnx::TensorProto& tensor) {
  auto values = onnx_io::to_doubles(tensor);
  if (!values) throw std::runtime_error(values.error().message);
  return std::move(*values);
}

std::vector<int64_t> int_values_of(const onnx::TensorProto& tensor) {
  std::vector<int64_t> ints;
  for (double v : values_of(tensor)) ints.push_back(static_cast<int64_t>(v));
  return ints;
}

double max_abs_diff(const NaiveTensor& a, const NaiveTensor& b) {
  if (a.dims != b.dims || a.data.size() != b.data.size()) throw std::runtime_error("max_abs_diff: tensors differ in shape");
  double worst = 0.0;
  for (size_t i = 0; i < a.data.size(); ++i) worst = std::max(worst, std::abs(a.data[i] - b.data[i]));
  return worst;
}

std::string checker_error(const onnx::ModelProto& model) {
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    return std::string("checker: ") + e.what();
  }
  // Strict shape inference also catches value_info that contradicts what the nodes compute.
  onnx::ModelProto copy = model;
  try {
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), onnx::ShapeInferenceOptions{true, 1, false});
  } catch (const std::exception& e) {
    return std::string("shape inference: ") + e.what();
  }
  return "";
}

std::vector<std::string> all_names(const onnx::ModelProto& model) {
  std::vector<std::string> names;
  for_each_graph(model.graph(), [&](const onnx::GraphProto& g) {
    for (const auto& v : g.input()) names.push_back(v.name());
    for (const auto& v : g.output()) names.push_back(v.name());
    for (const auto& v : g.value_info()) names.push_back(v.name());
    for (const auto& t : g.initializer()) names.push_back(t.name());
    for (const auto& n : g.node()) {
      if (!n.name().empty()) names.push_back(n.name());
      for (const auto& s : n.input()) names.push_back(s);
      for (const auto& s : n.output()) names.push_back(s);
    }
  });
  return names;
}

}  // namespace dwdeconv::test
