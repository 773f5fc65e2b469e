#include <catch2/catch.hpp>

#include "onnx_io/model_io.h"
#include "onnx_io/shapes.h"
#include "onnx_io/tensor.h"

using namespace dwdeconv;

TEST_CASE("a skeleton copy drops large data and leaves the model byte-identical", "[onnx_io][shapes]") {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* g = model.mutable_graph();
  // Large raw, large typed, small raw, and a large Constant value: each storage form.
  *g->add_initializer() = onnx_io::make_tensor("big_raw", onnx::TensorProto::FLOAT, {2048}, std::vector<double>(2048, 1.5), true);
  *g->add_initializer() = onnx_io::make_tensor("big_typed", onnx::TensorProto::FLOAT, {2048}, std::vector<double>(2048, 2.5), false);
  *g->add_initializer() = onnx_io::make_int64_tensor("small", {2}, {3, 4});
  auto* constant = g->add_node();
  constant->set_op_type("Constant");
  constant->add_output("c");
  auto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  *value->mutable_t() = onnx_io::make_tensor("", onnx::TensorProto::DOUBLE, {1024}, std::vector<double>(1024, 0.5), false);

  const auto before = onnx_io::serialize_model(model);
  REQUIRE(before.ok());
  const onnx::ModelProto skeleton = onnx_io::skeleton_copy(model);
  const auto after = onnx_io::serialize_model(model);
  REQUIRE(after.ok());
  CHECK(*after == *before);  // nothing lost, nothing added (e.g. an empty raw_data on a typed tensor)

  const auto& sg = skeleton.graph();
  CHECK_FALSE(sg.initializer(0).has_raw_data());
  CHECK(sg.initializer(1).float_data_size() == 0);
  CHECK(sg.initializer(2).raw_data().size() == 16);  // small data stays
  CHECK(sg.node(0).attribute(0).t().double_data_size() == 0);
  CHECK(sg.initializer(0).dims(0) == 2048);  // names, types and dims stay
  CHECK(sg.initializer(1).name() == "big_typed");
  CHECK(skeleton.ByteSizeLong() < 200);
}
