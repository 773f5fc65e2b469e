// Where weights come from and how nodes connect: shared weights, Constant and Identity sources, chains of
// deconvs, a deconv inside an If branch, and what is removed or kept afterwards.
#include <catch2/catch.hpp>

#include "rewrite_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;
using onnx::TensorProto;

namespace {

// Phase-weight initializers: every initializer a Conv reads as its weight.
std::set<std::string> conv_weights(const onnx::GraphProto& g) {
  std::set<std::string> names;
  for (const auto* conv : nodes_of(g, "Conv")) names.insert(conv->input(1));
  return names;
}

// Two depthwise ConvTransposes "up1" and "up2" on the same input, both reading weight W.
onnx::ModelProto shared_weight_model(int64_t k, const std::string& attrs1, const std::string& attrs2, int64_t s) {
  const std::string out = "float[1,2," + std::to_string(4 * s) + "," + std::to_string(3 * s) + "]";
  auto model = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,3] X) => ()" +
                           out + " Y1, " + out + R"( Y2) {
  Y1 = ConvTranspose <group=2, )" +
                           attrs1 + R"(> (X, W)
  Y2 = ConvTranspose <group=2, )" +
                           attrs2 + R"(> (X, W)
})");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {2, 1, k, k}, 11);
  name_node(model, "Y1", "up1");
  name_node(model, "Y2", "up2");
  return model;
}

}  // namespace

TEST_CASE("a weight shared with different pads gets separate phase weights", "[rewrite][shared]") {
  const auto original = shared_weight_model(4, "strides=[2,2], pads=[1,1,1,1]", "strides=[2,2], pads=[2,0,0,2]", 2);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 2);
  require_polyphase(g, "Y1", 2, 2, 13, "up1");
  require_polyphase(g, "Y2", 2, 2, 13, "up2");
  CHECK(conv_weights(g).size() == 8);
  CHECK(g.initializer_size() == 8);
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 2, 4, 3, 5)}};
  CHECK(output_diff(original, out.model, inputs, "Y1") < kTolerance);
  CHECK(output_diff(original, out.model, inputs, "Y2") < kTolerance);
}

TEST_CASE("k9 s3 weight shared by pads 3 op 0 and pads 4 op 2 gives correct numbers", "[rewrite][shared]") {
  // The reference PR's silent wrong-output case: 18 phase kernels are needed, not 9.
  const auto original = shared_weight_model(9, "strides=[3,3], pads=[3,3,3,3]", "strides=[3,3], pads=[4,4,4,4], output_padding=[2,2]", 3);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 2);
  require_polyphase(g, "Y1", 3, 2, 13, "up1");
  require_polyphase(g, "Y2", 3, 2, 13, "up2");
  CHECK(conv_weights(g).size() == 18);
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 2, 4, 3, 6)}};
  CHECK(output_diff(original, out.model, inputs, "Y1", {1, 2, 12, 9}) < kTolerance);
  CHECK(output_diff(original, out.model, inputs, "Y2", {1, 2, 12, 9}) < kTolerance);
}

TEST_CASE("a weight shared with identical parameters gets one set of phase weights", "[rewrite][shared]") {
  const auto original = shared_weight_model(4, "strides=[2,2], pads=[1,1,1,1]", "strides=[2,2], pads=[1,1,1,1]", 2);
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 2);
  const auto convs1 = require_polyphase(g, "Y1", 2, 2, 13, "up1");
  const auto convs2 = require_polyphase(g, "Y2", 2, 2, 13, "up2");
  for (size_t i = 0; i < 4; ++i) CHECK(convs1[i]->input(1) == convs2[i]->input(1));
  CHECK(conv_weights(g).size() == 4);
  CHECK(g.initializer_size() == 4);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 2, 4, 3, 7)}};
  CHECK(output_diff(original, out.model, inputs, "Y1") < kTolerance);
  CHECK(output_diff(original, out.model, inputs, "Y2") < kTolerance);
}

TEST_CASE("three deconvs feeding each other are all rewritten", "[rewrite][chain]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,3,2] X) => (float[1,2,24,16] Y) {
  A = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W1, B1)
  C = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1], output_padding=[1,1]> (A, W2)
  Y = ConvTranspose <group=2, strides=[2,2]> (C, W3, B3)
})");
  auto& graph = *original.mutable_graph();
  set_random_initializer(graph, "W1", TensorProto::FLOAT, {2, 1, 4, 4}, 1);
  set_random_initializer(graph, "B1", TensorProto::FLOAT, {2}, 2);
  set_random_initializer(graph, "W2", TensorProto::FLOAT, {2, 1, 3, 3}, 3);
  set_random_initializer(graph, "W3", TensorProto::FLOAT, {2, 1, 2, 2}, 4);
  set_random_initializer(graph, "B3", TensorProto::FLOAT, {2}, 5);
  name_node(original, "A", "up1");
  name_node(original, "C", "up2");
  name_node(original, "Y", "up3");
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 3);
  CHECK(count_ops(g, "ConvTranspose") == 0);
  CHECK(count_ops(g, "Conv") == 12);
  CHECK(count_ops(g, "DepthToSpace") == 3);
  for (const auto* conv : require_polyphase(g, "A", 2, 2, 13, "up1")) CHECK(conv->input(0) == "X");
  for (const auto* conv : require_polyphase(g, "C", 2, 2, 13, "up2")) CHECK(conv->input(0) == "A");
  for (const auto* conv : require_polyphase(g, "Y", 2, 2, 13, "up3")) CHECK(conv->input(0) == "C");
  for (const char* name : {"W1", "W2", "W3"}) CHECK(find_initializer(g, name) == nullptr);
  CHECK(find_initializer(g, "B1") != nullptr);
  CHECK(find_initializer(g, "B3") != nullptr);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", random_tensor4(1, 2, 3, 2, 8)}}, "Y", {1, 2, 24, 16}) < kTolerance);
}

TEST_CASE("a Relu after the deconv reads the DepthToSpace output", "[rewrite][chain]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,5,4] X) => (float[1,3,10,8] Z) {
  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W, B)
  Z = Relu (Y)
})");
  set_random_initializer(*original.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4, 4}, 3);
  set_random_initializer(*original.mutable_graph(), "B", TensorProto::FLOAT, {3}, 4);
  name_node(original, "Y", "up1");
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  require_polyphase(g, "Y", 2, 3, 13, "up1");
  const auto relus = nodes_of(g, "Relu");
  REQUIRE(relus.size() == 1);
  CHECK(relus[0]->input(0) == "Y");
  CHECK(find_producer(g, relus[0]->input(0))->op_type() == "DepthToSpace");
  CHECK(op_types(g).back() == "Relu");  // still after its producer
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", random_tensor4(1, 3, 5, 4, 9)}}, "Z") < kTolerance);
}

TEST_CASE("a weight from a Constant node becomes Constant phase weights", "[rewrite][source]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,5,4] X) => (float[1,3,10,8] Y) {
  W = Constant <value = float[1] {0}> ()
  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W)
})");
  const bool raw = GENERATE(true, false);
  CAPTURE(raw);
  auto* value = original.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_t();
  *value = onnx_io::make_tensor("", TensorProto::FLOAT16, {3, 1, 4, 4}, random_values(48, 12), raw);
  original.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT16);
  original.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT16);
  name_node(original, "Y", "up1");
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  const auto convs = require_polyphase(g, "Y", 2, 3, 13, "up1");
  CHECK(g.initializer_size() == 0);
  CHECK(find_producer(g, "W") == nullptr);  // the original Constant is gone
  CHECK(count_ops(g, "Constant") == 4);
  for (const auto* conv : convs) {
    const auto* constant = find_producer(g, conv->input(1));
    REQUIRE(constant != nullptr);
    REQUIRE(constant->op_type() == "Constant");
    const auto& t = find_attr(*constant, "value")->t();
    CHECK(t.data_type() == TensorProto::FLOAT16);
    CHECK(t.has_raw_data() == raw);
    CHECK(onnx_io::dims_of(t) == std::vector<int64_t>{3, 1, 2, 2});
  }
  CHECK(checker_error(out.model).empty());  // also checks the Constants come before their readers
  CHECK(output_diff(original, out.model, {{"X", random_tensor4(1, 3, 5, 4, 13)}}) < kTolerance);
}

TEST_CASE("an orphaned Identity chain in front of an initializer or a Constant is removed", "[rewrite][source]") {
  const bool from_constant = GENERATE(false, true);
  CAPTURE(from_constant);
  auto original = parse_model(std::string(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,5,4] X) => (float[1,3,10,8] Y) {
)") + (from_constant ? "  W0 = Constant <value = float[1] {0}> ()\n" : "") +
                              R"(  W1 = Identity (W0)
  W2 = Identity (W1)
  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W2)
})");
  const auto w = onnx_io::make_tensor(from_constant ? "" : "W0", TensorProto::FLOAT, {3, 1, 4, 4}, random_values(48, 14), true);
  if (from_constant) {
    *original.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_t() = w;
  } else {
    *original.mutable_graph()->add_initializer() = w;
  }
  name_node(original, "Y", "up1");
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  require_polyphase(g, "Y", 2, 3, 13, "up1");
  CHECK(count_ops(g, "Identity") == 0);
  CHECK(find_initializer(g, "W0") == nullptr);
  CHECK(find_producer(g, "W0") == nullptr);
  CHECK(count_ops(g, "Constant") == (from_constant ? 4 : 0));
  CHECK(g.initializer_size() == (from_constant ? 0 : 4));
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", random_tensor4(1, 3, 5, 4, 15)}}) < kTolerance);
}

TEST_CASE("an Identity in the weight chain that something else reads is kept", "[rewrite][source]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,5,4] X) => (float[1,3,10,8] Y, float[3,1,4,4] R) {
  W1 = Identity (W0)
  W2 = Identity (W1)
  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W2)
  R = Relu (W1)
})");
  set_random_initializer(*original.mutable_graph(), "W0", TensorProto::FLOAT, {3, 1, 4, 4}, 16);
  name_node(original, "Y", "up1");
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  require_polyphase(g, "Y", 2, 3, 13, "up1");
  CHECK(find_producer(g, "W2") == nullptr);    // only the deconv read it
  REQUIRE(find_producer(g, "W1") != nullptr);  // the Relu still does
  CHECK(find_producer(g, "W1")->op_type() == "Identity");
  CHECK(find_initializer(g, "W0") != nullptr);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 3, 5, 4, 17)}};
  CHECK(output_diff(original, out.model, inputs, "Y") < kTolerance);
  CHECK(output_diff(original, out.model, inputs, "R") < kTolerance);
}

TEST_CASE("a weight that is also a graph output is kept", "[rewrite][source]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,5,4] X) => (float[1,3,10,8] Y, float[3,1,4,4] W) {
  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W)
})");
  set_random_initializer(*original.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4, 4}, 18);
  name_node(original, "Y", "up1");
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  require_polyphase(g, "Y", 2, 3, 13, "up1");
  CHECK(find_initializer(g, "W") != nullptr);
  CHECK(g.initializer_size() == 5);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 3, 5, 4, 19)}};
  CHECK(output_diff(original, out.model, inputs, "Y") < kTolerance);
  CHECK(output_diff(original, out.model, inputs, "W") < kTolerance);
}

TEST_CASE("a deconv inside an If branch is rewritten with its weight from the outer scope", "[rewrite][subgraph]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,3] X, bool cond) => (float[1,2,8,6] Y) {
  Y = If (cond) <
    then_branch = then_g () => (float[1,2,8,6] T) {
      T = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W, B)
    },
    else_branch = else_g () => (float[1,2,8,6] E) {
      E = ConvTranspose <group=2, strides=[2,2]> (X, W2)
    }>
})");
  set_random_initializer(*original.mutable_graph(), "W", TensorProto::FLOAT, {2, 1, 4, 4}, 20);
  set_random_initializer(*original.mutable_graph(), "B", TensorProto::FLOAT, {2}, 21);
  set_random_initializer(*original.mutable_graph(), "W2", TensorProto::FLOAT, {2, 1, 2, 2}, 22);
  name_node(original, "T", "up_then");
  name_node(original, "E", "up_else");
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 2);
  CHECK(count_ops_everywhere(out.model, "ConvTranspose") == 0);
  REQUIRE(g.node_size() == 1);
  REQUIRE(g.node(0).op_type() == "If");
  const auto& then_g = find_attr(g.node(0), "then_branch")->g();
  const auto& else_g = find_attr(g.node(0), "else_branch")->g();
  for (const auto* conv : require_polyphase(then_g, "T", 2, 2, 13, "up_then")) {
    CHECK(find_initializer(g, conv->input(1)) != nullptr);  // phase weights live where W lives
    CHECK(conv->input(2) == "B");
  }
  require_polyphase(else_g, "E", 2, 2, 13, "up_else");
  CHECK(then_g.output(0).name() == "T");
  CHECK(else_g.output(0).name() == "E");
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(find_initializer(g, "W2") == nullptr);
  CHECK(find_initializer(g, "B") != nullptr);
  CHECK(g.initializer_size() == 9);
  CHECK(out.result.nodes[0].summary.graph_path != "main");
  CHECK(checker_error(out.model).empty());
  const auto x = random_tensor4(1, 2, 4, 3, 23);
  for (bool cond : {true, false}) {
    CAPTURE(cond);
    CHECK(output_diff(original, out.model, {{"X", x}, {"cond", bool_scalar(cond)}}, "Y", {1, 2, 8, 6}) < kTolerance);
  }
}

TEST_CASE("at IR 3 an initializer listed as a graph input is constant and phase weights are listed too", "[rewrite][source]") {
  DeconvSpec spec;
  spec.ir_version = 3;
  spec.opset = 8;
  auto original = deconv_model(spec);
  auto* w_input = original.mutable_graph()->add_input();
  w_input->set_name("W");
  w_input->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  for (int64_t d : {3, 1, 4, 4}) w_input->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  REQUIRE(checker_error(original).empty());
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  require_polyphase(g, "Y", 2, 3, 8, "up1");
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(g.input_size() == 5);  // X and the four phase weights; W is gone
  for (const auto& init : g.initializer()) {
    bool listed = false;
    for (const auto& in : g.input()) listed = listed || in.name() == init.name();
    CHECK(listed);
  }
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}) < kTolerance);
}

TEST_CASE("a deconv inside a Loop body is rewritten and its Identity-wrapped outer weight cleaned up", "[rewrite][subgraph]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,3] X, int64 trips) => (float[1,2,4,3] V, float[2,1,2,8,6] S) {
  V = Loop (trips, , X) <
    body = body_g (int64 i, bool c_in, float[1,2,4,3] v_in) => (bool c_out, float[1,2,4,3] v_out, float[1,2,8,6] s) {
      c_out = Identity (c_in)
      v_out = Relu (v_in)
      WI = Identity (W)
      s = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (v_in, WI, B)
    }>
})");
  // The parser cannot name Loop's second output; add it by hand.
  original.mutable_graph()->mutable_node(0)->add_output("S");
  set_random_initializer(*original.mutable_graph(), "W", TensorProto::FLOAT, {2, 1, 4, 4}, 24);
  set_random_initializer(*original.mutable_graph(), "B", TensorProto::FLOAT, {2}, 25);
  name_node(original, "s", "up_loop");
  REQUIRE(checker_error(original).empty());
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  const auto& body = find_attr(g.node(0), "body")->g();
  CHECK(count_ops(body, "ConvTranspose") == 0);
  CHECK(count_ops(body, "Identity") == 1);  // c_out only; WI was orphaned
  for (const auto* conv : require_polyphase(body, "s", 2, 2, 13, "up_loop")) {
    CHECK(conv->input(0) == "v_in");
    CHECK(find_initializer(g, conv->input(1)) != nullptr);
  }
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 2, 4, 3, 26)}, {"trips", NaiveTensor({}, {2.0})}};
  CHECK(output_diff(original, out.model, inputs, "S", {2, 1, 2, 8, 6}) < kTolerance);
  CHECK(output_diff(original, out.model, inputs, "V") < kTolerance);
}

TEST_CASE("weights local to an If branch get phase weights in that branch", "[rewrite][subgraph]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,3] X, bool cond) => (float[1,2,8,6] Y) {
  Y = If (cond) <
    then_branch = then_g () => (float[1,2,8,6] T) {
      K = Constant <value = float[1] {0}> ()
      T = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, K)
    },
    else_branch = else_g () => (float[1,2,8,6] E) {
      E = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, WL)
    }>
})");
  auto& if_node = *original.mutable_graph()->mutable_node(0);
  auto& then_g = *if_node.mutable_attribute(0)->mutable_g();
  auto& else_g = *if_node.mutable_attribute(1)->mutable_g();
  *then_g.mutable_node(0)->mutable_attribute(0)->mutable_t() =
      onnx_io::make_tensor("", TensorProto::FLOAT, {2, 1, 4, 4}, random_values(32, 27), true);
  set_random_initializer(else_g, "WL", TensorProto::FLOAT, {2, 1, 4, 4}, 28);
  name_node(original, "T", "up_then");
  name_node(original, "E", "up_else");
  REQUIRE(checker_error(original).empty());
  const auto out = rewrite_copy(original);
  REQUIRE(out.result.rewritten == 2);
  const auto& g = out.model.graph();
  const auto& then_out = find_attr(g.node(0), "then_branch")->g();
  const auto& else_out = find_attr(g.node(0), "else_branch")->g();
  require_polyphase(then_out, "T", 2, 2, 13, "up_then");
  require_polyphase(else_out, "E", 2, 2, 13, "up_else");
  CHECK(count_ops(then_out, "Constant") == 4);
  CHECK(find_producer(then_out, "K") == nullptr);
  CHECK(else_out.initializer_size() == 4);
  CHECK(find_initializer(else_out, "WL") == nullptr);
  CHECK(g.initializer_size() == 0);
  CHECK(checker_error(out.model).empty());
  const auto x = random_tensor4(1, 2, 4, 3, 29);
  for (bool cond : {true, false}) {
    CAPTURE(cond);
    CHECK(output_diff(original, out.model, {{"X", x}, {"cond", bool_scalar(cond)}}, "Y") < kTolerance);
  }
}

TEST_CASE("a weight shared by a main-graph deconv and a branch deconv shares phase weights", "[rewrite][subgraph][shared]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,3] X, bool cond) => (float[1,2,8,6] Y, float[1,2,8,6] Z) {
  Z = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)
  Y = If (cond) <
    then_branch = then_g () => (float[1,2,8,6] T) { T = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W) },
    else_branch = else_g () => (float[1,2,8,6] E) { E = Identity (Z) }>
})");
  set_random_initializer(*original.mutable_graph(), "W", TensorProto::FLOAT, {2, 1, 4, 4}, 30);
  name_node(original, "Z", "up_main");
  name_node(original, "T", "up_then");
  const auto out = rewrite_copy(original);
  REQUIRE(out.result.rewritten == 2);
  const auto& g = out.model.graph();
  const auto main_convs = require_polyphase(g, "Z", 2, 2, 13, "up_main");
  const auto& then_out = find_attr(*find_producer(g, "Y"), "then_branch")->g();
  const auto then_convs = require_polyphase(then_out, "T", 2, 2, 13, "up_then");
  for (size_t i = 0; i < 4; ++i) CHECK(main_convs[i]->input(1) == then_convs[i]->input(1));
  CHECK(g.initializer_size() == 4);
  CHECK(checker_error(out.model).empty());
  const auto x = random_tensor4(1, 2, 4, 3, 31);
  for (bool cond : {true, false}) {
    CAPTURE(cond);
    CHECK(output_diff(original, out.model, {{"X", x}, {"cond", bool_scalar(cond)}}, "Y") < kTolerance);
  }
}
