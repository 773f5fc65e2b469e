// Writes the example models that ship in examples/, with seeded random weights, so the shipped files are
// reproducible: `dwdeconv-make-examples examples/` rewrites them byte for byte.
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "onnx_io/attributes.h"
#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"

namespace {

using dwdeconv::onnx_io::make_int_attribute;
using dwdeconv::onnx_io::make_ints_attribute;

class Builder {
 public:
  explicit Builder(uint32_t seed) : rng_(seed) {}

  // A seeded random float initializer with values in [-scale, scale].
  std::string weight(const std::string& name, const std::vector<int64_t>& dims, double scale) {
    int64_t count = 1;
    for (int64_t d : dims) count *= d;
    std::uniform_real_distribution<double> dist(-scale, scale);
    std::vector<double> values(static_cast<size_t>(count));
    for (auto& v : values) v = dist(rng_);
    *graph().add_initializer() = dwdeconv::onnx_io::make_tensor(name, onnx::TensorProto::FLOAT, dims, values, true);
    return name;
  }

  onnx::NodeProto& node(const std::string& op, const std::string& name, std::vector<std::string> inputs, const std::string& output) {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& s : inputs) n->add_input(s);
    n->add_output(output);
    return *n;
  }

  onnx::GraphProto& graph() { return *model_.mutable_graph(); }
  onnx::ModelProto& model() { return model_; }

 private:
  std::mt19937 rng_;
  onnx::ModelProto model_;
};

void add_io(onnx::ValueInfoProto* v, const std::string& name, const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (const auto& d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

// A small upsampling decoder: 8 channels at HxW in, 3 channels at 8Hx8W out. Three depthwise
// ConvTransposes are clean upscales (k4 s2 p1, k3 s2 p1 op1, k2 s2 p0); a fourth, grouped but not
// depthwise, shows a refusal.
onnx::ModelProto upsampler_small() {
  Builder b(20261129);
  auto& m = b.model();
  m.set_ir_version(8);
  m.set_producer_name("dwdeconv-make-examples");
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  auto& g = b.graph();
  g.set_name("upsampler_small");
  add_io(g.add_input(), "image", {"N", "8", "H", "W"});
  add_io(g.add_output(), "rgb", {"N", "3", "H8", "W8"});

  const int64_t c = 8;
  auto& stem = b.node("Conv", "stem", {"image", b.weight("stem.w", {c, 1, 3, 3}, 0.5), b.weight("stem.b", {c}, 0.1)}, "stem_out");
  *stem.add_attribute() = make_int_attribute("group", c);
  *stem.add_attribute() = make_ints_attribute("pads", {1, 1, 1, 1});
  b.node("Relu", "stem_relu", {"stem_out"}, "f0");

  auto& up1 = b.node("ConvTranspose", "up1", {"f0", b.weight("up1.w", {c, 1, 4, 4}, 0.5), b.weight("up1.b", {c}, 0.1)}, "u1");
  *up1.add_attribute() = make_int_attribute("group", c);
  *up1.add_attribute() = make_ints_attribute("strides", {2, 2});
  *up1.add_attribute() = make_ints_attribute("pads", {1, 1, 1, 1});
  auto& act1 = b.node("LeakyRelu", "up1_act", {"u1"}, "f1");
  onnx::AttributeProto alpha;
  alpha.set_name("alpha");
  alpha.set_type(onnx::AttributeProto::FLOAT);
  alpha.set_f(0.2f);
  *act1.add_attribute() = alpha;

  auto& up2 = b.node("ConvTranspose", "up2", {"f1", b.weight("up2.w", {c, 1, 3, 3}, 0.5)}, "u2");
  *up2.add_attribute() = make_int_attribute("group", c);
  *up2.add_attribute() = make_ints_attribute("strides", {2, 2});
  *up2.add_attribute() = make_ints_attribute("pads", {1, 1, 1, 1});
  *up2.add_attribute() = make_ints_attribute("output_padding", {1, 1});
  b.node("Relu", "up2_act", {"u2"}, "f2");

  // Grouped (2 groups of 4 channels), not depthwise: kept by the rewriter, with its reason.
  auto& mix = b.node("ConvTranspose", "mix_up", {"f2", b.weight("mix_up.w", {c, 4, 2, 2}, 0.3)}, "u3");
  *mix.add_attribute() = make_int_attribute("group", 2);
  *mix.add_attribute() = make_ints_attribute("strides", {2, 2});

  auto& up3 = b.node("ConvTranspose", "up3", {"u3", b.weight("up3.w", {c, 1, 2, 2}, 0.5), b.weight("up3.b", {c}, 0.1)}, "u4");
  *up3.add_attribute() = make_int_attribute("group", c);
  *up3.add_attribute() = make_ints_attribute("strides", {2, 2});

  b.node("Conv", "to_rgb", {"u4", b.weight("to_rgb.w", {3, c, 1, 1}, 0.4)}, "rgb");
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: dwdeconv-make-examples OUT_DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  auto bytes = dwdeconv::onnx_io::serialize_model(upsampler_small());
  const std::string path = dir + "/upsampler_small.onnx";
  if (!bytes || !dwdeconv::onnx_io::write_file_atomic(path, *bytes)) {
    std::cerr << "dwdeconv-make-examples: cannot write " << path << "\n";
    return 3;
  }
  std::cout << "wrote " << path << " (" << bytes->size() << " bytes)\n";
  return 0;
}
