// Writes the bad-input corpus of tests/bad_inputs/: each file is broken in one way that the tool must refuse
// with exit code 3 and a message naming the file, the node or tensor, and the problem (see expected.tsv).
//   make_bad_inputs tests/bad_inputs
#include <fstream>
#include <iostream>
#include <string>

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
onnx::ModelProto deconv(const std::string& attrs, const std::string& w_shape = "4, 1, 4, 4") {
  auto m = test::parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,4,5,5] X) => (float[1,4,?,?] Y) {
      Y = ConvTranspose <)" + attrs + R"(> (X, W)
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
  // below the input's. The tool runs inference in a child process, so this is an error, not a crash.
  auto low_rank = test::parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,1,3] X, float[1,3] W) => (float[1,1,5] Y) {
      Y = ConvTranspose (X, W)
    })");
  test::name_node(low_rank, "Y", "up1");
  write_model("weight_rank_below_input.onnx", low_rank);
  std::cout << "wrote the bad-input corpus to " << dir << "\n";
  return 0;
}
