// Reference kernels for the ops PyTorch exports in generator and decoder blocks: the opset forms the
// conformance data lacks, and hostile attributes and shape inputs, which must fail with an error naming the node.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "onnx_io/tensor.h"
#include "runtime_check/executor.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

// Executor::create must refuse `model` with a message naming `node` and saying `problem`.
void check_creation_error(const onnx::ModelProto& model, const std::string& node, const std::string& problem, bool use_xnnpack = true) {
  ExecutorOptions options;
  options.use_xnnpack = use_xnnpack;
  auto executor = Executor::create(model, options);
  REQUIRE_FALSE(executor.ok());
  CHECK_THAT(executor.error().message, Catch::Contains(node + ": ") && Catch::Contains(problem));
}

// Runs `model` on the given inputs; the test fails on any error.
std::vector<NamedTensor> run_model(const onnx::ModelProto& model, const std::vector<NamedTensor>& inputs) {
  ExecutorOptions options;
  options.inputs = inputs;
  auto executor = Executor::create(model, options);
  INFO((executor.ok() ? std::string() : executor.error().message));
  REQUIRE(executor.ok());
  auto outputs = executor->run(inputs);
  INFO((outputs.ok() ? std::string() : outputs.error().message));
  REQUIRE(outputs.ok());
  return outputs.value();
}

NamedTensor float_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
  NamedTensor t{name, {}};
  t.tensor.reshape(onnx::TensorProto::FLOAT, dims);
  t.tensor.f = values;
  return t;
}

NamedTensor int_tensor(const std::string& name, int32_t dtype, const std::vector<int64_t>& dims, const std::vector<int64_t>& values) {
  NamedTensor t{name, {}};
  t.tensor.reshape(dtype, dims);
  t.tensor.i = values;
  return t;
}

constexpr int64_t kHuge = int64_t{1} << 62;

}  // namespace

TEST_CASE("Expand with a shape whose element count overflows is an error naming the node", "[reference][expand]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1, 1] x) => (float y) {\n"
      "  y = Expand (x, shape)\n}");
  add_int64_initializer(model, "shape", {kHuge, 4});
  check_creation_error(model, "Expand producing 'y'", "overflow when multiplied");
}

TEST_CASE("Expand with a negative or non-broadcasting shape is an error naming the node", "[reference][expand]") {
  using Case = std::pair<std::vector<int64_t>, std::string>;  // shape, expected message
  const Case c = GENERATE(Case{{-1, 3}, "negative dimension"}, Case{{2, 5}, "do not broadcast"}, Case{{3, -4}, "do not broadcast"},
                          Case{{int64_t{1} << 40, 1, 3}, "more than"});
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1, 3] x) => (float y) {\n"
      "  y = Expand (x, shape)\n}");
  add_int64_initializer(model, "shape", c.first);
  check_creation_error(model, "Expand producing 'y'", c.second);
}

TEST_CASE("Tile with overflowing, negative or mis-sized repeats is an error naming the node", "[reference][tile]") {
  using Case = std::pair<std::vector<int64_t>, std::string>;  // repeats, expected message
  const Case c = GENERATE(Case{{kHuge, 1}, "overflows on axis 0"}, Case{{kHuge / 4, kHuge / 4}, "overflow when multiplied"},
                          Case{{-1, 2}, "must not be negative"}, Case{{2}, "repeats has 1 values for a rank-2"});
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[2, 3] x) => (float y) {\n"
      "  y = Tile (x, repeats)\n}");
  add_int64_initializer(model, "repeats", c.first);
  check_creation_error(model, "Tile producing 'y'", c.second);
}

TEST_CASE("Tile-1 repeats one axis given by an input", "[reference][tile]") {
  auto model = parse_model_text(
      "<ir_version: 3, opset_import: [\"\" : 1]> g (float[2, 2] x) => (float y) {\n"
      "  y = Tile (x, tiles, axis)\n}");
  add_int64_initializer(model, "tiles", {3});
  add_int64_initializer(model, "axis", {1});
  const auto out = run_model(model, {float_tensor("x", {2, 2}, {1, 2, 3, 4})});
  REQUIRE(out.size() == 1);
  CHECK(out[0].tensor.dims == std::vector<int64_t>{2, 6});
  CHECK(out[0].tensor.f == std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4});
}

TEST_CASE("Split with sizes that do not sum to the axis is an error naming the node", "[reference][split]") {
  using Case = std::pair<std::vector<int64_t>, std::string>;  // split, expected message
  const Case c = GENERATE(Case{{2, 2}, "sum to 4, not the axis's 6"}, Case{{7, -1}, "outside [0, 6]"},
                          Case{{6}, "1 sizes but the node has 2 outputs"}, Case{{kHuge, kHuge}, "outside [0, 6]"});
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[6] x) => (float a, float b) {\n"
      "  a, b = Split (x, split)\n}");
  add_int64_initializer(model, "split", c.first);
  check_creation_error(model, "Split producing 'a'", c.second);
}

TEST_CASE("Split with an axis out of range is an error naming the node", "[reference][split]") {
  const int64_t axis = GENERATE(-3, 2, 100);
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[2, 6] x) => (float a, float b) {\n"
      "  a, b = Split <axis = " +
      std::to_string(axis) + "> (x)\n}");
  check_creation_error(model, "Split producing 'a'", "axis " + std::to_string(axis) + " is out of range for a rank-2 input");
}

TEST_CASE("Split into equal parts that do not divide the axis is an error before opset 18", "[reference][split]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[7] x) => (float a, float b) {\n"
      "  a, b = Split (x)\n}");
  check_creation_error(model, "Split producing 'a'", "does not split into 2 equal parts");
}

TEST_CASE("Split takes sizes from opset 1's input, the attribute of 2 to 12 and the input of 13", "[reference][split]") {
  // The same split of [2, 3] into [2, 1] and [2, 2] in each form (axis -1 from opset 11, where it became legal).
  const int opset = GENERATE(1, 2, 11, 13);
  const std::string header =
      "<ir_version: 6, opset_import: [\"\" : " + std::to_string(opset) + "]> g (float[2, 3] x) => (float a, float b) {\n";
  onnx::ModelProto model;
  if (opset == 2 || opset == 11) {
    const std::string axis = opset == 2 ? "1" : "-1";
    model = parse_model_text(header + "  a, b = Split <axis = " + axis + ", split = [1, 2]> (x)\n}");
  } else if (opset == 1) {  // opset 1's split input has the data's (float) type
    model = parse_model_text(header + "  a, b = Split <axis = 1> (x, split)\n}");
    *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("split", onnx::TensorProto::FLOAT, {2}, {1.0, 2.0}, true);
  } else {
    model = parse_model_text(header + "  a, b = Split <axis = 1> (x, split)\n}");
    add_int64_initializer(model, "split", {1, 2});
  }
  const auto out = run_model(model, {float_tensor("x", {2, 3}, {1, 2, 3, 4, 5, 6})});
  REQUIRE(out.size() == 2);
  CHECK(out[0].tensor.dims == std::vector<int64_t>{2, 1});
  CHECK(out[0].tensor.f == std::vector<float>{1, 4});
  CHECK(out[1].tensor.dims == std::vector<int64_t>{2, 2});
  CHECK(out[1].tensor.f == std::vector<float>{2, 3, 5, 6});
}

TEST_CASE("Split-18 num_outputs makes ceil-sized chunks with a smaller last one", "[reference][split]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 18]> g (float[2, 8] x) => (float a, float b, float c) {\n"
      "  a, b, c = Split <axis = 1, num_outputs = 3> (x)\n}");
  std::vector<float> x(16);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>(k + 1);
  const auto out = run_model(model, {float_tensor("x", {2, 8}, x)});
  REQUIRE(out.size() == 3);
  CHECK(out[0].tensor.dims == std::vector<int64_t>{2, 3});
  CHECK(out[0].tensor.f == std::vector<float>{1, 2, 3, 9, 10, 11});
  CHECK(out[1].tensor.f == std::vector<float>{4, 5, 6, 12, 13, 14});
  CHECK(out[2].tensor.dims == std::vector<int64_t>{2, 2});
  CHECK(out[2].tensor.f == std::vector<float>{7, 8, 15, 16});
}

TEST_CASE("Split-18 num_outputs must match the node's outputs and leave no negative chunk", "[reference][split]") {
  using Case = std::pair<std::string, std::string>;  // model, expected message
  const Case c = GENERATE(Case{"<ir_version: 8, opset_import: [\"\" : 18]> g (float[6] x) => (float a, float b) {\n"
                               "  a, b = Split <num_outputs = 3> (x)\n}",
                               "num_outputs is 3 but the node has 2 outputs"},
                          // ceil(5 / 4) = 2 gives chunks 2, 2, 2 and -1.
                          Case{"<ir_version: 8, opset_import: [\"\" : 18]> g (float[5] x) => (float a, float b, float c, float d) {\n"
                               "  a, b, c, d = Split <num_outputs = 4> (x)\n}",
                               "negative last chunk"});
  check_creation_error(parse_model_text(c.first), "Split producing 'a'", c.second);
}

TEST_CASE("ReduceMean-18 takes axes from an input and honours noop_with_empty_axes", "[reference][reducemean]") {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  SECTION("axes input") {
    auto model = parse_model_text(
        "<ir_version: 8, opset_import: [\"\" : 18]> g (float[2, 3] x) => (float y) {\n"
        "  y = ReduceMean <keepdims = 0> (x, axes)\n}");
    add_int64_initializer(model, "axes", {-1});
    const auto out = run_model(model, {float_tensor("x", {2, 3}, x)});
    CHECK(out[0].tensor.dims == std::vector<int64_t>{2});
    CHECK(out[0].tensor.f == std::vector<float>{2, 5});
  }
  SECTION("no axes: every axis") {
    auto model = parse_model_text(
        "<ir_version: 8, opset_import: [\"\" : 18]> g (float[2, 3] x) => (float y) {\n"
        "  y = ReduceMean (x)\n}");
    const auto out = run_model(model, {float_tensor("x", {2, 3}, x)});
    CHECK(out[0].tensor.dims == std::vector<int64_t>{1, 1});
    CHECK(out[0].tensor.f == std::vector<float>{3.5f});
  }
  SECTION("no axes and noop_with_empty_axes: identity") {
    auto model = parse_model_text(
        "<ir_version: 8, opset_import: [\"\" : 18]> g (float[2, 3] x) => (float y) {\n"
        "  y = ReduceMean <noop_with_empty_axes = 1> (x)\n}");
    const auto out = run_model(model, {float_tensor("x", {2, 3}, x)});
    CHECK(out[0].tensor.dims == std::vector<int64_t>{2, 3});
    CHECK(out[0].tensor.f == x);
  }
}

TEST_CASE("ReduceSum and ReduceMax of int64 stay exact beyond 2^53", "[reference][reducemean]") {
  // 2^53 + 1 is not a double: summing or comparing in double would lose the 1.
  const int64_t big = (int64_t{1} << 53) + 1;
  for (const char* op : {"ReduceSum", "ReduceMax"}) {
    INFO(op);
    auto model = parse_model_text(
        "<ir_version: 8, opset_import: [\"\" : 13]> g (int64[2, 2] x) => (int64 y) {\n"
        "  y = " +
        std::string(op) + " <keepdims = 0> (x)\n}");
    const auto out = run_model(model, {int_tensor("x", onnx::TensorProto::INT64, {2, 2}, {big, 0, big, 2})});
    REQUIRE(out[0].tensor.dims.empty());
    CHECK(out[0].tensor.i[0] == (std::string(op) == "ReduceSum" ? 2 * big + 2 : big));
  }
}

TEST_CASE("ReduceMean with a repeated or out-of-range axis is an error naming the node", "[reference][reducemean]") {
  using Case = std::pair<std::string, std::string>;  // axes, expected message
  const Case c =
      GENERATE(Case{"[1, -1]", "axis -1 is repeated"}, Case{"[2]", "axis 2 is out of range"}, Case{"[-3]", "axis -3 is out of range"});
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[2, 3] x) => (float y) {\n"
      "  y = ReduceMean <axes = " +
      c.first + "> (x)\n}");
  check_creation_error(model, "ReduceMean producing 'y'", c.second);
}

TEST_CASE("Softmax before opset 13 normalizes over the input coerced to 2-D at axis", "[reference][softmax]") {
  // [1, 2, 2] at axis 1: one row of four before opset 13, two rows of two (along axis 1) from 13. Before 13 the
  // axis defaults to 1.
  const std::vector<float> x = {0, 1, 2, 3};
  auto model_at = [](int opset, const std::string& attributes) {
    return parse_model_text("<ir_version: 7, opset_import: [\"\" : " + std::to_string(opset) +
                            "]> g (float[1, 2, 2] x) => (float y) {\n  y = Softmax" + attributes + " (x)\n}");
  };
  const std::string old_attributes = GENERATE(std::string(" <axis = 1>"), std::string());
  const auto old_out = run_model(model_at(11, old_attributes), {float_tensor("x", {1, 2, 2}, x)});
  const auto new_out = run_model(model_at(13, " <axis = 1>"), {float_tensor("x", {1, 2, 2}, x)});
  double total = 0.0;
  for (float v : x) total += std::exp(static_cast<double>(v));
  for (size_t k = 0; k < x.size(); ++k) {
    CHECK(old_out[0].tensor.f[k] == Approx(std::exp(static_cast<double>(x[k])) / total));
    // From 13, each (x[j], x[j+2]) pair along axis 1 sums to one.
    const size_t other = (k + 2) % 4;
    CHECK(new_out[0].tensor.f[k] == Approx(1.0 / (1.0 + std::exp(static_cast<double>(x[other]) - static_cast<double>(x[k])))));
  }
}

TEST_CASE("Softmax with an axis out of range is an error naming the node", "[reference][softmax]") {
  const std::string text = GENERATE(std::string("<ir_version: 8, opset_import: [\"\" : 13]> g (float[2, 3] x) => (float y) {\n"
                                                "  y = Softmax <axis = 2> (x)\n}"),
                                    std::string("<ir_version: 8, opset_import: [\"\" : 13]> g (float[2, 3] x) => (float y) {\n"
                                                "  y = Softmax <axis = -3> (x)\n}"));
  check_creation_error(parse_model_text(text), "Softmax producing 'y'", "is out of range for a rank-2 input");
}

TEST_CASE("InstanceNormalization with scale or B not of C values is an error naming the node", "[reference][norm]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 6]> g (float[1, 3, 2, 2] x) => (float y) {\n"
      "  y = InstanceNormalization (x, s, b)\n}");
  add_initializer(model, "s", {2}, 1);
  add_initializer(model, "b", {3}, 2);
  check_creation_error(model, "InstanceNormalization producing 'y'", "scale FLOAT[2] and B FLOAT[3] must hold one value per channel (3)");
}

TEST_CASE("Pow keeps the base's type, and integer results that overflow are defined", "[reference][pow]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 15]> g (int64[4] x, float[4] e) => (int64 y) {\n"
      "  y = Pow (x, e)\n}");
  const auto out = run_model(
      model, {int_tensor("x", onnx::TensorProto::INT64, {4}, {2, -3, 10, 10}), float_tensor("e", {4}, {3.0f, 3.0f, 0.5f, 1e30f})});
  REQUIRE(out[0].tensor.dtype == onnx::TensorProto::INT64);
  CHECK(out[0].tensor.i[0] == 8);
  CHECK(out[0].tensor.i[1] == -27);
  CHECK(out[0].tensor.i[2] == 3);  // sqrt(10) truncated toward zero
  CHECK(out[0].tensor.i[3] == std::numeric_limits<int64_t>::max());
}

TEST_CASE("Pow of integers by negative integer exponents truncates toward zero", "[reference][pow]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 15]> g (int32[4] x, int32[4] e) => (int32 y) {\n"
      "  y = Pow (x, e)\n}");
  const auto out = run_model(model, {int_tensor("x", onnx::TensorProto::INT32, {4}, {1, -1, 2, 7}),
                                     int_tensor("e", onnx::TensorProto::INT32, {4}, {-5, -3, -1, 31})});
  // 7^31 wraps to int32 (7^31 mod 2^32 = 265001655), as int32 arithmetic would.
  CHECK(out[0].tensor.i == std::vector<int64_t>{1, -1, 0, 265001655});
}

TEST_CASE("Equal and Where refuse operands of different element types, naming the node", "[reference][where]") {
  struct Case {
    std::string model, node, problem;
  };
  const Case c = GENERATE(Case{"<ir_version: 8, opset_import: [\"\" : 13]> g (float[2] a, int64[2] b) => (bool y) {\n"
                               "  y = Equal (a, b)\n}",
                               "Equal producing 'y'", "inputs are FLOAT[2] and INT64[2]; their types must match"},
                          Case{"<ir_version: 8, opset_import: [\"\" : 16]> g (bool[2] c, float[2] a, int64[2] b) => (float y) {\n"
                               "  y = Where (c, a, b)\n}",
                               "Where producing 'y'", "X is FLOAT[2] but Y is INT64[2]"},
                          Case{"<ir_version: 8, opset_import: [\"\" : 16]> g (float[2] c, float[2] a, float[2] b) => (float y) {\n"
                               "  y = Where (c, a, b)\n}",
                               "Where producing 'y'", "condition is FLOAT[2], not BOOL"},
                          Case{"<ir_version: 8, opset_import: [\"\" : 16]> g (bool[3] c, float[2] a, float[2] b) => (float y) {\n"
                               "  y = Where (c, a, b)\n}",
                               "Where producing 'y'", "shapes 3 and 2 do not broadcast"});
  check_creation_error(parse_model_text(c.model), c.node, c.problem);
}

TEST_CASE("ConstantOfShape with a negative or huge shape is an error naming the node", "[reference][hostile]") {
  using Case = std::pair<std::vector<int64_t>, std::string>;  // shape, expected message
  const Case c =
      GENERATE(Case{{-1, 3}, "negative dimension"}, Case{{kHuge, 4}, "overflow when multiplied"}, Case{{int64_t{1} << 40}, "more than"});
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1] x) => (float y) {\n"
      "  c = ConstantOfShape (shape)\n"
      "  y = Add (x, c)\n}");
  add_int64_initializer(model, "shape", c.first);
  check_creation_error(model, "ConstantOfShape producing 'c'", c.second);
}

TEST_CASE("Resize to a negative, huge or non-finite size is an error naming the node", "[reference][hostile]") {
  using Case = std::pair<std::vector<double>, std::string>;  // scales, expected message
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Case c = GENERATE_COPY(Case{{1, 1, -2, 2}, "negative dimension"}, Case{{1, 1, 1e30, 1e30}, "overflow when multiplied"},
                               Case{{1, 1, 1e5, 1e5}, "more than"}, Case{{1, 1, nan, 2}, "not a finite"});
  const bool use_xnnpack = GENERATE(false, true);
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1, 1, 4, 4] x) => (float y) {\n"
      "  y = Resize <mode = \"nearest\"> (x, roi, scales)\n}");
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("roi", onnx::TensorProto::FLOAT, {0}, {}, true);
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, c.first, true);
  check_creation_error(model, "Resize producing 'y'", c.second, use_xnnpack);
}
