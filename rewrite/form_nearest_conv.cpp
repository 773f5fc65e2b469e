// Form `nearest_conv`: a nearest Resize by an integer factor s straight into a stride-1 Conv, recognised as the
// ConvTranspose it computes (see its row below and docs/design.md, "Hand-written upsamplers are
// ConvTransposes too").
#include <set>

#include "nearest_conv_parts.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "recogniser_parts.h"
#include "rewrite/forms.h"

namespace dwdeconv::rewrite {
namespace parts {

using core::declined;

const onnx::NodeProto* one_input_concat(const GraphScope& scope, const std::string& name) {
  const onnx::NodeProto* concat = producer(scope, name, "Concat");
  return concat != nullptr && concat->input_size() == 1 && !concat->input(0).empty() ? concat : nullptr;
}

core::Result<std::array<int64_t, 4>> conv_pads(const onnx::NodeProto& conv, int64_t ky, int64_t kx, bool one_d) {
  auto auto_pad = onnx_io::get_string(conv, "auto_pad", "NOTSET");
  auto pads = onnx_io::get_ints(conv, "pads", {});
  if (!auto_pad) return auto_pad.error();
  if (!pads) return pads.error();
  if (auto conflict = parts::auto_pad_conflict(conv); !conflict.empty()) return declined(conflict);
  if (*auto_pad == "VALID") return std::array<int64_t, 4>{0, 0, 0, 0};
  if (*auto_pad == "SAME_UPPER" || *auto_pad == "SAME_LOWER") {
    // Stride 1 keeps the size: K-1 in total, the odd one at the end (UPPER) or at the begin (LOWER).
    const bool upper = *auto_pad == "SAME_UPPER";
    const int64_t ty = ky - 1, tx = kx - 1;
    const int64_t by = upper ? ty / 2 : ty - ty / 2, bx = upper ? tx / 2 : tx - tx / 2;
    return std::array<int64_t, 4>{by, bx, ty - by, tx - bx};
  }
  if (*auto_pad != "NOTSET") return declined("Conv auto_pad " + *auto_pad);
  if (pads->empty()) return std::array<int64_t, 4>{0, 0, 0, 0};
  if (one_d && pads->size() == 2) *pads = {0, (*pads)[0], 0, (*pads)[1]};
  if (pads->size() != 4) return declined("Conv pads " + join(*pads) + " are not " + (one_d ? "1-D" : "2-D"));
  for (int64_t p : *pads) {
    if (p < 0 || p > parts::kMaxPad) return declined("Conv pads " + join(*pads) + " are out of range");
  }
  return std::array<int64_t, 4>{(*pads)[0], (*pads)[1], (*pads)[2], (*pads)[3]};
}

namespace {

// The box sum of one axis: g[m] = sum_{b<s} f[m-(s-1)+b], f being 0 outside [0, K); g has K+s-1 taps.
double box_tap(const std::vector<double>& f, size_t base, size_t stride, int64_t k, int64_t s, int64_t m) {
  double sum = 0.0;
  for (int64_t b = 0; b < s; ++b) {
    const int64_t t = m - (s - 1) + b;
    if (t >= 0 && t < k) sum += f[base + static_cast<size_t>(t) * stride];
  }
  return sum;
}

}  // namespace

core::Status fold_pad(const MatchContext& context, const onnx::NodeProto& between, const GraphScope& scope, int64_t s, bool one_d,
                      std::array<int64_t, 4>& pads, bool& edge_padding) {
  if (use_count(context.uses, between.output(0)) != 1) return declined("Pad output has another reader");
  auto pad = parts::spatial_pad(between, scope, context.eval, one_d);
  if (!pad) return pad.error();
  if (pad->mode == "constant") {
    // Zeros around the upsampled tensor, then the Conv's own zeros: one zero padding, added up.
    for (size_t k = 0; k < 4; ++k) pads[k] += pad->pads[k];
    return core::Ok{};
  }
  // Reflecting an s-times nearest upsampling by p <= s-1 repeats its first (last) cell's sample, x's edge
  // sample, as an edge Pad does for any p: the padded samples are x at the clamped index, so each phase pads x
  // by repeating its edge where the zero form pads with zeros (fast_neural_style's UpsampleConvLayer).
  for (int64_t p : pad->pads) {
    if (pad->mode == "reflect" && p > s - 1) {
      return declined("reflect Pad pads " + join({pad->pads[0], pad->pads[1], pad->pads[2], pad->pads[3]}) +
                      " reach past the first cell of the x" + std::to_string(s) + " upsampling (at most " + std::to_string(s - 1) + ")");
    }
  }
  if (pads != std::array<int64_t, 4>{0, 0, 0, 0}) return declined("Conv pads zeros after a " + pad->mode + " Pad");
  pads = pad->pads;
  edge_padding = true;
  return core::Ok{};
}

// Per axis: nearest by s, then Conv(K, pads cb, ce) is ConvTranspose k = K+s-1, Pb = K-1-cb, Pe = K-1-ce; clean exactly
// when cb + ce == K - 1 (the Conv keeps the upsampled size). `dims` are the Conv weight's as 2-D, `sy` and `s` the
// factors on H and W.
core::Result<std::array<core::AxisGeometry, 2>> nearest_conv_geometry(const std::vector<int64_t>& dims, const std::array<int64_t, 4>& pads,
                                                                      int64_t sy, int64_t s) {
  std::array<core::AxisGeometry, 2> geo;
  for (size_t axis = 0; axis < 2; ++axis) {
    const int64_t k = dims[2 + axis];
    const int64_t cb = pads[axis], ce = pads[axis + 2];
    const int64_t s_axis = axis == 0 ? sy : s;
    if (cb + ce != k - 1) {
      const int64_t excess = cb + ce - (k - 1);
      return declined("not a clean upscale: output is " + std::to_string(s) + "*" + (axis == 0 ? "H" : "W") + (excess > 0 ? "+" : "") +
                      std::to_string(excess) + " on that axis (Conv pads " + std::to_string(cb) + "+" + std::to_string(ce) + ", kernel " +
                      std::to_string(k) + ")");
    }
    geo[axis] = {k + s_axis - 1, s_axis, k - 1 - cb, k - 1 - ce, 0};
  }
  return geo;
}

// The derived kernel [C_in, C_out/g, wy, wx] of the Conv weight `f` ([C_out, C_in/g, Ky, Kx] as 2-D), per (output,
// input) channel pair of each group:
//   g[m] = sum_{b<s} f[m-(s-1)+b] on each axis (the box), w = flip(g), and the layout turned around:
//   Conv [C_out, C_in/g, Ky, Kx] -> ConvTranspose [C_in, C_out/g, ky, kx], ci = grp*C_in/g + i, co = grp*C_out/g + o.
core::Result<std::vector<double>> boxed_kernel(const ConstTensor& f, int64_t group, int64_t c_in, int64_t wy, int64_t wx, int64_t sy,
                                               int64_t s) {
  const int64_t c_out = f.dims[0], c_in_group = f.dims[1], ky = f.dims[2], kx = f.dims[3];
  const int64_t c_out_group = c_out / group;
  // Bounded like every folded value: a large s grows the kernel by (K+s-1)^2 / K^2, before --max-phases is asked.
  // C_in * C_out/g * ky * kx <= (folded weight elements <= 2^24) * (1 + 1023)^2: no overflow.
  if (const int64_t elements = c_in * c_out_group * wy * wx; elements > kMaxFoldedElements) {
    return declined("the equivalent ConvTranspose kernel would have " + std::to_string(elements) + " elements, over " +
                    std::to_string(kMaxFoldedElements));
  }
  std::vector<double> w(static_cast<size_t>(c_in * c_out_group * wy * wx));
  std::vector<double> rows(static_cast<size_t>(ky * wx));  // one channel pair boxed along x: [Ky, wx]
  for (int64_t co = 0; co < c_out; ++co) {
    for (int64_t i = 0; i < c_in_group; ++i) {
      const size_t plane = static_cast<size_t>((co * c_in_group + i) * ky * kx);
      for (int64_t ty = 0; ty < ky; ++ty) {
        for (int64_t mx = 0; mx < wx; ++mx) {
          rows[static_cast<size_t>(ty * wx + mx)] = box_tap(f.reals, plane + static_cast<size_t>(ty * kx), 1, kx, s, mx);  // L (W)
        }
      }
      const int64_t ci = (co / c_out_group) * c_in_group + i, o = co % c_out_group;
      const size_t dst = static_cast<size_t>((ci * c_out_group + o) * wy * wx);
      for (int64_t my = 0; my < wy; ++my) {
        for (int64_t mx = 0; mx < wx; ++mx) {
          // w[t] = g[k-1-t] on both axes.
          w[dst + static_cast<size_t>((wy - 1 - my) * wx + (wx - 1 - mx))] =
              box_tap(rows, static_cast<size_t>(mx), static_cast<size_t>(wx), ky, sy, my);
        }
      }
    }
  }
  return w;
}

core::Result<int64_t> stride_one_group(const onnx::NodeProto& conv) {
  auto group = onnx_io::get_int(conv, "group", 1);
  auto strides = onnx_io::get_ints(conv, "strides", {});
  auto dilations = onnx_io::get_ints(conv, "dilations", {});
  for (const core::Error* e :
       {group.ok() ? nullptr : &group.error(), strides.ok() ? nullptr : &strides.error(), dilations.ok() ? nullptr : &dilations.error()}) {
    if (e != nullptr) return *e;
  }
  for (int64_t s : *strides) {
    if (s != 1) return declined("Conv stride " + std::to_string(s));
  }
  for (int64_t d : *dilations) {
    if (d != 1) return declined("Conv dilation " + std::to_string(d));
  }
  return *group;
}

}  // namespace parts

namespace {

using core::declined;
using parts::boxed_kernel;
using parts::conv_pads;
using parts::fold_pad;
using parts::join;
using parts::nearest_conv_geometry;
using parts::producer;
using parts::stride_one_group;
using parts::use_count;

std::optional<FormSelection> select_nearest_conv(const MatchContext& context, const onnx::NodeProto& conv, const GraphScope& scope) {
  const onnx_io::ScopedTypes& types = context.types;
  ConstEvaluator& eval = context.eval;
  // Cheap and selective first (the row's root op and arity are checked already): a Conv reading a Resize of this graph.
  // Resize -> [Concat] -> [Pad] -> Conv, the Concat one of a single input (an identity).
  std::string read = conv.input(0);
  const onnx::NodeProto* between = producer(scope, read, "Pad");
  if (between != nullptr) {
    if (between->input_size() < 1) return std::nullopt;
    read = between->input(0);
  }
  const onnx::NodeProto* concat = parts::one_input_concat(scope, read);
  if (concat != nullptr) read = concat->input(0);
  const onnx::NodeProto* resize = producer(scope, read, "Resize");
  if (resize == nullptr || resize->input_size() < 2 || resize->input(0).empty()) return std::nullopt;

  FormSelection out;
  out.summary = parts::conv_summary(conv, scope, Form::kNearestConv);
  out.resize = resize;
  NodeSummary& sum = out.summary;
  const std::string& x = resize->input(0);

  // The Conv: stride 1, dilation 1, any group, a constant [C_out, C_in/group, Ky, Kx] weight.
  auto group = stride_one_group(conv);
  if (!group) return out.fail(group.error());
  auto weight = eval.evaluate_weight(conv.input(1), scope);
  if (!weight) return out.fail(declined("Conv weight not constant: " + weight.error().message));
  // A Conv1d (a rank-3 weight, Kokoro's nearest x2 then 1x1) is the 2-D one of [N, C, 1, L]: a unit H axis.
  const bool one_d = weight->dims.size() == 3;
  if (weight->dims.size() != 4 && !one_d) {
    return out.fail(declined("not 1-D or 2-D: Conv weight has rank " + std::to_string(weight->dims.size())));
  }
  if (auto conflict = parts::kernel_shape_conflict(conv, weight->dims); !conflict.empty()) return out.fail(declined(conflict));
  if (weight->is_integer()) return out.fail(declined("unsupported element type " + onnx_io::data_type_name(weight->data_type)));
  if (one_d) weight->dims.insert(weight->dims.begin() + 2, 1);
  const int64_t c_out = weight->dims[0], c_in_group = weight->dims[1], ky = weight->dims[2], kx = weight->dims[3];
  if (*group < 1 || c_out < 1 || c_in_group < 1 || ky < 1 || kx < 1 || c_out % *group != 0) {
    return out.fail(declined("Conv group " + std::to_string(*group) + " does not fit weight " + join(weight->dims)));
  }
  const int64_t c_in = c_in_group * *group;
  sum.channels = c_in;
  if (auto c = parts::known_dim(types, scope, x, 1); c && *c != c_in) {
    return out.fail(declined("Conv expects " + std::to_string(c_in) + " input channels, '" + x + "' has " + std::to_string(*c)));
  }
  auto pads = conv_pads(conv, ky, kx, one_d);
  if (!pads) return out.fail(pads.error());

  // The upsampled tensor (and the padded one) must feed only this Conv, or it stays and nothing is saved.
  if (use_count(context.uses, resize->output(0)) != 1) return out.fail(declined("Resize output has another reader"));
  if (concat != nullptr && use_count(context.uses, concat->output(0)) != 1) return out.fail(declined("Concat output has another reader"));
  auto s = parts::nearest_resize_factor(*resize, scope, eval, types, one_d);
  if (!s) return out.fail(s.error());
  const int64_t sy = one_d ? 1 : *s;  // the factor on each axis: a 1-D one upsamples L alone
  if (!one_d) sum.stride = *s;
  sum.strides = {sy, *s};
  bool edge_padding = false;
  if (between != nullptr) {
    if (auto folded = fold_pad(context, *between, scope, *s, one_d, *pads, edge_padding); !folded) return out.fail(folded.error());
  }

  auto geo = nearest_conv_geometry(weight->dims, *pads, sy, *s);
  if (!geo) return out.fail(geo.error());
  sum.kernel = {(*geo)[0].kernel, (*geo)[1].kernel};
  sum.pads = std::array<int64_t, 4>{(*geo)[0].pad_begin, (*geo)[1].pad_begin, (*geo)[0].pad_end, (*geo)[1].pad_end};
  sum.output_padding = std::array<int64_t, 2>{0, 0};

  const int64_t wy = (*geo)[0].kernel, wx = (*geo)[1].kernel;
  const int64_t c_out_group = c_out / *group;
  auto boxed = boxed_kernel(*weight, *group, c_in, wy, wx, sy, *s);
  if (!boxed) return out.fail(boxed.error());
  const std::vector<double>& w = *boxed;
  if (auto why = parts::derived_overflow(w, weight->data_type); !why.empty()) return out.fail(declined(why));
  UpsamplerMatch m;
  m.deconv = parts::derived_match(conv, scope, context.ir_version, types, x, weight->data_type, {c_in, c_out_group, wy, wx}, w);
  DeconvMatch& d = m.deconv;
  d.group = *group;
  d.out_channels = c_out;
  d.y = (*geo)[0];
  d.x = (*geo)[1];
  d.edge_padding = edge_padding;
  if (one_d) {
    // As the matcher reads a 1-D node: x's type as [N, C, 1, L].
    d.one_d = true;
    d.input_type = parts::one_d_type(types, scope, x);
  }

  // What only this upsampler reads: the Resize (and the Pad), their roi/scales/sizes/pads chains and the Conv's
  // weight chain.
  // The Pad's pads chain is walked before the Resize's (its data input is the Resize's output, replaced already).
  std::vector<const onnx::NodeProto*> nodes{resize}, walk;
  for (const onnx::NodeProto* node : {concat, between}) {
    if (node != nullptr) nodes.push_back(node);
  }
  walk.assign(nodes.rbegin(), nodes.rend());
  m.replaced = parts::replaced_tensors(scope, x, nodes, {conv.input(1)}, walk);
  out.match = std::move(m);
  return out;
}

}  // namespace

// Form `nearest_conv` (the upsampling block of U-Nets, VAE decoders, FPNs):
//   Before:  u = Resize(x)           nearest, an integer factor s >= 2 on H and W (scales or sizes), coordinates
//                                    that make it x[floor(o/s)] exactly; u has no other reader
//           [u = Concat(u)]          optional: a Concat of one input (torch.cat([u], 1)) is u
//           [v = Pad(u, p)]          optional: constant zeros (added to the Conv's pads), or reflect with p <= s-1
//                                    or edge (the Conv's pads then 0): x's edge samples, so the phases edge-pad x
//            y = Conv(u|v, f[, B])   stride 1, dilation 1, any group, kernel K, pads cb/ce with cb + ce == K - 1
//   After:   y = ConvTranspose(x, w, B) with group and channels of the Conv, k = K+s-1, w = flip(g),
//            g[m] = sum_{b<s} f[m-(s-1)+b] per axis, Pb = K-1-cb, Pe = K-1-ce.
const FormRow& nearest_conv_form() {
  static const FormRow row = [] {
    FormRow row;
    row.form = Form::kNearestConv;
    row.name = "nearest_conv";
    row.described = "nearest Resize, then a Conv of any group (U-Nets, VAE decoders, FPNs)";
    // Its ops: the chain, and the Resize's sizes or scales computed from Shape.
    row.ops = {"Resize", "Pad", "Conv", "Constant", "Shape", "Gather", "Unsqueeze", "Concat", "Cast", "Mul"};
    row.recognise = select_nearest_conv;
    row.min_opset = 10;  // Resize
    row.has_resize = true;
    row.kernel_grows_by_stride = true;
    return row;
  }();
  return row;
}

}  // namespace dwdeconv::rewrite
