// Reference kernels for the ops PyTorch exports in generator and decoder blocks (issue 10): the opset forms the
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

// The error Executor::create gives for `model` (the test fails if creation succeeds).
std::string creation_error(const onnx::ModelProto& model) {
  auto executor = Executor::create(model, {});
  REQUIRE_FALSE(executor.ok());
  return executor.error().message;
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

NamedTensor int_tensor(const std::string& name, int32_t dtype, const std::vector<int64_t>& dims,
                       const std::vector<int64_t>& values) {
  NamedTensor t{name, {}};
  t.tensor.reshape(dtype, dims);
  t.tensor.i = values;
  return t;
}

constexpr int64_t kHuge = int64_t{1} << 62;

}  // namespace

TEST_CASE("Pow keeps the base's type, and integer results that overflow are defined", "[reference][pow]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 15]> g (int64[4] x, float[4] e) => (int64 y) {\n"
      "  y = Pow (x, e)\n}");
  const auto out = run_model(model, {int_tensor("x", onnx::TensorProto::INT64, {4}, {2, -3, 10, 10}),
                                     float_tensor("e", {4}, {3.0f, 3.0f, 0.5f, 1e30f})});
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
  using Case = std::pair<std::string, std::string>;  // model, expected message
  const Case c = GENERATE(
      Case{"<ir_version: 8, opset_import: [\"\" : 13]> g (float[2] a, int64[2] b) => (bool y) {\n"
           "  y = Equal (a, b)\n}",
           "Equal producing 'y': inputs are FLOAT[2] and INT64[2]; their types must match"},
      Case{"<ir_version: 8, opset_import: [\"\" : 16]> g (bool[2] c, float[2] a, int64[2] b) => (float y) {\n"
           "  y = Where (c, a, b)\n}",
           "Where producing 'y': X is FLOAT[2] but Y is INT64[2]"},
      Case{"<ir_version: 8, opset_import: [\"\" : 16]> g (float[2] c, float[2] a, float[2] b) => (float y) {\n"
           "  y = Where (c, a, b)\n}",
           "Where producing 'y': condition is FLOAT[2], not BOOL"},
      Case{"<ir_version: 8, opset_import: [\"\" : 16]> g (bool[3] c, float[2] a, float[2] b) => (float y) {\n"
           "  y = Where (c, a, b)\n}",
           "Where producing 'y': shapes 3 and 2 do not broadcast"});
  CHECK_THAT(creation_error(parse_model_text(c.first)), Catch::Contains(c.second));
}
