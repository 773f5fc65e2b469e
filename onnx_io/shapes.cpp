#include "onnx_io/shapes.h"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx_io/graph_walk.h"

namespace dwdeconv::onnx_io {
namespace {

// Moves the data of large tensors out of a model and back again. Only the data fields move (std::string moves
// and RepeatedField swaps, no copies); every other field stays, so a copy taken in between is a skeleton.
class LargeDataDetacher {
 public:
  LargeDataDetacher(onnx::ModelProto& model, size_t max_bytes) : max_bytes_(max_bytes) {
    for_each_mutable_tensor(*model.mutable_graph(), [this](onnx::TensorProto& t) { detach(t); });
  }
  ~LargeDataDetacher() {
    for (auto& d : detached_) {
      if (d.had_raw) *d.tensor->mutable_raw_data() = std::move(d.raw);
      swap_typed(*d.tensor, d.typed);
    }
  }
  LargeDataDetacher(const LargeDataDetacher&) = delete;
  LargeDataDetacher& operator=(const LargeDataDetacher&) = delete;

 private:
  struct Detached {
    onnx::TensorProto* tensor;
    bool had_raw;
    std::string raw;
    onnx::TensorProto typed;  // holds the typed data fields while they are out
  };

  static void swap_typed(onnx::TensorProto& a, onnx::TensorProto& b) {
    a.mutable_float_data()->Swap(b.mutable_float_data());
    a.mutable_int32_data()->Swap(b.mutable_int32_data());
    a.mutable_int64_data()->Swap(b.mutable_int64_data());
    a.mutable_double_data()->Swap(b.mutable_double_data());
    a.mutable_uint64_data()->Swap(b.mutable_uint64_data());
  }

  static size_t data_bytes(const onnx::TensorProto& t) {
    return t.raw_data().size() + 4 * static_cast<size_t>(t.float_data_size() + t.int32_data_size()) +
           8 * static_cast<size_t>(t.int64_data_size() + t.double_data_size() + t.uint64_data_size());
  }

  void detach(onnx::TensorProto& t) {
    if (data_bytes(t) <= max_bytes_) return;
    Detached d{&t, t.has_raw_data(), {}, {}};
    if (d.had_raw) {
      d.raw = std::move(*t.mutable_raw_data());
      t.clear_raw_data();
    }
    swap_typed(t, d.typed);
    detached_.push_back(std::move(d));
  }

  size_t max_bytes_;
  std::vector<Detached> detached_;
};

}  // namespace

onnx::ModelProto skeleton_copy(const onnx::ModelProto& model, size_t max_bytes) {
  // The data is moved out and back, never changed, so the model is logically const throughout.
  LargeDataDetacher detached(const_cast<onnx::ModelProto&>(model), max_bytes);
  return model;
}

std::map<std::string, onnx::TypeProto> infer_types(const onnx::ModelProto& model) {
  onnx::ModelProto copy = skeleton_copy(model);
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
