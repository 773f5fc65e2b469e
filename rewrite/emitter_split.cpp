// The emission of a split Conv (DeconvMatch::addend): the upsampled channels as phases, the others as a Conv at full
// resolution, added.
#include "emitter_parts.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "rewrite/emitter.h"

namespace dwdeconv::rewrite {

using emitter_parts::make_node;

// Before:  y = Conv(Pad(Concat(u_0, r.., u_1..)), W, B)   u_i = nearest(x_i) by s_i, the Conv split by input channels
// After:   y_i = <the phases of x_i with W_i, joined>       as any upsampler of W_i (no bias)
//          r_c = Concat(r...)                            axis=1, only with more than one other input
//          r_p = Pad(r_c, mode)                          only for a reflect or edge Pad: each part keeps its pads
//          y_r = Conv(r_p | r_c, W_r, B)                 the channels that are not upsampled, at full resolution
//          y   = Add(..Add(y_0, y_1).., y_r)             a Conv is linear in its input channels
core::Result<std::vector<onnx::NodeProto>> Emitter::emit_split(const DeconvMatch& m, PhaseLayout layout) {
  const ConvAddend& rest = *m.addend;
  const std::string base = m.name.empty() ? m.output : m.name;
  std::vector<onnx::NodeProto> nodes;
  std::vector<std::string> terms;  // what the Adds sum, in order
  // Each part as the upsampler it is, into an output of its own: the first in `layout`, the others in theirs.
  const PhaseLayout join = layout == PhaseLayout::kGatherCrd || layout == PhaseLayout::kBatchCrd ? layout : PhaseLayout::kDcr;
  for (size_t i = 0; i <= rest.upsampled.size(); ++i) {
    DeconvMatch part = i == 0 ? m : rest.upsampled[i - 1];
    part.addend.reset();
    part.name = names_.fresh(base + "_upsampled" + (i == 0 ? std::string() : "_" + std::to_string(i)));
    part.output = names_.fresh(part.name + "_out");
    auto emitted = emit(part, i == 0 ? layout : layout_for(part, join));
    if (!emitted) return emitted.error();
    nodes.insert(nodes.end(), emitted->begin(), emitted->end());
    terms.push_back(part.output);
  }
  if (!rest.inputs.empty()) terms.push_back(rest_conv(m, base, nodes));
  // The sum keeps the split Conv's name and output, where the graph reads it.
  std::string sum = terms.front();
  for (size_t i = 1; i < terms.size(); ++i) {
    const bool last = i + 1 == terms.size();
    const std::string name = last && !m.name.empty() ? m.name : names_.fresh(base + "_sum");
    const std::string output = last ? m.output : names_.fresh(name + "_out");
    nodes.push_back(make_node("Add", name, {sum, terms[i]}, {output}));
    sum = output;
  }
  return nodes;
}

std::string Emitter::rest_conv(const DeconvMatch& m, const std::string& base, std::vector<onnx::NodeProto>& nodes) {
  const ConvAddend& rest = *m.addend;
  std::string input = rest.inputs.front();
  if (rest.inputs.size() > 1) {
    const std::string name = names_.fresh(base + "_rest_concat");
    input = names_.fresh(name + "_out");
    onnx::NodeProto concat = make_node("Concat", name, rest.inputs, {input});
    *concat.add_attribute() = onnx_io::make_int_attribute("axis", 1);
    nodes.push_back(std::move(concat));
  }
  if (!rest.pad_mode.empty()) {
    // ONNX Pad on NCHW: [n_begin, c_begin, top, left, n_end, c_end, bottom, right].
    const std::vector<int64_t> full{0, 0, rest.pad[0], rest.pad[1], 0, 0, rest.pad[2], rest.pad[3]};
    const std::string name = names_.fresh(base + "_rest_pad");
    const std::string output = names_.fresh(name + "_out");
    onnx::NodeProto pad = make_node("Pad", name, {input}, {output});
    *pad.add_attribute() = onnx_io::make_string_attribute("mode", rest.pad_mode);
    if (opset_ >= 11) {
      const std::string pads_name = names_.fresh(name + "_pads");
      add_initializer(*m.scope, onnx_io::make_int64_tensor(pads_name, {static_cast<int64_t>(full.size())}, full));
      pad.add_input(pads_name);
    } else {
      *pad.add_attribute() = onnx_io::make_ints_attribute(opset_ >= 2 ? "pads" : "paddings", full);
    }
    nodes.push_back(std::move(pad));
    input = output;
  }

  // The rest's weight, stored where the split Conv's weight is (it follows that weight's name, as the phases do).
  onnx::TensorProto weight = *rest.weight;
  const std::string weight_name = names_.fresh(weight.name() + "_rest");
  weight.set_name(weight_name);
  const std::array<int64_t, 2> kernel{weight.dims(2), weight.dims(3)};
  store_like_source(m.weight, std::move(weight));
  const std::string conv_name = names_.fresh(base + "_rest");
  const std::string conv_out = names_.fresh(conv_name + "_out");
  std::vector<std::string> inputs{input, weight_name};
  if (!rest.bias.empty()) inputs.push_back(rest.bias);
  onnx::NodeProto conv = make_node("Conv", conv_name, std::move(inputs), {conv_out});
  *conv.add_attribute() = onnx_io::make_int_attribute("group", 1);
  *conv.add_attribute() = onnx_io::make_ints_attribute("kernel_shape", {kernel[0], kernel[1]});
  const auto& p = rest.conv_pads;
  *conv.add_attribute() = onnx_io::make_ints_attribute("pads", {p[0], p[1], p[2], p[3]});
  *conv.add_attribute() = onnx_io::make_ints_attribute("strides", {1, 1});
  nodes.push_back(std::move(conv));

  return conv_out;
}

}  // namespace dwdeconv::rewrite
