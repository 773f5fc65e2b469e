// difference_outside_replacements: the structural match per-node verification relies on. The tool's own rewrite
// matches; any change outside the rewritten nodes, or a rewritten node per-node mode cannot check, is named.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "rewrite/rewriter.h"
#include "runtime_check/graph_match.h"
#include "runtime_check/verify.h"
#include "tests/runtime_check/test_models.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv;
using namespace dwdeconv::runtime_check;
using namespace dwdeconv::runtime_check::testing;

namespace {

onnx::ModelProto rewritten(const onnx::ModelProto& original, const rewrite::RewriteOptions& options = {}) {
  onnx::ModelProto model = original;
  auto result = rewrite::rewrite_model(model, options);
  INFO((result.ok() ? std::string() : result.error().message));
  REQUIRE(result.ok());
  REQUIRE(result->rewritten > 0);
  return model;
}

// The upsamplers of the original whose outputs `other` computes some other way, as per-node mode finds them.
std::vector<Replacement> replaced(const onnx::ModelProto& original, const onnx::ModelProto& other) {
  return find_replacements(original, other);
}

std::string difference(const onnx::ModelProto& original, const onnx::ModelProto& other) {
  return difference_outside_replacements(original, other, replaced(original, other));
}

onnx::NodeProto& producer_of(onnx::ModelProto& model, const std::string& output) {
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.output_size() > 0 && node.output(0) == output) return node;
  }
  FAIL("no node produces " << output);
  throw;
}

// The weight is a Constant node that another node reads too, so it stays; the rewrite adds its phase weights
// as Constant nodes and keeps the original one for the Abs.
onnx::ModelProto shared_constant_model() {
  std::string values;
  for (int k = 0; k < 32; ++k) values += (k ? ", " : "") + std::to_string(0.03125 * k - 0.5);
  return parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (float[1,2,6,6] y, float[2,1,4,4] w_abs, float[1,2,6,6] s) {\n"
      "  w = Constant <value = float[2,1,4,4] {" +
      values +
      "}> ()\n"
      "  y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n"
      "  w_abs = Abs (w)\n"
      "  s = Softmax <axis = 1> (y)\n"
      "}");
}

}  // namespace

TEST_CASE("The tool's own rewrite matches outside its rewritten nodes, even where it keeps a shared weight", "[graph_match]") {
  const auto original = shared_constant_model();
  const auto other = rewritten(original);
  REQUIRE(replaced(original, other).size() == 1);
  CHECK(difference(original, other).empty());

  // The same values in another storage form (typed field instead of raw_data) are the same constant.
  auto k_model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (float[1,2,6,6] y) {\n"
      "  u = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n"
      "  y = Add (u, k)\n"
      "}");
  add_initializer(k_model, "w", {2, 1, 4, 4}, 1);
  const auto k_values = add_initializer(k_model, "k", {1, 2, 1, 1}, 2);
  auto k_other = rewritten(k_model);
  for (auto& init : *k_other.mutable_graph()->mutable_initializer()) {
    if (init.name() == "k") init = onnx_io::make_tensor("k", onnx::TensorProto::FLOAT, {1, 2, 1, 1}, k_values, /*raw=*/false);
  }
  CHECK(difference(k_model, k_other).empty());

  // Before IR 4 every initializer is a graph input too, so the rewrite lists its phase weights as inputs.
  auto ir3 = parse_model_text(
      "<ir_version: 3, opset_import: [\"\" : 9]>\n"
      "g (float[1,2,3,3] x, float[2,1,4,4] w) => (float[1,2,6,6] y) {\n"
      "  y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n"
      "}");
  add_initializer(ir3, "w", {2, 1, 4, 4}, 5);
  const auto ir3_other = rewritten(ir3);
  REQUIRE(ir3_other.graph().input_size() > 2);
  CHECK(difference(ir3, ir3_other).empty());

  // A ConvTranspose the rewrite kept is an ordinary node, compared like any other.
  auto two = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (float[1,2,12,12] y) {\n"
      "  u = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n"
      "  y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (u, w)\n"
      "}");
  add_initializer(two, "w", {2, 1, 4, 4}, 4);
  rewrite::RewriteOptions skip_y;
  skip_y.skip = {"y"};
  auto one_kept = rewritten(two, skip_y);
  REQUIRE(replaced(two, one_kept).size() == 1);
  CHECK(difference(two, one_kept).empty());
  producer_of(one_kept, "y").mutable_attribute(0)->set_i(1);  // the kept node's group
  CHECK_THAT(difference(two, one_kept), Catch::Contains("ConvTranspose producing 'y': attribute"));
}

TEST_CASE("A change outside the rewritten nodes is named", "[graph_match]") {
  const auto original = shared_constant_model();
  const auto honest = rewritten(original);

  auto axis = honest;
  producer_of(axis, "s").mutable_attribute(0)->set_i(-1);
  CHECK_THAT(difference(original, axis), Catch::Contains("Softmax producing 's'") && Catch::Contains("attribute 'axis'"));

  auto kept_weight = honest;  // the Constant the Abs still reads
  producer_of(kept_weight, "w").mutable_attribute(0)->mutable_t()->set_raw_data(std::string(32 * 4, '\0'));
  producer_of(kept_weight, "w").mutable_attribute(0)->mutable_t()->clear_float_data();
  CHECK_THAT(difference(original, kept_weight), Catch::Contains("Constant producing 'w'") && Catch::Contains("attribute 'value'"));

  auto extra = honest;
  auto* dead = extra.mutable_graph()->add_node();
  dead->set_op_type("Relu");
  dead->add_input("x");
  dead->add_output("dead");
  CHECK_THAT(difference(original, extra), Catch::Contains("has a node the original lacks") && Catch::Contains("Relu producing 'dead'"));

  auto rewired = honest;
  producer_of(rewired, "w_abs").set_input(0, "x");
  CHECK_THAT(difference(original, rewired), Catch::Contains("Abs producing 'w_abs' reads ('w') in the original, ('x')"));

  auto input_type = honest;
  input_type.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::DOUBLE);
  CHECK_THAT(difference(original, input_type), Catch::Contains("graph input 'x' has another type"));

  auto opset = honest;
  opset.mutable_opset_import(0)->set_version(17);
  CHECK_THAT(difference(original, opset), Catch::Contains("opset imports"));
}

TEST_CASE("A ConvTranspose rewritten inside a subgraph is a difference: per-node mode cannot check it", "[graph_match]") {
  auto original = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x, bool c) => (float[1,2,6,6] y, float[1,2,6,6] z) {\n"
      "  y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n"
      "  z = If (c) <then_branch = g1 () => (float[1,2,6,6] t) {\n"
      "                t = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n"
      "              }, else_branch = g2 () => (float[1,2,6,6] e) {\n"
      "                e = Identity (y)\n"
      "              }>\n"
      "}");
  add_initializer(original, "w", {2, 1, 4, 4}, 3);
  const auto other = rewritten(original);
  REQUIRE(replaced(original, other).size() == 1);  // the main graph's only
  CHECK_THAT(difference(original, other), Catch::Contains("ConvTranspose producing 't' in attribute 'then_branch' of If producing 'z'") &&
                                              Catch::Contains("per-node mode checks only the main graph's ConvTranspose nodes"));
}

namespace {

// A lone stride-2 deconv whose rewrite has phase Convs, a Concat and a DepthToSpace, plus `extra` nodes after it.
onnx::ModelProto lone_deconv(const std::string& extra = "") {
  auto model = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (float[1,2,6,6] y) {\n"
      "  y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n" +
      extra + "}");
  add_initializer(model, "w", {2, 1, 4, 4}, 6);
  return model;
}

void add_scalar(onnx::ModelProto& model, const std::string& name, float value) {
  *model.mutable_graph()->add_initializer() = onnx_io::make_tensor(name, onnx::TensorProto::FLOAT, {}, {value}, /*raw=*/true);
}

}  // namespace

TEST_CASE("A rewritten region holds only the ops the emitter writes, in its forms", "[graph_match]") {
  const auto original = lone_deconv();
  const auto honest = rewritten(original);
  REQUIRE(difference(original, honest).empty());

  // The reviewer's cases: a Clip on x before the phase Convs, and one between DepthToSpace and y. Per-node mode
  // feeds small inputs, on which a Clip(-1, 1) or Clip(-20, 20) changes nothing, so only the structure shows them.
  auto clip_in = honest;
  for (auto& node : *clip_in.mutable_graph()->mutable_node()) {
    if (node.op_type() == "Conv" && node.input(0) == "x") node.set_input(0, "x_clipped");
  }
  auto* clip = clip_in.mutable_graph()->add_node();
  clip->set_op_type("Clip");
  clip->set_name("up_guard");
  clip->add_input("x");
  clip->add_input("lo");
  clip->add_input("hi");
  clip->add_output("x_clipped");
  add_scalar(clip_in, "lo", -1);
  add_scalar(clip_in, "hi", 1);
  CHECK_THAT(difference(original, clip_in), Catch::Contains("Clip 'up_guard'") && Catch::Contains("ConvTranspose producing 'y'") &&
                                                Catch::Contains("not one the rewrite emits"));

  auto clip_out = honest;
  producer_of(clip_out, "y").set_output(0, "d2s");
  auto* clip2 = clip_out.mutable_graph()->add_node();
  clip2->set_op_type("Clip");
  clip2->add_input("d2s");
  clip2->add_input("lo");
  clip2->add_input("hi");
  clip2->add_output("y");
  add_scalar(clip_out, "lo", -20);
  add_scalar(clip_out, "hi", 20);
  CHECK_THAT(difference(original, clip_out), Catch::Contains("Clip producing 'y'") && Catch::Contains("not one the rewrite emits"));

  // Emitted ops in forms the emitter never writes.
  // (CRD is emitted too now, for ExecuTorch; a CRD without its Gather is left to the numeric check. Every axis 0-4 is
  // emitted somewhere, axis 2 for a 1-D signal's edge samples; a negative axis never.)
  auto on_h = honest;
  for (auto& node : *on_h.mutable_graph()->mutable_node()) {
    if (node.op_type() != "Concat") continue;
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.name() == "axis") attr.set_i(-1);
    }
  }
  CHECK_THAT(difference(original, on_h),
             Catch::Contains("Concat") && Catch::Contains("replaces ConvTranspose producing 'y'") && Catch::Contains("'axis'"));
  auto gather_by_x = honest;
  {
    auto* g = gather_by_x.mutable_graph();
    auto& d2s = producer_of(gather_by_x, "y");
    auto* gather = g->add_node();
    gather->set_op_type("Gather");
    gather->add_input(d2s.input(0));
    gather->add_input("idx_from_x");
    gather->add_output("gathered");
    d2s.set_input(0, "gathered");
    auto* shape = g->add_node();
    shape->set_op_type("Shape");
    shape->add_input("x");
    shape->add_output("idx_from_x");
  }
  CHECK_THAT(difference(original, gather_by_x), Catch::Contains("Gather") && Catch::Contains("not a constant"));

  auto dilated = honest;
  for (auto& node : *dilated.mutable_graph()->mutable_node()) {
    if (node.op_type() == "Conv") *node.add_attribute() = onnx_io::make_ints_attribute("dilations", {2, 2});
  }
  CHECK_THAT(difference(original, dilated), Catch::Contains("Conv") && Catch::Contains("'dilations'"));

  auto strided = honest;
  for (auto& node : *strided.mutable_graph()->mutable_node()) {
    for (auto& attr : *node.mutable_attribute()) {
      if (node.op_type() == "Conv" && attr.name() == "strides") attr.set_ints(0, 2);
    }
  }
  CHECK_THAT(difference(original, strided), Catch::Contains("Conv") && Catch::Contains("'strides'"));

  // A Conv whose weight is computed from x is not linear in x.
  auto square = honest;
  for (auto& node : *square.mutable_graph()->mutable_node()) {
    if (node.op_type() == "Conv") node.set_input(1, node.input(0));
  }
  CHECK_THAT(difference(original, square), Catch::Contains("Conv") && Catch::Contains("weight"));

  // --explicit-pad's Pad nodes are emitted ones; a reflecting Pad is not.
  rewrite::RewriteOptions explicit_pad;
  explicit_pad.emit.explicit_pad = true;
  const auto padded = rewritten(original, explicit_pad);
  REQUIRE(std::any_of(padded.graph().node().begin(), padded.graph().node().end(), [](const auto& n) { return n.op_type() == "Pad"; }));
  CHECK(difference(original, padded).empty());
  auto reflect = padded;
  for (auto& node : *reflect.mutable_graph()->mutable_node()) {
    if (node.op_type() == "Pad") *node.add_attribute() = onnx_io::make_string_attribute("mode", "reflect");
  }
  CHECK_THAT(difference(original, reflect), Catch::Contains("Pad") && Catch::Contains("'mode'"));
}

TEST_CASE("Bias-only phases' Shape and ConstantOfShape are emitted ops", "[graph_match]") {
  auto original = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (float[1,2,6,6] y) {\n"
      "  y = ConvTranspose <group = 2, strides = [2, 2], output_padding = [1, 1]> (x, w, b)\n"
      "}");
  add_initializer(original, "w", {2, 1, 1, 1}, 7);
  add_initializer(original, "b", {2}, 8);
  const auto other = rewritten(original);
  REQUIRE(std::any_of(other.graph().node().begin(), other.graph().node().end(),
                      [](const auto& n) { return n.op_type() == "ConstantOfShape"; }));
  CHECK(difference(original, other).empty());
  auto ones = other;
  for (auto& node : *ones.mutable_graph()->mutable_node()) {
    if (node.op_type() == "ConstantOfShape") node.mutable_attribute(0)->mutable_t()->set_raw_data(std::string("\0\0\x80\x3f", 4));
  }
  CHECK_THAT(difference(original, ones), Catch::Contains("ConstantOfShape") && Catch::Contains("'value'"));
}

TEST_CASE("An original region that reads x's values other than as data is not affine: per-node mode refuses it", "[graph_match][verify]") {
  // Original: Y = Conv(float(int64(x))), i.e. Conv(trunc(x)), which is Conv(0) on per-node mode's inputs in [-1, 1).
  // Other: Y = Pad(Conv(x, zeros, b)), only its bias: the same numbers there, and different ones for |x| >= 1.
  // Hardmax (outside the executor's set) sends verification to per-node mode.
  auto original = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,4,4] x) => (float[1,2,4,4] y, float[1,2,4,4] h) {\n"
      "  i = Cast <to = 7> (x)\n  t = Cast <to = 1> (i)\n"
      "  y = Conv <pads = [1, 1, 1, 1]> (t, w, b)\n  h = Hardmax <axis = 1> (y)\n}");
  add_initializer(original, "w", {2, 2, 3, 3}, 1);
  add_initializer(original, "b", {2}, 2);
  auto other = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,4,4] x) => (float[1,2,4,4] y, float[1,2,4,4] h) {\n"
      "  c = Conv <pads = [1, 1, 1, 1]> (x, zero, b)\n  y = Pad (c, pads)\n"
      "  h = Hardmax <axis = 1> (y)\n}");
  *other.mutable_graph()->add_initializer() =
      onnx_io::make_tensor("zero", onnx::TensorProto::FLOAT, {2, 2, 3, 3}, std::vector<double>(36, 0.0), true);
  *other.mutable_graph()->add_initializer() = original.graph().initializer(1);
  add_int64_initializer(other, "pads", std::vector<int64_t>(8, 0));
  REQUIRE(replaced(original, other).size() == 1);
  CHECK(replaced(original, other)[0].input == "x");
  CHECK_THAT(difference(original, other), Catch::Contains("Cast producing 'i'") && Catch::Contains("to a float type"));
  auto verified = verify_models(original, other, {});
  REQUIRE(verified.ok());
  CHECK(verified->mode == VerifyMode::kPerNode);
  CHECK_FALSE(verified->passed);
  CHECK(verified->nodes.empty());  // refused before any number was compared

  // x's values as a Gather's indices (a lookup table), not as its data.
  auto lookup = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (int64[1,2,4,4] x) => (float[1,2,4,4] y) {\n"
      "  t = Gather (table, x)\n  y = Conv <pads = [1, 1, 1, 1]> (t, w, b)\n}");
  add_initializer(lookup, "table", {5}, 3);
  add_initializer(lookup, "w", {2, 2, 3, 3}, 1);
  add_initializer(lookup, "b", {2}, 2);
  auto lookup_other = other;
  lookup_other.mutable_graph()->mutable_node()->RemoveLast();  // the Hardmax
  lookup_other.mutable_graph()->mutable_output()->RemoveLast();
  *lookup_other.mutable_graph()->mutable_input(0) = lookup.graph().input(0);
  REQUIRE(replaced(lookup, lookup_other).size() == 1);
  CHECK_THAT(difference(lookup, lookup_other), Catch::Contains("Gather producing 't'") && Catch::Contains("input 1"));
}

TEST_CASE("A rewritten region reads exactly the original upsampler's input, plus constants", "[graph_match]") {
  // c = Clip(x, -1, 1) is a node both models have (its output is a graph output). An OTHER whose phase Convs read c
  // instead of x used to pass per-node mode: its inputs lie in [-1, 1), where the Clip changes nothing.
  auto original = parse_model_text(
      "<ir_version: 8, opset_import: [\"\" : 13]>\n"
      "g (float[1,2,3,3] x) => (float[1,2,6,6] y, float[1,2,3,3] c) {\n"
      "  lo = Constant <value = float {-1}> ()\n"
      "  hi = Constant <value = float {1}> ()\n"
      "  c = Clip (x, lo, hi)\n"
      "  y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)\n"
      "}");
  add_initializer(original, "w", {2, 1, 4, 4}, 7);
  auto other = rewritten(original);
  REQUIRE(difference(original, other).empty());
  size_t redirected = 0;
  for (auto& node : *other.mutable_graph()->mutable_node()) {
    if (node.op_type() != "Conv" && node.op_type() != "Pad") continue;
    for (auto& in : *node.mutable_input()) {
      if (in == "x") {
        in = "c";
        ++redirected;
      }
    }
  }
  REQUIRE(redirected > 0);
  CHECK_THAT(difference(original, other), Catch::Contains("reads 'c', which is neither that upsampler's input 'x' nor a constant"));
}

TEST_CASE("The rewrite's record of each region is what matching the graphs finds, on every example and fixture", "[graph_match][record]") {
  const std::string source = test::source_dir();
  size_t checked = 0;
  for (const char* file : {"examples/migan_tiny_deconv.onnx", "examples/migan_tiny_handwritten.onnx", "examples/upsampler_small.onnx",
                           "tests/fixtures/migan_nearest_scatternd_32_opset13.onnx", "tests/fixtures/migan_nearest_sizes_32_opset13.onnx",
                           "tests/fixtures/fastdepth_upconv_opset13.onnx", "tests/fixtures/upfirdn2d_literal_ends_opset13.onnx",
                           "tests/fixtures/nearest_mask_scatternd_opset13.onnx"}) {
    CAPTURE(file);
    auto original = onnx_io::load_model(source + "/" + file);
    REQUIRE(original.ok());
    onnx::ModelProto model = original.value();
    auto result = rewrite::rewrite_model(model, {});
    REQUIRE(result.ok());
    REQUIRE(result->rewritten > 0);
    std::set<std::string> original_outputs, rewritten_outputs;
    for (const auto& n : original->graph().node()) original_outputs.insert(n.output().begin(), n.output().end());
    for (const auto& n : model.graph().node()) rewritten_outputs.insert(n.output().begin(), n.output().end());
    std::vector<core::ReplacedRegion> regions;
    for (const auto& n : result->nodes) {
      if (!n.rewritten || n.summary.graph_path != "main") continue;
      CAPTURE(n.summary.name);
      // Each recorded node is one of the original's that the rewritten model no longer has, its output first.
      REQUIRE_FALSE(n.region.nodes.empty());
      CHECK(n.region.nodes.front() == n.region.output);
      for (const auto& name : n.region.nodes) {
        CHECK(original_outputs.count(name) == 1);
        if (name != n.region.output) CHECK(rewritten_outputs.count(name) == 0);
      }
      regions.push_back(n.region);
    }
    REQUIRE_FALSE(regions.empty());
    const auto recorded = replacements_from_record(*original, regions);
    CHECK(record_difference(recorded, find_replacements(*original, model)) == "");
    for (const auto& r : recorded) CHECK(r.problem.empty());
    checked += regions.size();
  }
  CHECK(checked >= 30);
}
