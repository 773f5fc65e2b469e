// Writes the bad-input corpus of tests/bad_inputs/: each file is broken in one way that the tool must refuse
// with exit code 3 and a message naming the file, the node or tensor, and the problem (see expected.tsv).
//   make_bad_inputs tests/bad_inputs
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "onnx_io/model_io.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv;

namespace {

std::string dir;

void write_bytes(const std::string& name, const std::string& bytes) { std::ofstream(dir + "/" + name, std::ios::binary) << bytes; }

void write_model(const std::string& name, const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  write_bytes(name, bytes);
}

// A valid k4 s2 p1 depthwise deconv "up1" with weight "W"; `attrs` replaces its attributes.
onnx::ModelProto deconv(const std::string& attrs, const std::string& w_shape = "4, 1, 4, 4", int opset = 13) {
  auto m = test::parse_model(R"(
    <ir_version: 8, opset_import: ["" : )" +
                             std::to_string(opset) + R"(]>
    g (float[1,4,5,5] X) => (float[1,4,?,?] Y) {
      Y = ConvTranspose <)" + attrs +
                             R"(> (X, W)
    })");
  std::vector<int64_t> dims;
  for (size_t pos = 0; pos < w_shape.size();) {
    const size_t comma = w_shape.find(',', pos);
    dims.push_back(std::stoll(w_shape.substr(pos, comma - pos)));
    pos = comma == std::string::npos ? w_shape.size() : comma + 1;
  }
  test::set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, dims, 1);
  test::name_node(m, "Y", "up1");
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_bad_inputs DIR\n";
    return 2;
  }
  dir = argv[1];
  const auto good = deconv("group=4, strides=[2,2], pads=[1,1,1,1]");
  std::string good_bytes;
  good.SerializeToString(&good_bytes);

  write_bytes("empty.onnx", "");
  std::string junk;
  for (int i = 0; i < 512; ++i) junk += static_cast<char>((i * 7919 + 13) % 251);
  write_bytes("random_bytes.onnx", junk);
  write_bytes("truncated.onnx", good_bytes.substr(0, good_bytes.size() / 2));
  // What a checkout without Git LFS leaves in place of a model tracked by LFS.
  write_bytes("lfs_pointer.onnx",
              "version https://git-lfs.github.com/spec/v1\n"
              "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
              "size 1354604\n");
  onnx::TensorProto tensor;  // a valid protobuf, but a TensorProto
  tensor.set_name("not_a_model");
  tensor.set_data_type(onnx::TensorProto::FLOAT);
  tensor.add_dims(3);
  tensor.set_raw_data(std::string(12, '\1'));
  std::string tensor_bytes;
  tensor.SerializeToString(&tensor_bytes);
  write_bytes("tensor_not_model.onnx", tensor_bytes);
  onnx::ModelProto no_graph;
  no_graph.set_ir_version(8);
  no_graph.add_opset_import()->set_version(13);
  write_model("no_graph.onnx", no_graph);

  auto undefined = deconv("group=4, strides=[2,2], pads=[1,1,1,1]");
  undefined.mutable_graph()->mutable_node(0)->set_input(0, "nowhere");
  write_model("undefined_input.onnx", undefined);

  auto raw = deconv("group=4, strides=[2,2], pads=[1,1,1,1]");
  raw.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(10, '\0'));
  write_model("raw_data_length.onnx", raw);

  auto overflow = deconv("group=4, strides=[2,2], pads=[1,1,1,1]");
  auto* w = overflow.mutable_graph()->mutable_initializer(0);
  w->clear_dims();
  for (int64_t d : {int64_t{1} << 40, int64_t{1} << 40, int64_t{4}, int64_t{4}}) w->add_dims(d);
  write_model("dims_overflow.onnx", overflow);

  write_model("stride_zero.onnx", deconv("group=4, strides=[0,0], pads=[1,1,1,1]"));
  write_model("negative_pads.onnx", deconv("group=4, strides=[2,2], pads=[-1,1,1,1]"));
  write_model("kernel_shape_mismatch.onnx", deconv("group=4, strides=[2,2], pads=[1,1,1,1], kernel_shape=[3,3]"));
  write_model("output_padding_too_big.onnx", deconv("group=4, strides=[2,2], pads=[1,1,1,1], output_padding=[2,2]"));
  write_model("group_not_dividing.onnx", deconv("group=3, strides=[2,2], pads=[1,1,1,1]"));
  write_model("attribute_wrong_type.onnx", deconv("group=4, strides=2, pads=[1,1,1,1]"));
  // Found by fuzzing: libonnx 1.12's ConvTranspose shape inference dereferences null when the weight's rank is
  // below the input's. Validation refuses a declared rank before inference runs.
  auto low_rank = test::parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,1,3] X, float[1,3] W) => (float[1,1,5] Y) {
      Y = ConvTranspose (X, W)
    })");
  test::name_node(low_rank, "Y", "up1");
  write_model("weight_rank_below_input.onnx", low_rank);
  // The same with the weight's rank computed by a node, which only inference knows: libonnx still crashes, in
  // the child process that runs it, so this is an error, not a crash. At opset 19 too, where inference runs
  // with the library's opset-17 schemas only to see whether it crashes.
  for (int opset : {13, 19}) {
    auto computed = test::parse_model(R"(
      <ir_version: 8, opset_import: ["" : )" +
                                      std::to_string(opset) + R"(]>
      g (float[1,1,3] X, float[1,3] W0) => (float[1,1,5] Y) {
        W = Identity (W0)
        Y = ConvTranspose (X, W)
      })");
    test::name_node(computed, "Y", "up1");
    write_model(opset == 13 ? "weight_rank_below_input_via_identity.onnx" : "weight_rank_below_input_via_identity_opset19.onnx", computed);
  }
  // Ranks that libonnx 1.12 reads past the end of its vectors on without a crash, so that the old tool wrote the
  // model back: a ConvTranspose weight with one spatial dim for a 2-D input, and a Conv weight with three.
  write_model("deconv_weight_rank3_input4.onnx", deconv("group=4, strides=[2,2], pads=[1,1,1,1]", "4, 1, 4"));
  auto conv_rank5 = test::parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,4,5,5] X) => (float[1,4,?,?] Y) {
      Y = Conv <group=4> (X, W)
    })");
  test::set_random_initializer(*conv_rank5.mutable_graph(), "W", onnx::TensorProto::FLOAT, {4, 1, 3, 3, 3}, 4);
  test::name_node(conv_rank5, "Y", "c1");
  write_model("conv_weight_rank5_input4.onnx", conv_rank5);
  // A Conv with a zero stride: libonnx 1.12's inference divides by it (SIGFPE).
  auto conv_stride0 = test::parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,4,5,5] X) => (float[1,4,?,?] Y) {
      Y = Conv <group=4, strides=[0,0]> (X, W)
    })");
  test::set_random_initializer(*conv_stride0.mutable_graph(), "W", onnx::TensorProto::FLOAT, {4, 1, 3, 3}, 5);
  test::name_node(conv_stride0, "Y", "c1");
  write_model("conv_stride_zero.onnx", conv_stride0);
  // Found by fuzzing: a graph output that no node writes, which libonnx 1.12's checker passes.
  auto lost_output = deconv("group=4, strides=[2,2], pads=[1,1,1,1]");
  *lost_output.mutable_graph()->add_output() = lost_output.graph().output(0);
  lost_output.mutable_graph()->mutable_output(1)->set_name("Y_lost");
  write_model("graph_output_undefined.onnx", lost_output);
  // Opset 18 is newer than libonnx 1.12, so only the partial check runs; it must still count inputs and outputs.
  auto two_outputs = deconv("group=4, strides=[2,2], pads=[1,1,1,1]", "4, 1, 4, 4", 18);
  two_outputs.mutable_graph()->mutable_node(0)->add_output("Y_extra");
  write_model("deconv_two_outputs_opset18.onnx", two_outputs);
  auto four_inputs = deconv("group=4, strides=[2,2], pads=[1,1,1,1]", "4, 1, 4, 4", 18);
  test::set_random_initializer(*four_inputs.mutable_graph(), "B", onnx::TensorProto::FLOAT, {4}, 2);
  four_inputs.mutable_graph()->mutable_node(0)->add_input("B");
  four_inputs.mutable_graph()->mutable_node(0)->add_input("B");
  write_model("deconv_four_inputs_opset18.onnx", four_inputs);
  auto no_output = deconv("group=4, strides=[2,2], pads=[1,1,1,1]", "4, 1, 4, 4", 18);
  no_output.mutable_graph()->mutable_node(0)->clear_output();
  no_output.mutable_graph()->mutable_output(0)->set_name("X");
  write_model("deconv_no_output_opset18.onnx", no_output);
  // Found in review: an If branch's initializer W shadows the main graph's W, which the else branch
  // reads too. ONNX Runtime runs the then branch with the outer W; the rewrite folded the inner one. libonnx's checker
  // passes it; the IR spec forbids it. At opset 19 the same through a Loop body input and the partial check.
  auto shadowed = test::parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,4,5,5] X, bool c) => (float[1,4,10,10] Y) {
      Y = If (c) <
        then_branch = then_g () => (float[1,4,10,10] A) { A = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (X, W) },
        else_branch = else_g () => (float[1,4,10,10] B) { B = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (X, W) }>
    })");
  test::set_random_initializer(*shadowed.mutable_graph(), "W", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 6);
  test::set_random_initializer(*shadowed.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g(), "W", onnx::TensorProto::FLOAT,
                               {4, 1, 4, 4}, 7);
  test::name_node(shadowed, "Y", "branch");
  write_model("subgraph_initializer_shadows_outer.onnx", shadowed);
  auto loop_shadow = test::parse_model(R"(
    <ir_version: 9, opset_import: ["" : 19]>
    g (float[1,4,5,5] X, int64 n) => (float[1,4,5,5] V, float[?,1,4,10,10] S) {
      V, S = Loop (n, , X) <body = b (int64 i, bool c, float[1,4,5,5] X) => (bool c2, float[1,4,5,5] v, float[1,4,10,10] s) {
        c2 = Identity (c)
        v = Relu (X)
        s = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (X, W)
      }>
    })");
  test::set_random_initializer(*loop_shadow.mutable_graph(), "W", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 8);
  test::name_node(loop_shadow, "V", "loop");
  write_model("loop_body_input_shadows_outer_opset19.onnx", loop_shadow);

  // Not bad: a valid model with sparse initializers (a Conv weight, and a deconv weight, which is kept).
  auto sparse = test::parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,4,5,5] X) => (float[1,4,10,10] Y, float[1,4,10,10] Y2, float[1,4,10,10] Z) {
      Y = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (X, W)
      Y2 = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (X, SW)
      Z = Conv <group=4, pads=[1,1,1,1]> (Y, SC)
    })");
  test::set_random_initializer(*sparse.mutable_graph(), "W", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 3);
  for (const auto& [name, dims] : std::vector<std::pair<std::string, std::vector<int64_t>>>{{"SW", {4, 1, 4, 4}}, {"SC", {4, 1, 3, 3}}}) {
    auto& sp = *sparse.mutable_graph()->add_sparse_initializer();
    for (int64_t d : dims) sp.add_dims(d);
    sp.mutable_values()->set_name(name);
    sp.mutable_values()->set_data_type(onnx::TensorProto::FLOAT);
    sp.mutable_values()->add_dims(2);
    sp.mutable_values()->add_float_data(0.5F);
    sp.mutable_values()->add_float_data(-2.0F);
    sp.mutable_indices()->set_data_type(onnx::TensorProto::INT64);
    sp.mutable_indices()->add_dims(2);
    sp.mutable_indices()->add_int64_data(3);
    sp.mutable_indices()->add_int64_data(20);
  }
  test::name_node(sparse, "Y", "up1");
  test::name_node(sparse, "Y2", "up_sparse");
  write_model("sparse_initializer.onnx", sparse);
  std::cout << "wrote the bad-input corpus to " << dir << "\n";
  return 0;
}
