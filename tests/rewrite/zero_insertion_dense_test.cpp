// Zero insertion followed by a dense (or grouped) Conv, FastDepth's UpConv: Unpool (a one-tap depthwise ConvTranspose
// k2 s2) straight into a 5x5 Conv with its own pads, or through a Pad. The fold is the dense ConvTranspose they compute,
// emitted as s*s dense phase Convs on the low-resolution input: each with only the taps that meet a non-zero, about
// 1/s^2 of the Conv's MACs.
#include <catch2/catch.hpp>

#include <algorithm>

#include "rewrite_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;
using onnx::TensorProto;

namespace {

// z = ConvTranspose(X, V) <k2 s2, one tap at [0,0] of gain 1 per channel>, [p = Pad(z)], Y = Conv(z | p, W) <group g>.
onnx::ModelProto unpool_conv_model(int64_t c, int64_t m, int64_t g, bool pad_node) {
  const std::string cs = std::to_string(c), ms = std::to_string(m);
  std::string body = "  z = ConvTranspose <group=" + cs + ", strides=[2,2], kernel_shape=[2,2]> (X, V)\n";
  body += pad_node ? "  p = Pad (z, pads)\n  Y = Conv <group=" + std::to_string(g) + ", kernel_shape=[5,5]> (p, W, B)\n"
                   : "  Y = Conv <group=" + std::to_string(g) + ", kernel_shape=[5,5], pads=[2,2,2,2]> (z, W, B)\n";
  auto model = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1," + cs + ",5,4] X) => (float[1," + ms + ",10,8] Y) {\n" +
                           body + "}\n");
  auto& graph = *model.mutable_graph();
  std::vector<double> v(static_cast<size_t>(c * 4), 0.0);
  for (int64_t i = 0; i < c; ++i) v[static_cast<size_t>(i * 4)] = 1.0;
  *graph.add_initializer() = onnx_io::make_tensor("V", TensorProto::FLOAT, {c, 1, 2, 2}, v, true);
  *graph.add_initializer() = onnx_io::make_int64_tensor("pads", {8}, {0, 0, 2, 2, 0, 0, 2, 2});
  set_random_initializer(graph, "W", TensorProto::FLOAT, {m, c / g, 5, 5}, 31);
  set_random_initializer(graph, "B", TensorProto::FLOAT, {m}, 32);
  name_node(model, "Y", "upconv");
  return model;
}

}  // namespace

TEST_CASE("zero insertion then a dense Conv becomes dense phase Convs on the low-resolution input (FastDepth's UpConv)",
          "[rewrite][zero_insertion][dense]") {
  struct Case {
    int64_t c, m, g;
    bool pad_node;
  };
  const Case c = GENERATE(values<Case>({{4, 6, 1, false}, {4, 6, 1, true}}));
  CAPTURE(c.c, c.m, c.g, c.pad_node);
  const auto model = unpool_conv_model(c.c, c.m, c.g, c.pad_node);
  const auto out = rewrite_copy(model);
  REQUIRE(out.result.nodes.size() == 1);  // the fold's row; the absorbed ConvTranspose has none
  const auto& row = out.result.nodes[0];
  CAPTURE(row.reason);
  REQUIRE(row.rewritten);
  CHECK(row.summary.form == "zero_insertion");
  CHECK(row.summary.channels == c.c);
  const auto& g = out.model.graph();
  CHECK(count_ops(g, "ConvTranspose") == 0);
  CHECK(count_ops(g, "Pad") == 0);
  CHECK(find_initializer(g, "V") == nullptr);
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(find_initializer(g, "B") != nullptr);
  const auto* d2s = find_producer(g, "Y");
  REQUIRE(d2s != nullptr);
  CHECK(d2s->op_type() == "DepthToSpace");
  // Four phases of the 5x5 kernel on X itself: 3x3, 3x2, 2x3 and 2x2 taps, 25 in all against the Conv's 4 x 25 per
  // input pixel (a quarter of the MACs).
  int64_t taps = 0;
  for (const auto* conv : nodes_of(g, "Conv")) {
    CHECK(conv->input(0) == "X");
    CHECK(find_attr(*conv, "group")->i() == c.g);
    const auto dims = conv_weight_dims(g, *conv);
    CHECK(dims[0] == c.m);
    CHECK(dims[1] == c.c / c.g);
    taps += dims[2] * dims[3];
  }
  CHECK(count_ops(g, "Conv") == 4);
  CHECK(taps == 25);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(model, out.model, {{"X", random_tensor4(1, c.c, 5, 4, 33)}}, "Y", {1, c.m, 10, 8}) < kTolerance);
}

TEST_CASE("a Conv straight after a ConvTranspose that inserts no zeros is no zero_insertion row", "[rewrite][zero_insertion][dense]") {
  auto model = parse_model(
      "<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1,4,5,4] X) => (float[1,6,10,8] Y) {\n"
      "  z = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (X, V)\n"
      "  Y = Conv <kernel_shape=[3,3], pads=[1,1,1,1]> (z, W)\n}\n");
  set_random_initializer(*model.mutable_graph(), "V", TensorProto::FLOAT, {4, 1, 4, 4}, 34);
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {6, 4, 3, 3}, 35);
  name_node(model, "z", "up");
  const auto out = rewrite_copy(model);
  REQUIRE(out.result.nodes.size() == 1);
  CHECK(out.result.nodes[0].summary.form == "conv_transpose");
  CHECK(out.result.nodes[0].summary.name == "up");
  CHECK(out.result.nodes[0].rewritten);
  CHECK(count_ops(out.model.graph(), "Conv") == 5);  // four phases, and the 3x3 Conv as it was
}

TEST_CASE("zero insertion before a grouped Conv is kept: not measured on any runtime", "[rewrite][zero_insertion][dense]") {
  // With a Pad the fold's row says why (without one, a near-miss gets no row); its ConvTranspose is then rewritten on
  // its own (a one-tap k2 s2).
  const auto model = unpool_conv_model(4, 6, 2, true);
  const auto out = rewrite_copy(model);
  const auto fold = std::find_if(out.result.nodes.begin(), out.result.nodes.end(),
                                 [](const rewrite::NodeReport& n) { return n.summary.form == "zero_insertion"; });
  REQUIRE(fold != out.result.nodes.end());
  CHECK_FALSE(fold->rewritten);
  CHECK_THAT(fold->reason, Catch::Contains("Conv is grouped (group 2 of 4 input channels)") && Catch::Contains("not measured"));
  CHECK(find_producer(out.model.graph(), "Y")->op_type() == "Conv");
  CHECK(output_diff(model, out.model, {{"X", random_tensor4(1, 4, 5, 4, 36)}}, "Y", {1, 6, 10, 8}) < kTolerance);
}
