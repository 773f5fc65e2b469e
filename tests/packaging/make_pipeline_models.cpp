// Writes the models the pipeline tests need that the shipped examples do not cover, into the directory argv[1]:
//   symbolic_upsampler.onnx  one depthwise k4 s2 p1 ConvTranspose whose input `image` is float[1,4,H,W].
//                            --verify cannot run it whole or isolate the node until --input-shape fixes H and W.
#include <cstdio>
#include <exception>
#include <string>

#include "onnx_io/model_io.h"
#include "tests/support/model_builder.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  try {
    auto model = dwdeconv::test::parse_model(R"(
      <ir_version: 8, opset_import: ["" : 13]>
      symbolic_upsampler (float[1,4,H,W] image) => (float[1,4,H2,W2] up) {
        up = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (image, w)
      })");
    dwdeconv::test::set_random_initializer(*model.mutable_graph(), "w", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 1);
    const std::string path = std::string(argv[1]) + "/symbolic_upsampler.onnx";
    if (auto saved = dwdeconv::onnx_io::save_model(model, path); !saved) {
      std::fprintf(stderr, "%s: %s\n", path.c_str(), saved.error().message.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
