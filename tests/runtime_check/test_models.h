// Helpers for runtime_check tests: ONNX-text models with random initializers, and core::Tensor4 conversion.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <onnx/defs/parser.h>
#include <catch2/catch.hpp>

#include "core/reference.h"
#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"
#include "rewrite/rewriter.h"
#include "runtime_check/executor.h"
#include "runtime_check/tensor.h"
#include "tests/support/source_dir.h"

namespace dwdeconv::runtime_check::testing {

// Parses ONNX text (onnx::OnnxParser); fails the test on a syntax error.
inline onnx::ModelProto parse_model_text(const std::string& text) {
  onnx::ModelProto model;
  const auto status = onnx::OnnxParser::Parse(model, text.c_str());
  INFO(status.ErrorMessage());
  REQUIRE(status.IsOK());
  return model;
}

// A model and the tool's rewrite of it.
struct ModelPair {
  onnx::ModelProto original;
  onnx::ModelProto rewritten;
};

// The examples' MI-GAN-like model (examples/migan_tiny_deconv.onnx) and its rewrite: fused Concats, layout
// conversions, over a hundred activations. The test fails when it cannot be read or nothing is rewritten.
inline ModelPair migan_example_pair() {
  const std::string source_dir = test::source_dir();
  auto original = onnx_io::load_model(source_dir + "/examples/migan_tiny_deconv.onnx");
  REQUIRE(original.ok());
  onnx::ModelProto rewritten = original.value();
  auto result = rewrite::rewrite_model(rewritten, {});
  REQUIRE(result.ok());
  REQUIRE(result->rewritten > 0);
  return ModelPair{original.value(), rewritten};
}

// The same outputs bit for bit: names, types, dims and every element.
inline void require_bit_identical(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    INFO("output " << a[k].name);
    CHECK(a[k].name == b[k].name);
    CHECK(a[k].tensor.dtype == b[k].tensor.dtype);
    CHECK(a[k].tensor.dims == b[k].tensor.dims);
    CHECK(a[k].tensor.f == b[k].tensor.f);
    CHECK(a[k].tensor.i == b[k].tensor.i);
  }
}

// Seeded uniform values in [-1, 1).
inline std::vector<double> random_values(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> v(count);
  for (double& x : v) x = static_cast<float>(uniform(rng));  // exactly representable in f32
  return v;
}

// Adds a FLOAT initializer and returns its values.
inline std::vector<double> add_initializer(onnx::ModelProto& model, const std::string& name, const std::vector<int64_t>& dims,
                                           uint64_t seed) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  const auto values = random_values(n, seed);
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor(name, onnx::TensorProto::FLOAT, dims, values, /*raw=*/true);
  return values;
}

inline void add_int64_initializer(onnx::ModelProto& model, const std::string& name, const std::vector<int64_t>& values) {
  *model.mutable_graph()->add_initializer() = onnx_io::make_int64_tensor(name, {static_cast<int64_t>(values.size())}, values);
}

inline core::Tensor4 to_tensor4(const Tensor& t) {
  REQUIRE(t.dims.size() == 4);
  core::Tensor4 r(t.dims[0], t.dims[1], t.dims[2], t.dims[3]);
  for (size_t k = 0; k < r.data.size(); ++k) r.data[k] = t.get(static_cast<int64_t>(k));
  return r;
}

inline core::Tensor4 to_tensor4(const std::vector<double>& values, const std::vector<int64_t>& dims) {
  core::Tensor4 r(dims[0], dims[1], dims[2], dims[3]);
  r.data = values;
  return r;
}

// Largest |a - b| over two same-shape tensors; the test fails on a shape mismatch.
inline double max_abs_diff(const Tensor& actual, const core::Tensor4& expected) {
  REQUIRE(actual.dims == std::vector<int64_t>{expected.n, expected.c, expected.h, expected.w});
  double worst = 0.0;
  for (size_t k = 0; k < expected.data.size(); ++k) {
    worst = std::max(worst, std::abs(actual.get(static_cast<int64_t>(k)) - expected.data[k]));
  }
  return worst;
}

struct Ran {
  Executor executor;
  std::vector<NamedTensor> outputs;
};

// Creates an executor and runs it once on its own creation inputs.
inline Ran create_and_run(const onnx::ModelProto& model, const ExecutorOptions& options = {}) {
  auto executor = Executor::create(model, options);
  INFO((executor.ok() ? std::string() : executor.error().message));
  REQUIRE(executor.ok());
  auto outputs = executor->run(executor->creation_inputs());
  INFO((outputs.ok() ? std::string() : outputs.error().message));
  REQUIRE(outputs.ok());
  return Ran{std::move(executor.value()), std::move(outputs.value())};
}

}  // namespace dwdeconv::runtime_check::testing
