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

TEST_CASE("the inference skeleton forgets the declared dims of loop-carried and scan state inputs, and only those", "[onnx_io][shapes]") {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* g = model.mutable_graph();
  const auto typed = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  };
  // Loop: iteration number, condition, then carried values. Scan (num_scan_inputs 1): one state, then one scan input.
  for (const char* op : {"Loop", "Scan"}) {
    auto* node = g->add_node();
    node->set_op_type(op);
    auto* body = node->add_attribute();
    body->set_name("body");
    body->set_type(onnx::AttributeProto::GRAPH);
    auto* bg = body->mutable_g();
    if (std::string(op) == "Loop") {
      typed(bg->add_input(), "i", {});
      typed(bg->add_input(), "cond", {});
      typed(bg->add_input(), "carried", {1, 4, 4, 4});
    } else {
      auto* n = node->add_attribute();
      n->set_name("num_scan_inputs");
      n->set_type(onnx::AttributeProto::INT);
      n->set_i(1);
      typed(bg->add_input(), "state", {1, 4});
      typed(bg->add_input(), "scanned", {4});
    }
  }
  const auto skeleton = onnx_io::inference_skeleton(model);
  const auto& loop_body = skeleton.graph().node(0).attribute(0).g();
  const auto& scan_body = skeleton.graph().node(1).attribute(0).g();
  CHECK(onnx_io::describe_type(loop_body.input(0).type()) == "FLOAT[]");  // the iteration number keeps its type
  CHECK(onnx_io::describe_type(loop_body.input(2).type()) == "FLOAT[?,?,?,?]");
  CHECK(onnx_io::describe_type(scan_body.input(0).type()) == "FLOAT[?,?]");
  CHECK(onnx_io::describe_type(scan_body.input(1).type()) == "FLOAT[4]");  // a scan input is sliced the same each time
  // The model itself keeps what it declares.
  CHECK(onnx_io::describe_type(model.graph().node(0).attribute(0).g().input(2).type()) == "FLOAT[1,4,4,4]");
}
