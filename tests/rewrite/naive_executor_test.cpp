// The naive executor checked against ONNX's own conformance data (Debian's libonnx-testdata), so that the
// rewrite tests compare models with an executor that is independently known to follow the spec.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"
#include "tests/support/model_builder.h"
#include "tests/support/naive_executor.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

const std::string kNodeData = "/usr/share/libonnx-testdata/data/node/";

NaiveTensor load_pb(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::TensorProto tensor;
  REQUIRE(tensor.ParseFromString(bytes.str()));
  auto values = onnx_io::to_doubles(tensor);
  REQUIRE(values.ok());
  return NaiveTensor(onnx_io::dims_of(tensor), *values);
}

}  // namespace

TEST_CASE("naive executor matches ONNX conformance data for every op it claims", "[support][naive_executor]") {
  const std::string name =
      GENERATE(as<std::string>{},  //
               "test_convtranspose", "test_convtranspose_autopad_same", "test_convtranspose_kernel_shape",
               "test_convtranspose_output_shape", "test_convtranspose_pad", "test_convtranspose_pads", "test_convtranspose_with_kernel",
               "test_convtranspose_dilations", "test_conv_with_strides_and_asymmetric_padding", "test_conv_with_strides_padding",
               "test_conv_with_strides_no_padding", "test_depthtospace_crd_mode", "test_depthtospace_dcr_mode", "test_depthtospace_example",
               "test_depthtospace_crd_mode_example", "test_relu", "test_identity", "test_if", "test_constant", "test_shape",
               "test_constantofshape_float_ones", "test_constantofshape_int_zeros");
  const std::string dir = kNodeData + name + "/";
  if (!std::filesystem::exists(dir + "model.onnx")) {
    WARN("libonnx-testdata is not installed; skipping " << name);
    return;
  }
  CAPTURE(name);
  auto model = onnx_io::load_model(dir + "model.onnx");
  REQUIRE(model.ok());
  std::map<std::string, NaiveTensor> inputs;
  int index = 0;
  for (const auto& in : model->graph().input()) {
    if (find_initializer(model->graph(), in.name()) != nullptr) continue;
    inputs[in.name()] = load_pb(dir + "test_data_set_0/input_" + std::to_string(index++) + ".pb");
  }
  const auto outputs = run_naive(*model, inputs);
  for (int i = 0; i < model->graph().output_size(); ++i) {
    const NaiveTensor expected = load_pb(dir + "test_data_set_0/output_" + std::to_string(i) + ".pb");
    CHECK(max_abs_diff(outputs.at(model->graph().output(i).name()), expected) < 1e-4);
  }
}

TEST_CASE("naive ConvTranspose pads follow the spec formula for output_shape and auto_pad", "[support][naive_executor]") {
  // k4 s2 op1 on H=5: total = 2*4 + 1 + 4 - 10 = 3.
  CHECK(naive_deconv_pads(5, 4, 2, 1, 1, "SAME_UPPER", 0, 0, -1) == std::pair<int64_t, int64_t>{1, 2});
  CHECK(naive_deconv_pads(5, 4, 2, 1, 1, "SAME_LOWER", 0, 0, -1) == std::pair<int64_t, int64_t>{2, 1});
  CHECK(naive_deconv_pads(5, 4, 2, 1, 1, "NOTSET", 0, 0, 10) == std::pair<int64_t, int64_t>{2, 1});
  CHECK(naive_deconv_pads(5, 4, 2, 1, 1, "SAME_UPPER", 0, 0, 10) == std::pair<int64_t, int64_t>{1, 2});
  CHECK(naive_deconv_pads(5, 2, 2, 1, 0, "VALID", 7, 7, -1) == std::pair<int64_t, int64_t>{0, 0});
  CHECK(naive_deconv_pads(5, 4, 2, 1, 0, "NOTSET", 2, 0, -1) == std::pair<int64_t, int64_t>{2, 0});
}
