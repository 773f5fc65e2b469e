// The executor's values (FLOAT16, DOUBLE, non-finite, sizes), refusals, input files and the comparison of outputs.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <algorithm>

#include <catch2/catch.hpp>

#include "core/reference.h"
#include "runtime_check/compare.h"
#include "runtime_check/executor.h"
#include "runtime_check/tensor_io.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

TEST_CASE("A FLOAT16 model computes in f32 and returns FLOAT16", "[executor][f16]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 17]> g (float16[1,3,6,6] x) => (float16 y) {\n"
      "  y = ConvTranspose <group = 3, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n}");
  const auto w = random_values(3 * 16, 81);
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor("w", onnx::TensorProto::FLOAT16, {3, 1, 4, 4}, w, false);
  auto ran = create_and_run(model);
  CHECK(ran.executor.count("ConvTranspose", Placement::kXnnpack) == 1);
  CHECK(ran.outputs[0].tensor.dtype == onnx::TensorProto::FLOAT16);
  core::ConvTranspose2dParams p;
  p.strides = {2, 2};
  p.pads = {1, 1, 1, 1};
  p.group = 3;
  core::Tensor4 wt = to_tensor4(w, {3, 1, 4, 4});
  for (double& v : wt.data) v = round_to_type(static_cast<float>(v), onnx::TensorProto::FLOAT16);
  const auto expected = core::conv_transpose2d_reference(to_tensor4(ran.executor.creation_inputs()[0].tensor), wt, {}, p);
  CHECK(max_abs_diff(ran.outputs[0].tensor, expected) < 2e-3);
}

TEST_CASE("DOUBLE values are refused naming the node and the value: the executor does not judge float64 in float32", "[executor][f64]") {
  // In f32, (x + 1e10) - 1e10 is 0 for every |x| < 512; in f64 it is x.
  const auto refused = [](const std::string& text) {
    auto executor = Executor::create(parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]>\n" + text), {});
    REQUIRE_FALSE(executor.ok());
    return executor.error().message;
  };
  const std::string why = "the executor holds float64 values in float32 and would judge a float64 computation in float32";
  // A DOUBLE graph input read by a node, computed or folded.
  CHECK_THAT(refused("g (double[1,2,3,3] x) => (double[1,2,3,3] z) {\n  a = Add (x, x)\n  z = Sub (a, x)\n}"),
             Catch::StartsWith("Add producing 'a': reads 'x', which is DOUBLE: " + why));
  CHECK_THAT(refused("g (float[2] x) => (double[1] z) {\n  c = Constant <value = double[1] {1.5}> ()\n  z = Neg (c)\n}"),
             Catch::StartsWith("Constant producing 'c': writes 'c', which is DOUBLE: " + why));
  // A Cast to DOUBLE writes one.
  CHECK_THAT(refused("g (float[2] x) => (double[2] y) {\n  y = Cast <to = 11> (x)\n}"),
             Catch::StartsWith("Cast producing 'y': writes 'y', which is DOUBLE: " + why));
  // A DOUBLE graph input that is itself a graph output, which no node reads.
  CHECK_THAT(refused("g (double[2] x, float[2] f) => (double[2] x, float[2] r) {\n  r = Relu (f)\n}"),
             Catch::StartsWith("graph output 'x' is DOUBLE: " + why));

  // Shape reads only the dims of a DOUBLE value, so a model may take one for its shape.
  auto shape_only = Executor::create(parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                                                      "g (double[1,2,3] x, float[2] f) => (int64[3] s, float[2] r) {\n"
                                                      "  s = Shape (x)\n  r = Relu (f)\n}"),
                                     {});
  INFO((shape_only.ok() ? std::string() : shape_only.error().message));
  REQUIRE(shape_only.ok());
  const auto outputs = shape_only->last_outputs();
  REQUIRE(outputs.size() == 2);
  CHECK(outputs[0].tensor.i == std::vector<int64_t>{1, 2, 3});

  // A float64 .npy for a float32 input is fed as float32, the input's declared type: the model still runs.
  ExecutorOptions options;
  NamedTensor given{"f", {}};
  given.tensor.reshape(onnx::TensorProto::DOUBLE, {2});
  given.tensor.f = {-0.5f, 0.25f};
  options.inputs = {given};
  auto fed = Executor::create(parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                                               "g (float[2] f) => (float[2] r) {\n  r = Relu (f)\n}"),
                              options);
  INFO((fed.ok() ? std::string() : fed.error().message));
  REQUIRE(fed.ok());
  CHECK(fed->creation_inputs()[0].tensor.dtype == onnx::TensorProto::FLOAT);
  CHECK(fed->last_outputs()[0].tensor.dtype == onnx::TensorProto::FLOAT);
  CHECK(fed->last_outputs()[0].tensor.f == FloatStorage{0.0f, 0.25f});
}

TEST_CASE("first_non_finite names the first value of the creation run holding inf or NaN, its writer and element",
          "[executor][non_finite]") {
  const auto create = [](const std::string& text, const std::vector<NamedTensor>& inputs = {}) {
    ExecutorOptions options;
    options.inputs = inputs;
    auto executor = Executor::create(parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]>\n" + text), options);
    INFO((executor.ok() ? std::string() : executor.error().message));
    REQUIRE(executor.ok());
    return std::move(executor.value());
  };
  // Sqrt of the seeded inputs in [-1, 1) is NaN at the first negative one; the Mul after it (XNNPACK, which clamps that
  // NaN to -inf) is not what is named.
  auto sqrt = create(
      "g (float[1,2,2,3] x) => (float[1,2,2,3] y) {\n  s = Sqrt (x)\n"
      "  one = Constant <value = float[1] {1.0}> ()\n  y = Mul (s, one)\n}");
  const Tensor& x = sqrt.creation_inputs()[0].tensor;
  int64_t first_negative = 0;
  while (first_negative < x.numel() && x.get(first_negative) >= 0) ++first_negative;
  REQUIRE(first_negative < x.numel());
  REQUIRE(sqrt.first_non_finite().has_value());
  const NonFiniteValue& nan = *sqrt.first_non_finite();
  CHECK(nan.value == "s");
  CHECK(nan.node == "Sqrt producing 's'");
  CHECK(std::isnan(nan.number));
  CHECK(nan.element == first_negative);
  CHECK_THAT(nan.describe(), Catch::StartsWith("Sqrt producing 's' writes NaN to 's' at element " + std::to_string(first_negative) + " ["));
  CHECK(sqrt.count("Sqrt", Placement::kXnnpack) == 1);

  // An NHWC value (a dense 1x1 Conv on XNNPACK) is searched in ONNX order: x = 3e38 at [0,0,0,2] and [0,1,0,0] overflows
  // to inf at both; in NHWC storage [0,1,0,0] comes first, in ONNX order [0,0,0,2] does.
  NamedTensor big{"x", {}};
  big.tensor.reshape(onnx::TensorProto::FLOAT, {1, 2, 1, 3});
  big.tensor.f = {0.5f, 0.25f, 3e38f, 3e38f, -0.5f, 0.125f};
  auto conv = create(
      "g (float[1,2,1,3] x) => (float[1,2,1,3] y) {\n"
      "  w = Constant <value = float[2,2,1,1] {10.0, 0.0, 0.0, 10.0}> ()\n  y = Conv (x, w)\n}",
      {big});
  CHECK(conv.count("Conv", Placement::kXnnpack) == 1);
  REQUIRE(conv.first_non_finite().has_value());
  CHECK(conv.first_non_finite()->describe() == "Conv producing 'y' writes inf to 'y' at element 2 [0, 0, 0, 2]");

  // Graph inputs first, then initializers, then node outputs (folded ones included).
  NamedTensor minus_inf{"x", {}};
  minus_inf.tensor.reshape(onnx::TensorProto::FLOAT, {2});
  minus_inf.tensor.f = {1.0f, -std::numeric_limits<float>::infinity()};
  auto input = create("g (float[2] x) => (float[2] y) {\n  y = Neg (x)\n}", {minus_inf});
  REQUIRE(input.first_non_finite().has_value());
  CHECK(input.first_non_finite()->describe() == "graph input 'x' holds -inf at element 1 [1]");
  auto initializer = parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[2] x) => (float[2] y) {\n  y = Add (x, b)\n}");
  *initializer.mutable_graph()->add_initializer() =
      onnx_io::make_tensor("b", onnx::TensorProto::FLOAT, {2}, {0.0, std::numeric_limits<double>::quiet_NaN()}, /*raw=*/true);
  auto with_nan = Executor::create(initializer, {});
  REQUIRE(with_nan.ok());
  REQUIRE(with_nan->first_non_finite().has_value());
  CHECK(with_nan->first_non_finite()->describe() == "initializer 'b' holds NaN at element 1 [1]");
  auto folded = create(
      "g (float[2] x) => (float[2] y) {\n  c = Constant <value = float[1] {3e38}> ()\n  d = Mul (c, c)\n"
      "  y = Add (x, d)\n}");
  REQUIRE(folded.first_non_finite().has_value());
  CHECK(folded.first_non_finite()->describe() == "Mul producing 'd' writes inf to 'd' at element 0 [0]");
  CHECK(folded.count("Mul", Placement::kFolded) == 1);

  // Finite everywhere: nothing to name.
  auto finite = create("g (float[1,2,2,3] x) => (float[1,2,2,3] y) {\n  r = Relu (x)\n  y = Sqrt (r)\n}");
  CHECK_FALSE(finite.first_non_finite().has_value());
}

TEST_CASE("Unsupported ops and unknown dims fail with a message naming them", "[executor]") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,4] x) => (float y) {\n"
      "  y = Hardmax (x)\n}");
  model.mutable_graph()->mutable_node(0)->set_name("sm");
  auto executor = Executor::create(model, {});
  REQUIRE_FALSE(executor.ok());
  CHECK_THAT(executor.error().message, Catch::Contains("Hardmax 'sm'") && Catch::Contains("not supported"));

  auto symbolic = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[N,2] x) => (float y) {\n"
      "  y = Relu (x)\n}");
  auto missing = Executor::create(symbolic, {});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains("'N'") && Catch::Contains("--input-shape x="));
  ExecutorOptions options;
  options.input_shapes["x"] = {3, 2};
  auto fixed = Executor::create(symbolic, options);
  REQUIRE(fixed.ok());
  CHECK(fixed->creation_inputs()[0].tensor.dims == std::vector<int64_t>{3, 2});
  // A run with other dims than the plan's is refused.
  auto other = make_random_inputs(symbolic, {{"x", {4, 2}}}, 0);
  REQUIRE(other.ok());
  CHECK_FALSE(fixed->run(other.value()).ok());
}

TEST_CASE("A value too large to hold is refused naming its node and dims, folded or computed", "[executor][sizes]") {
  // Folded at creation (a constant padded): about 2^44 floats fit int64 but need 64 TiB.
  auto folded = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1] x) => (float y) {\n"
      "  y = Pad (c, pads)\n}");
  add_initializer(folded, "c", {1, 4, 2, 2}, 5);
  add_int64_initializer(folded, "pads", {0, 0, 1048576, 1048576, 0, 0, 1048576, 1048576});
  folded.mutable_graph()->mutable_node(0)->set_name("big");
  auto refused = Executor::create(folded, {});
  REQUIRE_FALSE(refused.ok());
  // The kernel checks its output shape against the op library's element bound before allocating anything.
  CHECK_THAT(refused.error().message, Catch::Contains("Pad 'big'") && Catch::Contains("output shape 1x4x2097154x2097154") &&
                                          Catch::Contains("more than the 2147483648 allowed"));

  // A step's output from its input's size: padding [1, 4, 2, 2] by 2^31 on each side gives 2^66 elements.
  auto padded = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,4,2,2] x) => (float y) {\n"
      "  y = Pad (x, pads)\n}");
  add_int64_initializer(padded, "pads", {0, 0, 2147483648, 2147483648, 0, 0, 2147483648, 2147483648});
  padded.mutable_graph()->mutable_node(0)->set_name("pad");
  auto huge_pad = Executor::create(padded, {});
  REQUIRE_FALSE(huge_pad.ok());
  CHECK_THAT(huge_pad.error().message,
             Catch::Contains("Pad 'pad'") && Catch::Contains("4x4294967298x4294967298") && Catch::Contains("overflow"));

  // Resize sizes index tables from its output dims, so it checks them first: 2^31 x 2^31 of [1, 4, 2, 2].
  auto computed = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,4,2,2] x) => (float y) {\n"
      "  y = Resize <mode = \"nearest\"> (x, , scales)\n}");
  *computed.mutable_graph()->add_initializer() =
      onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, {1.0, 1.0, 2147483648.0, 2147483648.0}, /*raw=*/true);
  computed.mutable_graph()->mutable_node(0)->set_name("up");
  auto overflow = Executor::create(computed, {});
  REQUIRE_FALSE(overflow.ok());
  CHECK_THAT(overflow.error().message,
             Catch::Contains("Resize 'up'") && Catch::Contains("4x4294967296x4294967296") && Catch::Contains("overflow"));
}

TEST_CASE("Input files: .npy and TensorProto .pb", "[tensor_io]") {
  // A float32 [2, 3] array as numpy writes it (format 1.0).
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header += std::string(128 - 10 - header.size() - 1, ' ') + "\n";  // pad to a multiple of 64
  std::string npy = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header;
  for (int k = 0; k < 6; ++k) {
    const float v = 0.5f * static_cast<float>(k) - 1.0f;
    npy.append(reinterpret_cast<const char*>(&v), 4);
  }
  auto t = parse_npy(npy, "test.npy");
  REQUIRE(t.ok());
  CHECK(t->dims == std::vector<int64_t>{2, 3});
  CHECK(t->f[5] == 1.5f);
  auto big_endian = npy;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  CHECK_FALSE(parse_npy(big_endian, "test.npy").ok());
  auto fortran = npy;
  fortran.replace(fortran.find("False"), 5, "True ");
  CHECK_FALSE(parse_npy(fortran, "test.npy").ok());
  CHECK_FALSE(parse_npy(npy.substr(0, npy.size() - 4), "test.npy").ok());  // truncated data

  // A .pb written next to the test binary (the build tree), then removed.
  const std::string path = "runtime_check_tensor_io_test.pb";
  Tensor ints;
  ints.reshape(onnx::TensorProto::INT64, {3});
  ints.i = {1, -2, 9223372036854775807};
  {
    std::ofstream out(path, std::ios::binary);
    out << tensor_to_proto(ints, "shape").SerializeAsString();
  }
  auto loaded = load_tensor_file(path);
  std::remove(path.c_str());
  REQUIRE(loaded.ok());
  CHECK(loaded->name == "shape");
  CHECK(loaded->tensor.i == ints.i);
  CHECK_FALSE(load_tensor_file("does_not_exist.npy").ok());

  auto shape = parse_input_shape("x=1x4x256x256");
  REQUIRE(shape.ok());
  CHECK(shape->first == "x");
  CHECK(shape->second == std::vector<int64_t>{1, 4, 256, 256});
  CHECK_FALSE(parse_input_shape("x=1x-4").ok());
}

TEST_CASE("compare_outputs: errors relative to the output scale, per-dtype defaults", "[compare]") {
  Tensor expected;
  expected.reshape(onnx::TensorProto::FLOAT, {3});
  expected.f = {10.0f, -20.0f, 5.0f};
  Tensor actual = expected;
  actual.f[1] = -20.001f;  // 1e-3 abs, 5e-5 of the scale 20
  auto report = compare_outputs({{"y", actual}}, {{"y", expected}}, {});
  REQUIRE(report.outputs.size() == 1);
  CHECK(report.passed);
  CHECK(report.outputs[0].scale == 20.0);
  CHECK(report.outputs[0].max_rel_error == Approx(5e-5).epsilon(0.01));
  actual.f[1] = -20.01f;  // 5e-4 of the scale: fails the f32 default, passes a looser rtol
  CHECK_FALSE(compare_outputs({{"y", actual}}, {{"y", expected}}, {}).passed);
  CHECK(compare_outputs({{"y", actual}}, {{"y", expected}}, {std::nullopt, 1e-3}).passed);
  CHECK_FALSE(compare_outputs({}, {{"y", expected}}, {}).passed);  // missing output
  actual.dims = {1, 3};
  CHECK_FALSE(compare_outputs({{"y", actual}}, {{"y", expected}}, {}).passed);  // shape mismatch
  CHECK(default_tolerance(onnx::TensorProto::FLOAT16).rtol > default_tolerance(onnx::TensorProto::FLOAT).rtol);
}

TEST_CASE("a comparison's summary shows an output name's control bytes escaped, one line per output", "[compare]") {
  // A name from the model holding a newline started a log line of its own.
  Tensor t;
  t.reshape(onnx::TensorProto::FLOAT, {2});
  t.f = {1.0f, 2.0f};
  const std::string name = "o\tx\nforged: pass";
  const auto report = compare_outputs({{name, t}}, {{name, t}}, {});
  const std::string text = report.summary();
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
  CHECK_THAT(text, Catch::StartsWith("o\\x09x\\x0aforged: pass: max abs 0"));
}

TEST_CASE("compare_tensor: integer and bool outputs are compared exactly as int64, never through double, with no tolerance", "[compare]") {
  // 2^60 and 2^60 + 1 are one double: compared through double they were equal.
  const int64_t big = int64_t{1} << 60;
  Tensor expected;
  expected.reshape(onnx::TensorProto::INT64, {4});
  expected.i = {big, big, 7, -3};
  Tensor actual = expected;
  CHECK(compare_tensor("z", actual, expected, {}).passed);
  actual.i[1] = big + 1;
  actual.i[3] = -4;
  const OutputComparison off_by_one = compare_tensor("z", actual, expected, {});
  CHECK_FALSE(off_by_one.passed);
  CHECK(off_by_one.message == "element 1 is 1152921504606846977, expected 1152921504606846976 (integers are compared exactly)");
  CHECK(off_by_one.max_abs_error == 1.0);
  CHECK(off_by_one.scale == static_cast<double>(big));
  // A tolerance given for float outputs does not loosen an integer one.
  const OutputComparison tolerant = compare_tensor("z", actual, expected, {1e3, 1.0});
  CHECK_FALSE(tolerant.passed);
  CHECK(tolerant.tolerance.atol == 0.0);
  CHECK(tolerant.tolerance.rtol == 0.0);
  CHECK_FALSE(compare_outputs({{"z", actual}}, {{"z", expected}}, {1e3, 1.0}).passed);
  // The widest difference is measured without overflowing int64.
  expected.i = {INT64_MAX};
  expected.dims = {1};
  actual = expected;
  actual.i = {INT64_MIN};
  const OutputComparison extremes = compare_tensor("z", actual, expected, {});
  CHECK_FALSE(extremes.passed);
  CHECK(extremes.max_abs_error == Approx(1.8446744073709552e19));
  // BOOL is held as int64 0/1 and compared the same way.
  Tensor mask;
  mask.reshape(onnx::TensorProto::BOOL, {2});
  mask.i = {1, 0};
  Tensor flipped = mask;
  flipped.i[0] = 0;
  CHECK(compare_tensor("m", mask, mask, {}).passed);
  const OutputComparison bools = compare_tensor("m", flipped, mask, {1.0, 1.0});
  CHECK_FALSE(bools.passed);
  CHECK(bools.message == "element 0 is 0, expected 1 (integers are compared exactly)");
}
