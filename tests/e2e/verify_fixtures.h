// The e2e --verify and --compare tests' shared helper: a planted error in a model's weights.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include <onnx/onnx_pb.h>

namespace dwdeconv::test {

// Adds `delta` to element 0 of the first initializer whose name contains `fragment` (raw FLOAT data).
inline void plant_error(onnx::ModelProto& model, const std::string& fragment, float delta) {
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    if (init.name().find(fragment) == std::string::npos) continue;
    REQUIRE(init.data_type() == onnx::TensorProto::FLOAT);
    REQUIRE(init.has_raw_data());
    float v;
    std::memcpy(&v, init.raw_data().data(), 4);
    v += delta;
    std::string raw = init.raw_data();
    std::memcpy(raw.data(), &v, 4);
    init.set_raw_data(raw);
    return;
  }
  FAIL("no initializer named like " << fragment);
}

}  // namespace dwdeconv::test
