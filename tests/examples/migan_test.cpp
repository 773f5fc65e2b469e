// The example generator's two MI-GAN forms compute the same function, and have the structure they claim.
#include <catch2/catch.hpp>

#include <onnx/checker.h>

#include "examples/migan.h"
#include "runtime_check/compare.h"
#include "runtime_check/executor.h"

using namespace dwdeconv;

namespace {

int count_ops(const onnx::ModelProto& m, const std::string& op) {
  int n = 0;
  for (const auto& node : m.graph().node()) n += node.op_type() == op;
  return n;
}

}  // namespace

TEST_CASE("MI-GAN forms (a) and (b) have the upsampler structure they claim", "[examples][migan]") {
  const auto a = examples::make_migan(64, examples::UpsampleForm::kDeconv, 8, 1);
  const auto b = examples::make_migan(64, examples::UpsampleForm::kHandWritten, 8, 1);
  // R=64 has four synthesis blocks, each upsampling features and the image: 8 upsamplers.
  CHECK(count_ops(a, "ConvTranspose") == 8);
  CHECK(count_ops(a, "Resize") == 0);
  CHECK(count_ops(b, "ConvTranspose") == 0);
  CHECK(count_ops(b, "Resize") == 8);
  CHECK(count_ops(b, "Pad") == 8);
  CHECK_NOTHROW(onnx::checker::check_model(a));
  CHECK_NOTHROW(onnx::checker::check_model(b));
  const auto full = examples::make_migan(256, examples::UpsampleForm::kDeconv, 64, 1);
  CHECK(count_ops(full, "ConvTranspose") == 12);  // the R=256 count
}

TEST_CASE("MI-GAN forms (a) and (b) compute the same function", "[examples][migan]") {
  const auto a = examples::make_migan(64, examples::UpsampleForm::kDeconv, 8, 1);
  const auto b = examples::make_migan(64, examples::UpsampleForm::kHandWritten, 8, 1);
  runtime_check::ExecutorOptions options;
  options.seed = 7;
  auto run_a = runtime_check::Executor::create(a, options);
  REQUIRE(run_a.ok());
  options.inputs = run_a->creation_inputs();
  auto run_b = runtime_check::Executor::create(b, options);
  REQUIRE(run_b.ok());
  auto ya = run_a->run(options.inputs);
  auto yb = run_b->run(options.inputs);
  REQUIRE(ya.ok());
  REQUIRE(yb.ok());
  const auto cmp = runtime_check::compare_outputs(*yb, *ya, {});
  INFO(cmp.summary());
  CHECK(cmp.passed);
  REQUIRE(cmp.outputs.size() == 1);
  CHECK(cmp.outputs[0].scale > 0.1);  // a real signal, not two zero outputs

  // A different seed gives different weights: the comparison can tell models apart.
  const auto other = examples::make_migan(64, examples::UpsampleForm::kHandWritten, 8, 2);
  auto run_other = runtime_check::Executor::create(other, options);
  REQUIRE(run_other.ok());
  auto yo = run_other->run(options.inputs);
  REQUIRE(yo.ok());
  CHECK_FALSE(runtime_check::compare_outputs(*yo, *ya, {}).passed);
}
