// Typed NodeProto attribute getters with defaults.
//
// A present attribute of the wrong type is an invalid model (the message names the node and attribute);
// an absent one yields the default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::onnx_io {

// Finds an attribute by name; nullptr when absent.
const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name);

core::Result<int64_t> get_int(const onnx::NodeProto& node, const std::string& name, int64_t fallback);
core::Result<std::vector<int64_t>> get_ints(const onnx::NodeProto& node, const std::string& name, std::vector<int64_t> fallback);
core::Result<std::string> get_string(const onnx::NodeProto& node, const std::string& name, std::string fallback);

// "ConvTranspose 'up1'" or "ConvTranspose producing 'y'" for an unnamed node: how messages name nodes.
std::string describe_node(const onnx::NodeProto& node);

// Attribute builders for emitted nodes.
onnx::AttributeProto make_int_attribute(const std::string& name, int64_t value);
onnx::AttributeProto make_ints_attribute(const std::string& name, const std::vector<int64_t>& values);
onnx::AttributeProto make_string_attribute(const std::string& name, const std::string& value);

}  // namespace dwdeconv::onnx_io
