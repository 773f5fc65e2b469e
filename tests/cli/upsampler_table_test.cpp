// The per-upsampler table (cli/upsampler_table.h) on profiles written by hand in the shape ONNX Runtime 1.32 gives
// them (ort_adapter.profile_nodes: each kernel of its optimised graph with the values it reads and writes). The
// expected times are sums worked out from the lists below, so a kernel counted for the wrong row, or not at all,
// changes them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "cli/upsampler_table.h"
#include "onnx_io/tensor.h"
#include "tests/support/model_builder.h"

namespace dwdeconv::test {
namespace {

using cli::NodeMs;
using cli::NodeValues;
using cli::UpsamplerTime;

// A model and its rewrite (the xnnpack target), as --bench has them.
struct Rewritten {
  onnx::ModelProto original;
  onnx::ModelProto rewritten;
  rewrite::RewriteResult result;
};

Rewritten rewrite_of(onnx::ModelProto original) {
  Rewritten r{original, original, {}};
  auto result = rewrite::rewrite_model(r.rewritten, rewrite::RewriteOptions{});
  REQUIRE(result.ok());
  r.result = *result;
  return r;
}

// MI-GAN's and SD's upsampler: a nearest x2 Resize and a dense 3x3 Conv 'conv' (form nearest_conv), then `tail`.
// The xnnpack target rewrites it into conv_phase_{0,1}_{0,1} (x -> conv_phase_i_j_out), conv_concat
// (-> conv_concat_out) and a DepthToSpace 'conv' writing cv. `names` name nodes by output before the rewrite.
Rewritten nearest_conv_then(const std::string& tail, const std::string& extra_inputs = "",
                            const std::vector<std::pair<std::string, std::string>>& names = {{"r", "resize"}, {"cv", "conv"}}) {
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,8,8] x)" + extra_inputs +
                       R"() => (float[1,4,16,16] y) {
  r = Resize <mode = "nearest"> (x, , scales)
  cv = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (r, wc, bc)
)" + tail + "\n}");
  auto& g = *m.mutable_graph();
  *g.add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, {1.0, 1.0, 2.0, 2.0}, true);
  set_random_initializer(g, "wc", onnx::TensorProto::FLOAT, {4, 4, 3, 3}, 2);
  set_random_initializer(g, "bc", onnx::TensorProto::FLOAT, {4}, 3);
  for (const auto& [output, name] : names) name_node(m, output, name);
  auto r = rewrite_of(m);
  REQUIRE(r.result.rewritten == 1);
  const std::string conv = find_producer(r.original.graph(), "cv")->name();
  for (const char* phase : {"_phase_0_0", "_phase_0_1", "_phase_1_0", "_phase_1_1", "_concat"}) {
    CAPTURE(phase);
    REQUIRE(find_producer(r.rewritten.graph(), conv + phase + "_out") != nullptr);
  }
  REQUIRE(find_producer(r.rewritten.graph(), "cv")->op_type() == "DepthToSpace");
  return r;
}

// The rewritten nearest_conv as ORT 1.32 runs it: its layout transformer reorders x once, runs the four phases and the
// Concat in NCHWc and reorders the Concat's output back (ms 0.05 + 4 x 0.3 + 0.1 + 0.06 + DepthToSpace 0.2 = 1.61).
std::vector<NodeMs> rewritten_nearest_conv_kernels() {
  return {{"ReorderInput", "ReorderInput", 0.05, {"x"}, {"reorder_token_0"}},
          {"conv_phase_0_0_out_nchwc", "Conv", 0.3, {"reorder_token_0", "reorder_token_6", "bc"}, {"reorder_token_7"}},
          {"conv_phase_0_1_out_nchwc", "Conv", 0.3, {"reorder_token_0", "reorder_token_4", "bc"}, {"reorder_token_5"}},
          {"conv_phase_1_0_out_nchwc", "Conv", 0.3, {"reorder_token_0", "reorder_token_2", "bc"}, {"reorder_token_3"}},
          {"conv_phase_1_1_out_nchwc", "Conv", 0.3, {"reorder_token_0", "reorder", "bc"}, {"reorder_token_1"}},
          {"conv_concat", "Concat", 0.1, {"reorder_token_7", "reorder_token_5", "reorder_token_3", "reorder_token_1"}, {"reorder_token_8"}},
          {"ReorderOutput", "ReorderOutput", 0.06, {"reorder_token_8"}, {"conv_concat_out"}},
          {"conv", "DepthToSpace", 0.2, {"conv_concat_out"}, {"cv"}}};
}

std::vector<UpsamplerTime> times(const Rewritten& r, const std::vector<NodeMs>& original, const std::vector<NodeMs>& rewritten,
                                 NodeValues values = NodeValues::kOnnx) {
  return cli::upsampler_times(r.original, r.rewritten, r.result, original, rewritten, {}, values);
}

}  // namespace

TEST_CASE("upsampler table: ORT's Conv fused with the Relu after it is timed with that Relu on both sides, not dropped",
          "[cli][upsampler_table]") {
  // The issue's case: the original's Conv and Relu are one NCHWc kernel named after the Relu's output (y_nchwc), which
  // matches no node of the upsampler by name; by name the row was resize + its reorder = 0.30 ms against 1.61 ms,
  // 0.19x. The kernel reads r (the Resize's output, through a reorder) and writes y (through ReorderOutput): it
  // computes the Conv and the Relu, so the row times the Relu on both sides.
  const auto r = nearest_conv_then("  y = Relu (cv)", "", {{"r", "resize"}, {"cv", "conv"}, {"y", "act"}});
  const std::vector<NodeMs> original = {{"resize", "Resize", 0.25, {"x", "", "scales"}, {"r"}},
                                        {"ReorderInput", "ReorderInput", 0.05, {"r"}, {"reorder_token_0"}},
                                        {"y_nchwc", "Conv", 2.0, {"reorder_token_0", "reorder", "bc"}, {"reorder_token_1"}},
                                        {"ReorderOutput", "ReorderOutput", 0.04, {"reorder_token_1"}, {"y"}}};
  auto rewritten = rewritten_nearest_conv_kernels();
  rewritten.push_back({"act", "Relu", 0.15, {"cv"}, {"y"}});
  const auto rows = times(r, original, rewritten);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].name == "conv");
  CHECK(rows[0].not_attributable.empty());
  CHECK(rows[0].original_ms == Approx(0.25 + 0.05 + 2.0 + 0.04));
  CHECK(rows[0].rewritten_ms == Approx(1.61 + 0.15));
  CHECK(rows[0].timed_with == std::vector<std::string>{"act"});
  CHECK(rows[0].original_ms / rows[0].rewritten_ms > 1.3);  // 2.34 / 1.76, not 0.19x

  SECTION("the table says what the row times besides the upsampler") {
    const std::string text = cli::format_upsampler_times(rows);
    CHECK_THAT(text, Catch::Contains("2.340         1.760   1.33x"));
    CHECK_THAT(text, Catch::Contains("timed with 'act' both ways"));
  }
  SECTION("when the rewritten model runs that Relu in one kernel with a node further on, the row has no edge to time") {
    // Widening the row to the Relu would take in the Mul on one side only: no times, and why.
    const auto r2 =
        nearest_conv_then("  a = Relu (cv)\n  y = Mul (a, a)", "", {{"r", "resize"}, {"cv", "conv"}, {"a", "act"}, {"y", "sq"}});
    const std::vector<NodeMs> fused = {{"resize", "Resize", 0.25, {"x", "", "scales"}, {"r"}},
                                       {"ReorderInput", "ReorderInput", 0.05, {"r"}, {"reorder_token_0"}},
                                       {"a_nchwc", "Conv", 2.0, {"reorder_token_0", "reorder", "bc"}, {"reorder_token_1"}},
                                       {"ReorderOutput", "ReorderOutput", 0.04, {"reorder_token_1"}, {"a"}},
                                       {"sq", "Mul", 0.1, {"a", "a"}, {"y"}}};
    auto unfused = rewritten_nearest_conv_kernels();
    unfused.push_back({"act_sq", "ReluMul", 0.2, {"cv"}, {"y"}});
    const auto rows2 = times(r2, fused, unfused);
    REQUIRE(rows2.size() == 1);
    CHECK_THAT(rows2[0].not_attributable, Catch::Contains("in one kernel with 'y' too, so the layer has no edge both models share"));
    CHECK(std::isnan(rows2[0].rewritten_ms));
  }
  SECTION("with Add and Relu fused in too (NCHWc's Sum and its activation), both are timed with it") {
    const auto r2 = nearest_conv_then("  s = Add (cv, z)\n  y = Relu (s)", ", float[1,4,16,16] z");
    const std::vector<NodeMs> fused = {
        {"resize", "Resize", 0.25, {"x", "", "scales"}, {"r"}},
        {"ReorderInput", "ReorderInput", 0.05, {"r"}, {"reorder_token_0"}},
        {"ReorderInput_token_3", "ReorderInput", 0.05, {"z"}, {"reorder_token_2"}},
        {"cv_nchwc", "Conv", 2.0, {"reorder_token_0", "reorder", "bc", "reorder_token_2"}, {"reorder_token_1"}},
        {"ReorderOutput", "ReorderOutput", 0.04, {"reorder_token_1"}, {"y"}}};
    auto unfused = rewritten_nearest_conv_kernels();
    unfused.push_back({"s", "Add", 0.1, {"cv", "z"}, {"s"}});
    unfused.push_back({"y", "Relu", 0.15, {"s"}, {"y"}});
    const auto rows2 = times(r2, fused, unfused);
    REQUIRE(rows2.size() == 1);
    CHECK(rows2[0].not_attributable.empty());
    CHECK(rows2[0].timed_with == std::vector<std::string>{"s", "y"});  // unnamed: by first output, in graph order
    CHECK(rows2[0].original_ms == Approx(0.25 + 0.05 + 0.05 + 2.0 + 0.04));
    CHECK(rows2[0].rewritten_ms == Approx(1.61 + 0.1 + 0.15));
  }
}

TEST_CASE("upsampler table: a rewritten Conv ORT fuses with the Relu after it times that Relu in the original too",
          "[cli][upsampler_table]") {
  // A stride-1 dilated depthwise ConvTranspose (GTCRN) is rewritten as one Conv 'dil', which ORT fuses with the Relu;
  // the kernel is named after y. By name the rewritten row had no kernel at all (0 ms, ratio '-').
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,8,8] x) => (float[1,4,8,8] y) {
  u = ConvTranspose <group = 4, kernel_shape = [3, 3], dilations = [2, 2], pads = [2, 2, 2, 2]> (x, w, b)
  y = Relu (u)
})");
  set_random_initializer(*m.mutable_graph(), "w", onnx::TensorProto::FLOAT, {4, 1, 3, 3}, 4);
  set_random_initializer(*m.mutable_graph(), "b", onnx::TensorProto::FLOAT, {4}, 5);
  name_node(m, "u", "dil");
  name_node(m, "y", "act");
  const auto r = rewrite_of(m);
  REQUIRE(r.result.rewritten == 1);
  REQUIRE(find_producer(r.rewritten.graph(), "u")->op_type() == "Conv");
  const std::vector<NodeMs> original = {{"dil", "ConvTranspose", 0.3, {"x", "w", "b"}, {"u"}}, {"act", "Relu", 0.1, {"u"}, {"y"}}};
  const std::vector<NodeMs> rewritten = {{"ReorderInput", "ReorderInput", 0.02, {"x"}, {"reorder_token_0"}},
                                         {"y_nchwc", "Conv", 0.08, {"reorder_token_0", "reorder", "b"}, {"reorder_token_1"}},
                                         {"ReorderOutput", "ReorderOutput", 0.02, {"reorder_token_1"}, {"y"}}};
  const auto rows = times(r, original, rewritten);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].not_attributable.empty());
  CHECK(rows[0].timed_with == std::vector<std::string>{"act"});
  CHECK(rows[0].original_ms == Approx(0.4));
  CHECK(rows[0].rewritten_ms == Approx(0.12));
}

TEST_CASE("upsampler table: an unfused upsampler is timed as by name, and the name rule is unchanged", "[cli][upsampler_table]") {
  // No activation: the original's NCHWc Conv is named after cv, which the region writes (ReorderOutput copies it out).
  const auto r = nearest_conv_then("  y = Identity (cv)");
  const std::vector<NodeMs> original = {{"resize", "Resize", 0.25, {"x", "", "scales"}, {"r"}},
                                        {"ReorderInput", "ReorderInput", 0.05, {"r"}, {"reorder_token_0"}},
                                        {"cv_nchwc", "Conv", 2.0, {"reorder_token_0", "reorder", "bc"}, {"reorder_token_1"}},
                                        {"ReorderOutput", "ReorderOutput", 0.04, {"reorder_token_1"}, {"cv"}},
                                        {"y", "Identity", 0.01, {"cv"}, {"y"}}};
  auto rewritten = rewritten_nearest_conv_kernels();
  rewritten.push_back({"y", "Identity", 0.01, {"cv"}, {"y"}});
  for (const auto values : {NodeValues::kOnnx, NodeValues::kNames}) {
    const auto rows = times(r, original, rewritten, values);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].not_attributable.empty());
    CHECK(rows[0].timed_with.empty());
    CHECK(rows[0].original_ms == Approx(2.34));
    CHECK(rows[0].rewritten_ms == Approx(1.61));
  }
}

TEST_CASE("upsampler table: an Identity ORT removes before the upsampler belongs to no kernel", "[cli][upsampler_table]") {
  // x -> Identity -> xi -> the upsampler: ORT drops the Identity, so the Resize's kernel and each rewritten phase's
  // read x. The Identity is no work of theirs: four phases each computing it would look like a profile read wrong.
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,8,8] x) => (float[1,4,16,16] y) {
  xi = Identity (x)
  r = Resize <mode = "nearest"> (xi, , scales)
  y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (r, wc, bc)
})");
  auto& g = *m.mutable_graph();
  *g.add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, {1.0, 1.0, 2.0, 2.0}, true);
  set_random_initializer(g, "wc", onnx::TensorProto::FLOAT, {4, 4, 3, 3}, 2);
  set_random_initializer(g, "bc", onnx::TensorProto::FLOAT, {4}, 3);
  name_node(m, "y", "conv");
  const auto r = rewrite_of(m);
  REQUIRE(r.result.rewritten == 1);
  const std::vector<NodeMs> original = {{"resize", "Resize", 0.25, {"x", "", "scales"}, {"r"}},
                                        {"ReorderInput", "ReorderInput", 0.05, {"r"}, {"reorder_token_0"}},
                                        {"y_nchwc", "Conv", 2.0, {"reorder_token_0", "reorder", "bc"}, {"reorder_token_1"}},
                                        {"ReorderOutput", "ReorderOutput", 0.04, {"reorder_token_1"}, {"y"}}};
  auto rewritten = rewritten_nearest_conv_kernels();
  rewritten.back().outputs = {"y"};  // the DepthToSpace writes the graph output here
  const auto rows = times(r, original, rewritten);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].not_attributable.empty());
  CHECK(rows[0].timed_with.empty());
  CHECK(rows[0].original_ms == Approx(2.34));
  CHECK(rows[0].rewritten_ms == Approx(1.61));
}

TEST_CASE("upsampler table: one kernel computing parts of two upsamplers leaves both rows without times", "[cli][upsampler_table]") {
  auto m = parse_model(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,8,8] x) => (float[1,4,32,32] y) {
  u1 = ConvTranspose <group = 4, strides = [2, 2], pads = [1, 1, 1, 1], kernel_shape = [4, 4]> (x, w1)
  y = ConvTranspose <group = 4, strides = [2, 2], pads = [1, 1, 1, 1], kernel_shape = [4, 4]> (u1, w2)
})");
  set_random_initializer(*m.mutable_graph(), "w1", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 6);
  set_random_initializer(*m.mutable_graph(), "w2", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 7);
  name_node(m, "u1", "up1");
  name_node(m, "y", "up2");
  const auto r = rewrite_of(m);
  REQUIRE(r.result.rewritten == 2);
  // A runtime that ran both ConvTransposes as one kernel 'both', which reads x and writes y.
  const std::vector<NodeMs> original = {{"both", "FusedConvTranspose", 1.0, {"x", "w1", "w2"}, {"y"}}};
  std::vector<NodeMs> rewritten;
  for (const auto& n : r.rewritten.graph().node()) {
    rewritten.push_back({n.name(), n.op_type(), 0.1, {n.input().begin(), n.input().end()}, {n.output().begin(), n.output().end()}});
  }
  const auto rows = times(r, original, rewritten);
  REQUIRE(rows.size() == 2);
  CHECK_THAT(rows[0].not_attributable, Catch::Contains("runs it and upsampler 'up2' in one kernel ('both') in the original model"));
  CHECK_THAT(rows[1].not_attributable, Catch::Contains("runs it and upsampler 'up1' in one kernel ('both') in the original model"));
  for (const auto& row : rows) {
    CHECK(std::isnan(row.original_ms));
    CHECK(std::isnan(row.rewritten_ms));
    CHECK(row.timed_with.empty());
  }
  const std::string text = cli::format_upsampler_times(rows);
  CHECK_THAT(text, Catch::Contains("  up1        conv_transpose          1x4x8x8                     -             -       -\n"
                                   "    not attributable: ONNX Runtime runs it and upsampler 'up2'"));
}

TEST_CASE("upsampler table: a profile without values, or with a kernel listed twice, gives no times, saying why",
          "[cli][upsampler_table]") {
  const auto r = nearest_conv_then("  y = Relu (cv)");
  auto rewritten = rewritten_nearest_conv_kernels();
  rewritten.push_back({"y", "Relu", 0.15, {"cv"}, {"y"}});
  SECTION("no values: ORT could not save its optimised graph") {
    const std::vector<NodeMs> original = {{"resize", "Resize", 0.25, {}, {}}, {"y_nchwc", "Conv", 2.0, {}, {}}};
    const auto rows = times(r, original, rewritten);
    REQUIRE(rows.size() == 1);
    CHECK_THAT(rows[0].not_attributable, Catch::Contains("optimised graph of the original model could not be read back"));
    CHECK(std::isnan(rows[0].original_ms));
  }
  SECTION("the same kernel twice: two kernels claim the Conv, so neither is trusted") {
    const std::vector<NodeMs> original = {{"resize", "Resize", 0.25, {"x", "", "scales"}, {"r"}},
                                          {"conv", "FusedConv", 1.0, {"r", "wc", "bc"}, {"y"}},
                                          {"conv", "FusedConv", 1.0, {"r", "wc", "bc"}, {"y"}}};
    const auto rows = times(r, original, rewritten);
    REQUIRE(rows.size() == 1);
    CHECK_THAT(rows[0].not_attributable,
               Catch::Contains("what ONNX Runtime's kernel 'conv' of the original model computes cannot be told"));
  }
}

TEST_CASE("upsampler table: a kernel's output that only its name explains is read by that name, and only when one node has it",
          "[cli][upsampler_table]") {
  // ORT's NCHWc chain: the Conv's kernel (named after cv) writes a value of its own straight into the Relu's kernel
  // (NCHWc elementwise, keeping the Relu's name); only the last value is copied out. That value of its own stands for
  // cv because the kernel is named "cv_nchwc".
  const auto kernels = [](const std::string& relu) {
    return std::vector<NodeMs>{{"resize", "Resize", 0.25, {"x", "", "scales"}, {"r"}},
                               {"ReorderInput", "ReorderInput", 0.05, {"r"}, {"reorder_token_0"}},
                               {"cv_nchwc", "Conv", 2.0, {"reorder_token_0", "reorder", "bc"}, {"reorder_token_1"}},
                               {relu, "Relu", 0.1, {"reorder_token_1"}, {"reorder_token_2"}},
                               {"ReorderOutput", "ReorderOutput", 0.04, {"reorder_token_2"}, {"y"}}};
  };
  auto rewritten = rewritten_nearest_conv_kernels();
  rewritten.push_back({"act", "Relu", 0.15, {"cv"}, {"y"}});
  SECTION("one node has the name: the Relu's kernel is outside the upsampler, the Conv's inside") {
    const auto r = nearest_conv_then("  y = Relu (cv)", "", {{"r", "resize"}, {"cv", "conv"}, {"y", "act"}});
    const auto rows = times(r, kernels("act"), rewritten);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].not_attributable.empty());
    CHECK(rows[0].timed_with.empty());
    CHECK(rows[0].original_ms == Approx(2.3));
    CHECK(rows[0].rewritten_ms == Approx(1.61));
  }
  SECTION("the Relu is named cv_nchwc too: which node the kernel stands for cannot be told, and the row says so") {
    // Read as the Relu's, the Conv's kernel would seem to compute the Conv and the Relu: a row timed with the Relu.
    const auto r = nearest_conv_then("  y = Relu (cv)", "", {{"r", "resize"}, {"cv", "conv"}, {"y", "cv_nchwc"}});
    auto renamed = rewritten;
    renamed.back().node = "cv_nchwc";
    const auto rows = times(r, kernels("cv_nchwc"), renamed);
    REQUIRE(rows.size() == 1);
    CHECK_THAT(rows[0].not_attributable,
               Catch::Contains("what ONNX Runtime's kernel 'cv_nchwc' of the original model computes cannot be told"));
    CHECK(rows[0].timed_with.empty());
    CHECK(std::isnan(rows[0].original_ms));
  }
}

TEST_CASE("upsampler table: hostile names are matched exactly and shown escaped", "[cli][upsampler_table]") {
  // The Resize is named like ORT's NCHWc kernel ("y_nchwc", which by name stood for the Resize), the upsampler's Conv
  // holds a newline, a quote and a terminal escape, and the Relu a line separator and a bell.
  const std::string evil = "c\nv'\x1b[2J";
  const std::string relu = "a\u2028ct\x07";
  const auto r = nearest_conv_then("  y = Relu (cv)", "", {{"r", "y_nchwc"}, {"cv", evil}, {"y", relu}});
  REQUIRE(find_producer(r.rewritten.graph(), "cv")->name() == evil);  // the rewrite names its nodes after the Conv
  const std::vector<NodeMs> original = {{"y_nchwc", "Resize", 0.25, {"x", "", "scales"}, {"r"}},
                                        {"ReorderInput", "ReorderInput", 0.05, {"r"}, {"reorder_token_0"}},
                                        {"y_nchwc", "Conv", 2.0, {"reorder_token_0", "reorder", "bc"}, {"reorder_token_1"}},
                                        {"ReorderOutput", "ReorderOutput", 0.04, {"reorder_token_1"}, {"y"}}};
  // The rewritten model's nodes as they are, each its own kernel.
  std::vector<NodeMs> rewritten;
  for (const auto& n : r.rewritten.graph().node()) {
    rewritten.push_back({n.name(), n.op_type(), 0.1, {n.input().begin(), n.input().end()}, {n.output().begin(), n.output().end()}});
  }
  const auto rows = times(r, original, rewritten);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].name == evil);
  CHECK(rows[0].not_attributable.empty());
  CHECK(rows[0].timed_with == std::vector<std::string>{relu});  // exact: the report escapes it as JSON
  CHECK(rows[0].original_ms == Approx(2.34));
  CHECK(rows[0].rewritten_ms == Approx(0.1 * static_cast<double>(rewritten.size())));  // every emitted node and the Relu
  const std::string text = cli::format_upsampler_times(rows);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);  // header, row, note: no name breaks a line
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x07') == std::string::npos);
  CHECK_THAT(text, Catch::Contains("c\\x0av'\\x1b[2J"));
  CHECK_THAT(text, Catch::Contains("timed with 'a\\u2028ct\\x07' both ways"));
}

TEST_CASE("upsampler regions are the rewrite's record of each upsampler, its nodes resolved in both models", "[cli][upsampler_table]") {
  // The record (core::ReplacedRegion) read as it is: x the Resize reads, y the Conv writes, the Conv's bias, and the
  // replaced nodes by first output, the upsampler's own Conv first, then the Resize of its form.
  const auto r = nearest_conv_then("  y = Identity (cv)");
  const auto regions = cli::upsampler_regions(r.original, r.rewritten, r.result, {});
  REQUIRE(regions.size() == 1);
  const cli::UpsamplerRegion& region = regions[0];
  CHECK(region.input == "x");
  CHECK(region.output == "cv");
  CHECK(region.bias == "bc");
  CHECK(region.nodes == std::vector<std::string>{"cv", "r"});
  CHECK(region.name == "conv");
  CHECK(region.form == "nearest_conv");
  CHECK(region.input_shape == "1x4x8x8");
  REQUIRE(region.original_nodes.size() == 2);
  CHECK(region.original_nodes[0] == find_producer(r.original.graph(), "cv"));
  CHECK(region.original_nodes[1] == find_producer(r.original.graph(), "r"));
  // Four phase Convs, their Concat and the DepthToSpace that writes cv, as nodes of the rewritten model.
  std::vector<std::string> emitted;
  for (const auto* n : region.emitted_nodes) emitted.push_back(n->op_type());
  std::sort(emitted.begin(), emitted.end());
  CHECK(emitted == std::vector<std::string>{"Concat", "Conv", "Conv", "Conv", "Conv", "DepthToSpace"});
}

}  // namespace dwdeconv::test
