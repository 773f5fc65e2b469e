// What verification costs: creating an executor runs its model once on the creation inputs, and whole-model
// verification compares those outputs (Executor::last_outputs()) instead of running each model a second time.
// The outputs must be bit-identical to a later run() on the same inputs, with and without the memory plan.
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime_check/executor.h"
#include "runtime_check/graph_match.h"
#include "runtime_check/verify.h"
#include "tests/runtime_check/test_models.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

TEST_CASE("Executor: after create() last_outputs() are the creation run's outputs, bit-identical to run() on its inputs",
          "[executor][verify]") {
  const bool plan = GENERATE(true, false);
  INFO("plan_memory " << plan);
  // A fused activation, a fused Concat, an NHWC output read NCHW, an output a later node reads, an integer output
  // and a FLOAT16 output.
  auto small = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,4,6,6] x) => (float a, float y, int64[4] s, float16 h) {\n"
      "  a = Conv <pads = [1, 1, 1, 1]> (x, w)\n  p = Conv <pads = [1, 1, 1, 1]> (x, w)\n  r = Relu (p)\n"
      "  c1 = Conv <pads = [1, 1, 1, 1]> (r, w)\n"
      "  c2 = Conv <pads = [1, 1, 1, 1]> (x, w)\n  cat = Concat <axis = 1> (c1, c2)\n  t = Tanh (cat)\n"
      "  b = Conv <pads = [1, 1, 1, 1]> (t, w8)\n  y = Add (b, a)\n  s = Shape (y)\n  h = Cast <to = 10> (y)\n}");
  add_initializer(small, "w", {4, 4, 3, 3}, 31);
  add_initializer(small, "w8", {4, 8, 3, 3}, 32);
  const ModelPair migan = migan_example_pair();
  for (const onnx::ModelProto* model : std::vector<const onnx::ModelProto*>{&small, &migan.original, &migan.rewritten}) {
    ExecutorOptions options;
    options.plan_memory = plan;
    options.seed = 5;
    auto executor = Executor::create(*model, options);
    INFO((executor.ok() ? std::string() : executor.error().message));
    REQUIRE(executor.ok());
    CHECK(executor->runs() == 1);
    const std::vector<NamedTensor> created = executor->last_outputs();
    CHECK(executor->runs() == 1);  // reading them runs nothing
    auto ran = executor->run(executor->creation_inputs());
    REQUIRE(ran.ok());
    CHECK(executor->runs() == 2);
    require_bit_identical(created, ran.value());
    require_bit_identical(executor->last_outputs(), ran.value());
    if (model == &small) {
      // Structure: the fusions this model is here for did happen.
      CHECK(executor->count_fused("Relu") == 1);
      CHECK(executor->count_fused("Concat") == 1);
      REQUIRE(created.size() == 4);
      CHECK(created[2].tensor.i == std::vector<int64_t>{1, 4, 6, 6});
      CHECK(created[3].tensor.dtype == onnx::TensorProto::FLOAT16);
    }
  }
}

TEST_CASE("Whole-model verification runs each model once and compares what running them again would give", "[verify]") {
  const ModelPair migan = migan_example_pair();
  VerifyOptions vo;
  vo.seed = 9;
  auto verified = verify_models(migan.original, migan.rewritten, vo);
  INFO((verified.ok() ? std::string() : verified.error().message));
  REQUIRE(verified.ok());
  CHECK(verified->mode == VerifyMode::kWholeModel);
  CHECK(verified->passed);
  CHECK(verified->original_runs == 1);
  CHECK(verified->rewritten_runs == 1);
  REQUIRE(!verified->outputs.empty());

  // The numbers are those of running both models explicitly on the same inputs.
  ExecutorOptions eo;
  eo.seed = 9;
  auto a = Executor::create(migan.original, eo);
  REQUIRE(a.ok());
  eo.inputs = a->creation_inputs();
  auto b = Executor::create(migan.rewritten, eo);
  REQUIRE(b.ok());
  auto ya = a->run(eo.inputs);
  auto yb = b->run(eo.inputs);
  REQUIRE(ya.ok());
  REQUIRE(yb.ok());
  const ComparisonReport expected = compare_outputs(yb.value(), ya.value(), vo.tolerances);
  REQUIRE(expected.outputs.size() == verified->outputs.size());
  for (size_t k = 0; k < expected.outputs.size(); ++k) {
    CHECK(verified->outputs[k].name == expected.outputs[k].name);
    CHECK(verified->outputs[k].max_abs_error == expected.outputs[k].max_abs_error);
    CHECK(verified->outputs[k].scale == expected.outputs[k].scale);
  }
}

TEST_CASE(
    "Verification refuses models whose graph inputs or outputs differ in name, type or number before running them, "
    "and only note another order",
    "[verify]") {
  // Outputs are compared by name, so each of these computed the same values and passed; but a caller feeding 'x'
  // or reading outputs by position gets something else from the other model.
  const auto with = [](const std::string& input, const std::string& outputs, const std::string& extra) {
    auto m = parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]> g (float[1,2,4,4] " + input + ") => (" + outputs +
                              ") {\n  y = Conv <pads = [1, 1, 1, 1]> (" + input + ", w)\n  z = Relu (y)\n" + extra + "}");
    add_initializer(m, "w", {2, 2, 3, 3}, 4);
    return m;
  };
  const auto original = with("x", "float y, float z", "");
  const struct {
    const char* what;
    onnx::ModelProto other;
    const char* difference;
  } cases[] = {
      {"an extra output", with("x", "float y, float z, float e", "  e = Neg (y)\n"),
       "the rewritten model has a graph output the original lacks: 'e'"},
      {"the input renamed", with("x2", "float y, float z", ""),
       "graph input 'x' is missing from the rewritten model, which has 'x2' instead"},
      {"the output declared with other dims", with("x", "float y, float[1,2,4,4] z", ""),
       "graph output 'z' has another type in the rewritten model (FLOAT[] in the original, FLOAT[1,2,4,4] in the rewritten model)"},
  };
  auto same = verify_models(original, original, {});
  REQUIRE(same.ok());
  CHECK(same->passed);
  for (const auto& c : cases) {
    INFO(c.what);
    auto r = verify_models(original, c.other, {});
    INFO((r.ok() ? r->summary() : r.error().message));
    REQUIRE(r.ok());
    CHECK(r->mode == VerifyMode::kWholeModel);
    CHECK_FALSE(r->passed);
    CHECK_THAT(r->difference, Catch::Contains(c.difference));
    CHECK(r->outputs.empty());  // refused before any output was compared
    CHECK_THAT(r->summary(), Catch::Contains("the models differ in their graph inputs or outputs"));
    CHECK_THAT(r->summary(), Catch::Contains("nothing was run"));
  }
  // The same outputs listed in another order are matched by name: the same model, with a note for positional callers.
  const auto swapped = with("x", "float z, float y", "");
  auto r = verify_models(original, swapped, {});
  REQUIRE(r.ok());
  CHECK(r->passed);
  CHECK(r->outputs.size() == 2);
  CHECK_THAT(interface_order_note(original, swapped),
             Catch::Contains("the graph outputs are listed in another order ('y', 'z' in the original, 'z', 'y' in the rewritten model)"));
  CHECK(interface_order_note(original, original).empty());
}

TEST_CASE("Verification of a float64 model fails naming the node and DOUBLE in both modes, never passing a float32 check",
          "[verify][f64]") {
  // (x + 1e10) - 1e10 against x * 0: in float32 both are 0 for |x| < 512, so the pair passed.
  // A float64 graph input is refused before anything runs (its values would be rounded to float32 on the way in);
  // a float input cast to float64 inside reaches the executor, which refuses the DOUBLE node.
  auto in_double = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (double[1,2,3,3] x) => (double[1,2,3,3] z) {\n  z = Neg (x)\n}");
  auto refused = verify_models(in_double, in_double, {});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().kind == core::ErrorKind::kCannotVerify);
  CHECK_THAT(refused.error().message, Catch::StartsWith("graph input 'x' is DOUBLE: inputs are held in float32 here"));
  auto original = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (double[1,2,3,3] z) {\n  xd = Cast <to = 11> (x)\n"
      "  big = Constant <value = double[1] {1e10}> ()\n  a = Add (xd, big)\n  z = Sub (a, big)\n}");
  auto other = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (double[1,2,3,3] z) {\n  xd = Cast <to = 11> (x)\n"
      "  zero = Constant <value = double[1] {0.0}> ()\n  z = Mul (xd, zero)\n}");
  auto whole = verify_models(original, other, {});
  REQUIRE_FALSE(whole.ok());
  CHECK(whole.error().kind == core::ErrorKind::kCannotVerify);
  CHECK_THAT(whole.error().message,
             Catch::StartsWith("the original model cannot run whole: Cast producing 'xd': writes 'xd', which is DOUBLE: "
                               "the executor holds float64 values in float32") &&
                 Catch::EndsWith("; and no rewritten upsampler of the main graph can be checked on its own"));

  // Per-node mode runs the upsampler through the executor too: a float64 ConvTranspose is not checked in float32.
  auto deconv = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (double[1,2,6,6] y) {\n"
      "  xd = Cast <to = 11> (x)\n  a = Hardmax <axis = 1> (xd)\n"
      "  y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (a, w)\n}");
  auto w = onnx_io::make_tensor("w", onnx::TensorProto::DOUBLE, {2, 1, 4, 4}, random_values(32, 3), /*raw=*/false);
  *deconv.mutable_graph()->add_initializer() = w;
  deconv.mutable_graph()->mutable_node(2)->set_name("up");
  onnx::ModelProto rewritten = deconv;
  auto result = rewrite::rewrite_model(rewritten, {});
  REQUIRE(result.ok());
  REQUIRE(result->rewritten == 1);
  auto per_node = verify_models(deconv, rewritten, {});
  REQUIRE_FALSE(per_node.ok());
  CHECK(per_node.error().kind == core::ErrorKind::kCannotVerify);
  CHECK_THAT(per_node.error().message, Catch::StartsWith("the original model cannot run whole: Hardmax") &&
                                           Catch::Contains("; and ConvTranspose 'up': reads '") &&
                                           Catch::Contains("', which is DOUBLE: the executor holds float64 values in float32"));
}

TEST_CASE("A NaN or infinity in either model's run is not compared whole: the executor does not keep NaN", "[verify][non_finite]") {
  // MODEL y = Sqrt(x) * 1 is NaN where x < 0; OTHER y = Where(Relu(x) == 0, -inf, Sqrt(Relu(x))) is -inf there (its -inf
  // is -(3e38 * 3e38), folded: this ONNX text parser reads no inf literal). XNNPACK's
  // Mul clamps NaN to -inf, so the two compared equal. After a Relu both are 0 in the executor,
  // where ONNX Runtime gives NaN and 0: no output holds a non-finite value, yet the runs are not the models'.
  const auto model = [](const std::string& body, const std::string& inits = "") {
    return parse_model_text("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1,3,4,5] x) => (float[1,3,4,5] y)" + inits + " {\n" +
                            body + "}");
  };
  const auto nan_model = model("  s = Sqrt (x)\n  one = Constant <value = float[1] {1.0}> ()\n  y = Mul (s, one)\n");
  const auto inf_model = model(
      "  r = Relu (x)\n  zero = Constant <value = float[1] {0.0}> ()\n  c = Equal (r, zero)\n"
      "  big = Constant <value = float[1] {3e38}> ()\n  square = Mul (big, big)\n  ninf = Neg (square)\n"
      "  s = Sqrt (r)\n  y = Where (c, ninf, s)\n");
  const auto laundered = model("  s = Sqrt (x)\n  one = Constant <value = float[1] {1.0}> ()\n  m = Mul (s, one)\n  y = Relu (m)\n");
  const auto clean = model("  r = Relu (x)\n  s = Sqrt (r)\n  y = Relu (s)\n");
  const struct {
    const char* what;
    const onnx::ModelProto& original;
    const onnx::ModelProto& other;
    const char* side;
    const char* first;
  } cases[] = {
      {"NaN against -inf", nan_model, inf_model, "original", "Sqrt producing 's' writes NaN to 's' at element "},
      {"-inf against NaN", inf_model, nan_model, "original", "Mul producing 'square' writes inf to 'square' at element 0 [0]"},
      {"NaN made finite by a Relu", laundered, clean, "original", "Sqrt producing 's' writes NaN to 's' at element "},
      {"a clean original against NaN", clean, laundered, "rewritten", "Sqrt producing 's' writes NaN to 's' at element "},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto r = verify_models(c.original, c.other, {});
    INFO((r.ok() ? r->summary() : r.error().message));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == core::ErrorKind::kCannotVerify);
    CHECK_THAT(r.error().message,
               Catch::StartsWith(std::string("the ") + c.side + " model cannot be compared whole: " + c.first) &&
                   Catch::Contains("; the executor cannot compare non-finite values faithfully (XNNPACK's output clamps do "
                                   "not keep NaN") &&
                   Catch::EndsWith("; and no rewritten upsampler of the main graph can be checked on its own"));
  }
  // The same random inputs hold no negative x for the clean pair: it is compared whole and passes.
  auto same = verify_models(clean, clean, {});
  REQUIRE(same.ok());
  CHECK(same->mode == VerifyMode::kWholeModel);
  CHECK(same->passed);
}

namespace {

// A depthwise ConvTranspose 'up' whose output goes through Log (NaN wherever it is negative: whole-model mode cannot
// compare it, so verification runs per node), and the tool's rewrite of it.
struct LogTailPair {
  onnx::ModelProto original;
  onnx::ModelProto rewritten;
  rewrite::RewriteResult result;
};

LogTailPair log_tail_pair() {
  LogTailPair p;
  p.original = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (float[1,2,6,6] z) {\n"
      "  y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n"
      "  z = Log (y)\n}");
  add_initializer(p.original, "w", {2, 1, 4, 4}, 7);
  p.original.mutable_graph()->mutable_node(0)->set_name("up");
  p.rewritten = p.original;
  auto result = rewrite::rewrite_model(p.rewritten, {});
  REQUIRE(result.ok());
  REQUIRE(result->rewritten == 1);
  p.result = std::move(*result);
  return p;
}

}  // namespace

TEST_CASE("A correct rewrite whose model computes a NaN is verified per node, with the NaN as the reason", "[verify][non_finite]") {
  // Log of the upsampled values is NaN wherever they are negative: whole-model mode cannot compare it, but every node
  // outside the rewritten ConvTranspose is the same in both models, and the ConvTranspose is checked on its own.
  auto pair = log_tail_pair();
  const onnx::ModelProto& original = pair.original;
  onnx::ModelProto& rewritten = pair.rewritten;
  auto r = verify_models(original, rewritten, {});
  INFO((r.ok() ? r->summary() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->mode == VerifyMode::kPerNode);
  CHECK_THAT(r->mode_reason, Catch::StartsWith("the original model cannot be compared whole: Log producing 'z' writes NaN to 'z' "
                                               "at element ") &&
                                 Catch::Contains("the executor cannot compare non-finite values faithfully"));
  CHECK(r->passed);
  REQUIRE(r->nodes.size() == 1);
  CHECK(r->nodes[0].node == "ConvTranspose 'up'");
  CHECK(r->nodes[0].passed);

  // A rewrite that is wrong inside the region still fails there.
  for (auto& init : *rewritten.mutable_graph()->mutable_initializer()) {
    if (init.data_type() != onnx::TensorProto::FLOAT || init.float_data_size() + static_cast<int>(init.raw_data().size()) == 0) continue;
    if (init.name().find("phase") == std::string::npos) continue;
    if (init.float_data_size() > 0) init.set_float_data(0, init.float_data(0) + 0.5f);
    else {
      std::string raw = init.raw_data();
      float v;
      std::memcpy(&v, raw.data(), 4);
      v += 0.5f;
      std::memcpy(raw.data(), &v, 4);
      init.set_raw_data(raw);
    }
    break;
  }
  auto wrong = verify_models(original, rewritten, {});
  REQUIRE(wrong.ok());
  CHECK(wrong->mode == VerifyMode::kPerNode);
  CHECK_FALSE(wrong->passed);
}

TEST_CASE("Per-node mode checks the regions the rewrite recorded, and fails where the graphs do not confirm them",
          "[verify][per_node][record]") {
  auto pair = log_tail_pair();
  const onnx::ModelProto& original = pair.original;
  onnx::ModelProto& rewritten = pair.rewritten;
  const rewrite::RewriteResult* result = &pair.result;
  const core::ReplacedRegion& region = result->nodes.at(0).region;
  CHECK(region.input == "x");
  CHECK(region.output == "y");
  CHECK(region.nodes == std::vector<std::string>{"y"});

  // The record and the graphs agree: the same upsampler, read from the same input.
  const auto recorded = replacements_from_record(original, {region});
  REQUIRE(recorded.size() == 1);
  CHECK(recorded[0].node == &original.graph().node(0));
  // The record itself, as the rewrite wrote it: the one region type, not a copy of some of its fields.
  CHECK(recorded[0].input == "x");
  CHECK(recorded[0].output == "y");
  CHECK(recorded[0].nodes == std::vector<std::string>{"y"});
  CHECK(record_difference(recorded, find_replacements(original, rewritten)).empty());

  VerifyOptions options;
  options.regions = std::vector<core::ReplacedRegion>{region};
  auto r = verify_models(original, rewritten, options);
  INFO((r.ok() ? r->summary() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->mode == VerifyMode::kPerNode);
  CHECK(r->passed);
  REQUIRE(r->nodes.size() == 1);

  // A record that names another input, or leaves the upsampler out, is not confirmed: per-node mode fails, naming it.
  core::ReplacedRegion wrong_input = region;
  wrong_input.input = "w";
  options.regions = std::vector<core::ReplacedRegion>{wrong_input};
  auto lied = verify_models(original, rewritten, options);
  REQUIRE(lied.ok());
  CHECK_FALSE(lied->passed);
  CHECK_THAT(lied->difference, Catch::Contains("recorded ConvTranspose 'up'") && Catch::Contains("as reading 'w'"));
  options.regions = std::vector<core::ReplacedRegion>{};
  auto missing = verify_models(original, rewritten, options);
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->passed);
  CHECK_THAT(missing->difference, Catch::Contains("which the rewrite did not record"));
  core::ReplacedRegion elsewhere = region;
  elsewhere.output = "z";
  CHECK_THAT(record_difference(replacements_from_record(original, {elsewhere}), find_replacements(original, rewritten)),
             Catch::Contains("still computes 'z'"));
}
