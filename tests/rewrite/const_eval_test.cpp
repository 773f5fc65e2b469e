// The constant evaluator: each op it folds, on values written out by hand, and the 8-op chain PyTorch exports
// for a Pad's pads. It must evaluate without changing the model.
#include <catch2/catch.hpp>

#include "onnx_io/shapes.h"
#include "rewrite/const_eval.h"
#include "rewrite/shape_propagation.h"
#include "upsampler_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

// Folds `name` in a model whose main graph has input X (float[1,3,5,4]), output Y = Identity(X), and `body`.
// Without `infer`, no shape inference runs (libonnx's data propagation crashes, in its isolated child, on some
// hostile constants; the evaluator needs inference only for Shape).
core::Result<rewrite::ConstTensor> fold(const std::string& body, const std::string& name, int64_t opset = 13, bool infer = true) {
  onnx::ModelProto model = parse_model("<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) +
                                       "]>\ng (float[1,3,5,4] X) => (float[1,3,5,4] Y) {\n" + body + "\n  Y = Identity(X)\n}");
  const std::string before = serialized(model);
  const auto types = infer ? onnx_io::infer_types(model) : onnx_io::ScopedTypes{};
  rewrite::GraphTree tree(model);
  rewrite::ConstEvaluator eval(model.ir_version(), onnx_io::default_opset(model), types);
  auto result = eval.evaluate(name, tree.main());
  CHECK(serialized(model) == before);  // evaluates, never rewrites
  return result;
}

std::vector<int64_t> folded_ints(const std::string& body, const std::string& name, int64_t opset = 13, bool infer = true) {
  auto r = fold(body, name, opset, infer);
  if (!r) FAIL("not folded: " << r.error().message);
  REQUIRE(r->is_integer());
  return r->ints;
}

std::vector<int64_t> folded_dims(const std::string& body, const std::string& name, int64_t opset = 13) {
  auto r = fold(body, name, opset);
  if (!r) FAIL("not folded: " << r.error().message);
  return r->dims;
}

}  // namespace

// Exported by PyTorch for F.pad(x, [1, 1, 2, 2]) at opsets 11 to 17: ONNX wants [0,0,2,1, 0,0,2,1].
const std::string kPadsChain = pads_chain("pads", "p_", 1, 1, 2, 2);

TEST_CASE("const eval folds the 8-op pads chain PyTorch exports", "[rewrite][const_eval]") {
  CHECK(folded_ints(kPadsChain, "pads") == std::vector<int64_t>{0, 0, 2, 1, 0, 0, 2, 1});
  CHECK(folded_dims(kPadsChain, "pads") == std::vector<int64_t>{8});
  CHECK(folded_ints(kPadsChain, "p_rev") == std::vector<int64_t>{0, 0, 0, 0, 2, 2, 1, 1});
}

TEST_CASE("const eval: ConstantOfShape, Concat on axis 1, Reshape with 0 and -1", "[rewrite][const_eval]") {
  const char* body = R"(
  s = Constant <value = int64[2] {2, 3}> ()
  z = ConstantOfShape <value = float[1] {2.5}> (s)
  a = Constant <value = float[2,1] {7, 8}> ()
  c = Concat <axis = -1> (a, z)
  r_shape = Constant <value = int64[3] {0, -1, 2}> ()
  r = Reshape (c, r_shape))";
  auto z = fold(body, "z");
  REQUIRE(z);
  CHECK(z->dims == std::vector<int64_t>{2, 3});
  CHECK(z->reals == std::vector<double>(6, 2.5));
  auto c = fold(body, "c");
  REQUIRE(c);
  CHECK(c->dims == std::vector<int64_t>{2, 4});
  CHECK(c->reals == std::vector<double>{7, 2.5, 2.5, 2.5, 8, 2.5, 2.5, 2.5});
  CHECK(folded_dims(body, "r") == std::vector<int64_t>{2, 2, 2});
  // ConstantOfShape without `value` is float zeros.
  auto plain = fold("  s = Constant <value = int64[1] {3}> ()\n  z = ConstantOfShape (s)", "z");
  REQUIRE(plain);
  CHECK(plain->data_type == onnx::TensorProto::FLOAT);
  CHECK(plain->reals == std::vector<double>(3, 0.0));
}

TEST_CASE("const eval: Slice with positive and negative steps, and the attribute form", "[rewrite][const_eval]") {
  const std::string base = "  v = Constant <value = int64[6] {0, 1, 2, 3, 4, 5}> ()\n";
  auto slice = [&](const std::string& starts, const std::string& ends, const std::string& steps) {
    return folded_ints(base + "  b = Constant <value = int64[1] {" + starts + "}> ()\n  e = Constant <value = int64[1] {" + ends +
                           "}> ()\n  a = Constant <value = int64[1] {0}> ()\n  st = Constant <value = int64[1] {" + steps +
                           "}> ()\n  y = Slice (v, b, e, a, st)",
                       "y");
  };
  CHECK(slice("1", "5", "2") == std::vector<int64_t>{1, 3});
  CHECK(slice("-1", "-9223372036854775807", "-1") == std::vector<int64_t>{5, 4, 3, 2, 1, 0});
  CHECK(slice("4", "0", "-2") == std::vector<int64_t>{4, 2});
  CHECK(slice("0", "9223372036854775807", "1") == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(slice("3", "1", "1").empty());
  CHECK(folded_ints(base + "  y = Slice <starts = [1], ends = [-1], axes = [0]> (v)", "y", 9) == std::vector<int64_t>{1, 2, 3, 4});
  const auto zero = fold(base +
                             "  b = Constant <value = int64[1] {0}> ()\n  st = Constant <value = int64[1] {0}> ()\n"
                             "  y = Slice (v, b, b, b, st)",
                         "y");
  REQUIRE_FALSE(zero);
  CHECK_THAT(zero.error().message, Catch::Contains("step 0"));
}

TEST_CASE("const eval: Transpose with and without perm", "[rewrite][const_eval]") {
  const std::string base = "  v = Constant <value = int64[2,3] {0, 1, 2, 3, 4, 5}> ()\n";
  CHECK(folded_ints(base + "  y = Transpose (v)", "y") == std::vector<int64_t>{0, 3, 1, 4, 2, 5});
  CHECK(folded_dims(base + "  y = Transpose (v)", "y") == std::vector<int64_t>{3, 2});
  const std::string cube = "  v = Constant <value = int64[2,2,2] {0, 1, 2, 3, 4, 5, 6, 7}> ()\n";
  CHECK(folded_ints(cube + "  y = Transpose <perm = [2, 0, 1]> (v)", "y") == std::vector<int64_t>{0, 2, 4, 6, 1, 3, 5, 7});
}

TEST_CASE("const eval: Cast between float and integer types", "[rewrite][const_eval]") {
  auto f = fold("  v = Constant <value = int64[3] {1, -2, 3}> ()\n  y = Cast <to = 1> (v)", "y");
  REQUIRE(f);
  CHECK(f->data_type == onnx::TensorProto::FLOAT);
  CHECK(f->reals == std::vector<double>{1, -2, 3});
  CHECK(folded_ints("  v = Constant <value = float[3] {1.75, -2.5, 3}> ()\n  y = Cast <to = 7> (v)", "y") ==
        std::vector<int64_t>{1, -2, 3});
  // FLOAT16 folds, rounded to half as the runtime rounds it; DOUBLE does not (the op library computes in float).
  auto half = fold("  v = Constant <value = float[1] {0.1}> ()\n  y = Cast <to = 10> (v)", "y");
  REQUIRE(half);
  CHECK(half->data_type == onnx::TensorProto::FLOAT16);
  CHECK(half->reals == std::vector<double>{0.0999755859375});
  auto to_double = fold("  v = Constant <value = float[1] {1}> ()\n  y = Cast <to = 11> (v)", "y");
  REQUIRE_FALSE(to_double);
  CHECK_THAT(to_double.error().message, Catch::Contains("DOUBLE, which is not folded"));
  // A float out of the target's range has no value that runtimes agree on.
  auto huge = fold("  v = Constant <value = float[1] {3e9}> ()\n  y = Cast <to = 6> (v)", "y");
  REQUIRE_FALSE(huge);
  CHECK_THAT(huge.error().message, Catch::Contains("out of its range"));
}

TEST_CASE("const eval: Unsqueeze and Squeeze in the attribute (opset 11) and input (opset 13) forms", "[rewrite][const_eval]") {
  const std::string base = "  v = Constant <value = float[2,2] {1, 2, 3, 4}> ()\n";
  CHECK(folded_dims(base + "  y = Unsqueeze <axes = [0, -1]> (v)", "y", 11) == std::vector<int64_t>{1, 2, 2, 1});
  CHECK(folded_dims(base + "  a = Constant <value = int64[2] {0, 3}> ()\n  y = Unsqueeze (v, a)", "y", 13) ==
        std::vector<int64_t>{1, 2, 2, 1});
  const std::string ones = "  v = Constant <value = float[1,2,1] {1, 2}> ()\n";
  CHECK(folded_dims(ones + "  y = Squeeze <axes = [2]> (v)", "y", 11) == std::vector<int64_t>{1, 2});
  CHECK(folded_dims(ones + "  a = Constant <value = int64[1] {0}> ()\n  y = Squeeze (v, a)", "y", 13) == std::vector<int64_t>{2, 1});
  CHECK(folded_dims(ones + "  y = Squeeze (v)", "y", 13) == std::vector<int64_t>{2});
  auto bad = fold(base + "  y = Squeeze <axes = [0]> (v)", "y", 11);
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message, Catch::Contains("axis 0 has size 2, not 1"));
}

TEST_CASE("const eval: Expand and Tile", "[rewrite][const_eval]") {
  const std::string base = "  v = Constant <value = int64[2,1] {1, 2}> ()\n";
  CHECK(folded_ints(base + "  s = Constant <value = int64[3] {2, 1, 3}> ()\n  y = Expand (v, s)", "y") ==
        std::vector<int64_t>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  CHECK(folded_dims(base + "  s = Constant <value = int64[3] {2, 1, 3}> ()\n  y = Expand (v, s)", "y") == std::vector<int64_t>{2, 2, 3});
  CHECK(folded_ints(base + "  r = Constant <value = int64[2] {2, 2}> ()\n  y = Tile (v, r)", "y") ==
        std::vector<int64_t>{1, 1, 2, 2, 1, 1, 2, 2});
}

TEST_CASE("const eval: Gather with negative and matrix indices", "[rewrite][const_eval]") {
  const std::string base = "  v = Constant <value = int64[2,3] {0, 1, 2, 3, 4, 5}> ()\n";
  CHECK(folded_ints(base + "  i = Constant <value = int64[2] {-1, 0}> ()\n  y = Gather <axis = 1> (v, i)", "y") ==
        std::vector<int64_t>{2, 0, 5, 3});
  CHECK(folded_ints(base + "  i = Constant <value = int64 {1}> ()\n  y = Gather (v, i)", "y") == std::vector<int64_t>{3, 4, 5});
  CHECK(folded_dims(base + "  i = Constant <value = int64 {1}> ()\n  y = Gather (v, i)", "y") == std::vector<int64_t>{3});
  CHECK(folded_ints(base + "  i = Constant <value = int64[2,2] {1, 0, 0, 1}> ()\n  y = Gather <axis = 0> (v, i)", "y") ==
        std::vector<int64_t>{3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5});
}

TEST_CASE("const eval: Shape of a tensor with known dims, and what it declines", "[rewrite][const_eval]") {
  CHECK(folded_ints("  s = Shape (X)", "s") == std::vector<int64_t>{1, 3, 5, 4});
  CHECK(folded_ints("  s = Shape (X)\n  i = Constant <value = int64 {2}> ()\n  h = Gather (s, i)", "h") == std::vector<int64_t>{5});
  CHECK(folded_ints("  s = Shape <start = -2> (X)", "s", 15) == std::vector<int64_t>{5, 4});
  auto input = fold("  r = Relu (X)", "X");
  REQUIRE_FALSE(input);
  CHECK_THAT(input.error().message, Catch::Contains("graph input"));
  auto relu = fold("  r = Relu (X)", "r");
  REQUIRE_FALSE(relu);
  CHECK_THAT(relu.error().message, Catch::Contains("'X' is a graph input"));
  auto unknown = fold("  r = Unique (X)", "r");
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error().message, Catch::Contains("Unique") && Catch::Contains("not folded"));
  auto huge = fold("  s = Constant <value = int64[2] {100000, 100000}> ()\n  z = ConstantOfShape (s)", "z");
  REQUIRE_FALSE(huge);
  CHECK_THAT(huge.error().message, Catch::Contains("more than"));
}

TEST_CASE("const eval declines hostile sizes and steps instead of overflowing", "[rewrite][const_eval][hostile]") {
  const std::string base = "  v = Constant <value = int64[6] {0, 1, 2, 3, 4, 5}> ()\n  a = Constant <value = int64[1] {0}> ()\n";
  // A huge step takes one element; the smallest int64 step is declined.
  CHECK(folded_ints(base + "  b = Constant <value = int64[1] {1}> ()\n  e = Constant <value = int64[1] {6}> ()\n"
                           "  st = Constant <value = int64[1] {9223372036854775807}> ()\n  y = Slice (v, b, e, a, st)",
                    "y", 13, false) == std::vector<int64_t>{1});
  CHECK(folded_ints(base + "  b = Constant <value = int64[1] {4}> ()\n  e = Constant <value = int64[1] {-9223372036854775807}> ()\n"
                           "  st = Constant <value = int64[1] {-9223372036854775807}> ()\n  y = Slice (v, b, e, a, st)",
                    "y", 13, false) == std::vector<int64_t>{4});
  const auto min_step = fold(base +
                                 "  b = Constant <value = int64[1] {4}> ()\n  st = Constant <value = int64[1] {-9223372036854775808}> ()\n"
                                 "  y = Slice (v, b, b, a, st)",
                             "y", 13, false);
  REQUIRE_FALSE(min_step);
  CHECK_THAT(min_step.error().message, Catch::Contains("out of range"));
  const auto tile = fold(base + "  r = Constant <value = int64[1] {4611686018427387904}> ()\n  y = Tile (v, r)", "y", 13, false);
  REQUIRE_FALSE(tile);
  CHECK_THAT(tile.error().message, Catch::Contains("overflows"));
  const auto reshape =
      fold(base + "  s = Constant <value = int64[3] {1099511627776, 1099511627776, -1}> ()\n  y = Reshape (v, s)", "y", 13, false);
  REQUIRE_FALSE(reshape);
  CHECK_THAT(reshape.error().message, Catch::Contains("more elements than int64"));
}

TEST_CASE("const eval computes at most kMaxComputedElements in all: a chain of large values is declined, not held",
          "[rewrite][const_eval][hostile]") {
  // `links` Adds of a [side,side] ConstantOfShape of ones, then ReduceMax: links + 1 when folded.
  const auto chain = [](int side, int links) {
    std::string body = "  shp = Constant <value = int64[2] {" + std::to_string(side) + ", " + std::to_string(side) +
                       "}> ()\n  one = Constant <value = float[1] {1}> ()\n  c0 = ConstantOfShape <value = float[1] {1}> (shp)\n";
    for (int i = 0; i < links; ++i) body += "  c" + std::to_string(i + 1) + " = Add (c" + std::to_string(i) + ", one)\n";
    return body + "  m = ReduceMax <keepdims = 0> (c" + std::to_string(links) + ")";
  };
  // 60 links at 2048: each value is under kMaxFoldedElements, but holding them all took 2 GB (a 4.2 KB model). The
  // budget stops the chain after 2^25 elements, naming the node it stopped at.
  const auto folded = fold(chain(2048, 60), "m", 13, false);
  REQUIRE_FALSE(folded);
  CHECK_THAT(folded.error().message,
             Catch::Contains("is computed by Add producing 'c8'") && Catch::Contains("the constants folded so far hold 33554432 elements"));
  // Below the budget the same chain folds: 7 links at 1024 hold 8 Mi elements.
  const auto ok = fold(chain(1024, 7), "m", 13, false);
  REQUIRE(ok);
  CHECK(ok->at(0) == 8.0);
}

TEST_CASE("const eval: Add, Sub, Mul and Div with broadcasting, as PyTorch's unfolded exports use them", "[rewrite][const_eval]") {
  const std::string base = "  a = Constant <value = int64[2,2] {1, 2, 3, 4}> ()\n  b = Constant <value = int64[2] {10, 20}> ()\n";
  CHECK(folded_ints(base + "  y = Add (a, b)", "y") == std::vector<int64_t>{11, 22, 13, 24});
  CHECK(folded_ints(base + "  y = Sub (b, a)", "y") == std::vector<int64_t>{9, 18, 7, 16});
  CHECK(folded_ints(base + "  y = Mul (a, b)", "y") == std::vector<int64_t>{10, 40, 30, 80});
  CHECK(folded_dims(base + "  y = Mul (a, b)", "y") == std::vector<int64_t>{2, 2});
  CHECK(folded_ints("  a = Constant <value = int64[2,2] {1, 2, 5, 4}> ()\n  b = Constant <value = int64[2] {10, 20}> ()\n"
                    "  y = Div (b, a)",
                    "y") == std::vector<int64_t>{10, 10, 2, 5});
  // Integer Div truncates; a negative inexact quotient, which runtimes round differently, is not folded.
  CHECK(folded_ints(base + "  c = Constant <value = int64[1] {3}> ()\n  y = Div (b, c)", "y") == std::vector<int64_t>{3, 6});
  const auto inexact = fold(base + "  c = Constant <value = int64[1] {-3}> ()\n  y = Div (b, c)", "y");
  REQUIRE_FALSE(inexact);
  CHECK_THAT(inexact.error().message, Catch::Contains("inexact and negative"));
  // The filter times gain**2 of upfirdn2d, in float: rounded to float as the runtime would.
  auto f = fold("  f = Constant <value = float[2] {0.1, 3}> ()\n  g = Constant <value = float {4}> ()\n  y = Mul (f, g)", "y");
  REQUIRE(f);
  CHECK(f->reals == std::vector<double>{static_cast<double>(0.1f * 4.0f), 12.0});
  auto q = fold("  f = Constant <value = float[2] {1, 3}> ()\n  g = Constant <value = float {4}> ()\n  y = Div (f, g)", "y");
  REQUIRE(q);
  CHECK(q->reals == std::vector<double>{0.25, 0.75});
  // Integers wrap in two's complement at their width, as the runtime's integer types do (and as the executor
  // computes them: one kernel for both).
  CHECK(folded_ints("  a = Constant <value = int64 {9223372036854775807}> ()\n  y = Add (a, a)", "y") == std::vector<int64_t>{-2});
  CHECK(folded_ints("  a = Constant <value = int32 {2147483647}> ()\n  y = Add (a, a)", "y") == std::vector<int64_t>{-2});
  CHECK(folded_ints("  a = Constant <value = int32 {-7}> ()\n  y = Mul (a, a)", "y") == std::vector<int64_t>{49});
  CHECK(folded_ints("  a = Constant <value = uint8 {1}> ()\n  b = Constant <value = uint8 {2}> ()\n  y = Sub (a, b)", "y") ==
        std::vector<int64_t>{255});
}

TEST_CASE("const eval folds what exporters build constants with: ScatterND, Range, Where, Equal, ConstantOfShape, Expand",
          "[rewrite][const_eval]") {
  // mask = zeros(1, 1, 2, 4); mask[:, :, ::2, ::2] = 4, as PyTorch writes it: ScatterND on ConstantOfShape zeros.
  const std::string mask =
      "  s = Constant <value = int64[4] {1, 1, 2, 4}> ()\n"
      "  z = ConstantOfShape <value = float[1] {0}> (s)\n"
      "  i = Constant <value = int64[1,1,1,2,4] {0, 0, 0, 0, 0, 0, 0, 2}> ()\n"
      "  u = Constant <value = float[1,1,1,2] {4, 4}> ()\n"
      "  m = ScatterND (z, i, u)\n";
  auto m = fold(mask, "m");
  REQUIRE(m);
  CHECK(m->dims == std::vector<int64_t>{1, 1, 2, 4});
  CHECK(m->reals == std::vector<double>{4, 0, 4, 0, 0, 0, 0, 0});
  CHECK(folded_ints("  a = Constant <value = int64 {1}> ()\n  b = Constant <value = int64 {10}> ()\n"
                    "  d = Constant <value = int64 {3}> ()\n  r = Range (a, b, d)",
                    "r", 13) == std::vector<int64_t>{1, 4, 7});
  CHECK(folded_ints("  a = Constant <value = int64 {5}> ()\n  b = Constant <value = int64 {-1}> ()\n"
                    "  d = Constant <value = int64 {-2}> ()\n  r = Range (a, b, d)",
                    "r", 13) == std::vector<int64_t>{5, 3, 1});
  // Where(Equal(v, -1), ones, v): PyTorch's pattern for a shape with -1 replaced.
  CHECK(folded_ints("  v = Constant <value = int64[3] {2, -1, 4}> ()\n  n = Constant <value = int64 {-1}> ()\n"
                    "  e = Equal (v, n)\n  o = Constant <value = int64[3] {1, 1, 1}> ()\n  w = Where (e, o, v)",
                    "w") == std::vector<int64_t>{2, 1, 4});
  CHECK(folded_ints("  v = Constant <value = int64[1] {7}> ()\n  s = Constant <value = int64[2] {2, 3}> ()\n"
                    "  e = Expand (v, s)",
                    "e") == std::vector<int64_t>(6, 7));
  // ScatterND writing one slice twice (reduction none) has no order-free answer: not folded.
  const auto twice = fold(
      "  s = Constant <value = int64[1] {4}> ()\n  z = ConstantOfShape (s)\n"
      "  i = Constant <value = int64[2,1] {1, 1}> ()\n  u = Constant <value = float[2] {1, 2}> ()\n"
      "  m = ScatterND (z, i, u)",
      "m");
  REQUIRE_FALSE(twice);
  CHECK_THAT(twice.error().message, Catch::Contains("twice"));
  // A Range larger than the folding bound is declined before anything is allocated.
  const auto huge = fold(
      "  a = Constant <value = int64 {0}> ()\n  b = Constant <value = int64 {9223372036854775807}> ()\n"
      "  d = Constant <value = int64 {1}> ()\n  r = Range (a, b, d)",
      "r", 13, false);
  REQUIRE_FALSE(huge);
  CHECK_THAT(huge.error().message, Catch::Contains("more than the 16777216 allowed"));
}

namespace {

// Folds `name` as evaluate_flagged does: every value it can fold, with the flags of ops runtimes round differently.
core::Result<rewrite::ConstTensor> fold_flagged(const std::string& body, const std::string& name, bool weight = false) {
  onnx::ModelProto model = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1,3,5,4] X) => (float[1,3,5,4] Y) {\n" + body +
                                       "\n  Y = Identity(X)\n}");
  rewrite::GraphTree tree(model);
  rewrite::ConstEvaluator eval(model.ir_version(), onnx_io::default_opset(model), onnx_io::ScopedTypes{});
  return weight ? eval.evaluate_weight(name, tree.main()) : eval.evaluate_flagged(name, tree.main());
}

const char* kGateChain = R"(
  c = Constant <value = float[2] {0.5, -1.25}> ()
  k = Constant <value = float[2] {16, 8}> ()
  g = Sigmoid (c)
  gk = Mul (g, k)
  h = Cast <to = 10> (gk)
  fl = Floor (h)
  n = Cast <to = 7> (fl)
  a = Constant <value = float[2] {1.5, 2}> ()
  b = Constant <value = float[2] {0.25, 4}> ()
  ab = Add (a, b)
  q = Div (ab, b)
  r = Sqrt (q)
  two = Cast <to = 7> (a))";

}  // namespace

TEST_CASE("const eval flags what runtimes round differently, through every op computed from it", "[rewrite][const_eval][inexact]") {
  // Sigmoid -> Mul -> Cast (float16) -> Floor -> Cast (int64): flagged at each step, naming the Sigmoid.
  for (const char* name : {"g", "gk", "h", "fl", "n"}) {
    CAPTURE(name);
    auto v = fold_flagged(kGateChain, name);
    REQUIRE(v);
    CHECK(v->inexact == "Sigmoid producing 'g'");
    CHECK(v->inexact_dims.empty());  // elementwise: the dims are the constants' own
  }
  // Add, Div and Sqrt of exact constants round once, as IEEE 754 requires: the same on every runtime.
  for (const char* name : {"ab", "q", "r", "two", "a"}) {
    CAPTURE(name);
    auto v = fold_flagged(kGateChain, name);
    REQUIRE(v);
    CHECK(v->inexact.empty());
  }
  // The value a decision reads is refused, naming the op; a weight's values are not.
  const std::string body = kGateChain;
  onnx::ModelProto model = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1,3,5,4] X) => (float[1,3,5,4] Y) {\n" + body +
                                       "\n  Y = Identity(X)\n}");
  rewrite::GraphTree tree(model);
  rewrite::ConstEvaluator eval(model.ir_version(), onnx_io::default_opset(model), onnx_io::ScopedTypes{});
  auto decided = eval.evaluate("n", tree.main());
  REQUIRE_FALSE(decided);
  CHECK(decided.error().kind == core::ErrorKind::kDeclined);
  CHECK_THAT(decided.error().message, Catch::Contains("'n' is computed through Sigmoid producing 'g', which runtimes round differently"));
  CHECK(eval.evaluate("ab", tree.main()));
  auto weight = eval.evaluate_weight("gk", tree.main());
  REQUIRE(weight);
  CHECK(weight->reals.size() == 2);
}

TEST_CASE("const eval flags dims computed from an inexact value, not dims that only carry one", "[rewrite][const_eval][inexact]") {
  const std::string body = R"(
  w = Constant <value = float[6] {1, 2, 3, 4, 5, 6}> ()
  ws = Sigmoid (w)
  s = Constant <value = int64[2] {2, 3}> ()
  carried = Reshape (ws, s)
  half = Constant <value = float[2] {0.5, 0.5}> ()
  hg = Sigmoid (half)
  k = Constant <value = float[2] {4, 6}> ()
  hk = Mul (hg, k)
  shape = Cast <to = 7> (hk)
  decided = Reshape (w, shape))";
  auto carried = fold_flagged(body, "carried");
  REQUIRE(carried);
  CHECK(carried->inexact == "Sigmoid producing 'ws'");
  CHECK(carried->inexact_dims.empty());
  CHECK(fold_flagged(body, "carried", /*weight=*/true));  // a weight: its values may round differently
  auto decided = fold_flagged(body, "decided");
  REQUIRE(decided);
  CHECK(decided->dims == std::vector<int64_t>{2, 3});
  CHECK(decided->inexact == "Sigmoid producing 'hg'");
  CHECK(decided->inexact_dims == "Sigmoid producing 'hg'");
  auto as_weight = fold_flagged(body, "decided", /*weight=*/true);
  REQUIRE_FALSE(as_weight);
  CHECK_THAT(as_weight.error().message, Catch::Contains("the dims of 'decided' are computed through Sigmoid producing 'hg'"));
}

TEST_CASE("shape propagation folds no size computed through Sigmoid: a Resize's output stays unknown, not the folder's 8x8",
          "[rewrite][const_eval][inexact]") {
  // floor(Sigmoid(0.5) * 12.852245) is 8 for this tool's Sigmoid and 7 for ONNX Runtime's (see recognisers_test.cpp).
  const auto model = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,4,4] X) => (float[1,8,OH,OW] Y) {
  c = Constant <value = float[2] {0.5, 0.5}> ()
  k = Constant <value = float[2] {12.852245330810547, 12.852245330810547}> ()
  nc = Constant <value = int64[2] {1, 8}> ()
  g = Sigmoid (c)
  gk = Mul (g, k)
  fl = Floor (gk)
  hw = Cast <to = 7> (fl)
  sizes = Concat <axis = 0> (nc, hw)
  Y = Resize <mode = "nearest"> (X, , , sizes)
  exact_sizes = Constant <value = int64[4] {1, 8, 8, 8}> ()
  Z = Resize <mode = "nearest"> (X, , , exact_sizes)
})");
  const auto propagated = rewrite::propagate_types(model);
  const auto dims = [&](const std::string& name) {
    const auto* type = propagated.types.find(0, name);
    return type != nullptr ? onnx_io::known_dims(*type) : std::vector<int64_t>{};
  };
  CHECK(dims("Y").empty());                              // not [1,8,8,8]: runtimes disagree on it
  CHECK(dims("Z") == std::vector<int64_t>{1, 8, 8, 8});  // the same Resize with literal sizes is known
}
