#include "onnx_io/shapes.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx_io/graph_walk.h"

namespace dwdeconv::onnx_io {

std::map<std::string, onnx::TypeProto> infer_types(const onnx::ModelProto& model) {
  onnx::ModelProto copy = model;
  try {
    onnx::shape_inference::InferShapes(copy, onnx::OpSchemaRegistry::Instance(), onnx::ShapeInferenceOptions{false, 0, true});
  } catch (const std::exception&) {
    // Partial information is still useful; whatever was inferred before the error stays in `copy`.
  }
  std::map<std::string, onnx::TypeProto> types;
  for_each_graph(copy.graph(), [&types](const onnx::GraphProto& g) {
    for (const auto& v : g.input()) types.emplace(v.name(), v.type());
    for (const auto& v : g.output()) types.emplace(v.name(), v.type());
    for (const auto& v : g.value_info()) types.emplace(v.name(), v.type());
    for (const auto& t : g.initializer()) {
      onnx::TypeProto type;
      type.mutable_tensor_type()->set_elem_type(t.data_type());
      for (int64_t d : t.dims()) type.mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
      types.emplace(t.name(), type);
    }
  });
  return types;
}

std::vector<int64_t> known_dims(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return {};
  std::vector<int64_t> dims;
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return {};
    dims.push_back(d.dim_value());
  }
  return dims;
}

}  // namespace dwdeconv::onnx_io
