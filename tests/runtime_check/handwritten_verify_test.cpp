// Per-node verification of hand-written upsamplers: a rewritten nearest x mask form is checked region
// by region, where the original's region is what the rewritten model no longer has, and any tampering with the
// rewritten region, with a node outside it, or with what the original's region holds fails the check.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "examples/migan.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "runtime_check/graph_match.h"
#include "runtime_check/verify.h"
#include "tests/rewrite/nearest_conv_fixtures.h"
#include "tests/rewrite/upsampler_fixtures.h"

using namespace dwdeconv;
using runtime_check::VerifyMode;

namespace {

// `model` with a Hardmax reading `output` as an extra graph output: Hardmax is outside the executor's set, so
// neither model runs whole and verification takes the per-node path.
onnx::ModelProto with_hardmax(onnx::ModelProto model, const std::string& output) {
  auto* node = model.mutable_graph()->add_node();
  node->set_op_type("Hardmax");
  node->set_name("hardmax");
  node->add_input(output);
  node->add_output("hard");
  *node->add_attribute() = onnx_io::make_int_attribute("axis", 1);
  model.mutable_graph()->add_output()->set_name("hard");
  return model;
}

// The tool's rewrite of `original`, every upsampler of which is a nearest x mask form it replaces.
onnx::ModelProto rewritten_copy(const onnx::ModelProto& original, int expected_rewrites) {
  const auto out = test::rewrite_copy(original);
  REQUIRE(out.result.rewritten == expected_rewrites);
  for (const auto& n : out.result.nodes) CHECK(n.summary.form == "nearest_mask");
  REQUIRE(test::count_ops(out.model.graph(), "Resize") == 0);
  REQUIRE(test::count_ops(out.model.graph(), "DepthToSpace") == expected_rewrites);
  return out.model;
}

runtime_check::VerifyResult verify(const onnx::ModelProto& original, const onnx::ModelProto& rewritten) {
  auto r = runtime_check::verify_models(original, rewritten, {});
  INFO((r.ok() ? r->summary() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->mode == VerifyMode::kPerNode);
  return *r;
}

// The small form (b) of tests/rewrite: X [1,3,5,4], mask through Identity, pads through PyTorch's 8-op chain, a bias.
onnx::ModelProto small_mask_model() {
  test::MaskSpec spec;
  spec.bias = true;
  return with_hardmax(test::mask_model(spec), "Y");
}

onnx::NodeProto& producer_of(onnx::ModelProto& model, const std::string& output) {
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.output_size() > 0 && node.output(0) == output) return node;
  }
  FAIL("no node produces " << output);
  throw;
}

// Adds `clip = Clip(input, -bound, bound)` to `model` and returns the Clip's output name.
std::string add_clip(onnx::ModelProto& model, const std::string& input, const std::string& name, float bound) {
  auto& g = *model.mutable_graph();
  *g.add_initializer() = onnx_io::make_tensor(name + "_lo", onnx::TensorProto::FLOAT, {}, {-bound}, true);
  *g.add_initializer() = onnx_io::make_tensor(name + "_hi", onnx::TensorProto::FLOAT, {}, {bound}, true);
  auto* clip = g.add_node();
  clip->set_op_type("Clip");
  clip->set_name(name);
  clip->add_input(input);
  clip->add_input(name + "_lo");
  clip->add_input(name + "_hi");
  clip->add_output(name + "_out");
  return name + "_out";
}

// Graph order must stay topological for the checker-free models built here: moves the last node before `before`.
void move_last_before(onnx::ModelProto& model, const std::string& before) {
  auto& nodes = *model.mutable_graph()->mutable_node();
  int at = 0;
  while (at < nodes.size() && (nodes.Get(at).output_size() == 0 || nodes.Get(at).output(0) != before)) ++at;
  REQUIRE(at < nodes.size());
  for (int k = nodes.size() - 1; k > at; --k) nodes.SwapElements(k, k - 1);
}

}  // namespace

TEST_CASE("Per-node verify passes a rewritten nearest x mask upsampler, checking it against its own region", "[verify][handwritten]") {
  const auto original = small_mask_model();
  const auto rewritten = rewritten_copy(original, 1);
  const auto r = verify(original, rewritten);
  CHECK(r.passed);
  CHECK(r.difference.empty());
  REQUIRE(r.nodes.size() == 1);
  CHECK(r.nodes[0].node == "Conv 'up1'");
  CHECK(r.nodes[0].input_shape == std::vector<int64_t>{1, 3, 5, 4});
  CHECK(r.nodes[0].expected == "the original region on the reference kernels");
  // The original's region: Resize, Identity, Mul, the 8-op pads chain (15 nodes with its Constants), Pad, Conv.
  CHECK(r.nodes[0].original_nodes == 20);
  CHECK_THAT(r.nodes[0].original_placement, Catch::Contains("Resize 1"));
  CHECK_THAT(r.nodes[0].rewritten_placement, Catch::Contains("DepthToSpace 1") && Catch::Contains("Conv 4"));
  CHECK(r.nodes[0].rewritten.max_abs_error < 1e-5);
  CHECK(r.nodes[0].runs == 3);  // each side once, and the original region once more on the reference kernels
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].name == "Y");
  CHECK(r.outputs[0].scale > 0.1);  // a real signal was compared
}

TEST_CASE("Per-node verify passes the examples' MI-GAN-like form (b) after rewriting", "[verify][handwritten]") {
  const auto original = with_hardmax(examples::make_migan(64, examples::UpsampleForm::kHandWritten, 8, 1), "rgb");
  const auto rewritten = rewritten_copy(original, 8);
  const auto r = verify(original, rewritten);
  CHECK(r.passed);
  CHECK(r.difference.empty());
  REQUIRE(r.nodes.size() == 8);
  for (const auto& n : r.nodes) {
    CHECK_THAT(n.node, Catch::StartsWith("Conv '"));
    CHECK(n.rewritten.passed);
    CHECK(n.rewritten.scale > 0);
  }
}

TEST_CASE("Per-node verify fails a tampered rewrite of a hand-written upsampler", "[verify][handwritten]") {
  const auto original = small_mask_model();
  const auto honest = rewritten_copy(original, 1);

  SECTION("a phase weight changed") {
    auto bad = honest;
    // The first phase Conv's weight: an initializer the rewrite derived from the flipped filter.
    const onnx::NodeProto* phase = nullptr;
    for (const auto& node : bad.graph().node()) {
      if (node.op_type() == "Conv" && phase == nullptr) phase = &node;
    }
    REQUIRE(phase != nullptr);
    const std::string weight = phase->input(1);
    bool changed = false;
    for (auto& init : *bad.mutable_graph()->mutable_initializer()) {
      if (init.name() != weight) continue;
      auto values = onnx_io::to_doubles(init);
      REQUIRE(values.ok());
      values.value()[0] += 0.25;
      init = onnx_io::make_tensor(init.name(), init.data_type(), onnx_io::dims_of(init), values.value(), true);
      changed = true;
    }
    REQUIRE(changed);
    const auto r = verify(original, bad);
    CHECK_FALSE(r.passed);
    CHECK(r.difference.empty());  // structurally fine: the numbers catch it
    REQUIRE(r.nodes.size() == 1);
    CHECK(r.nodes[0].original.passed);
    CHECK_FALSE(r.nodes[0].rewritten.passed);
    CHECK(r.nodes[0].rewritten.max_abs_error > 0.01);
  }

  SECTION("a node outside the region changed") {
    auto bad = honest;
    producer_of(bad, "hard").mutable_attribute(0)->set_i(2);
    const auto r = verify(original, bad);
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.difference, Catch::Contains("Hardmax 'hardmax'") && Catch::Contains("attribute 'axis'"));
    CHECK(r.nodes.empty());
  }

  SECTION("an extra Clip in the rewritten region") {
    // Between DepthToSpace and Y, where the small random inputs of per-node mode never reach the bound.
    auto bad = honest;
    producer_of(bad, "Y").set_output(0, "d2s");
    const std::string clipped = add_clip(bad, "d2s", "guard", 20);
    producer_of(bad, clipped).set_output(0, "Y");
    move_last_before(bad, "hard");
    const auto r = verify(original, bad);
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.difference, Catch::Contains("Clip 'guard'") && Catch::Contains("region that replaces Conv 'up1'") &&
                                 Catch::Contains("not one the rewrite emits"));
  }
}

TEST_CASE("Per-node verify refuses an original region it cannot check on its own", "[verify][handwritten][graph_match]") {
  const auto clean = small_mask_model();
  const auto rewritten = rewritten_copy(clean, 1);

  SECTION("an op outside the upsampler forms in the original's region") {
    // Clip(-20, 20) between Resize and Mul: it changes nothing on per-node mode's inputs, so only the structure shows it.
    auto clipped = clean;
    const std::string out = add_clip(clipped, "u", "hidden", 20);
    move_last_before(clipped, "m");
    producer_of(clipped, "m").set_input(0, out);
    const auto r = verify(clipped, rewritten);
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.difference, Catch::Contains("Clip 'hidden' in the original's upsampler that ends at Conv 'up1'") &&
                                 Catch::Contains("not an op of the upsampler forms"));
  }

  SECTION("a region that reads two activations") {
    // The mask is a graph input: the region reads X and it. Both models declare the input, so only the region differs.
    auto two = clean;
    auto other = rewritten;
    for (auto* model : {&two, &other}) {
      auto* in = model->mutable_graph()->add_input();
      in->set_name("mask_in");
      in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
      for (int64_t d : {1, 1, 10, 8}) in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    }
    producer_of(two, "m").set_input(1, "mask_in");
    const auto replaced = runtime_check::find_replacements(two, other);
    REQUIRE(replaced.size() == 1);
    CHECK(replaced[0].input.empty());
    const auto r = verify(two, other);
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.difference, Catch::Contains("reads 2 activations ('X', 'mask_in')"));
  }

  SECTION("Mul reading x's values twice is not affine") {
    auto square = clean;
    producer_of(square, "m").set_input(1, "u");
    auto& nodes = *square.mutable_graph()->mutable_node();  // the mask's Identity, now read by nothing
    nodes.erase(std::find_if(nodes.begin(), nodes.end(), [](const onnx::NodeProto& n) { return n.op_type() == "Identity"; }));
    const auto r = verify(square, rewritten);
    CHECK_FALSE(r.passed);
    CHECK_THAT(r.difference, Catch::Contains("Mul producing 'm'") && Catch::Contains("through 2 inputs"));
  }
}

TEST_CASE("find_replacements names each replaced upsampler's one activation input", "[graph_match][handwritten]") {
  const auto original = small_mask_model();
  const auto rewritten = rewritten_copy(original, 1);
  const auto replaced = runtime_check::find_replacements(original, rewritten);
  REQUIRE(replaced.size() == 1);
  CHECK(replaced[0].output == "Y");
  CHECK(replaced[0].input == "X");
  CHECK(replaced[0].bias == "B");
  CHECK(replaced[0].label == "Conv 'up1'");
  CHECK(replaced[0].problem.empty());
  CHECK(runtime_check::difference_outside_replacements(original, rewritten, replaced).empty());
  // A model compared with itself replaces nothing.
  CHECK(runtime_check::find_replacements(original, original).empty());
}

TEST_CASE("Per-node mode takes an input shape for a hand-written upsampler's input inside the graph", "[verify][handwritten]") {
  // The graph input has symbolic dims and X = Relu(input) inside the graph: shape inference cannot tell X's dims,
  // so per-node mode asks for them by X's name, and that name must then be accepted.
  test::MaskSpec spec;
  auto original = test::mask_model(spec);
  auto& g = *original.mutable_graph();
  auto* shape = g.mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  g.mutable_input(0)->set_name("image");
  for (int axis : {2, 3}) shape->mutable_dim(axis)->set_dim_param(axis == 2 ? "h" : "w");
  auto* relu = g.add_node();
  relu->set_op_type("Relu");
  relu->add_input("image");
  relu->add_output("X");
  for (int k = g.node_size() - 1; k > 0; --k) g.mutable_node()->SwapElements(k, k - 1);
  const auto rewritten = rewritten_copy(original, 1);

  auto unknown = runtime_check::verify_models(original, rewritten, {});
  REQUIRE_FALSE(unknown.ok());
  // The hint names the graph input, whose dims the user knows, and not the inner tensor.
  CHECK_THAT(unknown.error().message, Catch::Contains("give the graph input's dims, --input-shape image=") &&
                                          Catch::Contains("x<h>x<w> (with the numbers it runs at)") && !Catch::Contains("X="));
  // And fixing the graph input is enough: inference reaches X.
  runtime_check::VerifyOptions by_input;
  by_input.input_shapes["image"] = {1, 3, 5, 4};
  auto fixed = runtime_check::verify_models(original, rewritten, by_input);
  INFO((fixed.ok() ? fixed->summary() : fixed.error().message));
  REQUIRE(fixed.ok());
  CHECK(fixed->passed);

  runtime_check::VerifyOptions options;
  options.input_shapes["X"] = {1, 3, 5, 4};
  auto r = runtime_check::verify_models(original, rewritten, options);
  INFO((r.ok() ? r->summary() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->mode == VerifyMode::kPerNode);
  CHECK(r->passed);
  REQUIRE(r->nodes.size() == 1);
  CHECK(r->nodes[0].input_shape == std::vector<int64_t>{1, 3, 5, 4});

  // A name that is no graph input and no upsampler's input stays a usage error.
  options.input_shapes = {{"u", {1, 3, 10, 8}}};
  auto typo = runtime_check::verify_models(original, rewritten, options);
  REQUIRE_FALSE(typo.ok());
  CHECK(typo.error().kind == core::ErrorKind::kUsage);
}

TEST_CASE("Per-node mode refuses an input shape that contradicts the dims shape inference knows", "[verify][handwritten]") {
  // X = Relu(image) with image [1,3,5,4]: X's dims are known, so a shape given for X may not change them, or the
  // upsampler would be checked on an input it never gets.
  test::MaskSpec spec;
  auto original = test::mask_model(spec);
  auto& g = *original.mutable_graph();
  g.mutable_input(0)->set_name("image");
  auto* relu = g.add_node();
  relu->set_op_type("Relu");
  relu->add_input("image");
  relu->add_output("X");
  for (int k = g.node_size() - 1; k > 0; --k) g.mutable_node()->SwapElements(k, k - 1);
  original = with_hardmax(original, "Y");
  const auto rewritten = rewritten_copy(original, 1);

  runtime_check::VerifyOptions options;
  options.input_shapes["X"] = {1, 3, 5, 4};  // what inference says: accepted
  auto same = runtime_check::verify_models(original, rewritten, options);
  INFO((same.ok() ? same->summary() : same.error().message));
  REQUIRE(same.ok());
  CHECK(same->mode == VerifyMode::kPerNode);
  CHECK(same->passed);

  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{2, 3, 5, 4}, std::vector<int64_t>{1, 3, 5, 4, 1}}) {
    options.input_shapes["X"] = dims;
    auto other = runtime_check::verify_models(original, rewritten, options);
    INFO((other.ok() ? other->summary() : other.error().message));
    REQUIRE_FALSE(other.ok());
    CHECK(other.error().kind == core::ErrorKind::kUsage);
    CHECK_THAT(other.error().message, Catch::Contains("--input-shape X=") && Catch::Contains("1x3x5x4"));
  }
}

namespace {

// small_mask_model() with its Resize, Identity and Mul (X -> m) replaced by `nodes`, which must compute the same m
// (zero insertion by 2 at offset 0): the same function, spelled as another hand-written form.
onnx::ModelProto respelled(const std::string& nodes, const std::vector<onnx::TensorProto>& constants) {
  auto model = small_mask_model();
  const auto spelled =
      test::parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1,3,5,4] X) => (float[1,3,10,8] m) {\n" + nodes + "}\n");
  auto& g = *model.mutable_graph();
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (const auto& node : g.node()) {
    if (node.op_type() == "Resize") {
      for (const auto& n : spelled.graph().node()) *kept.Add() = n;
    } else if (node.op_type() != "Identity" && node.op_type() != "Mul") {
      *kept.Add() = node;
    }
  }
  *g.mutable_node() = kept;
  for (const auto& t : constants) *g.add_initializer() = t;
  return model;
}

}  // namespace

TEST_CASE("Per-node verify finds the region of other hand-written spellings of the same upsampler", "[verify][handwritten]") {
  // The rewrite of the nearest x mask form stands for the rewrite of each spelling below: they compute the same Y
  // from X. The regions are found structurally, whatever recogniser wrote the rewrite.
  const auto rewritten = rewritten_copy(small_mask_model(), 1);
  std::vector<double> one_tap;
  for (int c = 0; c < 3; ++c) one_tap.insert(one_tap.end(), {1, 0, 0, 0});

  SECTION("zero insertion by a ConvTranspose with one tap") {
    const auto original = respelled("  m = ConvTranspose <group = 3, strides = [2, 2]> (X, zw)\n",
                                    {onnx_io::make_tensor("zw", onnx::TensorProto::FLOAT, {3, 1, 2, 2}, one_tap, true)});
    const auto replaced = runtime_check::find_replacements(original, rewritten);
    REQUIRE(replaced.size() == 1);  // the Conv; the inner ConvTranspose's output is gone, not recomputed
    CHECK(replaced[0].label == "Conv 'up1'");
    CHECK(replaced[0].input == "X");
    const auto r = verify(original, rewritten);
    CHECK(r.passed);
    REQUIRE(r.nodes.size() == 1);
    CHECK(r.nodes[0].original_nodes == 18);  // ConvTranspose, the 15-node pads chain, Pad, Conv
    CHECK(r.nodes[0].expected == "the original region on the reference kernels");
  }

  SECTION("zero insertion by Reshape, Pad, Reshape (StyleGAN2's upfirdn2d)") {
    const auto original = respelled("  r6 = Reshape (X, shape6)\n  z6 = Pad (r6, pads6)\n  m = Reshape (z6, shape4)\n",
                                    {onnx_io::make_int64_tensor("shape6", {6}, {1, 3, 5, 1, 4, 1}),
                                     onnx_io::make_int64_tensor("pads6", {12}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}),
                                     onnx_io::make_int64_tensor("shape4", {4}, {1, 3, 10, 8})});
    const auto r = verify(original, rewritten);
    CHECK(r.passed);
    REQUIRE(r.nodes.size() == 1);
    CHECK(r.nodes[0].original_nodes == 20);  // Reshape, Pad, Reshape, the pads chain, Pad, Conv
  }

  SECTION("and a spelling that is not the same upsampler fails") {
    // Zero insertion at offset (1, 1) instead of (0, 0): a shifted output.
    std::vector<double> shifted;
    for (int c = 0; c < 3; ++c) shifted.insert(shifted.end(), {0, 0, 0, 1});
    const auto original = respelled("  m = ConvTranspose <group = 3, strides = [2, 2]> (X, zw)\n",
                                    {onnx_io::make_tensor("zw", onnx::TensorProto::FLOAT, {3, 1, 2, 2}, shifted, true)});
    const auto r = verify(original, rewritten);
    CHECK_FALSE(r.passed);
    CHECK(r.difference.empty());
    REQUIRE(r.nodes.size() == 1);
    CHECK(r.nodes[0].original.passed);
    CHECK_FALSE(r.nodes[0].rewritten.passed);
  }
}

namespace {

// `model` with graph input X's H and W symbolic.
onnx::ModelProto with_symbolic_x(onnx::ModelProto model) {
  for (auto& input : *model.mutable_graph()->mutable_input()) {
    if (input.name() != "X") continue;
    auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->mutable_dim(2)->set_dim_param("H");
    shape->mutable_dim(3)->set_dim_param("W");
  }
  return model;
}

runtime_check::VerifyOptions at_shape(const std::vector<int64_t>& dims) {
  runtime_check::VerifyOptions options;
  options.input_shapes["X"] = dims;
  return options;
}

}  // namespace

TEST_CASE("Per-node mode refuses an original region whose output size a constant fixes while its input's size may vary",
          "[verify][handwritten][symbolic]") {
  // Checked at one input size, a region whose output a constant fixes agrees there with a replacement whose output
  // follows x, and nowhere else: Resize to sizes 6x8 and the rewrite's 2H x 2W agree at 3x4 only (ONNX Runtime at
  // H = 2: 6x8 and 4x8). With static dims the same pair is checked and passes.
  test::NearestConvSpec spec;
  spec.by_sizes = true;
  spec.c_in = spec.c_out = spec.group = 4;
  const auto static_original = with_hardmax(test::nearest_conv_model(spec), "Y");
  const auto out = test::rewrite_copy(static_original);
  REQUIRE(out.result.rewritten == 1);
  const auto checked = verify(static_original, out.model);
  CHECK(checked.passed);

  const auto original = with_symbolic_x(static_original);
  const auto rewritten = with_symbolic_x(out.model);
  const auto r = runtime_check::verify_models(original, rewritten, at_shape({1, 4, 3, 4}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == core::ErrorKind::kCannotVerify);
  CHECK_THAT(r.error().message, Catch::Contains("Resize producing 'u' in the original's upsampler that ends at Conv 'up1' reads sizes "
                                                "'sizes', which fix its output size whatever the size of its input 'X' (1x4xHxW in "
                                                "the model)") &&
                                    Catch::Contains("per-node mode checks the region at one size of 'X' (1x4x3x4, where the model has "
                                                    "1x4xHxW)"));
}

TEST_CASE("Per-node mode refuses a literal crop or reshape on an axis whose size may vary, and passes what follows x",
          "[verify][handwritten][symbolic]") {
  // A Slice ending at 10 on H is a no-op at H = 5 and a crop for every larger input; a Reshape to literal dims fits
  // one size. The nearest x mask form's own region (a Resize by scales, a mask, pads) is checked as before.
  const auto rewritten_static = rewritten_copy(small_mask_model(), 1);
  const auto rewritten = with_symbolic_x(rewritten_static);
  std::vector<double> one_tap;
  for (int c = 0; c < 3; ++c) one_tap.insert(one_tap.end(), {1, 0, 0, 0});
  const auto zw = onnx_io::make_tensor("zw", onnx::TensorProto::FLOAT, {3, 1, 2, 2}, one_tap, true);

  SECTION("the nearest x mask form itself") {
    const auto r = runtime_check::verify_models(with_symbolic_x(small_mask_model()), rewritten, at_shape({1, 3, 5, 4}));
    INFO((r.ok() ? r->summary() : r.error().message));
    REQUIRE(r.ok());
    CHECK(r->mode == VerifyMode::kPerNode);
    CHECK(r->passed);
  }
  SECTION("a Slice that ends at a literal") {
    const auto original = respelled("  m0 = ConvTranspose <group = 3, strides = [2, 2]> (X, zw)\n  m = Slice (m0, st, en, ax)\n",
                                    {zw, onnx_io::make_int64_tensor("st", {1}, {0}), onnx_io::make_int64_tensor("en", {1}, {10}),
                                     onnx_io::make_int64_tensor("ax", {1}, {2})});
    CHECK(verify(original, rewritten_static).passed);  // static X: one size, checked
    const auto r = runtime_check::verify_models(with_symbolic_x(original), rewritten, at_shape({1, 3, 5, 4}));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == core::ErrorKind::kCannotVerify);
    CHECK_THAT(r.error().message, Catch::Contains("Slice producing 'm' in the original's upsampler that ends at Conv 'up1' ends at 10 on "
                                                  "axis 2, and its input 'm0' is ") &&
                                      Catch::Contains("it crops any larger input to that size"));
  }
  SECTION("a Reshape to literal dims") {
    const auto original = respelled("  r6 = Reshape (X, shape6)\n  z6 = Pad (r6, pads6)\n  m = Reshape (z6, shape4)\n",
                                    {onnx_io::make_int64_tensor("shape6", {6}, {1, 3, 5, 1, 4, 1}),
                                     onnx_io::make_int64_tensor("pads6", {12}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}),
                                     onnx_io::make_int64_tensor("shape4", {4}, {1, 3, 10, 8})});
    CHECK(verify(original, rewritten_static).passed);
    const auto r = runtime_check::verify_models(with_symbolic_x(original), rewritten, at_shape({1, 3, 5, 4}));
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("Reshape producing 'r6' in the original's upsampler that ends at Conv 'up1' reshapes to "
                                                  "[1,3,5,1,4,1], and its input 'X' is 1x3xHxW in the model: a literal dim there is one "
                                                  "size for every input size"));
  }
}
