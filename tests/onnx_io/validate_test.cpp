// Validation and type lookup corners: node arity in the partial check of models newer than the library,
// subgraph names that shadow outer ones, sparse initializers, types resolved per graph scope (from the graph
// inputs, not from what the file declares), the convolution ranks and strides libonnx 1.12 crashes
// on, and the quiet child that isolated shape inference runs in.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <csignal>

#include <onnx/defs/parser.h>

#include "onnx_io/shapes.h"
#include "onnx_io/tensor.h"
#include "onnx_io/validate.h"

using namespace dwdeconv;

namespace {

onnx::ModelProto parse(const std::string& text) {
  onnx::ModelProto model;
  const auto status = onnx::OnnxParser::Parse(model, text.c_str());
  if (!status.IsOK()) FAIL("parse error: " << status.ErrorMessage());
  return model;
}

// An opset-18 model (newer than libonnx 1.12, so the partial check runs) with a depthwise deconv "up1".
onnx::ModelProto opset18_deconv() {
  auto m = parse(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[1,2,4,3] X) => (float[1,2,8,6] Y) {
  Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W, B)
})");
  *m.mutable_graph()->add_initializer() =
      onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, std::vector<double>(32, 0.5), true);
  *m.mutable_graph()->add_initializer() = onnx_io::make_tensor("B", onnx::TensorProto::FLOAT, {2}, {1.0, 2.0}, true);
  m.mutable_graph()->mutable_node(0)->set_name("up1");
  return m;
}

}  // namespace

TEST_CASE("the partial check refuses nodes with more or fewer inputs or outputs than their schema", "[onnx_io][validate]") {
  auto model = opset18_deconv();
  REQUIRE(onnx_io::validate_model(model, {}).ok());
  auto& node = *model.mutable_graph()->mutable_node(0);
  std::string expected;
  SECTION("four inputs") {
    node.add_input("B");
    expected = "main graph: ConvTranspose 'up1' has 4 inputs, but ConvTranspose takes 2 to 3";
  }
  SECTION("two outputs") {
    node.add_output("Y2");
    expected = "main graph: ConvTranspose 'up1' has 2 outputs, but ConvTranspose has 1";
  }
  SECTION("no output") {
    node.clear_output();
    model.mutable_graph()->clear_output();
    expected = "main graph: ConvTranspose 'up1' has 0 outputs, but ConvTranspose has 1";
  }
  SECTION("one input") {
    node.mutable_input()->DeleteSubrange(1, 2);
    expected = "main graph: ConvTranspose 'up1' has 1 input, but ConvTranspose takes 2 to 3";
  }
  const auto result = onnx_io::validate_model(model, {});
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().kind == core::ErrorKind::kFailedValidation);
  CHECK_THAT(result.error().message, Catch::Contains(expected));
}

TEST_CASE("the partial check counts inputs and outputs inside subgraphs too", "[onnx_io][validate]") {
  auto model = parse(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[1,2,4,3] X, bool c) => (float[1,2,4,3] Y) {
  Y = If (c) <
    then_branch = t () => (float[1,2,4,3] A) { A = Relu (X, X) },
    else_branch = e () => (float[1,2,4,3] B) { B = Identity (X) }>
})");
  const auto result = onnx_io::validate_model(model, {});
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(result.error().message, Catch::Contains("Relu producing 'A' has 2 inputs, but Relu takes 1"));
}

TEST_CASE("the partial check refuses a subgraph node that redefines an outer name, as the checker does", "[onnx_io][validate]") {
  // ONNX Runtime refuses it too ("Graph must be in single static assignment (SSA) form").
  auto model = parse(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[1,2,4,3] X, bool c) => (float[1,2,4,3] Y) {
  Y = If (c) <
    then_branch = t () => (float[1,2,4,3] A) {
      X = Identity (c)
      A = Relu (X)
    },
    else_branch = e () => (float[1,2,4,3] B) { B = Identity (X) }>
})");
  const auto result = onnx_io::validate_model(model, {});
  REQUIRE_FALSE(result.ok());
  CHECK_THAT(result.error().message, Catch::Contains("main graph/If producing 'Y': Identity producing 'X' writes 'X', which an outer graph "
                                                     "already defines (ONNX requires single static assignment across subgraphs)"));
}

namespace {

// Main graph: initializer W [2,1,4,4] (read by the else branch too), input X, and the If "branch"; `then_body` is the
// then branch's body, with `then_inits` its initializers.
onnx::ModelProto if_model(int opset, const std::string& then_body) {
  auto m = parse(R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) + R"(]>
g (float[1,2,4,3] X, bool c) => (float[1,2,8,6] Y) {
  t = Relu (X)
  Y = If (c) <
    then_branch = then_g () => (float[1,2,8,6] A) {
)" + then_body + R"(
    },
    else_branch = else_g () => (float[1,2,8,6] B) { B = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (X, W) }>
})");
  *m.mutable_graph()->add_initializer() =
      onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, std::vector<double>(32, 0.5), true);
  m.mutable_graph()->mutable_node(1)->set_name("branch");
  return m;
}

onnx::GraphProto& then_branch(onnx::ModelProto& m) { return *m.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g(); }

}  // namespace

TEST_CASE("a subgraph input or initializer that shadows an outer name is refused at every opset", "[onnx_io][validate][shadow]") {
  // The ONNX IR spec forbids it (docs/IR.md since onnx 1.19: "names of inputs and initializers of the subgraph MUST be
  // distinct from the names from the outer scopes that are visible in the nested subgraph"), though the checker, in
  // libonnx 1.12 as in onnx 1.23, accepts it. ONNX Runtime 1.32 resolves a then-branch initializer W that shadows an
  // outer W to the OUTER tensor when the outer one has another reader (here the else branch): the rewrite folded the
  // inner one, and its output differed by 4.7.
  const int opset = GENERATE(13, 18);  // the full check, and the partial one of models newer than libonnx
  CAPTURE(opset);
  std::string expected;
  onnx::ModelProto model;
  SECTION("an If branch's initializer named like the main graph's initializer") {
    model = if_model(opset, "      A = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (X, W)");
    *then_branch(model).add_initializer() =
        onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, std::vector<double>(32, 2.0), true);
    expected = "main graph/If 'branch': the then_branch graph's initializer 'W' shadows 'W', an initializer of the main graph";
  }
  SECTION("an If branch's sparse initializer named like a main-graph node's output") {
    model = if_model(opset, "      A = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (t, W)");
    auto& sp = *then_branch(model).add_sparse_initializer();
    for (int64_t d : {1, 2, 4, 3}) sp.add_dims(d);
    *sp.mutable_values() = onnx_io::make_tensor("t", onnx::TensorProto::FLOAT, {1}, {1.0}, false);
    *sp.mutable_indices() = onnx_io::make_int64_tensor("", {1}, {0});
    expected =
        "main graph/If 'branch': the then_branch graph's sparse initializer 't' shadows 't', the output of Relu producing 't' in the "
        "main graph";
  }
  SECTION("an initializer two graphs down named like the main graph's input") {
    model = if_model(opset, R"(      A = If (c) <
        then_branch = inner_t () => (float[1,2,8,6] P) { P = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (X, W) },
        else_branch = inner_e () => (float[1,2,8,6] Q) { Q = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (X, W) }>)");
    auto& inner = *then_branch(model).mutable_node(0)->mutable_attribute(1)->mutable_g();
    REQUIRE(inner.name() == "inner_e");
    *inner.add_initializer() = onnx_io::make_tensor("X", onnx::TensorProto::FLOAT, {1, 2, 4, 3}, std::vector<double>(24, 1.0), true);
    expected =
        "main graph/If 'branch'/If producing 'A': the else_branch graph's initializer 'X' shadows 'X', a graph input of the main graph";
  }
  SECTION("a Loop body input named like the main graph's input") {
    // ONNX Runtime takes the body's own input here (onnxruntime#1186), this tool's scoping too; the spec allows neither.
    model = parse(R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) + R"(]>
g (float[1,2,4,3] X, int64 n) => (float[1,2,4,3] V) {
  V = Loop (n, , X) <body = b (int64 i, bool c, float[1,2,4,3] X) => (bool c2, float[1,2,4,3] v) {
    c2 = Identity (c)
    v = Relu (X)
  }>
})");
    expected = "main graph/Loop producing 'V': the body graph's graph input 'X' shadows 'X', a graph input of the main graph";
  }
  SECTION("a Loop body input that would hide an outer tensor of another rank") {
    // The outer W has rank 2, the body's rank 4: refused as shadowing before any convolution rank is compared.
    model = parse(R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) + R"(]>
g (float[1,1,3,3] X, float[1,3] W, float[1,1,1,1] K, int64 n) => (float[1,3] V, float[1,1,1,1] KO, float[?,1,1,3,3] S) {
  V = Identity (W)
  KO, S = Loop (n, , K) <body = b (int64 i, bool c, float[1,1,1,1] W) => (bool c2, float[1,1,1,1] wo, float[1,1,3,3] a) {
    c2 = Identity (c)
    wo = Identity (W)
    a = Conv (X, W)
  }>
})");
    expected = "main graph/Loop producing 'KO': the body graph's graph input 'W' shadows 'W', a graph input of the main graph";
  }
  const auto result = onnx_io::validate_model(model, {});
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().kind == core::ErrorKind::kFailedValidation);
  CHECK_THAT(result.error().message, Catch::StartsWith(expected) && Catch::Contains("ONNX forbids a nested graph's inputs and initializers "
                                                                                    "to reuse a name visible from an outer scope"));
}

TEST_CASE("subgraph names that shadow nothing visible are accepted", "[onnx_io][validate][shadow]") {
  // Sibling branches may each define `k`: neither is visible in the other.
  const int opset = GENERATE(13, 18);
  CAPTURE(opset);
  auto model = parse(R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) + R"(]>
g (float[1,2,4,3] X, bool c) => (float[1,2,4,3] Y) {
  Y = If (c) <
    then_branch = then_g () => (float[1,2,4,3] A) { A = Add (X, k) },
    else_branch = else_g () => (float[1,2,4,3] B) { B = Mul (X, k) }>
})");
  for (int branch : {0, 1}) {
    auto& g = *model.mutable_graph()->mutable_node(0)->mutable_attribute(branch)->mutable_g();
    *g.add_initializer() = onnx_io::make_tensor("k", onnx::TensorProto::FLOAT, {1}, {1.0 + branch}, true);
  }
  const auto result = onnx_io::validate_model(model, {});
  INFO((result ? result->detail : result.error().message));
  CHECK(result.ok());
}

TEST_CASE("a graph output that nothing writes is refused at every opset", "[onnx_io][validate]") {
  // libonnx 1.12's checker passes it at the opsets it knows; ONNX Runtime refuses it ("Graph output (Y2) does not
  // exist in the graph"). Found by fuzzing, with ONNX Runtime as the judge.
  for (int opset : {13, 18}) {
    CAPTURE(opset);
    auto model = parse(R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) + R"(]>
g (float[1,2,4,3] X) => (float[1,2,4,3] Y1, float[1,2,4,3] Y2) {
  Y1 = Relu (X)
  Y3 = Relu (X)
})");
    const auto result = onnx_io::validate_model(model, {});
    CHECK_FALSE(result.ok());
    if (!result.ok()) CHECK_THAT(result.error().message, Catch::Contains("main graph: graph output 'Y2' is never defined"));
  }
}

TEST_CASE("the partial check accepts inputs that ops gained after the library's newest opset", "[onnx_io][validate]") {
  // Pad-18 takes an `axes` input and the Reduce ops take `axes` as an input from opset 18: libonnx 1.12's
  // newest schemas (Pad-13, ReduceMean-13) have fewer inputs, but the model is valid.
  auto model = parse(R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[1,2,4,3] X) => (float[1,2,6,3] P, float[1,1,6,3] R) {
  pads = Constant <value = int64[2] {1, 1}> ()
  zero = Constant <value = float {0}> ()
  axes = Constant <value = int64[1] {2}> ()
  P = Pad (X, pads, zero, axes)
  axis1 = Constant <value = int64[1] {1}> ()
  R = ReduceMean (P, axis1)
})");
  const auto result = onnx_io::validate_model(model, {});
  INFO((result ? result->detail : result.error().message));
  CHECK(result.ok());
}

TEST_CASE("sparse initializers are defined names for the structure check and shape inference", "[onnx_io][validate][sparse]") {
  auto model = parse(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] A) => (float[2,3] Z) {
  Z = Add (A, S)
})");
  auto& sp = *model.mutable_graph()->add_sparse_initializer();
  sp.add_dims(2);
  sp.add_dims(3);
  *sp.mutable_values() = onnx_io::make_tensor("S", onnx::TensorProto::FLOAT, {2}, {1.0, 2.0}, false);
  *sp.mutable_indices() = onnx_io::make_int64_tensor("", {2}, {0, 4});
  const std::string before = model.SerializeAsString();

  CHECK(onnx_io::check_structure(model.graph()).ok());
  const auto full = onnx_io::validate_model(model, {});
  INFO((full ? full->detail : full.error().message));
  CHECK(full.ok());
  const auto types = onnx_io::infer_types(model);
  const auto* z = types.find(0, "Z");
  REQUIRE(z != nullptr);
  CHECK(onnx_io::known_dims(*z) == std::vector<int64_t>{2, 3});
  const auto* s = types.find(0, "S");
  REQUIRE(s != nullptr);
  CHECK(s->has_tensor_type());
  CHECK(onnx_io::known_dims(*s) == std::vector<int64_t>{2, 3});
  CHECK(model.SerializeAsString() == before);

  model.mutable_opset_import(0)->set_version(18);  // the partial check
  CHECK(onnx_io::validate_model(model, {}).ok());
}

TEST_CASE("types are looked up per scope, with ONNX's shadowing", "[onnx_io][shapes]") {
  auto model = parse(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] X, float[1,2,4,4] Z, int64 n) => (float[1,2,4,4] V) {
  V = Loop (n, , Z) <
    body = b (int64 i, bool c, float[1,2,4,4] X) => (bool c2, float[1,2,4,4] v) {
      c2 = Identity (c)
      v = Relu (X)
      u = Relu (Z)
    }>
})");
  const auto types = onnx_io::infer_types(model);
  REQUIRE(types.size() == 2);
  REQUIRE(types.find(0, "X") != nullptr);
  CHECK(onnx_io::known_dims(*types.find(0, "X")) == std::vector<int64_t>{1, 2, 5, 5});
  REQUIRE(types.find(1, "X") != nullptr);
  // The body's own X: loop-carried, so of unknown dims (its declared 4x4 holds for the first iteration only), and
  // not the main graph's 5x5.
  CHECK(types.find(1, "X")->tensor_type().shape().dim_size() == 4);
  CHECK_FALSE(types.find(1, "X")->tensor_type().shape().dim(2).has_dim_value());
  REQUIRE(types.find(1, "Z") != nullptr);  // not defined in the body: the main graph's
  CHECK(onnx_io::known_dims(*types.find(1, "Z")) == std::vector<int64_t>{1, 2, 4, 4});
  CHECK(types.find(0, "u") == nullptr);  // a body tensor is not visible outside
  CHECK(types.find(1, "nowhere") == nullptr);
}

TEST_CASE("types come from the graph inputs, not from the shapes the file declares for computed tensors", "[onnx_io][shapes]") {
  // A declared dim wins over an inferred symbol in ONNX's inference: value_info t [1,3,4,5] would make t 4x5 for an
  // X of any size, and so would the declared shape of graph output T.
  auto model = parse(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,H,W] X, bool c) => (float[1,3,4,5] T, float[1,3,4,5] Z) {
  t = Relu (X)
  T = Relu (t)
  U = Relu (T)
  Z = If (c) <
    then_branch = then_g () => (float[1,3,4,5] A) { A = Relu (X) },
    else_branch = else_g () => (float[1,3,4,5] B) { B = Relu (X) }>
})");
  auto* declared = model.mutable_graph()->add_value_info();
  *declared = model.graph().output(0);
  declared->set_name("t");
  const std::string before = model.SerializeAsString();
  const auto types = onnx_io::infer_types(model);
  CHECK(model.SerializeAsString() == before);
  for (const std::string name : {"t", "T", "U", "Z"}) {
    CAPTURE(name);
    const auto* type = types.find(0, name);
    REQUIRE(type != nullptr);
    REQUIRE(type->tensor_type().shape().dim_size() == 4);
    CHECK(type->tensor_type().shape().dim(1).dim_value() == 3);  // what inference knows stays known
    CHECK_FALSE(type->tensor_type().shape().dim(2).has_dim_value());
    CHECK(onnx_io::known_dims(*type).empty());
  }
  const auto* x = types.find(0, "X");  // a graph input is what a caller feeds: as declared
  REQUIRE(x != nullptr);
  CHECK(x->tensor_type().shape().dim(2).dim_param() == "H");
}

namespace {

// A rank-3 ConvTranspose (1-D data) whose weight has rank 2: libonnx 1.12's inference reads its kernel through
// a null pointer (the bad-input corpus's weight_rank_below_input.onnx). Inference itself, isolated, crashes.
const char* const kLowRankWeight = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,3] X, float[1,3] W) => (float[1,1,5] Y) {
  Y = ConvTranspose (X, W)
})";

int marker_pipe[2] = {-1, -1};
extern "C" void marker_handler(int) {
  const char x = 'x';
  (void)!::write(marker_pipe[1], &x, 1);
  ::_exit(42);
}
extern "C" void marker_death_callback() {
  const char x = 'd';
  (void)!::write(marker_pipe[1], &x, 1);
}

// What the marker handlers wrote, without blocking.
std::string drain_markers() {
  std::string seen;
  char buffer[16];
  for (ssize_t n; (n = ::read(marker_pipe[0], buffer, sizeof buffer)) > 0;) seen.append(buffer, static_cast<size_t>(n));
  return seen;
}

}  // namespace

extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

TEST_CASE("a crash in the isolated inference child runs none of the parent's crash handlers", "[onnx_io][shapes][isolated]") {
  // libFuzzer and ASan report a crash from their SIGSEGV (and other deadly-signal) handlers; a forked child
  // inherits them. Here the parent's handler stands in for theirs: it must not run in the child.
  REQUIRE(::pipe2(marker_pipe, O_NONBLOCK | O_CLOEXEC) == 0);
  struct sigaction marker {
  }, previous{};
  marker.sa_handler = marker_handler;
  sigemptyset(&marker.sa_mask);
  REQUIRE(::sigaction(SIGSEGV, &marker, &previous) == 0);
  auto skeleton = parse(kLowRankWeight);
  const auto inferred = onnx_io::infer_shapes_isolated(skeleton, /*strict=*/true, /*data_propagation=*/false);
  ::sigaction(SIGSEGV, &previous, nullptr);
  const std::string seen = drain_markers();
  ::close(marker_pipe[0]);
  ::close(marker_pipe[1]);
  REQUIRE_FALSE(inferred.ok());
  CHECK(seen.empty());
  CHECK_THAT(inferred.error().message, Catch::Contains("ONNX shape inference crashed on this model (signal 11, Segmentation fault)"));
}

TEST_CASE("a crash in the isolated inference child calls no sanitizer death callback", "[onnx_io][shapes][isolated]") {
  // libFuzzer writes its crash artifact from the death callback it gives the sanitizer runtime.
  if (__sanitizer_set_death_callback == nullptr) {
    WARN("skipped: no sanitizer runtime in this build");
    return;
  }
  REQUIRE(::pipe2(marker_pipe, O_NONBLOCK | O_CLOEXEC) == 0);
  __sanitizer_set_death_callback(marker_death_callback);
  auto skeleton = parse(kLowRankWeight);
  bool crashed = false;
  const auto inferred = onnx_io::infer_shapes_isolated(skeleton, /*strict=*/true, /*data_propagation=*/false, &crashed);
  __sanitizer_set_death_callback(nullptr);
  const std::string seen = drain_markers();
  ::close(marker_pipe[0]);
  ::close(marker_pipe[1]);
  CHECK(seen.empty());
  CHECK(crashed);
  REQUIRE_FALSE(inferred.ok());
  CHECK_THAT(inferred.error().message, Catch::Contains("(signal 11, Segmentation fault)"));
}

TEST_CASE("validation refuses convolution ranks libonnx 1.12 crashes on, before its shape inference runs", "[onnx_io][validate][ranks]") {
  // Each case's rank is declared somewhere other than by a node; ONNX Runtime refuses all of them ("Weight tensor
  // must have at least 3 dimensions", "Number of spatial dimensions in the weight tensor ... does not match").
  struct Case {
    std::string name, text, expected;
  };
  const std::vector<Case> cases = {
      {"weight rank 2, graph input", kLowRankWeight,
       "main graph: ConvTranspose producing 'Y': weight 'W' has rank 2 (graph input), but a ConvTranspose weight must have at least 3 "
       "dimensions (C x M/group x k1...kn)"},
      {"weight rank 2, opset 19", R"(<ir_version: 8, opset_import: ["" : 19]>
g (float[1,1,3] X, float[1,3] W) => (float[1,1,5] Y) {
  Y = ConvTranspose (X, W)
})",
       "main graph: ConvTranspose producing 'Y': weight 'W' has rank 2 (graph input), but a ConvTranspose weight must have at least 3"},
      {"weight rank 2, Constant, opset 19", R"(<ir_version: 8, opset_import: ["" : 19]>
g (float[1,1,3] X) => (float[1,1,5] Y) {
  W = Constant <value = float[1,3] {1, 2, 3}> ()
  Y = ConvTranspose (X, W)
})",
       "weight 'W' has rank 2 (Constant)"},
      {"weight rank 2, value_info", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,3] X, float[1,3] W0) => (float[1,1,5] Y) <float[1,3] W> {
  W = Identity (W0)
  Y = ConvTranspose (X, W)
})",
       "weight 'W' has rank 2 (value_info)"},
      {"weight rank 3 for a 2-D input", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] X, float[2,1,3] W) => (float[1,2,?,?] Y) {
  Y = ConvTranspose <group = 2> (X, W)
})",
       "ConvTranspose producing 'Y': weight 'W' has rank 3 (graph input) and input 'X' has rank 4 (graph input), but their spatial "
       "dimensions (1 and 2) must agree"},
      {"Conv weight rank 5 for a 2-D input", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] X, float[2,2,3,3,3] W) => (float[1,2,?,?] Y) {
  Y = Conv (X, W)
})",
       "Conv producing 'Y': weight 'W' has rank 5 (graph input) and input 'X' has rank 4 (graph input), but their spatial dimensions (3 "
       "and 2)"},
      {"Conv weight rank 2", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5] X, float[2,2] W) => (float[1,2,?] Y) {
  Y = Conv (X, W)
})",
       "Conv producing 'Y': weight 'W' has rank 2 (graph input), but a Conv weight must have at least 3 dimensions (M x C/group x "
       "k1...kn)"},
      {"no convolution, so rank 2 is no concern", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2] X) => (float[1,2] Y) {
  Y = Relu (X)
})",
       ""},  // no convolution: passes
      {"input rank 2", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2] X, float[2,2,3] W) => (float[1,2] Y) {
  Y = Conv (X, W)
})",
       "Conv producing 'Y': input 'X' has rank 2 (graph input), but a Conv input must have at least 3 dimensions (N x C x D1...Dn)"},
      {"QLinearConv weight rank 3 for a 2-D input", R"(<ir_version: 8, opset_import: ["" : 13]>
g (uint8[1,2,5,5] X, float xs, uint8 xz, uint8[2,2,3] W, float ws, uint8 wz, float ys, uint8 yz) => (uint8[1,2,?,?] Y) {
  Y = QLinearConv (X, xs, xz, W, ws, wz, ys, yz)
})",
       "QLinearConv producing 'Y': weight 'W' has rank 3 (graph input) and input 'X' has rank 4"},
      {"weight rank 2 inside an If branch", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,3] X, float[1,3] W, bool c) => (float[1,1,?] Y) {
  Y = If (c) <
    then_branch = t () => (float[1,1,?] A) { A = ConvTranspose (X, W) },
    else_branch = e () => (float[1,1,3] B) { B = Identity (X) }>
})",
       "main graph/If producing 'Y': ConvTranspose producing 'A': weight 'W' has rank 2 (graph input)"},
      {"a Conv with a zero stride", R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] X, float[2,2,3,3] W) => (float[1,2,?,?] Y) {
  Y = Conv <strides = [1, 0]> (X, W)
})",
       "main graph: Conv producing 'Y': stride 0 must be >= 1 (strides [1,0])"},
      {"a MaxPool with a zero stride, opset 19", R"(<ir_version: 8, opset_import: ["" : 19]>
g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = MaxPool <kernel_shape = [2, 2], strides = [0, 0]> (X)
})",
       "main graph: MaxPool producing 'Y': stride 0 must be >= 1 (strides [0,0])"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto result = onnx_io::validate_model(parse(c.text), {});
    if (c.expected.empty()) {
      CHECK(result.ok());
      continue;
    }
    CHECK_FALSE(result.ok());
    if (result.ok()) continue;
    CHECK(result.error().kind == core::ErrorKind::kFailedValidation);
    CHECK_THAT(result.error().message, Catch::Contains(c.expected));
    CHECK_THAT(result.error().message, !Catch::Contains("crashed"));
  }
}

TEST_CASE("validation accepts convolutions whose ranks agree, and ranks it cannot know", "[onnx_io][validate][ranks]") {
  const std::vector<std::string> valid = {
      // 1-D and 3-D convolutions.
      R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5] X, float[2,1,3] W) => (float[1,2,7] Y) {
  Y = ConvTranspose <group = 2> (X, W)
})",
      R"(<ir_version: 8, opset_import: ["" : 19]>
g (float[1,2,5,5,5] X, float[2,2,3,3,3] W) => (float[1,2,3,3,3] Y) {
  Y = Conv (X, W)
})",
      // The input's rank is not declared (computed by Relu), the weight's is fine.
      R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] X0, float[2,2,3,3] W) => (float[1,2,3,3] Y) {
  X = Relu (X0)
  Y = Conv (X, W)
})",
  };
  for (const auto& text : valid) {
    CAPTURE(text);
    const auto result = onnx_io::validate_model(parse(text), {});
    INFO((result ? result->detail : result.error().message));
    CHECK(result.ok());
  }
}

TEST_CASE("a weight rank only inference knows is still refused, after inference or by its contained crash", "[onnx_io][validate][ranks]") {
  SECTION("a rank libonnx reads past without crashing: the check runs again on the inferred ranks") {
    const auto result = onnx_io::validate_model(parse(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,5,5] X, float[2,2,3] W0) => (float[1,2,?,?] Z) {
  W = Identity (W0)
  Y = Conv (X, W)
  Z = Identity (X)
})"),
                                                {});
    REQUIRE_FALSE(result.ok());
    CHECK_THAT(result.error().message, Catch::Contains("Conv producing 'Y': weight 'W' has rank 3 (inferred by ONNX shape inference) and "
                                                       "input 'X' has rank 4 (graph input)"));
  }
  SECTION("a rank libonnx crashes on, at an opset it knows") {
    const auto result = onnx_io::validate_model(parse(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,3] X, float[1,3] W0) => (float[1,1,5] Y) {
  W = Identity (W0)
  Y = ConvTranspose (X, W)
})"),
                                                {});
    REQUIRE_FALSE(result.ok());
    CHECK_THAT(result.error().message, Catch::Contains("ONNX shape inference: ONNX shape inference crashed on this model (signal 11"));
  }
  SECTION("a rank libonnx crashes on, at an opset newer than it knows") {
    // The partial check runs no inference for what inference says, but a crash still means a broken model.
    const auto result = onnx_io::validate_model(parse(R"(<ir_version: 8, opset_import: ["" : 19]>
g (float[1,1,3] X, float[1,3] W0) => (float[1,1,5] Y) {
  W = Identity (W0)
  Y = ConvTranspose (X, W)
})"),
                                                {});
    REQUIRE_FALSE(result.ok());
    CHECK_THAT(result.error().message,
               Catch::Contains("ONNX shape inference (libonnx 1.12.0, opset 17 schemas): ONNX shape inference crashed "
                               "on this model (signal 11"));
  }
}
