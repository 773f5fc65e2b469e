#include "examples/model_builder.h"

#include <cctype>
#include <cmath>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::examples {
namespace {

void describe(onnx::ValueInfoProto* v, const std::string& name, const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (const auto& d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

std::vector<double> replicate(const std::vector<double>& plane, int64_t c) {
  std::vector<double> values;
  for (int64_t i = 0; i < c; ++i) values.insert(values.end(), plane.begin(), plane.end());
  return values;
}

}  // namespace

ModelBuilder::ModelBuilder(const std::string& graph_name, int64_t opset, uint32_t seed) : rng_(seed) {
  model_.set_ir_version(8);
  model_.set_producer_name("dwdeconv-make-examples");
  auto* imp = model_.add_opset_import();
  imp->set_domain("");
  imp->set_version(opset);
  graph().set_name(graph_name);
}

void ModelBuilder::input(const std::string& name, const std::vector<std::string>& dims) { describe(graph().add_input(), name, dims); }
void ModelBuilder::output(const std::string& name, const std::vector<std::string>& dims) { describe(graph().add_output(), name, dims); }

std::string ModelBuilder::constant(const std::string& name, const std::vector<int64_t>& dims, const std::vector<double>& values) {
  *graph().add_initializer() = onnx_io::make_tensor(name, onnx::TensorProto::FLOAT, dims, values, true);
  return name;
}

std::string ModelBuilder::random(const std::string& name, const std::vector<int64_t>& dims, double scale) {
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  std::uniform_real_distribution<double> dist(-scale, scale);
  std::vector<double> values(static_cast<size_t>(count));
  for (auto& v : values) v = dist(rng_);
  return constant(name, dims, values);
}

std::string ModelBuilder::int64s(const std::string& name, const std::vector<int64_t>& values) {
  *graph().add_initializer() = onnx_io::make_int64_tensor(name, {static_cast<int64_t>(values.size())}, values);
  return name;
}

onnx::NodeProto& ModelBuilder::node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                                    const std::string& output) {
  auto* n = graph().add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& s : inputs) n->add_input(s);
  n->add_output(output);
  return *n;
}

std::string ModelBuilder::conv(const std::string& name, const std::string& x, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                               const std::vector<int64_t>& pads, int64_t group) {
  // Uniform init with variance 1/fan_in keeps activations in range through deep stacks.
  const double scale = std::sqrt(3.0 / static_cast<double>(cin / group * k * k));
  const std::string w = random(name + ".weight", {cout, cin / group, k, k}, scale);
  const std::string b = random(name + ".bias", {cout}, 0.1);
  auto& n = node("Conv", name, {x, w, b}, name + "_out");
  set_int(n, "group", group);
  set_ints(n, "kernel_shape", {k, k});
  set_ints(n, "pads", pads);
  set_ints(n, "strides", {stride, stride});
  return name + "_out";
}

std::string ModelBuilder::depthwise_conv(const std::string& name, const std::string& x, int64_t c, const std::vector<double>& plane,
                                         int64_t k, int64_t stride, const std::vector<int64_t>& pads) {
  const std::string w = constant(name + ".weight", {c, 1, k, k}, replicate(plane, c));
  auto& n = node("Conv", name, {x, w}, name + "_out");
  set_int(n, "group", c);
  set_ints(n, "kernel_shape", {k, k});
  set_ints(n, "pads", pads);
  set_ints(n, "strides", {stride, stride});
  return name + "_out";
}

std::string ModelBuilder::depthwise_deconv(const std::string& name, const std::string& x, int64_t c, const std::vector<double>& plane,
                                           int64_t k, int64_t stride, const std::vector<int64_t>& pads) {
  const std::string w = constant(name + ".weight", {c, 1, k, k}, replicate(plane, c));
  auto& n = node("ConvTranspose", name, {x, w}, name + "_out");
  set_int(n, "group", c);
  set_ints(n, "kernel_shape", {k, k});
  set_ints(n, "pads", pads);
  set_ints(n, "strides", {stride, stride});
  return name + "_out";
}

void set_int(onnx::NodeProto& node, const std::string& name, int64_t value) {
  *node.add_attribute() = onnx_io::make_int_attribute(name, value);
}
void set_ints(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& values) {
  *node.add_attribute() = onnx_io::make_ints_attribute(name, values);
}
void set_string(onnx::NodeProto& node, const std::string& name, const std::string& value) {
  *node.add_attribute() = onnx_io::make_string_attribute(name, value);
}
void set_float(onnx::NodeProto& node, const std::string& name, float value) {
  onnx::AttributeProto attr;
  attr.set_name(name);
  attr.set_type(onnx::AttributeProto::FLOAT);
  attr.set_f(value);
  *node.add_attribute() = attr;
}

}  // namespace dwdeconv::examples
