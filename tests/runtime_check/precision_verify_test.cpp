// verify_from_run at --precision fp16, bf16 and int8: the tolerance each precision is judged under, int8's steps, the float
// side clamped to the quantised side's range, and what steps never excuse. On a PythonRun made here, as the runtime
// module answers one.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime_check/runner.h"

using namespace dwdeconv;
using runtime_check::PythonRun;

namespace {

runtime_check::NamedTensor output(const std::vector<float>& values) {
  runtime_check::NamedTensor t;
  t.name = "y";
  t.tensor.reshape(onnx::TensorProto::FLOAT, {static_cast<int64_t>(values.size())});
  for (size_t k = 0; k < values.size(); ++k) t.tensor.f[k] = values[k];
  return t;
}

PythonRun run_of(const std::string& precision, const std::vector<float>& original, const std::vector<float>& rewritten) {
  PythonRun run;
  run.precision = precision;
  run.original_outputs = {output(original)};
  run.rewritten_outputs = {output(rewritten)};
  return run;
}

}  // namespace

TEST_CASE("int8 outputs are judged in steps of the larger side's scale, bounded by max_steps", "[verify][precision]") {
  const double step = 0.01;
  auto run = run_of("int8", {0.0f, 0.5f, 1.0f}, {0.0f, 0.515f, 1.0f});  // 1.5 steps apart, far over the float tolerance
  run.original_steps["y"] = {step, 0};
  run.rewritten_steps["y"] = {step / 2, 0};
  auto v = runtime_check::verify_from_run(run, {}, 2.0);
  REQUIRE(v.outputs.size() == 1);
  CHECK(v.passed);
  CHECK(v.outputs[0].quant_step == Approx(step));
  CHECK(v.outputs[0].quant_steps == Approx(1.5).epsilon(1e-3));
  // The same difference over a tighter bound fails, saying by how much.
  v = runtime_check::verify_from_run(run, {}, 1.0);
  CHECK_FALSE(v.passed);
  CHECK_THAT(v.outputs[0].message, Catch::Contains("quantisation steps, over the bound of 1"));
  // Judged in float at fp32: the same outputs fail the float tolerance.
  run.precision = "fp32";
  CHECK_FALSE(runtime_check::verify_from_run(run, {}, 2.0).passed);
}

TEST_CASE("int8 steps never excuse a NaN in one model, a shape, or a missing output", "[verify][precision]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto run = run_of("int8", {0.0f, 0.5f}, {0.0f, nan});
  run.original_steps["y"] = run.rewritten_steps["y"] = {0.01, 0};
  CHECK_FALSE(runtime_check::verify_from_run(run, {}, 1e9).passed);
  run = run_of("int8", {0.0f, 0.5f}, {0.0f, 0.5f, 0.0f});
  run.original_steps["y"] = run.rewritten_steps["y"] = {0.01, 0};
  CHECK_FALSE(runtime_check::verify_from_run(run, {}, 1e9).passed);
  run = run_of("int8", {0.0f}, {0.0f});
  run.rewritten_outputs[0].name = "z";
  run.original_steps["y"] = {0.01, 0};
  CHECK_FALSE(runtime_check::verify_from_run(run, {}, 1e9).passed);
}

TEST_CASE("int8 with one side in float clamps that side to the other's range, and says so", "[verify][precision]") {
  // The rewritten output is int8 with step 0.01, zero point 0: it cannot exceed 1.27. The float original's 1.40 is
  // what the int8 model saturates to, not a rewrite error.
  auto run = run_of("int8", {0.2f, 1.40f}, {0.2f, 1.27f});
  run.rewritten_steps["y"] = {0.01, 0};
  auto v = runtime_check::verify_from_run(run, {}, 2.0);
  CHECK(v.passed);
  CHECK(v.outputs[0].quant_steps == Approx(0.0).margin(1e-4));
  CHECK_THAT(v.outputs[0].message, Catch::Contains("clamped to the other's int8 range"));
  // Inside the range nothing is clamped: 3 steps off fails.
  run = run_of("int8", {0.2f, 1.0f}, {0.2f, 1.03f});
  run.rewritten_steps["y"] = {0.01, 0};
  CHECK_FALSE(runtime_check::verify_from_run(run, {}, 2.0).passed);
  // No step on either side: judged in float, and the message says so.
  run = run_of("int8", {0.2f, 1.0f}, {0.2f, 1.0f});
  v = runtime_check::verify_from_run(run, {}, 2.0);
  CHECK(v.passed);
  CHECK(v.outputs[0].quant_steps < 0);
  CHECK_THAT(v.outputs[0].message, Catch::Contains("judged in float"));
}

TEST_CASE("an int8 failure where one side ran ops in float says the difference holds that quantisation's error", "[verify][precision]") {
  // Both outputs int8 (step 0.01), 5 steps apart. Without a note the failure is the rewrite's to explain; with the
  // original's note (ExecuTorch's XNNPACKQuantizer left its ConvTranspose in float) it says the two are not quantised
  // alike, and still fails: the bound is not raised behind the user's back.
  auto run = run_of("int8", {0.2f, 1.0f}, {0.2f, 1.05f});
  run.original_steps["y"] = run.rewritten_steps["y"] = {0.01, 0};
  auto v = runtime_check::verify_from_run(run, {}, 2.0);
  CHECK_FALSE(v.passed);
  CHECK_THAT(v.outputs[0].message, !Catch::Contains("ran ops in float"));
  run.notes = {"original: 12 grouped ConvTranspose left in float by XNNPACKQuantizer"};
  v = runtime_check::verify_from_run(run, {}, 2.0);
  CHECK_FALSE(v.passed);
  CHECK(v.outputs[0].quant_steps == Approx(5.0).epsilon(1e-3));
  CHECK_THAT(v.outputs[0].message, Catch::StartsWith("5 quantisation steps, over the bound of 2") &&
                                       Catch::Contains("the original ran ops in float that the other quantises") &&
                                       Catch::Contains("--verify at fp32 checks the rewrite"));
  // A passing output gets no such text.
  v = runtime_check::verify_from_run(run, {}, 8.0);
  CHECK(v.passed);
  CHECK_THAT(v.outputs[0].message, !Catch::Contains("ran ops in float"));
}

TEST_CASE("fp16 outputs get FLOAT16's tolerances unless the command line gave its own", "[verify][precision]") {
  auto run = run_of("fp16", {0.0f, 1.0f}, {0.0f, 1.005f});  // within 1e-3 + 1e-2 * 1, not within fp32's
  CHECK(runtime_check::verify_from_run(run, {}, 2.0).passed);
  CHECK_FALSE(runtime_check::verify_from_run(run, {1e-6, 1e-4}, 2.0).passed);
  run.precision = "fp32";
  CHECK_FALSE(runtime_check::verify_from_run(run, {}, 2.0).passed);
}

TEST_CASE("bf16 outputs get BFLOAT16's looser tolerances unless the command line gave its own", "[verify][precision]") {
  // 0.02 at a largest magnitude of 1: five bf16 steps (2^-8 each), within 1e-2 + 2e-2 * 1, over fp16's 1e-3 + 1e-2.
  auto run = run_of("bf16", {0.0f, 1.0f}, {0.0f, 1.02f});
  const auto bf16 = runtime_check::verify_from_run(run, {}, 2.0);
  CHECK(bf16.passed);
  REQUIRE(bf16.outputs.size() == 1);
  CHECK(bf16.outputs[0].tolerance.atol == Approx(1e-2));
  CHECK(bf16.outputs[0].tolerance.rtol == Approx(2e-2));
  CHECK_FALSE(runtime_check::verify_from_run(run, {1e-3, 1e-2}, 2.0).passed);
  run.precision = "fp16";
  CHECK_FALSE(runtime_check::verify_from_run(run, {}, 2.0).passed);
  // Over twice the bound (0.07 against 0.03) still fails at bf16: looser is not unbounded.
  CHECK_FALSE(runtime_check::verify_from_run(run_of("bf16", {0.0f, 1.0f}, {0.0f, 1.07f}), {}, 2.0).passed);
}
