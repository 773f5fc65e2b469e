#include "onnx_io/attributes.h"

#include "core/text.h"

namespace dwdeconv::onnx_io {
namespace {

core::Error wrong_type(const onnx::NodeProto& node, const onnx::AttributeProto& attr, const char* wanted) {
  return core::invalid_model(describe_node(node) + ": attribute '" + attr.name() + "' must be " + wanted + " (found " +
                             onnx::AttributeProto_AttributeType_Name(attr.type()) + ")");
}

}  // namespace

const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& attr : node.attribute()) {
    if (attr.name() == name) return &attr;
  }
  return nullptr;
}

core::Result<int64_t> get_int(const onnx::NodeProto& node, const std::string& name, int64_t fallback) {
  const auto* attr = find_attribute(node, name);
  if (attr == nullptr) return fallback;
  if (attr->type() != onnx::AttributeProto::INT) return wrong_type(node, *attr, "INT");
  return attr->i();
}

core::Result<std::vector<int64_t>> get_ints(const onnx::NodeProto& node, const std::string& name, std::vector<int64_t> fallback) {
  const auto* attr = find_attribute(node, name);
  if (attr == nullptr) return fallback;
  if (attr->type() != onnx::AttributeProto::INTS) return wrong_type(node, *attr, "INTS");
  return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
}

core::Result<std::string> get_string(const onnx::NodeProto& node, const std::string& name, std::string fallback) {
  const auto* attr = find_attribute(node, name);
  if (attr == nullptr) return fallback;
  if (attr->type() != onnx::AttributeProto::STRING) return wrong_type(node, *attr, "STRING");
  return attr->s();
}

std::string describe_node(const onnx::NodeProto& node) {
  // Names as a log line shows them (core/text.h): every message that names a node does so through here.
  if (!node.name().empty()) return core::printable(node.op_type()) + " '" + core::printable(node.name()) + "'";
  if (node.output_size() > 0) return core::printable(node.op_type()) + " producing '" + core::printable(node.output(0)) + "'";
  return "unnamed " + core::printable(node.op_type());
}

onnx::AttributeProto make_int_attribute(const std::string& name, int64_t value) {
  onnx::AttributeProto attr;
  attr.set_name(name);
  attr.set_type(onnx::AttributeProto::INT);
  attr.set_i(value);
  return attr;
}

onnx::AttributeProto make_ints_attribute(const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto attr;
  attr.set_name(name);
  attr.set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) attr.add_ints(v);
  return attr;
}

onnx::AttributeProto make_string_attribute(const std::string& name, const std::string& value) {
  onnx::AttributeProto attr;
  attr.set_name(name);
  attr.set_type(onnx::AttributeProto::STRING);
  attr.set_s(value);
  return attr;
}

}  // namespace dwdeconv::onnx_io
