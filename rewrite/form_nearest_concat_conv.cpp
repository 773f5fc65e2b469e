// Form `nearest_concat_conv`: a nearest Resize by s joined with other tensors by a Concat of channels, then a stride-1
// dense Conv (the U-Net skip): the Conv split by its input channels, the upsampled part recognised as the ConvTranspose
// it computes and the rest kept a Conv at full resolution (see its row below and docs/forms.md).
#include <algorithm>
#include <iterator>
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

// The Conv weight's input channels in `ranges` ([first, count) each, in order) as a tensor of their own:
// [C_out, C_in, Ky, Kx] -> [C_out, sum of counts, Ky, Kx].
ConstTensor slice_channels(const ConstTensor& f, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  const int64_t c_out = f.dims[0], c_in = f.dims[1], taps = f.dims[2] * f.dims[3];
  ConstTensor part;
  part.data_type = f.data_type;
  int64_t count = 0;
  for (const auto& [first, n] : ranges) count += n;
  part.dims = {c_out, count, f.dims[2], f.dims[3]};
  for (int64_t co = 0; co < c_out; ++co) {
    for (const auto& [first, n] : ranges) {
      const auto from = f.reals.begin() + static_cast<std::ptrdiff_t>((co * c_in + first) * taps);
      part.reals.insert(part.reals.end(), from, from + static_cast<std::ptrdiff_t>(n * taps));
    }
  }
  return part;
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

// The Pad between the Concat and the Conv as the rest takes it: the same Pad of its own tensor (reflect, edge), or
// zeros added to its Conv's pads. The upsampled parts fold it as the nearest_conv form does (upsampled_part).
core::Status rest_pad(const MatchContext& context, const onnx::NodeProto& between, const GraphScope& scope, ConvAddend& rest) {
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

// One upsampled input's part of the split Conv: the ConvTranspose that nearest(x) by the Resize's factor, the Pad
// `between` (or none) and the Conv with `conv_pads` and the weight channels `part` of that input compute, without the
// bias. `sum` (the first part's): the plan row's stride, kernel and pads.
core::Result<DeconvMatch> upsampled_part(const MatchContext& context, const onnx::NodeProto& conv, const GraphScope& scope,
                                         const onnx::NodeProto& resize, const onnx::NodeProto* between, const ConstTensor& part,
                                         std::array<int64_t, 4> pads, NodeSummary* sum) {
  if (use_count(context.uses, resize.output(0)) != 1) return declined("Resize output has another reader");
  auto s = parts::nearest_resize_factor(resize, scope, context.eval, context.types);
  if (!s) return s.error();
  if (sum != nullptr) sum->stride = *s, sum->strides = {*s, *s};
  bool edge_padding = false;
  if (between != nullptr) {
    if (auto folded = parts::fold_pad(context, *between, scope, *s, false, pads, edge_padding); !folded) return folded.error();
  }
  auto geo = parts::nearest_conv_geometry(part.dims, pads, *s, *s);
  if (!geo) return geo.error();
  const int64_t wy = (*geo)[0].kernel, wx = (*geo)[1].kernel, c_out = part.dims[0], c_up = part.dims[1];
  if (sum != nullptr) {
    sum->kernel = {wy, wx};
    sum->pads = std::array<int64_t, 4>{(*geo)[0].pad_begin, (*geo)[1].pad_begin, (*geo)[0].pad_end, (*geo)[1].pad_end};
    sum->output_padding = std::array<int64_t, 2>{0, 0};
  }
  // Conv(Concat(u, r)) = Conv_u(u) + Conv_r(r): the upsampled channels' part of the weight becomes the phases.
  auto boxed = parts::boxed_kernel(part, 1, c_up, wy, wx, *s, *s);
  if (!boxed) return boxed.error();
  if (auto why = parts::derived_overflow(*boxed, part.data_type); !why.empty()) return declined(why);
  DeconvMatch d =
      parts::derived_match(conv, scope, context.ir_version, context.types, resize.input(0), part.data_type, {c_up, c_out, wy, wx}, *boxed);
  d.group = 1;
  d.out_channels = c_out;
  d.y = (*geo)[0];
  d.x = (*geo)[1];
  d.edge_padding = edge_padding;
  d.bias.clear();  // added once, by the rest's Conv or the first part
  return d;
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
  const onnx::NodeProto* resize = nearest_producer(scope, concat->input(upsampled.front()));

  FormSelection out;
  out.summary = parts::conv_summary(conv, scope, Form::kNearestConv);  // the select step names the row
  out.resize = resize;
  for (size_t k = 1; k < upsampled.size(); ++k) out.more_resizes.push_back(nearest_producer(scope, concat->input(upsampled[k])));
  NodeSummary& sum = out.summary;
  const std::string& x = resize->input(0);
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
  const int64_t c_in = weight->dims[1], ky = weight->dims[2], kx = weight->dims[3];
  auto channels = input_channels(context, *concat, scope, c_in);
  if (!channels) return out.fail(channels.error());
  sum.channels = (*channels)[static_cast<size_t>(upsampled.front())];
  auto pads = parts::conv_pads(conv, ky, kx, false);
  if (!pads) return out.fail(pads.error());

  // The Concat (and the Pad) must feed only this Conv, or they stay and nothing is saved.
  if (use_count(context.uses, concat->output(0)) != 1) return out.fail(declined("Concat output has another reader"));
  std::vector<int64_t> first(channels->size(), 0);  // where each input's channels start in the Conv's
  for (size_t i = 1; i < first.size(); ++i) first[i] = first[i - 1] + (*channels)[i - 1];
  std::vector<DeconvMatch> ups;  // one part per upsampled input, the first the row's
  for (const int i : upsampled) {
    const auto k = static_cast<size_t>(i);
    auto part = upsampled_part(context, conv, scope, *nearest_producer(scope, concat->input(i)), between,
                               slice_channels(*weight, {{first[k], (*channels)[k]}}), *pads, ups.empty() ? &sum : nullptr);
    if (!part) {
      core::Error e = part.error();
      if (!ups.empty()) e.message = "Concat input '" + concat->input(i) + "': " + e.message;
      return out.fail(std::move(e));
    }
    ups.push_back(std::move(*part));
  }

  ConvAddend rest;
  rest.conv_pads = *pads;
  if (between != nullptr) {
    if (auto padded = rest_pad(context, *between, scope, rest); !padded) return out.fail(padded.error());
  }
  std::vector<std::pair<int64_t, int64_t>> rest_channels;
  for (int i = 0; i < concat->input_size(); ++i) {
    if (std::count(upsampled.begin(), upsampled.end(), i) != 0) continue;
    rest.inputs.push_back(concat->input(i));
    rest_channels.emplace_back(first[static_cast<size_t>(i)], (*channels)[static_cast<size_t>(i)]);
  }
  const std::string bias = conv.input_size() > 2 ? conv.input(2) : std::string();
  if (rest.inputs.empty()) {
    ups.front().bias = bias;  // every input upsampled: no rest, the first part adds the bias
  } else {
    const ConstTensor others = slice_channels(*weight, rest_channels);
    rest.bias = bias;
    rest.weight = std::make_shared<onnx::TensorProto>(
        onnx_io::make_tensor(ups.front().weight.name, weight->data_type, others.dims, others.reals, true));
  }
  rest.upsampled.assign(std::make_move_iterator(ups.begin() + 1), std::make_move_iterator(ups.end()));
  DeconvMatch deconv = std::move(ups.front());
  deconv.addend = std::move(rest);

  // What only this upsampler reads: the Resizes, the Concat (and the Pad), the Resizes' and Pad's constant chains and
  // the Conv's weight chain; the Concat's other inputs are read by the rest's Conv.
  std::vector<const onnx::NodeProto*> nodes, walk;
  if (between != nullptr) walk.push_back(between);
  for (const int i : upsampled) walk.push_back(nearest_producer(scope, concat->input(i)));
  nodes.assign(walk.begin() + (between != nullptr ? 1 : 0), walk.end());
  nodes.push_back(concat);
  if (between != nullptr) nodes.push_back(between);
  return out.succeed(std::move(deconv), parts::replaced_tensors(scope, x, nodes, {conv.input(1)}, walk));
}

}  // namespace

// Form `nearest_concat_conv` (the skip connection of U-Net and FPN decoders: Monodepth2, DBNet's fuse):
//   Before:  u_i = Resize(x_i)           nearest, an integer factor s_i >= 2 each (as nearest_conv takes it); no other
//                                        reader
//            c = Concat(r0.., u_0, ..)   axis 1, the upsampled inputs anywhere among the others r_j (or alone)
//           [v = Pad(c, p)]              optional: constant zeros, reflect with p <= s_i-1, or edge (as nearest_conv)
//            y = Conv(c|v, f[, B])       stride 1, dilation 1, group 1, cb + ce == K - 1
//   After:   y = sum_i ConvTranspose(x_i, w_i) + Conv(Pad(Concat(r_j..)), f_r, B): f split by input channels into f_i
//            (u_i's) and f_r, w_i the box-summed, flipped f_i as nearest_conv derives it; each part keeps the Pad; without
//            any r_j the first part adds B.
const FormRow& nearest_concat_conv_form() {
  static const FormRow row = [] {
    FormRow row;
    row.name = "nearest_concat_conv";
    row.described = "nearest Resizes in a Concat of channels, then a dense Conv (U-Net and FPN skips, FPN fuses)";
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
