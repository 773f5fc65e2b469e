// Node selection, determinism, idempotence, fresh names, and everything the rewrite must leave alone.
#include <catch2/catch.hpp>

#include <functional>

#include "rewrite_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;
using onnx::TensorProto;

namespace {

// Two independent deconvs "up1" (X -> Y1) and "up2" (X -> Y2).
onnx::ModelProto two_deconvs() {
  auto model = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,3] X) => (float[1,2,8,6] Y1, float[1,2,8,6] Y2) {
  Y1 = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W1)
  Y2 = ConvTranspose <group=2, strides=[2,2]> (X, W2, B2)
})");
  set_random_initializer(*model.mutable_graph(), "W1", TensorProto::FLOAT, {2, 1, 4, 4}, 1);
  set_random_initializer(*model.mutable_graph(), "W2", TensorProto::FLOAT, {2, 1, 2, 2}, 2);
  set_random_initializer(*model.mutable_graph(), "B2", TensorProto::FLOAT, {2}, 3);
  name_node(model, "Y1", "up1");
  name_node(model, "Y2", "up2");
  return model;
}

// A model with most of what the rewriter handles at once: a shared weight, a Constant weight behind an
// Identity, an If branch, and a kept node (up_Y4, k3 s2 p1: not a clean upscale).
onnx::ModelProto mixed_model() {
  auto model = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,3] X, bool cond) => (float[1,2,8,6] Y1, float[1,2,8,6] Y2, float[1,2,8,6] Y3, float[1,2,7,5] Y4) {
  K = Constant <value = float[1] {0}> ()
  KI = Identity (K)
  Y1 = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)
  Y2 = ConvTranspose <group=2, strides=[2,2], pads=[2,0,0,2]> (X, W)
  Y3 = If (cond) <
    then_branch = then_g () => (float[1,2,8,6] T) { T = ConvTranspose <group=2, strides=[2,2], output_padding=[1,1], pads=[1,1,1,1]> (X, KI) },
    else_branch = else_g () => (float[1,2,8,6] E) { E = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W) }>
  Y4 = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, KI)
})");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {2, 1, 4, 4}, 4);
  *model.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_t() =
      onnx_io::make_tensor("", TensorProto::FLOAT, {2, 1, 3, 3}, random_values(18, 5), false);
  for (const char* out : {"Y1", "Y2", "T", "E", "Y4"}) name_node(model, out, std::string("up_") + out);
  return model;
}

}  // namespace

TEST_CASE("only rewrites the named nodes and reports names that match nothing", "[rewrite][options]") {
  const auto original = two_deconvs();
  rewrite::RewriteOptions options;
  options.only = {"up1", "nope"};
  const auto out = rewrite_copy(original, options);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  REQUIRE(out.result.kept == 1);
  CHECK(out.result.nodes[0].rewritten);
  CHECK(out.result.nodes[1].reason == "not selected by --only");
  CHECK(out.result.unmatched_names == std::vector<std::string>{"nope"});
  require_polyphase(g, "Y1", 2, 2, 13, "up1");
  CHECK(find_producer(g, "Y2")->op_type() == "ConvTranspose");
  CHECK(find_initializer(g, "W1") == nullptr);
  CHECK(find_initializer(g, "W2") != nullptr);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 2, 4, 3, 6)}};
  CHECK(output_diff(original, out.model, inputs, "Y1") < kTolerance);
  CHECK(output_diff(original, out.model, inputs, "Y2") < kTolerance);
}

TEST_CASE("skip keeps the named nodes and reports names that match nothing", "[rewrite][options]") {
  const auto original = two_deconvs();
  rewrite::RewriteOptions options;
  options.skip = {"up1", "ghost"};
  const auto out = rewrite_copy(original, options);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  CHECK(out.result.nodes[0].reason == "skipped by --skip");
  CHECK(out.result.nodes[1].rewritten);
  CHECK(out.result.unmatched_names == std::vector<std::string>{"ghost"});
  CHECK(find_producer(g, "Y1")->op_type() == "ConvTranspose");
  require_polyphase(g, "Y2", 2, 2, 13, "up2");
  CHECK(find_initializer(g, "W1") != nullptr);
  CHECK(find_initializer(g, "W2") == nullptr);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 2, 4, 3, 7)}};
  CHECK(output_diff(original, out.model, inputs, "Y1") < kTolerance);
  CHECK(output_diff(original, out.model, inputs, "Y2") < kTolerance);
}

TEST_CASE("only selects an unnamed node by the name the report gives it", "[rewrite][options]") {
  // The plan and the report call an unnamed node by its output, "Y"; that name must select it.
  DeconvSpec spec;
  auto original = deconv_model(spec);
  original.mutable_graph()->mutable_node(0)->clear_name();
  const auto report = rewrite_copy(original).result;
  REQUIRE(report.nodes[0].summary.name == "Y");
  rewrite::RewriteOptions options;
  options.only = {"Y"};
  const auto out = rewrite_copy(original, options);
  CHECK(out.result.unmatched_names.empty());
  CHECK(out.result.rewritten == 1);
  CHECK(count_ops(out.model.graph(), "ConvTranspose") == 0);
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}) < kTolerance);
}

TEST_CASE("an unnamed node is rewritten with fresh names derived from its output", "[rewrite][options]") {
  DeconvSpec spec;
  auto original = deconv_model(spec);
  original.mutable_graph()->mutable_node(0)->clear_name();
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  const auto* d2s = find_producer(g, "Y");
  REQUIRE(d2s != nullptr);
  require_polyphase(g, "Y", 2, 3, 13, d2s->name());
  CHECK_FALSE(d2s->name().empty());
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}) < kTolerance);
}

TEST_CASE("rewriting is deterministic: two copies give byte-identical models", "[rewrite][determinism]") {
  const auto original = mixed_model();
  const auto first = rewrite_copy(original);
  const auto second = rewrite_copy(mixed_model());  // built anew: other addresses, same content
  REQUIRE(first.result.rewritten == 4);
  REQUIRE(first.result.kept == 1);  // up_Y4: k3 s2 p1 is 2*H-1
  CHECK(serialized(first.model) == serialized(second.model));
  CHECK(checker_error(first.model).empty());
  const auto x = random_tensor4(1, 2, 4, 3, 8);
  for (bool cond : {true, false}) {
    for (const char* y : {"Y1", "Y2", "Y3", "Y4"}) {
      CAPTURE(cond, y);
      CHECK(output_diff(original, first.model, {{"X", x}, {"cond", bool_scalar(cond)}}, y) < kTolerance);
    }
  }
}

TEST_CASE("rewriting is idempotent: a rewritten model comes back unchanged", "[rewrite][idempotence]") {
  const auto once = rewrite_copy(mixed_model());
  REQUIRE(once.result.rewritten == 4);
  CHECK(count_ops_everywhere(once.model, "ConvTranspose") == 1);  // the kept up_Y4
  const auto twice = rewrite_copy(once.model);
  CHECK(twice.result.rewritten == 0);
  REQUIRE(twice.result.nodes.size() == 1);
  CHECK(twice.result.nodes[0].summary.name == "up_Y4");
  CHECK_THAT(twice.result.nodes[0].reason, Catch::Contains("not a clean upscale"));
  CHECK(serialized(twice.model) == serialized(once.model));
}

TEST_CASE("emitted names never collide with names already in the model", "[rewrite][names]") {
  // Plant the names the emitter would pick first: node names, tensors, an initializer, a subgraph tensor.
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,5,4] X, bool cond) => (float[1,3,10,8] Y, float[1,3,5,4] up1_phase_0_0, float[1,3,5,4] Z) {
  up1_phase_0_0 = Identity (X)
  up1_phases = Identity (X)
  Z = If (cond) <
    then_branch = then_g () => (float[1,3,5,4] up1_pad_0_0) { up1_pad_0_0 = Identity (up1_phases) },
    else_branch = else_g () => (float[1,3,5,4] up1_pad_0_0_pads) { up1_pad_0_0_pads = Identity (X) }>
  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W)
})");
  auto& graph = *original.mutable_graph();
  set_random_initializer(graph, "W", TensorProto::FLOAT, {3, 1, 4, 4}, 9);
  set_random_initializer(graph, "W_s2_p1_1_1_1_phase_0_0", TensorProto::FLOAT, {3, 1, 2, 2}, 10);
  name_node(original, "up1_phase_0_0", "up1_concat");
  name_node(original, "up1_phases", "up1_phase_1_1");
  name_node(original, "Y", "up1");
  const auto before_names = all_names(original);
  const std::set<std::string> planted(before_names.begin(), before_names.end());

  rewrite::RewriteOptions options;
  options.emit.explicit_pad = true;
  const auto out = rewrite_copy(original, options);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  const auto convs = require_polyphase(g, "Y", 2, 3, 13, "up1");
  CHECK(count_ops(g, "Pad") == 4);

  // Every node and tensor the rewrite added is new; the planted ones are untouched.
  for (const auto& name : out.result.nodes[0].emitted_nodes) {
    if (name != "up1") CHECK(planted.count(name) == 0);
  }
  std::map<std::string, int> definitions;  // tensor -> times defined (graph inputs, initializers, node outputs)
  std::map<std::string, int> node_names;
  std::function<void(const onnx::GraphProto&)> visit = [&](const onnx::GraphProto& sub) {
    for (const auto& v : sub.input()) ++definitions[v.name()];
    for (const auto& t : sub.initializer()) ++definitions[t.name()];
    for (const auto& n : sub.node()) {
      if (!n.name().empty()) ++node_names[n.name()];
      for (const auto& o : n.output()) ++definitions[o];
      for (const auto& a : n.attribute()) {
        if (a.has_g()) visit(a.g());
      }
    }
  };
  visit(g);
  for (const auto& [name, n] : definitions) {
    CAPTURE(name);
    CHECK(n == 1);
  }
  for (const auto& [name, n] : node_names) {
    CAPTURE(name);
    CHECK(n == 1);
  }
  for (const auto* conv : convs) {
    CHECK(planted.count(conv->output(0)) == 0);
    CHECK(planted.count(conv->input(1)) == 0);
    CHECK(planted.count(conv->input(0)) == 0);  // the Pad outputs
  }
  const auto* planted_init = find_initializer(g, "W_s2_p1_1_1_1_phase_0_0");
  REQUIRE(planted_init != nullptr);
  CHECK(planted_init->SerializeAsString() == find_initializer(original.graph(), "W_s2_p1_1_1_1_phase_0_0")->SerializeAsString());
  CHECK(find_producer(g, "up1_phase_0_0")->name() == "up1_concat");
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 3, 5, 4, 11)}, {"cond", bool_scalar(true)}};
  for (const char* y : {"Y", "up1_phase_0_0", "Z"}) CHECK(output_diff(original, out.model, inputs, y) < kTolerance);
}

TEST_CASE("everything else in the model is preserved", "[rewrite][preserve]") {
  DeconvSpec spec;
  auto original = deconv_model(spec);
  original.set_producer_name("tests");
  original.set_producer_version("1.0");
  original.set_doc_string("model doc");
  original.set_model_version(42);
  auto* extra_opset = original.add_opset_import();
  extra_opset->set_domain("com.example");
  extra_opset->set_version(1);
  auto* prop = original.add_metadata_props();
  prop->set_key("license");
  prop->set_value("Apache-2.0");
  auto* graph = original.mutable_graph();
  graph->set_doc_string("graph doc");
  graph->mutable_input(0)->set_doc_string("input doc");
  auto* fn = original.add_functions();
  fn->set_name("Helper");
  fn->set_domain("com.example");
  fn->add_input("a");
  fn->add_output("b");
  auto* fn_node = fn->add_node();
  fn_node->set_op_type("Identity");
  fn_node->add_input("a");
  fn_node->add_output("b");
  fn->add_opset_import()->set_version(13);
  original.add_training_info()->mutable_algorithm()->set_name("train");

  const auto out = rewrite_copy(original);
  REQUIRE(out.result.rewritten == 1);
  require_polyphase(out.model.graph(), "Y", 2, 3, 13, "up1");
  CHECK(out.model.producer_name() == "tests");
  CHECK(out.model.producer_version() == "1.0");
  CHECK(out.model.doc_string() == "model doc");
  CHECK(out.model.model_version() == 42);
  CHECK(out.model.ir_version() == original.ir_version());
  CHECK(out.model.opset_import_size() == 2);
  CHECK(out.model.opset_import(1).domain() == "com.example");
  REQUIRE(out.model.metadata_props_size() == 1);
  CHECK(out.model.metadata_props(0).value() == "Apache-2.0");
  CHECK(out.model.graph().doc_string() == "graph doc");
  CHECK(out.model.graph().input(0).SerializeAsString() == original.graph().input(0).SerializeAsString());
  CHECK(out.model.graph().output(0).SerializeAsString() == original.graph().output(0).SerializeAsString());
  CHECK(out.model.functions_size() == 1);
  CHECK(out.model.functions(0).SerializeAsString() == original.functions(0).SerializeAsString());
  CHECK(out.model.training_info_size() == 1);
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}) < kTolerance);
}

TEST_CASE("output_shape works when H is known only through shape inference", "[rewrite][output_shape]") {
  const int64_t opset = GENERATE(13, 18);
  CAPTURE(opset);
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) + R"(]>
g (float[1,2,3,2] X) => (float[1,2,12,8] Y) {
  A = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W1)
  R = Relu (A)
  Y = ConvTranspose <group=2, strides=[2,2], output_padding=[1,1], output_shape=[12,8]> (R, W2)
})");
  set_random_initializer(*original.mutable_graph(), "W1", TensorProto::FLOAT, {2, 1, 4, 4}, 12);
  set_random_initializer(*original.mutable_graph(), "W2", TensorProto::FLOAT, {2, 1, 4, 4}, 13);
  name_node(original, "A", "up1");
  name_node(original, "Y", "up2");
  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 2);
  CHECK(out.result.nodes[1].summary.pads == std::array<int64_t, 4>{2, 2, 1, 1});
  const auto convs = require_polyphase(g, "Y", 2, 2, opset, "up2");
  for (const auto* conv : convs) {
    const auto* vi = find_value_info(g, conv->output(0));
    REQUIRE(vi != nullptr);
    CHECK(vi->type().tensor_type().shape().dim(2).dim_value() == 6);
  }
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(original, out.model, {{"X", random_tensor4(1, 2, 3, 2, 14)}}, "Y", {1, 2, 12, 8}) < kTolerance);
}
