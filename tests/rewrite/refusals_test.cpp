// Nodes the rewriter keeps, each with a reason a user can read, and models it refuses as invalid. Either way
// the model must come back byte for byte as it went in, so its numbers cannot change.
#include <catch2/catch.hpp>

#include "rewrite_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;
using onnx::TensorProto;

namespace {

// Rewrites a copy and requires: the one ConvTranspose kept with a reason holding every key word, nothing
// rewritten, and the model unchanged.
void require_kept(const onnx::ModelProto& original, const std::vector<std::string>& key_words) {
  const auto out = rewrite_copy(original);
  REQUIRE(out.result.rewritten == 0);
  REQUIRE(out.result.kept == 1);
  REQUIRE(out.result.nodes.size() == 1);
  const auto& report = out.result.nodes[0];
  CAPTURE(report.reason);
  CHECK_FALSE(report.rewritten);
  CHECK(report.emitted_nodes.empty());
  for (const auto& word : key_words) CHECK_THAT(report.reason, Catch::Contains(word));
  CHECK(count_ops_everywhere(out.model, "ConvTranspose") == 1);
  CHECK(serialized(out.model) == serialized(original));
}

// Requires rewrite_model to refuse the model as invalid, with a message holding every key word, and to
// leave it untouched.
void require_invalid(const onnx::ModelProto& original, const std::vector<std::string>& key_words) {
  onnx::ModelProto model = original;
  const auto result = rewrite::rewrite_model(model, {});
  REQUIRE_FALSE(result.ok());
  CAPTURE(result.error().message);
  CHECK(result.error().kind == core::ErrorKind::kInvalidModel);
  for (const auto& word : key_words) CHECK_THAT(result.error().message, Catch::Contains(word));
  CHECK(serialized(model) == serialized(original));
}

onnx::ModelProto model_from(const std::string& body, const std::string& inputs, const std::string& outputs) {
  return parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (" + inputs + ") => (" + outputs + ") {\n" + body + "\n}");
}

}  // namespace

TEST_CASE("a grouped but not depthwise deconv is kept", "[rewrite][refusal]") {
  auto model = model_from("  Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)", "float[1,4,5,4] X", "float[1,2,10,8] Y");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {4, 1, 4, 4}, 1);
  name_node(model, "Y", "up1");
  require_kept(model, {"grouped but not depthwise", "group 2 != 4"});
}

TEST_CASE("a dense deconv (group 1) is kept and called dense, not grouped", "[rewrite][refusal]") {
  auto model = model_from("  Y = ConvTranspose <strides=[2,2], pads=[1,1,1,1]> (X, W)", "float[1,4,5,4] X", "float[1,3,10,8] Y");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {4, 3, 4, 4}, 1);
  name_node(model, "Y", "up1");
  require_kept(model, {"dense (group 1)", "4 to 3 channels", "polyphase subconvolutions", "BENCHMARKS.md"});
  CHECK_THAT(rewrite_copy(model).result.nodes[0].reason, !Catch::Contains("grouped"));
  // The layer bench's switch rewrites it, as dense phase Convs, to the same numbers: what was measured is the form
  // the tool would emit.
  rewrite::RewriteOptions dense;
  dense.dense_conv_transpose = true;
  const auto out = rewrite_copy(model, dense);
  REQUIRE(out.result.rewritten == 1);
  const auto convs = nodes_of(out.model.graph(), "Conv");
  REQUIRE(convs.size() == 4);
  for (const auto* conv : convs) CHECK(find_attr(*conv, "group")->i() == 1);
  CHECK(count_ops(out.model.graph(), "ConvTranspose") == 0);
  CHECK(output_diff(model, out.model, {{"X", random_tensor4(1, 4, 5, 4, 3)}}, "Y", {1, 3, 10, 8}) < kTolerance);
}

TEST_CASE("a channel multiplier other than 1 is kept", "[rewrite][refusal]") {
  auto model = model_from("  Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)", "float[1,2,5,4] X", "float[1,4,10,8] Y");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {2, 2, 4, 4}, 2);
  name_node(model, "Y", "up1");
  require_kept(model, {"channel multiplier 2 != 1"});
}

TEST_CASE("dilation > 1 on an axis of stride > 1 is kept", "[rewrite][refusal]") {
  DeconvSpec spec;
  spec.kh = spec.kw = 3;
  spec.attrs = "strides=[2,2], pads=[2,2,2,2], dilations=[2,2]";
  require_kept(deconv_model(spec), {"dilation > 1 with stride > 1", "[2,2]", "only a stride-1 axis may be dilated"});
  spec.attrs = "strides=[1,2], pads=[2,1,2,1], dilations=[2,2]";  // the stride-1 axis alone may be dilated
  require_kept(deconv_model(spec), {"dilation > 1 with stride > 1", "dilations [2,2], strides [1,2]"});
}

TEST_CASE("a deconv that is not a clean upscale is kept with the output size it has", "[rewrite][refusal]") {
  DeconvSpec spec;  // k3 s2 p1 op0 on 5x4: 2*H-1 x 2*W-1 = 9x7
  spec.kh = spec.kw = 3;
  spec.attrs = "strides=[2,2], pads=[1,1,1,1]";
  require_kept(deconv_model(spec), {"not a clean upscale", "2*H-1 x 2*W-1", "9x7 from 5x4", "wants 2*H x 2*W"});
  spec.h = spec.w = 0;  // symbolic: the formula, without numbers
  require_kept(deconv_model(spec), {"not a clean upscale", "2*H-1 x 2*W-1"});
}

TEST_CASE("a weight that is a graph input is kept as not constant", "[rewrite][refusal]") {
  auto model = model_from("  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W)", "float[1,3,5,4] X, float[3,1,4,4] W",
                          "float[1,3,10,8] Y");
  name_node(model, "Y", "up1");
  require_kept(model, {"weight not constant", "'W'", "graph input"});
}

TEST_CASE("an initializer that is also a graph input at IR >= 4 is kept", "[rewrite][refusal]") {
  auto model = model_from("  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W)", "float[1,3,5,4] X, float[3,1,4,4] W",
                          "float[1,3,10,8] Y");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4, 4}, 3);
  name_node(model, "Y", "up1");
  require_kept(model, {"weight not constant", "also a graph input", "overridden"});
}

TEST_CASE("a weight from DequantizeLinear (QDQ) is kept", "[rewrite][refusal]") {
  auto model = model_from(R"(  W = DequantizeLinear (Wq, scale, zero)
  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W))",
                          "float[1,3,5,4] X", "float[1,3,10,8] Y");
  auto& g = *model.mutable_graph();
  auto& wq = *g.add_initializer();
  wq.set_name("Wq");
  wq.set_data_type(TensorProto::INT8);
  for (int64_t d : {3, 1, 4, 4}) wq.add_dims(d);
  wq.set_raw_data(std::string(48, '\x03'));
  *g.add_initializer() = onnx_io::make_tensor("scale", TensorProto::FLOAT, {}, {0.5}, true);
  auto& zero = *g.add_initializer();
  zero.set_name("zero");
  zero.set_data_type(TensorProto::INT8);
  zero.set_raw_data(std::string(1, '\0'));
  name_node(model, "Y", "up1");
  require_kept(model, {"DequantizeLinear (QDQ)"});
}

TEST_CASE("a 3-D ConvTranspose is kept as not 1-D or 2-D, and a dense 1-D one as dense (HiFi-GAN, Demucs)", "[rewrite][refusal]") {
  auto model = model_from("  Y = ConvTranspose <group=3, strides=[2,2,2], pads=[1,1,1,1,1,1]> (X, W)", "float[1,3,5,5,5] X",
                          "float[1,3,10,10,10] Y");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4, 4, 4}, 4);
  name_node(model, "Y", "up1");
  require_kept(model, {"not 1-D or 2-D", "rank 5"});
  auto dense = model_from("  Y = ConvTranspose <strides=[4], pads=[2,2]> (X, W, B)", "float[1,6,5] X", "float[1,3,20] Y");
  set_random_initializer(*dense.mutable_graph(), "W", TensorProto::FLOAT, {6, 3, 8}, 5);
  set_random_initializer(*dense.mutable_graph(), "B", TensorProto::FLOAT, {3}, 6);
  name_node(dense, "Y", "up1");
  require_kept(dense, {"dense (group 1), 6 to 3 channels"});
}

TEST_CASE("an unsupported weight element type is kept", "[rewrite][refusal]") {
  // ConvTranspose's schema admits only float types, so this model is also type-inconsistent; the matcher must
  // still decline it rather than reinterpret the bytes.
  DeconvSpec spec;
  auto model = deconv_model(spec);
  auto& w = *model.mutable_graph()->mutable_initializer(0);
  w.clear_raw_data();
  w.set_data_type(TensorProto::INT32);
  for (int i = 0; i < 48; ++i) w.add_int32_data(i);
  require_kept(model, {"unsupported element type INT32"});
}

TEST_CASE("output_shape with an unknown input size is kept", "[rewrite][refusal]") {
  DeconvSpec spec;
  spec.h = spec.w = 0;
  spec.attrs = "strides=[2,2], output_shape=[10,8]";
  require_kept(deconv_model(spec), {"output_shape", "unknown"});
}

TEST_CASE("a bias that is a graph input is kept as not constant", "[rewrite][refusal]") {
  auto model = model_from("  Y = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W, B)", "float[1,3,5,4] X, float[3] B",
                          "float[1,3,10,8] Y");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4, 4}, 5);
  name_node(model, "Y", "up1");
  require_kept(model, {"bias not constant", "'B'"});
}

TEST_CASE("a kept node keeps the weight it shares with a rewritten one", "[rewrite][refusal]") {
  auto model = model_from(R"(  Y1 = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W)
  Y2 = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1], dilations=[2,2]> (X, W))",
                          "float[1,3,5,4] X", "float[1,3,10,8] Y1, float[1,3,13,11] Y2");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4, 4}, 6);
  name_node(model, "Y1", "up1");
  name_node(model, "Y2", "up2");
  const auto out = rewrite_copy(model);
  const auto& g = out.model.graph();
  REQUIRE(out.result.rewritten == 1);
  REQUIRE(out.result.kept == 1);
  CHECK_THAT(out.result.nodes[1].reason, Catch::Contains("dilation > 1"));
  require_polyphase(g, "Y1", 2, 3, 13, "up1");
  CHECK(count_ops(g, "ConvTranspose") == 1);
  CHECK(find_initializer(g, "W") != nullptr);
  CHECK(checker_error(out.model).empty());
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(1, 3, 5, 4, 7)}};
  CHECK(output_diff(model, out.model, inputs, "Y1") < kTolerance);
  CHECK(output_diff(model, out.model, inputs, "Y2") < kTolerance);
}

TEST_CASE("invalid ConvTranspose attributes refuse the model as invalid", "[rewrite][invalid]") {
  struct Case {
    const char* what;
    const char* attrs;
    std::vector<std::string> key_words;
  };
  const Case c = GENERATE(values<Case>({
      {"stride 0", "strides=[0,0]", {"stride 0", "must be >= 1"}},
      {"negative pads", "strides=[2,2], pads=[1,1,1,-1]", {"negative pad", "[1,1,1,-1]"}},
      {"kernel_shape disagrees with the weight", "strides=[2,2], pads=[1,1,1,1], kernel_shape=[3,3]", {"kernel_shape [3,3]", "disagrees"}},
      {"output_padding >= stride", "strides=[2,2], output_padding=[2,2]", {"output_padding 2", "less than stride 2"}},
      {"attribute of the wrong type", "strides=2.0, pads=[1,1,1,1]", {"strides"}},
      {"pads of the wrong length", "strides=[2,2], pads=[1,1]", {"pads [1,1]", "4 values"}},
      {"unknown auto_pad", "strides=[2,2], auto_pad=\"SAME\"", {"auto_pad 'SAME'"}},
  }));
  CAPTURE(c.what);
  DeconvSpec spec;
  spec.attrs = c.attrs;
  auto model = deconv_model(spec);
  std::vector<std::string> words = c.key_words;
  words.push_back("'up1'");
  require_invalid(model, words);
}

TEST_CASE("a group that does not divide the channels refuses the model as invalid", "[rewrite][invalid]") {
  auto model = model_from("  Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)", "float[1,3,5,4] X", "float[1,3,10,8] Y");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {3, 1, 4, 4}, 8);
  name_node(model, "Y", "up1");
  require_invalid(model, {"group 2 does not divide the 3 input channels"});
}

TEST_CASE("an invalid node inside an If branch names the branch", "[rewrite][invalid]") {
  auto model = parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,3] X, bool cond) => (float[1,2,8,6] Y) {
  Y = If (cond) <
    then_branch = then_g () => (float[1,2,8,6] T) { T = ConvTranspose <group=2, strides=[0,0]> (X, W) },
    else_branch = else_g () => (float[1,2,8,6] E) { E = ConvTranspose <group=2, strides=[2,2]> (X, W) }>
})");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {2, 1, 2, 2}, 9);
  require_invalid(model, {"stride 0", "then_branch"});
}

TEST_CASE("a ConvTranspose whose output of a known input is not positive refuses the model, and a huge dilation is kept",
          "[rewrite][invalid]") {
  DeconvSpec spec;  // k3 s1 on 5 rows with 40 end pads: 5 - 1 + 3 - 40 = -33 rows
  spec.kh = spec.kw = 3;
  spec.attrs = "strides=[1,1], pads=[0,0,40,0]";
  require_invalid(deconv_model(spec), {"output length -33 from input length 5 is not positive", "H axis"});
  spec.attrs = "strides=[1,1], dilations=[1073741824,1]";  // (3-1) * 2^30 + 1 samples
  require_kept(deconv_model(spec), {"a kernel of 3 taps dilated by 1073741824 spans more than 2^30 samples"});
}

TEST_CASE("a bias of the wrong length or a negative output refuses the model even where the node would be kept anyway",
          "[rewrite][invalid]") {
  // Dense (group 1, a weight that is not diagonal): a node the tool keeps. Its invalidity still rejects the model.
  auto model = model_from("  Y = ConvTranspose <strides=[2,2], pads=[1,1,1,1]> (X, W, B)", "float[1,3,5,4] X", "float[1,3,10,8] Y");
  set_random_initializer(*model.mutable_graph(), "W", TensorProto::FLOAT, {3, 3, 4, 4}, 8);
  set_random_initializer(*model.mutable_graph(), "B", TensorProto::FLOAT, {2}, 9);
  name_node(model, "Y", "up1");
  require_invalid(model, {"bias 'B' has shape [2], expected [3]", "'up1'"});
  auto negative = model_from("  Y = ConvTranspose <strides=[1,1], pads=[0,0,40,0]> (X, W)", "float[1,3,5,4] X", "float[1,3,10,8] Y");
  set_random_initializer(*negative.mutable_graph(), "W", TensorProto::FLOAT, {3, 3, 3, 3}, 8);
  name_node(negative, "Y", "up1");
  require_invalid(negative, {"output length -33 from input length 5 is not positive"});
}
