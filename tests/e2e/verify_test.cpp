// End-to-end tests of --verify and --compare: the rewritten model is run through XNNPACK against the original.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>
#include <vector>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"
#include "tests/e2e/verify_fixtures.h"
#include "tests/support/model_builder.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv::test;

namespace {

// A chain that makes the rewriter emit every kind of node: a rectangular kernel with asymmetric x pads,
// crop phases (k3 s3 op2), bias-only phases (k1 s3 op2) and stride 4.
onnx::ModelProto every_kind_model() {
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    every_kind (float[1,4,3,2] X) => (float[1,4,216,144] Y) {
      A = ConvTranspose <group=4, strides=[2,2], pads=[1,0,1,0]> (X, W_rect)
      B = ConvTranspose <group=4, strides=[3,3], pads=[1,1,1,1], output_padding=[2,2]> (A, W_crop, B_crop)
      C = ConvTranspose <group=4, strides=[3,3], output_padding=[2,2]> (B, W_bias, B_bias)
      Y = ConvTranspose <group=4, strides=[4,4]> (C, W_s4)
    })");
  auto& g = *m.mutable_graph();
  set_random_initializer(g, "W_rect", onnx::TensorProto::FLOAT, {4, 1, 4, 2}, 1);
  set_random_initializer(g, "W_crop", onnx::TensorProto::FLOAT, {4, 1, 3, 3}, 2);
  set_random_initializer(g, "B_crop", onnx::TensorProto::FLOAT, {4}, 3);
  set_random_initializer(g, "W_bias", onnx::TensorProto::FLOAT, {4, 1, 1, 1}, 4);
  set_random_initializer(g, "B_bias", onnx::TensorProto::FLOAT, {4}, 5);
  set_random_initializer(g, "W_s4", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 6);
  return m;
}

}  // namespace

TEST_CASE("verify runs both models whole through XNNPACK and reports it", "[e2e][verify]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx", report = dir.path / "r.json";
  // --target xnnpack: DCR, which XNNPACK runs (executorch's Gather + CRD join runs as channel copies).
  const auto r = run_cli(in.string() + " -o " + out.string() + " --target xnnpack --verify --report " + report.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rewritten = load(out), original = load(in);
  CHECK(count_ops(rewritten, "ConvTranspose") == 0);  // the rewrite happened
  CHECK_THAT(r.err, Catch::Contains("verify (whole-model)"));
  CHECK_THAT(r.err, Catch::Contains("verified: max abs error"));
  const Report json = read_report(report);
  const Report& verify = json.at("verify");
  CHECK(verify.at("mode") == "whole-model");
  CHECK(verify.at("passed") == true);
  const Report& rgb = row_named(verify.at("outputs"), "rgb");
  CHECK(rgb.at("max_abs_error").is_number());
  // The rewritten side that ran is the written model (its every node, on XNNPACK), not the original again, and every
  // element of the output [1, 3, 64, 64] was compared.
  REQUIRE(rewritten.graph().node_size() != original.graph().node_size());
  CHECK(verify.at("xnnpack_ops") == rewritten.graph().node_size());
  CHECK(verify.at("reference_ops") == 0);
  CHECK(rgb.at("compared") == 3 * 64 * 64);
}

TEST_CASE("compare passes an honest rewrite and fails a planted error in one phase weight", "[e2e][verify]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx", bad = dir.path / "bad.onnx", report = dir.path / "r.json";
  REQUIRE(run_cli(in.string() + " -o " + out.string(), dir).exit_code == 0);
  CHECK(run_cli(in.string() + " --compare " + out.string(), dir).exit_code == 0);

  auto model = load(out);
  plant_error(model, "_phase_0_1", 0.5f);
  save(model, bad);
  const size_t files = dir.file_count();
  const auto r = run_cli(in.string() + " --compare " + bad.string() + " --report " + report.string(), dir);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("verification FAILED"));
  CHECK(dir.file_count() == files + 1);  // the report, nothing else
  const Report json = read_report(report);
  CHECK(json.at("verify").at("passed") == false);
  CHECK(json.at("compared") == bad.string());  // --compare's OTHER
}

TEST_CASE("compare fails int64 outputs that differ by 1 at 2^60: integer outputs are compared exactly", "[e2e][verify]") {
  // A second graph output Z = Shape(X) + K; MODEL and OTHER differ only in K, by 1 at 2^60, where doubles are 256
  // apart (compared through double, every element was equal, "max abs 0").
  const auto with_k = [](const std::string& k) {
    auto m = parse_model(
        "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1,2,3,3] X) => (float[1,2,6,6] Y, int64[4] Z) {\n"
        "  Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)\n  S = Shape (X)\n"
        "  K = Constant <value = int64[4] {" +
        k + ", " + k + ", " + k + ", " + k + "}> ()\n  Z = Add (S, K)\n}\n");
    set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, 21);
    return m;
  };
  TempDir dir;
  const auto model = dir.path / "model.onnx", other = dir.path / "other.onnx", report = dir.path / "r.json";
  save(with_k("1152921504606846976"), model);
  save(with_k("1152921504606846977"), other);
  CHECK(run_cli(model.string() + " --compare " + model.string(), dir).exit_code == 0);
  const auto r = run_cli(model.string() + " --compare " + other.string() + " --atol 10 --report " + report.string(), dir);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("Y: max abs 0") && Catch::Contains("): pass"));
  // Element 0 of Shape(X) is 1: 1 + 2^60 against 1 + 2^60 + 1.
  CHECK_THAT(r.err,
             Catch::Contains("Z: max abs 1,") &&
                 Catch::Contains("FAIL (element 0 is 1152921504606846978, expected 1152921504606846977 (integers are compared exactly))"));
  CHECK_THAT(r.err, Catch::Contains("verification FAILED"));
  const Report json = read_report(report);
  const Report& verify = json.at("verify");
  CHECK(verify.at("mode") == "whole-model");
  const Report& y = row_named(verify.at("outputs"), "Y");
  CHECK(y.at("max_abs_error") == 0.0);
  CHECK(y.at("max_rel_error") == 0.0);
  CHECK(y.at("passed") == true);
  CHECK(y.at("compared").is_number_integer());
  CHECK(row_named(verify.at("outputs"), "Z").at("max_abs_error") == 1.0);
  CHECK(verify.at("passed") == false);
}

TEST_CASE("compare of float64 models fails naming the node and DOUBLE: the executor does not judge them in float32", "[e2e][verify]") {
  // (x + 1e10) - 1e10 against x * 0: ONNX Runtime differs by up to 1, float32 gives 0 for both.
  TempDir dir;
  const auto model = dir.path / "model.onnx", other = dir.path / "other.onnx", report = dir.path / "r.json";
  save(parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (double[1,2,3,3] x) => (double[1,2,3,3] z) {
      big = Constant <value = double[1] {1e10}> ()
      a = Add (x, big)
      z = Sub (a, big)
    })"),
       model);
  save(parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (double[1,2,3,3] x) => (double[1,2,3,3] z) {
      zero = Constant <value = double[1] {0.0}> ()
      z = Mul (x, zero)
    })"),
       other);
  const auto r = run_cli(model.string() + " --compare " + other.string() + " --report " + report.string(), dir);
  INFO(r.err);
  CHECK(r.exit_code == 4);
  // Refused before anything runs: its float64 input would reach any runtime rounded to float32.
  CHECK_THAT(r.err, Catch::Contains("cannot verify " + other.string() +
                                    ": graph input 'x' is DOUBLE: inputs are held in float32 "
                                    "here, so a float64 model cannot be fed its exact values"));
  CHECK_THAT(r.err, !Catch::Contains("verification passed"));
  const Report json = read_report(report);
  CHECK(json.at("exit_code") == 4);
  CHECK_THAT(report_error(json), Catch::Contains("is DOUBLE: inputs are held in float32"));
  CHECK_FALSE(json.contains("verify"));  // nothing was compared
}

TEST_CASE("compare does not pass a model whose run holds NaN against one holding -inf there", "[e2e][verify][non_finite]") {
  // MODEL y = Sqrt(x) * 1 (ONNX Runtime: NaN where x < 0), OTHER y = -inf there and Sqrt(x)
  // elsewhere. XNNPACK's Mul clamps NaN to -inf, so on the default random inputs the pair passed with max abs 0.
  TempDir dir;
  const auto model = dir.path / "model.onnx", other = dir.path / "other.onnx", report = dir.path / "r.json";
  save(parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,3,4,5] x) => (float[1,3,4,5] y) {
      s = Sqrt (x)
      one = Constant <value = float[1] {1.0}> ()
      y = Mul (s, one)
    })"),
       model);
  save(parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,3,4,5] x) => (float[1,3,4,5] y) {
      r = Relu (x)
      zero = Constant <value = float[1] {0.0}> ()
      c = Equal (r, zero)
      s = Sqrt (r)
      big = Constant <value = float[1] {3e38}> ()
      square = Mul (big, big)
      ninf = Neg (square)
      y = Where (c, ninf, s)
    })"),
       other);
  const auto r = run_cli(model.string() + " --compare " + other.string() + " --report " + report.string(), dir);
  INFO(r.err);
  CHECK(r.exit_code == 4);
  CHECK_THAT(r.err, Catch::Contains("cannot verify " + other.string() +
                                    ": the original model cannot be compared whole: "
                                    "Sqrt producing 's' writes NaN to 's' at element "));
  CHECK_THAT(r.err, Catch::Contains("the executor cannot compare non-finite values faithfully"));
  CHECK_THAT(r.err, Catch::Contains("; and no rewritten upsampler of the main graph can be checked on its own"));
  CHECK_THAT(r.err, !Catch::Contains("verification passed"));
  const Report json = read_report(report);
  CHECK(json.at("exit_code") == 4);
  CHECK_THAT(report_error(json), Catch::Contains("writes NaN to 's'"));
  CHECK_FALSE(json.contains("verify"));  // nothing was compared
  // The other way round the folded -(3e38 * 3e38) is the first non-finite value.
  const auto back = run_cli(other.string() + " --compare " + model.string(), dir);
  CHECK(back.exit_code == 4);
  CHECK_THAT(back.err, Catch::Contains("the original model cannot be compared whole: Mul producing 'square' writes inf to "
                                       "'square' at element 0 [0]"));
}

TEST_CASE("verify of a correct rewrite whose model computes NaN runs per node, and the report says why", "[e2e][verify][non_finite]") {
  // Log of the upsampled values is NaN wherever they are negative: not compared whole, but the ConvTranspose is
  // checked on its own and everything else is the same in both models.
  TempDir dir;
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    log_head (float[1,2,3,3] X) => (float[1,2,6,6] Z) {
      Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)
      Z = Log (Y)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, 23);
  name_node(m, "Y", "up");
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --report " + report.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(count_ops(load(out), "ConvTranspose") == 0);
  CHECK_THAT(r.err, Catch::Contains("verify (per-node): the original model cannot be compared whole: Log producing 'Z' writes NaN "
                                    "to 'Z' at element "));
  const Report json = read_report(report);
  const Report& verify = json.at("verify");
  CHECK(verify.at("mode") == "per-node");
  CHECK_THAT(verify.at("reason").get<std::string>(),
             Catch::StartsWith("the original model cannot be compared whole: Log producing 'Z' writes NaN"));
  CHECK(row_named(verify.at("outputs"), "Y").contains("max_abs_error"));
  CHECK(verify_passed_everywhere(json));
  CHECK_FALSE(has_value(json, "passed", false));
}

TEST_CASE("verify falls back to per-node mode on an unsupported op and still catches a planted error", "[e2e][verify]") {
  TempDir dir;
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    with_hardmax (float[1,6,5,7] X) => (float[1,6,20,28] Y) {
      A = ConvTranspose <group=6, strides=[2,2], pads=[1,1,1,1]> (X, W1, B1)
      S = Hardmax <axis=1> (A)
      Y = ConvTranspose <group=6, strides=[2,2], pads=[1,1,1,1], output_padding=[1,1]> (S, W2)
    })");
  set_random_initializer(*m.mutable_graph(), "W1", onnx::TensorProto::FLOAT, {6, 1, 4, 4}, 11);
  set_random_initializer(*m.mutable_graph(), "B1", onnx::TensorProto::FLOAT, {6}, 12);
  set_random_initializer(*m.mutable_graph(), "W2", onnx::TensorProto::FLOAT, {6, 1, 3, 3}, 13);
  name_node(m, "A", "up1");
  name_node(m, "Y", "up2");
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", bad = dir.path / "bad.onnx";
  const auto report = dir.path / "r.json";
  save(m, in);

  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --report " + report.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(count_ops(load(out), "ConvTranspose") == 0);
  const Report json = read_report(report);
  CHECK(json.at("verify").at("mode") == "per-node");
  CHECK_THAT(json.at("verify").at("reason").get<std::string>(), Catch::Contains("Hardmax"));
  CHECK(row_named(json.at("verify").at("outputs"), "A").is_object());
  CHECK(row_named(json.at("verify").at("outputs"), "Y").is_object());
  CHECK(json.at("verify").at("passed") == true);

  auto rewritten = load(out);
  plant_error(rewritten, "W2_s2", 0.25f);
  save(rewritten, bad);
  const auto caught = run_cli(in.string() + " --compare " + bad.string() + " --report " + report.string(), dir);
  CHECK(caught.exit_code == 1);
  CHECK(read_report(report).at("verify").at("mode") == "per-node");
  CHECK(read_report(report).at("verify").at("passed") == false);
}

TEST_CASE("whole-model verify passes for every kind of node the rewriter emits", "[e2e][verify]") {
  TempDir dir;
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(every_kind_model(), in);
  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --report " + report.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rewritten = load(out);
  CHECK(count_ops(rewritten, "ConvTranspose") == 0);
  CHECK(count_ops(rewritten, "DepthToSpace") == 4);
  CHECK(count_ops(rewritten, "Pad") >= 1);  // the crop phases
  bool zero_kernel = false;                 // a bias-only phase: a 1x1 kernel of zeros
  for (const auto& init : rewritten.graph().initializer()) {
    if (init.name().rfind("W_bias_", 0) == 0 && init.dims(2) == 1 && init.raw_data() == std::string(16, '\0')) zero_kernel = true;
  }
  CHECK(zero_kernel);
  CHECK(read_report(report).at("verify").at("mode") == "whole-model");
  CHECK(read_report(report).at("verify").at("passed") == true);
}

TEST_CASE("whole-model verify passes for float16 models", "[e2e][verify]") {
  TempDir dir;
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    half (float16[1,3,5,4] X) => (float16[1,3,30,24] Y) {
      A = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W1, B1)
      Y = ConvTranspose <group=3, strides=[3,3], pads=[1,1,1,1], output_padding=[2,2]> (A, W2)
    })");
  set_random_initializer(*m.mutable_graph(), "W1", onnx::TensorProto::FLOAT16, {3, 1, 4, 4}, 21);
  set_random_initializer(*m.mutable_graph(), "B1", onnx::TensorProto::FLOAT16, {3}, 22);
  set_random_initializer(*m.mutable_graph(), "W2", onnx::TensorProto::FLOAT16, {3, 1, 3, 3}, 23);
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --report " + report.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rewritten = load(out);
  CHECK(count_ops(rewritten, "ConvTranspose") == 0);
  int phase_weights = 0;
  for (const auto& init : rewritten.graph().initializer()) {
    if (init.dims_size() != 4) continue;  // the crop Pad's INT64 pads are not weights
    CHECK(init.data_type() == onnx::TensorProto::FLOAT16);
    ++phase_weights;
  }
  CHECK(phase_weights == 4 + 9);
  CHECK(read_report(report).at("verify").at("mode") == "whole-model");
  CHECK(read_report(report).at("verify").at("passed") == true);
}

TEST_CASE("verification options are usage errors without --verify or --compare", "[e2e][verify]") {
  TempDir dir;
  const auto in = dir.copy_example();
  CHECK(run_cli(in.string() + " -o " + (dir.path / "o.onnx").string() + " --input-shape image=1x8x4x4", dir).exit_code == 2);
  CHECK(run_cli(in.string() + " --compare " + in.string() + " -o x.onnx", dir).exit_code == 2);
  CHECK(run_cli(in.string() + " --dry-run --verify", dir).exit_code == 2);
  const auto bad_shape = run_cli(in.string() + " --compare " + in.string() + " --input-shape image=1xAx4", dir);
  CHECK(bad_shape.exit_code == 2);
  const auto missing = run_cli(in.string() + " --compare " + in.string() + " --input image=" + (dir.path / "nope.npy").string(), dir);
  CHECK(missing.exit_code == 3);
  CHECK_THAT(missing.err, Catch::Contains("nope.npy"));
}

// Per-node mode checks only the rewritten ConvTranspose nodes numerically, so it may pass only when everything
// else is identical in both models; --compare matches the two graphs first.
TEST_CASE("per-node compare fails a model that differs outside the rewritten nodes and names the difference", "[e2e][verify]") {
  TempDir dir;
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    two_outputs (float[1,6,5,7] X) => (float[1,6,10,14] Y, float[1,6,10,14] Z) {
      A = ConvTranspose <group=6, strides=[2,2], pads=[1,1,1,1]> (X, W1, B1)
      Y = Hardmax <axis=1> (A)
      M = Abs (A)
      Z = Add (M, K)
    })");
  set_random_initializer(*m.mutable_graph(), "W1", onnx::TensorProto::FLOAT, {6, 1, 4, 4}, 51);
  set_random_initializer(*m.mutable_graph(), "B1", onnx::TensorProto::FLOAT, {6}, 52);
  set_random_initializer(*m.mutable_graph(), "K", onnx::TensorProto::FLOAT, {1, 6, 1, 1}, 53);
  name_node(m, "A", "up1");
  name_node(m, "M", "abs1");
  name_node(m, "Z", "add1");
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", other = dir.path / "other.onnx";
  const auto report = dir.path / "r.json";
  save(m, in);
  REQUIRE(run_cli(in.string() + " -o " + out.string(), dir).exit_code == 0);
  const auto honest = load(out);
  REQUIRE(count_ops(honest, "ConvTranspose") == 0);
  REQUIRE(count_ops(honest, "Abs") == 1);

  // The honest rewrite passes, in per-node mode (Hardmax is outside the executor's set).
  const auto passed = run_cli(in.string() + " --compare " + out.string() + " --report " + report.string(), dir);
  INFO(passed.err);
  CHECK(passed.exit_code == 0);
  CHECK(read_report(report).at("verify").at("mode") == "per-node");
  CHECK(read_report(report).at("verify").at("passed") == true);
  CHECK(read_report(report).at("verify").at("difference").is_null());

  auto neg = honest;
  for (auto& node : *neg.mutable_graph()->mutable_node()) {
    if (node.op_type() == "Abs") node.set_op_type("Neg");
  }
  auto changed_constant = honest;
  plant_error(changed_constant, "K", 0.5f);
  auto renamed_output = honest;
  renamed_output.mutable_graph()->mutable_output(1)->set_name("Z2");
  for (auto& node : *renamed_output.mutable_graph()->mutable_node()) {
    if (node.output(0) == "Z") node.set_output(0, "Z2");
  }
  // A renamed graph output is an interface difference: refused before either model runs, in whole-model terms.
  const std::vector<std::tuple<std::string, onnx::ModelProto, std::vector<std::string>, bool>> cases = {
      {"Abs changed to Neg", neg, {"Abs 'abs1'", "Neg"}, false},
      {"a changed constant", changed_constant, {"initializer 'K'"}, false},
      {"a renamed graph output", renamed_output, {"graph output", "'Z2'"}, true},
  };
  for (const auto& [what, model, fragments, interface] : cases) {
    INFO(what);
    save(model, other);
    const auto r = run_cli(in.string() + " --compare " + other.string() + " --report " + report.string(), dir);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(interface ? "differ in their graph inputs or outputs" : "differ outside the rewritten nodes"));
    for (const auto& fragment : fragments) CHECK_THAT(r.err, Catch::Contains(fragment));
    CHECK_THAT(r.err, Catch::Contains("verification FAILED"));
    const Report verify = read_report(report).at("verify");
    CHECK(verify.at("mode") == (interface ? "whole-model" : "per-node"));
    CHECK(verify.at("passed") == false);
    // A CI step that reads only the report learns what differs too.
    REQUIRE(verify.at("difference").is_string());
    for (const auto& fragment : fragments) CHECK_THAT(verify.at("difference").get<std::string>(), Catch::Contains(fragment));
  }
}

TEST_CASE("verify with nothing rewritten writes the model and reports mode none, even with ops the executor lacks", "[e2e][verify]") {
  TempDir dir;
  // The only ConvTranspose is dense (kept), and Hardmax is outside the executor's set: running both models fails.
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    kept (float[1,4,5,5] X) => (float[1,4,10,10] Y) {
      A = ConvTranspose <strides=[2,2], pads=[1,1,1,1]> (X, W)
      Y = Hardmax <axis=1> (A)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {4, 4, 4, 4}, 61);
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify --report " + report.string(), dir);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("nothing to verify"));
  REQUIRE(fs::exists(out));
  // Nothing rewritten: the same model, but for the target it was written for, which --check reads back.
  auto written = load(out);
  CHECK(written.graph().SerializeAsString() == m.graph().SerializeAsString());
  REQUIRE(written.metadata_props_size() == 2);
  CHECK(written.metadata_props(0).key() == "dwdeconv-rewrite.target");
  CHECK(written.metadata_props(0).value() == "xnnpack");  // run_cli's --target
  CHECK(written.metadata_props(1).key() == "dwdeconv-rewrite.version");
  const Report json = read_report(report);
  CHECK(json.at("rewritten") == 0);
  CHECK(json.at("verify").at("mode") == "none");
  CHECK(json.at("verify").at("reason") == "nothing was rewritten: the output is the input");
  CHECK(json.at("verify").at("passed") == true);
}

TEST_CASE("compare refuses a model that is no valid ONNX model even when the executor would run it", "[e2e][verify]") {
  // The executor reads a value defined twice as its last definition and ignores an unknown attribute, so both
  // pass against the honest model numerically; ONNX Runtime refuses to load either.
  TempDir dir;
  const std::string header = "<ir_version: 8, opset_import: [\"\" : 13]>\n";
  auto honest = parse_model(header + "g (float[1,2,4,4] x) => (float[1,2,4,4] y) {\n  y = Conv <pads = [1, 1, 1, 1]> (x, w)\n}");
  auto twice = parse_model(header +
                           "g (float[1,2,4,4] x) => (float[1,2,4,4] y) {\n  y = Neg (x)\n"
                           "  y = Conv <pads = [1, 1, 1, 1]> (x, w)\n}");
  auto unknown = parse_model(header +
                             "g (float[1,2,4,4] x) => (float[1,2,4,4] y) {\n"
                             "  y = Conv <pads = [1, 1, 1, 1], bogus = 3> (x, w)\n}");
  for (auto* m : {&honest, &twice, &unknown}) set_random_initializer(*m->mutable_graph(), "w", onnx::TensorProto::FLOAT, {2, 2, 3, 3}, 7);
  const auto a = dir.path / "a.onnx", b = dir.path / "b.onnx", c = dir.path / "c.onnx", report = dir.path / "r.json";
  save(honest, a);
  save(twice, b);
  save(unknown, c);
  CHECK(run_cli(a.string() + " --compare " + a.string(), dir).exit_code == 0);
  for (const auto& bad : {b, c}) {
    INFO(bad);
    const auto r = run_cli(a.string() + " --compare " + bad.string() + " --report " + report.string(), dir);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains(bad.string() + ": invalid model"));
    const Report json = read_report(report);
    CHECK_THAT(report_error(json), Catch::Contains("invalid model"));
    CHECK(json.at("compared") == bad.string());  // --compare's OTHER
    // Either side: MODEL is judged too.
    const auto swapped = run_cli(bad.string() + " --compare " + a.string(), dir);
    CHECK(swapped.exit_code == 3);
    CHECK_THAT(swapped.err, Catch::Contains(bad.string() + ": invalid model"));
  }
}

TEST_CASE("per-node compare refuses a region whose output size a constant fixes while the model's input may take other sizes",
          "[e2e][verify][symbolic]") {
  // The review's pair: the model Resizes X to sizes 8x10, OTHER is the tool's rewrite of it at a static
  // 4x5, with X made symbolic again. They agree at 4x5 and nowhere else (ONNX Runtime at H = 3: 8x10 and 6x10), yet
  // --compare --input-shape X=1x3x4x5 passed. Hardmax keeps both from running whole.
  TempDir dir;
  const auto model = [](const std::string& x_dims) {
    auto m = parse_model(R"(
      <ir_version: 8, opset_import: ["" : 13]>
      resize_by_sizes (float[)" +
                         x_dims + R"(] X) => (float[1,3,8,10] Y) {
        sizes = Constant <value = int64[4] {1, 3, 8, 10}> ()
        u = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (X, , , sizes)
        v = Conv <group = 3, kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (u, W)
        Y = Hardmax <axis = 1> (v)
      })");
    set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {3, 1, 3, 3}, 61);
    name_node(m, "v", "conv");
    return m;
  };
  const auto fixed = dir.path / "fixed.onnx", fixed_out = dir.path / "fixed.xnn.onnx";
  const auto symbolic = dir.path / "symbolic.onnx", other = dir.path / "other.onnx", report = dir.path / "r.json";
  save(model("1,3,4,5"), fixed);
  REQUIRE(run_cli(fixed.string() + " -o " + fixed_out.string() + " --target xnnpack", dir).exit_code == 0);  // depthwise
  auto rewritten = load(fixed_out);
  REQUIRE(count_ops(rewritten, "Resize") == 0);
  REQUIRE(count_ops(rewritten, "DepthToSpace") == 1);
  const auto same_size = run_cli(fixed.string() + " --compare " + fixed_out.string(), dir);  // one size, checked there
  INFO(same_size.err);
  CHECK(same_size.exit_code == 0);

  save(model("1,3,H,W"), symbolic);
  auto* dims = rewritten.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  dims->mutable_dim(2)->set_dim_param("H");
  dims->mutable_dim(3)->set_dim_param("W");
  rewritten.mutable_graph()->clear_value_info();
  save(rewritten, other);
  const auto r = run_cli(symbolic.string() + " --compare " + other.string() + " --input-shape X=1x3x4x5 --report " + report.string(), dir);
  INFO(r.err);
  CHECK(r.exit_code == 4);
  CHECK_THAT(r.err, Catch::Contains("cannot verify " + other.string()) &&
                        Catch::Contains("Resize producing 'u' in the original's upsampler that ends at Conv 'conv' reads sizes 'sizes', "
                                        "which fix its output size whatever the size of its input 'X' (1x3xHxW in the model)"));
  const Report json = read_report(report);
  CHECK(json.at("exit_code") == 4);
  CHECK_THAT(report_error(json), Catch::Contains("reads sizes 'sizes'"));
}

TEST_CASE("per-node verification checks the fixtures' hand-written and computed-weight upsamplers from the rewrite's record",
          "[e2e][verify][per_node]") {
  // Each fixture gets a tail the executor does not implement (Softplus), so --verify runs per node. The mask's constant
  // chain and the Unpool weight's Expand chain are constants, not ops the region must be made of; the regions' input
  // sizes are the ones the rewrite computed. Before, both failed: "the models differ outside the rewritten nodes"
  // (a dead chain left in the output) and "Equal ... is not an op of the upsampler forms".
  for (const char* file : {"nearest_mask_scatternd_opset13.onnx", "fastdepth_upconv_opset13.onnx"}) {
    CAPTURE(file);
    TempDir dir;
    auto model = dwdeconv::onnx_io::load_model(source_dir() + "/tests/fixtures/" + file);
    REQUIRE(model.ok());
    auto& graph = *model->mutable_graph();
    const std::string y = graph.output(0).name();
    auto* tail = graph.add_node();
    tail->set_op_type("Softplus");
    tail->set_name("tail_softplus");
    tail->add_input(y);
    tail->add_output(y + "_abs");
    graph.mutable_output(0)->set_name(y + "_abs");
    const auto in = dir.path / "m.onnx", out = dir.path / "o.onnx";
    save(*model, in);
    const auto r = run_cli(in.string() + " -o " + out.string() + " --target xnnpack --verify", dir);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("verify (per-node)") && Catch::Contains("verification passed"));
    // Nothing the rewrite made dead stays in the output: every node's output is read or is a graph output.
    auto written = dwdeconv::onnx_io::load_model(out.string());
    REQUIRE(written.ok());
    std::set<std::string> read;
    for (const auto& n : written->graph().node()) read.insert(n.input().begin(), n.input().end());
    for (const auto& o : written->graph().output()) read.insert(o.name());
    for (const auto& n : written->graph().node()) {
      CAPTURE(n.op_type(), n.name());
      CHECK(std::any_of(n.output().begin(), n.output().end(), [&](const std::string& o) { return read.count(o) != 0; }));
    }
  }
}

TEST_CASE("per-node verification of an upsampler whose output has no element fails: nothing was compared", "[e2e][verify][per_node]") {
  TempDir dir;
  auto m = parse_model(
      "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[0,4,4,4] X) => (float[0,4,8,8] Z) {\n"
      "  Y = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (X, W)\n  Z = Softplus (Y)\n}");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 3);
  const auto in = dir.path / "m.onnx", out = dir.path / "o.onnx";
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string() + " --target xnnpack --verify", dir);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("verify (per-node)") && Catch::Contains("nothing compared"));
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE(
    "compare: --atol and --rtol decide it, and --seed chooses its input: a difference over the defaults fails, and passes within the "
    "tolerance given",
    "[e2e][verify]") {
  // Y = X * k: OTHER's k is 1.001, so every output is off by 0.1% of its value. That is over float32's defaults
  // (atol 1e-6 + rtol 1e-4 of max |Y|), within --atol 1 and within --rtol 0.01 of max |Y|.
  const auto times = [](const std::string& k) {
    return parse_model(
        "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1,2,3,3] X) => (float[1,2,3,3] Y) {\n"
        "  K = Constant <value = float[1] {" +
        k + "}> ()\n  Y = Mul (X, K)\n}\n");
  };
  TempDir dir;
  const auto model = dir.path / "model.onnx", other = dir.path / "other.onnx";
  save(times("1.0"), model);
  save(times("1.001"), other);
  const std::string base = model.string() + " --compare " + other.string();
  const auto defaults = run_cli(base, dir);
  CHECK(defaults.exit_code == 1);
  CHECK_THAT(defaults.err, Catch::Contains("verification FAILED"));
  for (const std::string tolerance : {" --atol 1", " --rtol 0.01"}) {
    INFO(tolerance);
    const auto r = run_cli(base + tolerance, dir);
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
  // Tighter than the difference, either way, still fails.
  CHECK(run_cli(base + " --atol 1e-5", dir).exit_code == 1);
  CHECK(run_cli(base + " --rtol 1e-5", dir).exit_code == 1);

  // The difference is 0.001 * max |X|, so it follows the random input: the same --seed gives the same figure, another
  // seed another one.
  const auto max_abs_error = [&](const std::string& seed) {
    const auto report = dir.path / ("seed" + seed + ".json");
    const auto r = run_cli(base + " --atol 1 --seed " + seed + " --report " + report.string(), dir);
    REQUIRE(r.exit_code == 0);
    const Report json = read_report(report);
    const Report& outputs = json.at("verify").at("outputs");
    REQUIRE(!outputs.empty());
    return outputs.at(0).at("max_abs_error").get<double>();
  };
  const double first = max_abs_error("1");
  CHECK(first > 0);
  CHECK(max_abs_error("1") == first);
  CHECK(max_abs_error("2") != first);
}

TEST_CASE("compare per node sizes an upsampler's input from the given graph-input dims, asking for no inner tensor", "[e2e][verify]") {
  // Selu is not in the executor, so --compare checks per node. The upsampler reads Reshape(e, shape) with a shape
  // computed through Div, which libonnx's inference does not follow: it asked for "--input-shape r=NxCxHxW" although
  // --input-shape had given X, which fixes r (the tool's own shape propagation computes [1,4,6,6]).
  TempDir dir;
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    selu_reshape (float[1,4,H,W] X) => (float[1,4,OH,OW] Y) {
      e = Selu (X)
      sh = Shape (e)
      shf = Cast <to = 1> (sh)
      one = Constant <value = float[4] {1, 1, 1, 1}> ()
      shd = Div (shf, one)
      shi = Cast <to = 7> (shd)
      r = Reshape (e, shi)
      Y = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (r, W)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 14);
  name_node(m, "Y", "up1");
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(m, in);
  REQUIRE(run_cli(in.string() + " -o " + out.string() + " --target xnnpack", dir).exit_code == 0);
  REQUIRE(count_ops(load(out), "ConvTranspose") == 0);

  const auto r = run_cli(in.string() + " --compare " + out.string() + " --input-shape X:1,4,6,6 --report " + report.string(), dir);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, !Catch::Contains("--input-shape r="));
  const Report json = read_report(report);
  CHECK(json.at("verify").at("mode") == "per-node");
  CHECK_THAT(json.at("verify").at("reason").get<std::string>(), Catch::Contains("Selu"));
  CHECK(json.at("verify").at("passed") == true);
  CHECK(has_value(json.at("verify").at("outputs"), "compared", 576));  // Y [1,4,12,12]: the upsampler ran at X's 6x6
  CHECK_THAT(r.err, Catch::Contains("ConvTranspose 'up1' on input 1x4x6x6"));
}

TEST_CASE("per-node verification checks a folded 1-D upsampler (upsample1d) and catches a planted error in a phase",
          "[e2e][verify][per_node][upsample1d]") {
  // BigVGAN's UpSample1d (edge Pad 5 + 5, depthwise ConvTranspose1d k 12 s 2, x2, crop 15 + 15), and Mimi's causal
  // crop (no padding, no gain, 10 samples off the end), each before a Hardmax the executor does not run: per-node mode.
  // Its region ends at the crop's Slice, and the replacement holds the edge Slices and Concats (xnnpack) or an edge
  // Pad (ort). Before, per-node mode failed it: "still computes 'Y' as the original does".
  struct Case {
    const char* target;
    const char* pad;
    const char* slice;
    const char* gain;
  };
  const Case c =
      GENERATE(values<Case>({{"xnnpack", "5", "15, -15", "2.0"}, {"ort", "5", "15, -15", "2.0"}, {"ort", "0", "0, -10", "1.0"}}));
  CAPTURE(c.target, c.pad, c.slice);
  TempDir dir;
  const std::string pad = c.pad;
  auto m = parse_model(std::string(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    upsample1d (float[1,24,40] X) => (float Z) {
      pads = Constant <value = int64[6] {0, 0, )") +
                       pad + ", 0, 0, " + pad + R"(}> ()
      XP = Pad <mode = ")" +
                       std::string(pad == "0" ? "constant" : "edge") + R"("> (X, pads)
      U = ConvTranspose <group = 24, kernel_shape = [12], strides = [2]> (XP, W)
      gain = Constant <value = float {)" +
                       c.gain + R"(}> ()
      G = Mul (U, gain)
      starts = Constant <value = int64[1] {)" +
                       std::string(c.slice).substr(0, std::string(c.slice).find(',')) + R"(}> ()
      ends = Constant <value = int64[1] {)" +
                       std::string(c.slice).substr(std::string(c.slice).find(',') + 1) + R"(}> ()
      axes = Constant <value = int64[1] {2}> ()
      Y = Slice (G, starts, ends, axes)
      Z = Hardmax <axis = 1> (Y)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {24, 1, 12}, 17);
  name_node(m, "U", "up");
  name_node(m, "Y", "crop");
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", bad = dir.path / "bad.onnx";
  const auto report = dir.path / "r.json";
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string() + " --target " + c.target + " --verify --report " + report.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto rewritten = load(out);
  CHECK(count_ops(rewritten, "ConvTranspose") == 0);
  CHECK(count_ops(rewritten, "Mul") == 0);
  CHECK(count_ops(rewritten, "Pad") == (std::string(c.target) == "ort" && pad != "0" ? 2 : 0));
  const Report json = read_report(report);
  CHECK(json.at("verify").at("mode") == "per-node");
  CHECK(row_named(json.at("verify").at("outputs"), "Y").is_object());
  CHECK(json.at("verify").at("passed") == true);
  CHECK_THAT(r.err, Catch::Contains("Slice 'crop' on input 1x24x40"));

  // One phase weight off by 0.25: per-node compare fails, naming the region.
  auto planted = rewritten;
  std::string weight;
  for (const auto& node : planted.graph().node()) {
    if (node.op_type() == "Conv" && weight.empty()) weight = node.input(1);
  }
  REQUIRE_FALSE(weight.empty());
  plant_error(planted, weight, 0.25f);
  save(planted, bad);
  const auto caught = run_cli(in.string() + " --compare " + bad.string() + " --report " + report.string(), dir);
  INFO(caught.err);
  CHECK(caught.exit_code == 1);
  CHECK(read_report(report).at("verify").at("mode") == "per-node");
  CHECK(read_report(report).at("verify").at("passed") == false);
}
