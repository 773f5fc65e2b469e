// Form `nearest_concat_conv`: a nearest Resize by s joined with other tensors by a Concat of channels, then a stride-1
// dense Conv (the U-Net skip): the Conv split by its input channels, the upsampled part recognised as the ConvTranspose
// it computes and the rest kept a Conv at full resolution (see its row below and docs/forms.md).
#include <memory>

#include "nearest_conv_parts.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "recogniser_parts.h"
#include "rewrite/forms.h"

namespace dwdeconv::rewrite {
namespace {

using core::declined;
using parts::join;
using parts::producer;
using parts::use_count;

// The nearest Resize that writes `name`, or nullptr (a linear one starts no upsampler form).
const onnx::NodeProto* nearest_producer(const GraphScope& scope, const std::string& name) {
  const onnx::NodeProto* resize = producer(scope, name, "Resize");
  if (resize == nullptr || resize->input_size() < 2 || resize->input(0).empty()) return nullptr;
  auto mode = onnx_io::get_string(*resize, "mode", "nearest");
  return mode && *mode == "nearest" ? resize : nullptr;
}

// The Conv weight's input channels [first, first + count) as a tensor of their own (the upsampled part), and the
// others, in order (the rest): [C_out, C_in, Ky, Kx] -> [C_out, count, Ky, Kx] and [C_out, C_in - count, Ky, Kx].
std::pair<ConstTensor, ConstTensor> split_channels(const ConstTensor& f, int64_t first, int64_t count) {
  const int64_t c_out = f.dims[0], c_in = f.dims[1], taps = f.dims[2] * f.dims[3];
  ConstTensor part, rest;
  part.data_type = rest.data_type = f.data_type;
  part.dims = {c_out, count, f.dims[2], f.dims[3]};
  rest.dims = {c_out, c_in - count, f.dims[2], f.dims[3]};
  for (int64_t co = 0; co < c_out; ++co) {
    for (int64_t ci = 0; ci < c_in; ++ci) {
      auto& into = ci >= first && ci < first + count ? part.reals : rest.reals;
      const auto from = f.reals.begin() + static_cast<std::ptrdiff_t>((co * c_in + ci) * taps);
      into.insert(into.end(), from, from + static_cast<std::ptrdiff_t>(taps));
    }
  }
  return {std::move(part), std::move(rest)};
}

// The channels of each Concat input (their sum is the Conv's C_in), or why they are not known or do not add up.
core::Result<std::vector<int64_t>> input_channels(const MatchContext& context, const onnx::NodeProto& concat, const GraphScope& scope,
                                                  int64_t c_in) {
  std::vector<int64_t> channels;
  int64_t sum = 0;
  for (const auto& in : concat.input()) {
    auto c = parts::known_dim(context.types, scope, in, 1);
    if (!c) return declined("the channels of Concat input '" + in + "' are not known, so the Conv's weight cannot be split");
    channels.push_back(*c);
    sum += *c;
  }
  if (sum != c_in) return declined("the Concat's inputs have " + std::to_string(sum) + " channels, the Conv reads " + std::to_string(c_in));
  return channels;
}

// The Pad between the Concat and the Conv as each part takes it: folded into the upsampled part's `up_pads` (and its
// `edge_padding`), as the nearest_conv form folds it, and for the rest the same Pad of its own tensor (reflect, edge)
// or zeros added to its Conv's pads.
core::Status split_pad(const MatchContext& context, const onnx::NodeProto& between, const GraphScope& scope, int64_t s,
                       std::array<int64_t, 4>& up_pads, bool& edge_padding, ConvAddend& rest) {
  if (auto folded = parts::fold_pad(context, between, scope, s, false, up_pads, edge_padding); !folded) return folded.error();
  auto pad = parts::spatial_pad(between, scope, context.eval);
  if (!pad) return pad.error();
  if (pad->mode == "constant") {
    for (size_t k = 0; k < 4; ++k) rest.conv_pads[k] += pad->pads[k];
  } else {
    rest.pad_mode = pad->mode;  // the Conv's own pads are 0 here: fold_pad declines any other
    rest.pad = pad->pads;
  }
  return core::Ok{};
}

std::optional<FormSelection> select_nearest_concat_conv(const MatchContext& context, const onnx::NodeProto& conv, const GraphScope& scope) {
  // Cheap and selective first: Concat -> [Pad] -> Conv, a nearest Resize among the Concat's inputs.
  std::string read = conv.input(0);
  const onnx::NodeProto* between = producer(scope, read, "Pad");
  if (between != nullptr) {
    if (between->input_size() < 1) return std::nullopt;
    read = between->input(0);
  }
  const onnx::NodeProto* concat = producer(scope, read, "Concat");
  if (concat == nullptr || concat->input_size() < 2) return std::nullopt;
  std::vector<int> upsampled;  // the Concat inputs a nearest Resize writes
  for (int i = 0; i < concat->input_size(); ++i) {
    if (nearest_producer(scope, concat->input(i)) != nullptr) upsampled.push_back(i);
  }
  if (upsampled.empty()) return std::nullopt;
  const int at = upsampled.front();
  const onnx::NodeProto* resize = nearest_producer(scope, concat->input(at));

  FormSelection out;
  out.summary = parts::conv_summary(conv, scope, Form::kNearestConv);  // the select step names the row
  out.resize = resize;
  NodeSummary& sum = out.summary;
  const std::string& x = resize->input(0);
  if (upsampled.size() > 1) {
    return out.fail(declined("its Concat joins " + std::to_string(upsampled.size()) +
                             " nearest Resizes: the split rewrites a Concat with one upsampled input (the first, '" + concat->input(at) +
                             "', is named here; the others have rows of their own)"));
  }
  auto axis = onnx_io::get_int(*concat, "axis", 0);
  if (!axis) return out.fail(axis.error());
  if (*axis != 1 && *axis != -3) return out.fail(declined("Concat axis " + std::to_string(*axis) + ": the split takes channels (axis 1)"));

  // The Conv: stride 1, dilation 1, dense, a constant 2-D weight [C_out, C_in, Ky, Kx].
  auto group = parts::stride_one_group(conv);
  if (!group) return out.fail(group.error());
  if (*group != 1) return out.fail(declined("Conv group " + std::to_string(*group) + ": the split takes a dense Conv (group 1)"));
  auto weight = context.eval.evaluate_weight(conv.input(1), scope);
  if (!weight) return out.fail(declined("Conv weight not constant: " + weight.error().message));
  if (weight->dims.size() != 4) return out.fail(declined("not 2-D: Conv weight has rank " + std::to_string(weight->dims.size())));
  if (auto conflict = parts::kernel_shape_conflict(conv, weight->dims); !conflict.empty()) return out.fail(declined(conflict));
  if (weight->is_integer()) return out.fail(declined("unsupported element type " + onnx_io::data_type_name(weight->data_type)));
  const int64_t c_out = weight->dims[0], c_in = weight->dims[1], ky = weight->dims[2], kx = weight->dims[3];
  auto channels = input_channels(context, *concat, scope, c_in);
  if (!channels) return out.fail(channels.error());
  const int64_t c_up = (*channels)[static_cast<size_t>(at)];
  int64_t first = 0;
  for (int i = 0; i < at; ++i) first += (*channels)[static_cast<size_t>(i)];
  sum.channels = c_up;
  auto pads = parts::conv_pads(conv, ky, kx, false);
  if (!pads) return out.fail(pads.error());

  // The upsampled tensor, the Concat (and the Pad) must feed only this Conv, or they stay and nothing is saved.
  if (use_count(context.uses, resize->output(0)) != 1) return out.fail(declined("Resize output has another reader"));
  if (use_count(context.uses, concat->output(0)) != 1) return out.fail(declined("Concat output has another reader"));
  auto s = parts::nearest_resize_factor(*resize, scope, context.eval, context.types);
  if (!s) return out.fail(s.error());
  sum.stride = *s;
  sum.strides = {*s, *s};
  ConvAddend rest;
  rest.conv_pads = *pads;
  std::array<int64_t, 4> up_pads = *pads;
  bool edge_padding = false;
  if (between != nullptr) {
    if (auto split = split_pad(context, *between, scope, *s, up_pads, edge_padding, rest); !split) return out.fail(split.error());
  }
  auto geo = parts::nearest_conv_geometry(weight->dims, up_pads, *s, *s);
  if (!geo) return out.fail(geo.error());
  sum.kernel = {(*geo)[0].kernel, (*geo)[1].kernel};
  sum.pads = std::array<int64_t, 4>{(*geo)[0].pad_begin, (*geo)[1].pad_begin, (*geo)[0].pad_end, (*geo)[1].pad_end};
  sum.output_padding = std::array<int64_t, 2>{0, 0};

  // Conv(Concat(u, r)) = Conv_u(u) + Conv_r(r): the upsampled channels' part of the weight becomes the phases.
  auto [part, others] = split_channels(*weight, first, c_up);
  const int64_t wy = (*geo)[0].kernel, wx = (*geo)[1].kernel;
  auto boxed = parts::boxed_kernel(part, 1, c_up, wy, wx, *s, *s);
  if (!boxed) return out.fail(boxed.error());
  if (auto why = parts::derived_overflow(*boxed, weight->data_type); !why.empty()) return out.fail(declined(why));
  UpsamplerMatch m;
  m.deconv = parts::derived_match(conv, scope, context.ir_version, context.types, x, weight->data_type, {c_up, c_out, wy, wx}, *boxed);
  DeconvMatch& d = m.deconv;
  d.group = 1;
  d.out_channels = c_out;
  d.y = (*geo)[0];
  d.x = (*geo)[1];
  d.edge_padding = edge_padding;
  rest.bias = d.bias;  // added once, by the rest's Conv
  d.bias.clear();
  for (int i = 0; i < concat->input_size(); ++i) {
    if (i != at) rest.inputs.push_back(concat->input(i));
  }
  rest.weight =
      std::make_shared<onnx::TensorProto>(onnx_io::make_tensor(d.weight.name, weight->data_type, others.dims, others.reals, true));
  d.addend = std::move(rest);

  // What only this upsampler reads: the Resize, the Concat (and the Pad), the Resize's and Pad's constant chains and
  // the Conv's weight chain; the Concat's other inputs are read by the rest's Conv.
  std::vector<const onnx::NodeProto*> nodes{resize, concat}, walk{resize};
  if (between != nullptr) {
    nodes.push_back(between);
    walk.insert(walk.begin(), between);
  }
  m.replaced = parts::replaced_tensors(scope, x, nodes, {conv.input(1)}, walk);
  out.match = std::move(m);
  return out;
}

}  // namespace

// Form `nearest_concat_conv` (the skip connection of U-Net and FPN decoders: Monodepth2, DBNet):
//   Before:  u = Resize(x)               nearest, an integer factor s >= 2 (as nearest_conv takes it); no other reader
//            c = Concat(r0.., u, r1..)   axis 1, u the one nearest-upsampled input, anywhere among them
//           [v = Pad(c, p)]              optional: constant zeros, reflect with p <= s-1, or edge (as nearest_conv)
//            y = Conv(c|v, f[, B])       stride 1, dilation 1, group 1, cb + ce == K - 1
//   After:   y = ConvTranspose(x, w_u) + Conv(Pad(Concat(r0.., r1..)), f_r, B): f split by input channels into f_u
//            (u's) and f_r, w_u the box-summed, flipped f_u as nearest_conv derives it; each part keeps the Pad.
const FormRow& nearest_concat_conv_form() {
  static const FormRow row = [] {
    FormRow row;
    row.name = "nearest_concat_conv";
    row.described = "nearest Resize, a Concat of channels with other tensors, then a dense Conv (U-Net and FPN skips)";
    // Its ops: the chain, and the Resize's sizes or scales computed from Shape.
    row.ops = {"Resize", "Concat", "Pad", "Conv", "Constant", "Shape", "Gather", "Unsqueeze", "Cast", "Mul"};
    row.recognise = select_nearest_concat_conv;
    row.min_opset = 10;  // Resize
    row.has_resize = true;
    row.kernel_grows_by_stride = true;
    return row;
  }();
  return row;
}

}  // namespace dwdeconv::rewrite
