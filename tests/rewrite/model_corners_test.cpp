// Corners of the ONNX model format the rewrite must get right: types resolved per scope (sibling If branches
// with a local tensor of the same name, a Loop body input that shadows a main-graph name), initializers that
// training_info still names, ConvTranspose nodes inside model-local functions, sparse initializers, and
// ConvTranspose nodes with the wrong number of inputs or outputs.
#include <set>

#include "onnx_io/validate.h"
#include "tests/rewrite/rewrite_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;
using onnx::TensorProto;

namespace {

const rewrite::NodeReport& report_of(const rewrite::RewriteResult& result, const std::string& name) {
  for (const auto& n : result.nodes) {
    if (n.summary.name == name) return n;
  }
  FAIL("no ConvTranspose '" << name << "' in the result");
  throw;
}

std::string opset_header(int64_t opset) { return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + "]>\n"; }

// Two sibling If nodes whose then-branches each define a local `t`: 5x5 in the first, 4x4 in the second. Both
// deconvs ask for a 10x10 output: a clean x2 upscale of 5x5 (pads 1), but not of 4x4 (pads 0, output 2H+2).
onnx::ModelProto sibling_if_model(int64_t opset) {
  auto m = parse_model(opset_header(opset) + R"(
g (float[1,8,5,5] A, float[1,8,4,4] B, float[1,8,10,10] C, bool c1, bool c2) => (float[1,8,10,10] Y1, float[1,8,10,10] Y2) {
  Y1 = If (c1) <
    then_branch = then1 () => (float[1,8,10,10] T1) {
      t = Relu (A)
      T1 = ConvTranspose <group=8, strides=[2,2], output_shape=[10,10]> (t, W)
    },
    else_branch = else1 () => (float[1,8,10,10] E1) {
      E1 = Identity (C)
    }>
  Y2 = If (c2) <
    then_branch = then2 () => (float[1,8,10,10] T2) {
      t = Relu (B)
      T2 = ConvTranspose <group=8, strides=[2,2], output_shape=[10,10]> (t, W)
    },
    else_branch = else2 () => (float[1,8,10,10] E2) {
      E2 = Identity (C)
    }>
})");
  set_random_initializer(*m.mutable_graph(), "W", TensorProto::FLOAT, {8, 1, 4, 4}, 41);
  name_node(m, "T1", "up_a");
  name_node(m, "T2", "up_b");
  return m;
}

// A main-graph deconv on X (5x5) and a Loop whose body input is also called X but carries a 4x4 tensor (or one
// of unknown size when `z_dims` says so). Both deconvs ask for a 10x10 output. The ONNX IR spec forbids the
// shadowing and the tool's validation refuses such an input; the rewrite's scoping must not depend on that.
onnx::ModelProto loop_shadow_model(int64_t opset, const std::string& z_dims = "1,8,4,4") {
  auto m = parse_model(opset_header(opset) + "g (float[1,8,5,5] X, float[" + z_dims +
                       R"(] Z, int64 trips) => (float[1,8,10,10] Y, float[)" + z_dims + R"(] V, float[2,1,8,10,10] S) {
  Y = ConvTranspose <group=8, strides=[2,2], output_shape=[10,10]> (X, W)
  V = Loop (trips, , Z) <
    body = body_g (int64 i, bool c_in, float[)" +
                       z_dims + R"(] X) => (bool c_out, float[)" + z_dims +
                       R"(] v_out, float[1,8,10,10] s) {
      c_out = Identity (c_in)
      v_out = Relu (X)
      s = ConvTranspose <group=8, strides=[2,2], output_shape=[10,10]> (X, W)
    }>
})");
  m.mutable_graph()->mutable_node(1)->add_output("S");  // the parser cannot name Loop's second output
  set_random_initializer(*m.mutable_graph(), "W", TensorProto::FLOAT, {8, 1, 4, 4}, 42);
  name_node(m, "Y", "up_main");
  name_node(m, "s", "up_body");
  return m;
}

}  // namespace

TEST_CASE("sibling If branches with a local tensor of the same name each get their own shape", "[rewrite][scope]") {
  for (int64_t opset : {13, 18}) {
    CAPTURE(opset);
    const auto original = sibling_if_model(opset);
    if (opset <= 17) REQUIRE(checker_error(original).empty());
    const auto out = rewrite_copy(original);
    REQUIRE(out.result.nodes.size() == 2);
    const auto& a = report_of(out.result, "up_a");
    const auto& b = report_of(out.result, "up_b");
    CHECK(a.rewritten);
    CHECK(a.summary.pads == std::array<int64_t, 4>{1, 1, 1, 1});
    // 4x4 -> 10x10 resolves pads 0 (2*(H+1), rewritten with every phase one row longer); 5x5, another scope's `t`,
    // would resolve pads 1.
    CHECK(b.rewritten);
    CHECK(b.summary.pads == std::array<int64_t, 4>{0, 0, 0, 0});
    CHECK(count_ops_everywhere(out.model, "ConvTranspose") == 0);
    if (opset <= 17) CHECK(checker_error(out.model).empty());
    const std::map<std::string, NaiveTensor> inputs{{"A", random_tensor4(1, 8, 5, 5, 43)},
                                                    {"B", random_tensor4(1, 8, 4, 4, 44)},
                                                    {"C", random_tensor4(1, 8, 10, 10, 45)},
                                                    {"c1", bool_scalar(true)},
                                                    {"c2", bool_scalar(true)}};
    CHECK(output_diff(original, out.model, inputs, "Y1", {1, 8, 10, 10}) < kTolerance);
    CHECK(output_diff(original, out.model, inputs, "Y2", {1, 8, 10, 10}) < kTolerance);
  }
}

TEST_CASE("sibling If branches with a local tensor of different channel counts are both rewritten", "[rewrite][scope]") {
  auto original = parse_model(opset_header(13) + R"(
g (float[1,4,5,5] A, float[1,8,5,5] B, bool c) => (float[1,4,10,10] Y1, float[1,8,10,10] Y2) {
  Y1 = If (c) <
    then_branch = then1 () => (float[1,4,10,10] T1) {
      t = Relu (A)
      T1 = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (t, W4)
    },
    else_branch = else1 () => (float[1,4,10,10] E1) {
      E1 = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (A, W4)
    }>
  Y2 = If (c) <
    then_branch = then2 () => (float[1,8,10,10] T2) {
      t = Relu (B)
      T2 = ConvTranspose <group=8, strides=[2,2], pads=[1,1,1,1]> (t, W8)
    },
    else_branch = else2 () => (float[1,8,10,10] E2) {
      E2 = ConvTranspose <group=8, strides=[2,2], pads=[1,1,1,1]> (B, W8)
    }>
})");
  set_random_initializer(*original.mutable_graph(), "W4", TensorProto::FLOAT, {4, 1, 4, 4}, 46);
  set_random_initializer(*original.mutable_graph(), "W8", TensorProto::FLOAT, {8, 1, 4, 4}, 47);
  name_node(original, "T1", "up_a");
  name_node(original, "T2", "up_b");
  REQUIRE(checker_error(original).empty());
  // Before types were scoped, up_b saw the first branch's `t` and the rewrite failed: "input 't' has 4 channels".
  const auto out = rewrite_copy(original);
  CHECK(out.result.rewritten == 4);
  CHECK(report_of(out.result, "up_b").summary.channels == 8);
  CHECK(count_ops_everywhere(out.model, "ConvTranspose") == 0);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{
      {"A", random_tensor4(1, 4, 5, 5, 48)}, {"B", random_tensor4(1, 8, 5, 5, 49)}, {"c", bool_scalar(true)}};
  CHECK(output_diff(original, out.model, inputs, "Y1", {1, 4, 10, 10}) < kTolerance);
  CHECK(output_diff(original, out.model, inputs, "Y2", {1, 8, 10, 10}) < kTolerance);
}

TEST_CASE("a Loop body input that shadows a main-graph name has the body's shape", "[rewrite][scope]") {
  for (int64_t opset : {13, 18}) {
    CAPTURE(opset);
    const auto original = loop_shadow_model(opset);
    if (opset <= 17) REQUIRE(checker_error(original).empty());
    const auto out = rewrite_copy(original);
    REQUIRE(out.result.nodes.size() == 2);
    const auto& main = report_of(out.result, "up_main");
    const auto& body = report_of(out.result, "up_body");
    CHECK(main.rewritten);
    CHECK(main.summary.pads == std::array<int64_t, 4>{1, 1, 1, 1});
    // The body's X is 4x4 (pads 0, 2*(H+1)); the main graph's X (5x5, pads 1) is hidden in there.
    CHECK(body.rewritten);
    CHECK(body.summary.pads == std::array<int64_t, 4>{0, 0, 0, 0});
    const auto& loop_body = find_attr(out.model.graph().node(out.model.graph().node_size() - 1), "body")->g();
    CHECK(count_ops(loop_body, "ConvTranspose") == 0);
    CHECK(count_ops(loop_body, "DepthToSpace") == 1);
    if (opset <= 17) CHECK(checker_error(out.model).empty());
    const std::map<std::string, NaiveTensor> inputs{
        {"X", random_tensor4(1, 8, 5, 5, 50)}, {"Z", random_tensor4(1, 8, 4, 4, 51)}, {"trips", NaiveTensor({}, {2.0})}};
    CHECK(output_diff(original, out.model, inputs, "S", {2, 1, 8, 10, 10}) < kTolerance);
    CHECK(output_diff(original, out.model, inputs, "Y", {1, 8, 10, 10}) < kTolerance);
  }
}

TEST_CASE("a shape unknown in a scope is unknown there, not taken from an outer name", "[rewrite][scope]") {
  // The body's X has symbolic H and W; the main graph's X is 5x5. output_shape then needs the unknown H.
  const auto original = loop_shadow_model(13, "1,8,H,W");
  REQUIRE(checker_error(original).empty());
  const auto out = rewrite_copy(original);
  const auto& body = report_of(out.result, "up_body");
  CHECK_FALSE(body.rewritten);
  CHECK(body.reason == "output_shape is set but the input's spatial size is unknown");
  CHECK(report_of(out.result, "up_main").rewritten);
}

TEST_CASE(
    "initializers that training_info names are kept, trained weights keep their node, and new names avoid "
    "training graph names",
    "[rewrite][training]") {
  DeconvSpec spec;
  auto original = deconv_model(spec);
  auto* training = original.add_training_info();
  // The algorithm graph reads W and names tensors the way the emitter would name its own.
  *training->mutable_algorithm() = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
algo (float[3,1,4,4] G) => (float[3,1,4,4] W_new) {
  up1_phase_0_0 = Relu (G)
  W_s2_p1_1_1_1_phase_0_0 = Identity (up1_phase_0_0)
  W_new = Identity (W_s2_p1_1_1_1_phase_0_0)
})")
                                       .graph();
  auto* binding = training->add_update_binding();
  binding->set_key("W");
  binding->set_value("W_new");

  SECTION("named only by update_binding") {}
  SECTION("named by update_binding and read by the training graph") { training->mutable_algorithm()->mutable_node(0)->set_input(0, "W"); }
  SECTION("read by the training graph only") {
    training->clear_update_binding();
    training->mutable_algorithm()->mutable_node(0)->set_input(0, "W");
  }
  const auto out = rewrite_copy(original);
  if (training->update_binding_size() > 0) {
    // Training writes W: phase weights gathered from it now would not follow, so the node is kept as written.
    REQUIRE(out.result.rewritten == 0);
    CHECK(report_of(out.result, "up1").reason ==
          "weight not constant: 'W' is written by training (a training_info binding), so it is not constant");
    CHECK(out.model.SerializeAsString() == original.SerializeAsString());
    return;
  }
  REQUIRE(out.result.rewritten == 1);
  require_polyphase(out.model.graph(), "Y", 2, 3, 13, "up1");
  CHECK(find_initializer(out.model.graph(), "W") != nullptr);  // still referenced by training_info
  // No name the rewrite added appears in the training graph, where it would alias another tensor.
  std::set<std::string> training_names;
  for (const auto& n : out.model.training_info(0).algorithm().node()) {
    training_names.insert(n.name());
    training_names.insert(n.input().begin(), n.input().end());
    training_names.insert(n.output().begin(), n.output().end());
  }
  const auto original_names = all_names(original);
  const std::set<std::string> before(original_names.begin(), original_names.end());
  for (const auto& name : all_names(out.model)) {
    if (before.count(name) != 0) continue;
    CHECK(training_names.count(name) == 0);
  }
  CHECK(out.model.training_info(0).SerializeAsString() == original.training_info(0).SerializeAsString());
  CHECK(output_diff(original, out.model, {{"X", input_for(spec)}}) < kTolerance);
}

TEST_CASE("a deconv inside a model-local function is listed as kept", "[rewrite][function]") {
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13, "custom" : 1]>
g (float[1,2,4,3] X) => (float[1,2,8,6] Y) {
  Y = custom.Up (X)
}
<domain: "custom", opset_import: ["" : 13]>
Up (x) => (y) {
  w = Constant <value = float[2,1,4,4] {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}> ()
  y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (x, w)
})");
  REQUIRE(original.functions_size() == 1);
  original.mutable_functions(0)->mutable_node(1)->set_name("up_fn");
  const auto out = rewrite_copy(original);
  REQUIRE(out.result.nodes.size() == 1);
  const auto& n = out.result.nodes[0];
  CHECK(n.summary.name == "up_fn");
  CHECK(n.summary.graph_path == "function 'custom.Up'");
  CHECK_FALSE(n.rewritten);
  CHECK(n.reason == "inside a model-local function");
  CHECK(out.result.kept == 1);
  CHECK(serialized(out.model) == serialized(original));

  rewrite::RewriteOptions skip;
  skip.skip = {"up_fn"};
  CHECK(rewrite_copy(original, skip).result.unmatched_names.empty());  // the plan's name is a valid --skip name
}

namespace {

// A sparse initializer in the SparseTensorProto form ONNX uses: values named `name`, linear int64 indices.
onnx::SparseTensorProto& add_sparse(onnx::GraphProto& graph, const std::string& name, const std::vector<int64_t>& dims,
                                    const std::vector<float>& values, const std::vector<int64_t>& indices) {
  auto& sp = *graph.add_sparse_initializer();
  for (int64_t d : dims) sp.add_dims(d);
  auto& v = *sp.mutable_values();
  v.set_name(name);
  v.set_data_type(TensorProto::FLOAT);
  v.add_dims(static_cast<int64_t>(values.size()));
  for (float x : values) v.add_float_data(x);
  auto& i = *sp.mutable_indices();
  i.set_data_type(TensorProto::INT64);
  i.add_dims(static_cast<int64_t>(indices.size()));
  for (int64_t x : indices) i.add_int64_data(x);
  return sp;
}

// A clean deconv "up1" on a dense weight, a second "up_sparse" whose weight is a sparse initializer, and a
// Conv whose weight is another sparse initializer.
onnx::ModelProto sparse_model() {
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,3] X) => (float[1,2,8,6] Y, float[1,2,8,6] Y2, float[1,2,8,6] Z) {
  Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)
  Y2 = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, SW)
  Z = Conv <group=2, pads=[1,1,1,1]> (Y, SC)
})");
  set_random_initializer(*m.mutable_graph(), "W", TensorProto::FLOAT, {2, 1, 4, 4}, 52);
  add_sparse(*m.mutable_graph(), "SW", {2, 1, 4, 4}, {0.5F, -1.0F, 2.0F}, {0, 5, 17});
  add_sparse(*m.mutable_graph(), "SC", {2, 1, 3, 3}, {1.0F, 0.25F}, {4, 13});
  name_node(m, "Y", "up1");
  name_node(m, "Y2", "up_sparse");
  return m;
}

}  // namespace

TEST_CASE("a model with sparse initializers validates, and its clean deconvs are rewritten", "[rewrite][sparse]") {
  const auto original = sparse_model();
  auto input_check = onnx_io::validate_model(original, {});
  INFO((input_check ? input_check->detail : input_check.error().message));
  REQUIRE(input_check.ok());
  CHECK(input_check->full);

  const auto out = rewrite_copy(original);
  const auto& g = out.model.graph();
  REQUIRE(out.result.nodes.size() == 2);
  CHECK(report_of(out.result, "up1").rewritten);
  require_polyphase(g, "Y", 2, 2, 13, "up1");
  const auto& kept = report_of(out.result, "up_sparse");
  CHECK_FALSE(kept.rewritten);
  CHECK(kept.reason == "weight 'SW' is a sparse initializer, which is not supported by this tool");
  CHECK(find_producer(g, "Y2")->op_type() == "ConvTranspose");
  // The sparse initializers survive untouched, in order.
  REQUIRE(g.sparse_initializer_size() == 2);
  for (int i = 0; i < 2; ++i) {
    CHECK(g.sparse_initializer(i).SerializeAsString() == original.graph().sparse_initializer(i).SerializeAsString());
  }

  auto output_check = onnx_io::validate_model(out.model, rewrite::emitted_node_names(out.result));
  INFO((output_check ? output_check->detail : output_check.error().message));
  CHECK(output_check.ok());
}

TEST_CASE("ConvTranspose nodes with the wrong number of inputs or outputs are refused, naming the node", "[rewrite][arity]") {
  {
    const int64_t opset = GENERATE(13, 18);
    CAPTURE(opset);
    DeconvSpec spec;
    spec.opset = opset;
    auto model = deconv_model(spec);
    auto& node = *model.mutable_graph()->mutable_node(0);
    std::string problem;
    SECTION("two outputs") {
      node.add_output("Y_extra");
      problem = "2 outputs";
    }
    SECTION("no output") {
      node.clear_output();
      model.mutable_graph()->clear_output();
      problem = "0 outputs";
    }
    SECTION("four inputs") {
      set_random_initializer(*model.mutable_graph(), "B", TensorProto::FLOAT, {3}, 53);
      node.add_input("B");
      node.add_input("B");
      problem = "4 inputs";
    }
    const std::string before = serialized(model);
    auto result = rewrite::rewrite_model(model, {});
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().kind == core::ErrorKind::kInvalidModel);
    CHECK_THAT(result.error().message, Catch::Contains("ConvTranspose 'up1'") && Catch::Contains(problem));
    CHECK(serialized(model) == before);
  }
}
