// What the emitter's sources share (internal to rewrite/): building a node. emitter.cpp plans and writes the phases,
// emitter_join.cpp the joins that put them back together.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

namespace dwdeconv::rewrite::emitter_parts {

// A node of op `op` named `name`, reading `inputs` and writing `outputs`, without attributes.
inline onnx::NodeProto make_node(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                                 std::vector<std::string> outputs) {
  onnx::NodeProto node;
  node.set_op_type(op);
  node.set_name(name);
  for (auto& s : inputs) node.add_input(std::move(s));
  for (auto& s : outputs) node.add_output(std::move(s));
  return node;
}

}  // namespace dwdeconv::rewrite::emitter_parts
