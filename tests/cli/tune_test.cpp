// --tune's decisions (cli/tune.h) applied by a second rewrite, without timing anything: the figures are given, so
// the rule is tested on what it does with them, not on this machine's speed.
#include <catch2/catch.hpp>

#include "cli/tune.h"
#include "onnx_io/tensor.h"
#include "tests/support/model_builder.h"

namespace dwdeconv::test {
namespace {

// MI-GAN's older zero insertion: a one-tap depthwise ConvTranspose 'ins', a constant Pad and a 4x4 depthwise Conv
// 'up1', which the rewrite folds into one k4 s2 upsampler (form zero_insertion) named after the Conv.
onnx::ModelProto zero_insertion_fold() {
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,5,4] X) => (float[1,3,10,8] Y) {
  z = ConvTranspose <group = 3, strides = [2, 2], kernel_shape = [2, 2]> (X, V)
  p = Pad <mode = "constant"> (z, pads)
  Y = Conv <group = 3, kernel_shape = [4, 4]> (p, W)
})");
  auto& g = *m.mutable_graph();
  std::vector<double> v(12, 0.0);
  for (int c = 0; c < 3; ++c) v[static_cast<size_t>(c * 4)] = 1.0;  // tap (0, 0) of each channel
  *g.add_initializer() = onnx_io::make_tensor("V", onnx::TensorProto::FLOAT, {3, 1, 2, 2}, v, true);
  *g.add_initializer() = onnx_io::make_int64_tensor("pads", {8}, {0, 0, 2, 2, 0, 0, 1, 1});
  set_random_initializer(g, "W", onnx::TensorProto::FLOAT, {3, 1, 4, 4}, 31);
  name_node(m, "Y", "up1");
  name_node(m, "z", "ins");
  return m;
}

cli::TuneFigure figure(const std::string& name, double speedup) {
  cli::TuneFigure f;
  f.name = name;
  f.graph_path = "main";
  f.input_shape = "1x3x5x4";
  f.original_ms = 1.0;
  f.rewritten_ms = 1.0 / speedup;
  f.speedup = speedup;
  f.rewritten = speedup >= 1.0;
  return f;
}

const rewrite::NodeReport* row(const rewrite::RewriteResult& r, const std::string& name) {
  for (const auto& n : r.nodes) {
    if (n.summary.name == name) return &n;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("the second rewrite of --tune keeps a zero_insertion fold it measured slower, and its ConvTranspose too, untimed",
          "[cli][tune]") {
  const auto original = zero_insertion_fold();
  rewrite::RewriteOptions ro;
  auto first_model = original;
  auto first = rewrite::rewrite_model(first_model, ro);
  REQUIRE(first.ok());
  REQUIRE(first->nodes.size() == 1);  // the fold absorbed the ConvTranspose: one row
  REQUIRE(first->nodes[0].summary.form == "zero_insertion");
  REQUIRE(first->nodes[0].rewritten);

  cli::RuntimeInfo where;
  where.label = "ONNX Runtime 1.32.0 (CPU provider)";
  SECTION("measured slower: nothing is rewritten, the ConvTranspose the fold had absorbed included") {
    auto model = original;
    ro.caller_keep = cli::tune_keep_rule(*first, {figure("up1", 0.44)}, where);
    auto second = rewrite::rewrite_model(model, ro);
    REQUIRE(second.ok());
    CHECK(second->rewritten == 0);
    const auto* fold = row(*second, "up1");
    const auto* deconv = row(*second, "ins");
    REQUIRE(fold != nullptr);
    REQUIRE(deconv != nullptr);
    CHECK_FALSE(fold->rewritten);
    CHECK_THAT(fold->reason, Catch::Contains("--tune: measured 0.44x alone on ONNX Runtime 1.32.0"));
    CHECK(deconv->summary.form == "conv_transpose");
    CHECK_FALSE(deconv->rewritten);
    CHECK_THAT(deconv->reason, Catch::Contains("--tune: not timed alone"));
    CHECK(model.SerializeAsString() == original.SerializeAsString());
    CHECK(count_ops(model.graph(), "ConvTranspose") == 1);
  }
  SECTION("measured faster: the fold is rewritten as the target decides, in one piece") {
    auto model = original;
    ro.caller_keep = cli::tune_keep_rule(*first, {figure("up1", 1.7)}, where);
    auto second = rewrite::rewrite_model(model, ro);
    REQUIRE(second.ok());
    CHECK(second->rewritten == 1);
    CHECK(second->nodes.size() == 1);
    CHECK(count_ops(model.graph(), "ConvTranspose") == 0);
    CHECK(count_ops(model.graph(), "DepthToSpace") == 1);
  }
  SECTION("not timed: kept, saying why") {
    auto model = original;
    auto untimed = figure("up1", 1.0);
    untimed.not_timed = "the input's shape is not known";
    untimed.rewritten = false;
    ro.caller_keep = cli::tune_keep_rule(*first, {untimed}, where);
    auto second = rewrite::rewrite_model(model, ro);
    REQUIRE(second.ok());
    CHECK(second->rewritten == 0);
    REQUIRE(row(*second, "up1") != nullptr);
    CHECK_THAT(row(*second, "up1")->reason, Catch::Contains("not timed alone (the input's shape is not known)"));
  }
}

TEST_CASE("tune: --tune cuts out an upsampler whose weight a shared-weight Identity passes on, and times it", "[cli][tune]") {
  // torch writes `Wd_shared = Identity(Wd)` when two layers share one weight: 'up2' reads the Identity's output, which
  // the cut-out region must define too (it said "tensor 'Wd_shared' is read but never defined" and kept 'up2').
  auto original = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,4,6,6] X) => (float[1,4,24,24] Y) {
  a = ConvTranspose <group = 4, strides = [2, 2], pads = [1, 1, 1, 1], kernel_shape = [4, 4]> (X, Wd)
  Wd_shared = Identity (Wd)
  Y = ConvTranspose <group = 4, strides = [2, 2], pads = [1, 1, 1, 1], kernel_shape = [4, 4]> (a, Wd_shared)
})");
  set_random_initializer(*original.mutable_graph(), "Wd", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 32);
  name_node(original, "a", "up1");
  name_node(original, "Y", "up2");
  rewrite::RewriteOptions ro;
  auto rewritten = original;
  auto first = rewrite::rewrite_model(rewritten, ro);
  REQUIRE(first.ok());
  REQUIRE(first->rewritten == 2);
  cli::Options opt;
  opt.runs = 1;
  cli::RuntimeInfo where;
  auto figures = cli::tune_upsamplers(original, rewritten, *first, ro, opt, {}, where);
  REQUIRE(figures.ok());
  REQUIRE(figures->size() == 2);
  for (const auto& f : *figures) {
    CAPTURE(f.name, f.not_timed);
    CHECK(f.not_timed.empty());
    CHECK(f.input_shape == (f.name == "up1" ? "1x4x6x6" : "1x4x12x12"));
    CHECK(f.original_ms > 0);
    CHECK(f.rewritten_ms > 0);
  }
}

}  // namespace dwdeconv::test
