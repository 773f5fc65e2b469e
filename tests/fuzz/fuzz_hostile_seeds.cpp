// The fuzzer's hostile seeds: convolution ranks libonnx 1.12's shape inference crashes on or reads past, and a
// deconv next to ops the executor and the shape chains read, at a newer opset.
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_seed_models.h"
#include "tests/fuzz/fuzz_seeds.h"
#include "tests/support/model_builder.h"

namespace dwdeconv::fuzz {

void add_hostile_seeds(std::vector<Seed>& out) {
  auto add = [&out](const std::string& name, onnx::ModelProto model, Expect expect, const std::string& form = "") {
    out.push_back({name, std::move(model), expect, form});
  };
  const std::string ct = "conv_transpose";

  // Hostile: convolution ranks libonnx 1.12's shape inference crashes on or reads past, each in the places a
  // rank can be declared. ONNX Runtime refuses every one of them.
  const std::string ct_rank_text = R"(g (float[1,1,3] X, float[1,3] W) => (float[1,1,5] Y) {
  Y = ConvTranspose (X, W)
})";
  add("rank_ct_weight2_graph_input_opset13", text_model(header(13) + ct_rank_text), Expect::kInvalid);
  add("rank_ct_weight2_graph_input_opset19", text_model(header(19) + ct_rank_text), Expect::kInvalid);
  add("rank_ct_weight2_initializer",
      with_weights(text_model(header(13) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = ConvTranspose <group = 2, strides = [2, 2]> (X, W)
})"),
                   {{"W", {2, 1}}}),
      Expect::kInvalid);
  add("rank_ct_weight2_constant_opset19", text_model(header(19) + R"(g (float[1,1,3] X) => (float[1,1,?] Y) {
  W = Constant <value = float[1,3] {1, 2, 3}> ()
  Y = ConvTranspose (X, W)
})"),
      Expect::kInvalid);
  add("rank_ct_weight2_via_identity_opset13", text_model(header(13) + R"(g (float[1,1,3] X, float[1,3] W0) => (float[1,1,?] Y) {
  W = Identity (W0)
  Y = ConvTranspose (X, W)
})"),
      Expect::kInvalid);
  add("rank_ct_weight2_via_identity_opset19", text_model(header(19) + R"(g (float[1,1,3] X, float[1,3] W0) => (float[1,1,?] Y) {
  W = Identity (W0)
  Y = ConvTranspose (X, W)
})"),
      Expect::kInvalid);
  add("rank_ct_weight3_input4",
      with_weights(text_model(header(13) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = ConvTranspose <group = 2> (X, W)
})"),
                   {{"W", {2, 1, 3}}}),
      Expect::kInvalid);
  add("rank_ct_weight5_input4",
      with_weights(text_model(header(13) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = ConvTranspose <group = 2> (X, W)
})"),
                   {{"W", {2, 1, 3, 3, 3}}}),
      Expect::kInvalid);
  add("rank_ct_weight2_in_if_branch",
      with_weights(text_model(header(13) + R"(g (float[1,1,3] X, bool c) => (float[1,1,?] Y) {
  Y = If (c) <
    then_branch = t () => (float[1,1,?] A) { A = ConvTranspose (X, W) },
    else_branch = e () => (float[1,1,3] B) { B = Identity (X) }>
})"),
                   {{"W", {1, 3}}}),
      Expect::kInvalid);
  add("rank_conv_weight3_input4",
      with_weights(text_model(header(13) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = Conv (X, W)
})"),
                   {{"W", {2, 2, 3}}}),
      Expect::kInvalid);
  add("rank_conv_weight3_input4_same_upper",
      with_weights(text_model(header(13) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = Conv <auto_pad = "SAME_UPPER"> (X, W)
})"),
                   {{"W", {2, 2, 3}}}),
      Expect::kInvalid);
  add("rank_conv_weight5_input4",
      with_weights(text_model(header(13) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = Conv (X, W)
})"),
                   {{"W", {2, 2, 3, 3, 3}}}),
      Expect::kInvalid);
  add("rank_conv_input2",
      with_weights(text_model(header(13) + R"(g (float[1,2] X) => (float[1,2] Y) {
  Y = Conv (X, W)
})"),
                   {{"W", {2, 2}}}),
      Expect::kInvalid);
  add("rank_conv_weight3_input4_opset19",
      with_weights(text_model(header(19) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = Conv (X, W)
})"),
                   {{"W", {2, 2, 3}}}),
      Expect::kInvalid);
  add("stride0_conv",
      with_weights(text_model(header(13) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = Conv <strides = [0, 0]> (X, W)
})"),
                   {{"W", {2, 2, 3, 3}}}),
      Expect::kInvalid);
  add("stride0_maxpool", text_model(header(13) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = MaxPool <kernel_shape = [2, 2], strides = [0, 0]> (X)
})"),
      Expect::kInvalid);
  add("stride0_averagepool_opset19", text_model(header(19) + R"(g (float[1,2,5,5] X) => (float[1,2,?,?] Y) {
  Y = AveragePool <kernel_shape = [2, 2], strides = [0, 0]> (X)
})"),
      Expect::kAny);
  // A deconv next to ops the executor and the shape chains read, at a newer opset.
  add("ct_with_shape_chain_opset19",
      with_weights(text_model(header(19) + R"(g (float[1,2,4,3] X) => (float[1,2,8,6] Y, int64[4] S) {
  Y = ConvTranspose <group = 2, strides = [2, 2], pads = [1, 1, 1, 1]> (X, W)
  S = Shape (Y)
})"),
                   {{"W", {2, 1, 4, 4}}}),
      Expect::kRewrite, ct);
}

}  // namespace dwdeconv::fuzz
