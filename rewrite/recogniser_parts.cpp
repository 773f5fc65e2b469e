#include "recogniser_parts.h"

#include <cmath>
#include <cstdio>
#include <memory>

#include "core/text.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::rewrite::parts {

using core::declined;

bool default_domain(const onnx::NodeProto& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

const onnx::NodeProto* producer(const GraphScope& scope, const std::string& name, const std::string& op) {
  if (name.empty()) return nullptr;
  for (const auto& node : scope.graph->node()) {
    for (const auto& out : node.output()) {
      if (out == name) return node.op_type() == op && default_domain(node) && node.output_size() == 1 ? &node : nullptr;
    }
  }
  return nullptr;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return "[" + s + "]";
}

std::string number(double v) { return core::shortest_number(v); }

std::optional<int64_t> known_dim(const onnx_io::ScopedTypes& types, const GraphScope& scope, const std::string& name, int64_t axis) {
  const auto* type = types.find(scope.index, name);
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) return std::nullopt;
  const auto& shape = type->tensor_type().shape();
  if (axis < 0 || axis >= shape.dim_size() || !shape.dim(static_cast<int>(axis)).has_dim_value()) return std::nullopt;
  return shape.dim(static_cast<int>(axis)).dim_value();
}

int use_count(const std::map<std::string, int>& uses, const std::string& name) {
  auto it = uses.find(name);
  return it == uses.end() ? 0 : it->second;
}

void collect_upstream(const std::string& name, const GraphScope& scope, const std::string& stop,
                      std::set<std::pair<size_t, std::string>>& seen, std::vector<std::pair<const GraphScope*, std::string>>& out) {
  if (name.empty() || name == stop) return;
  for (const GraphScope* at = &scope; at != nullptr; at = at->parent) {
    for (const auto& node : at->graph->node()) {
      for (const auto& o : node.output()) {
        if (o != name) continue;
        if (!seen.insert({at->index, name}).second) return;
        out.emplace_back(at, name);
        if (node.op_type() == "Shape") return;
        for (const auto& in : node.input()) collect_upstream(in, *at, stop, seen, out);
        return;
      }
    }
    for (const auto& init : at->graph->initializer()) {
      if (init.name() == name) {
        if (seen.insert({at->index, name}).second) out.emplace_back(at, name);
        return;
      }
    }
    for (const auto& input : at->graph->input()) {
      if (input.name() == name) return;
    }
  }
}

std::vector<std::pair<const GraphScope*, std::string>> replaced_tensors(const GraphScope& scope, const std::string& x,
                                                                        const std::vector<const onnx::NodeProto*>& nodes,
                                                                        const std::vector<std::string>& also,
                                                                        const std::vector<const onnx::NodeProto*>& walk) {
  std::vector<std::pair<const GraphScope*, std::string>> out;
  std::set<std::pair<size_t, std::string>> seen;
  for (const auto* node : nodes) {
    out.emplace_back(&scope, node->output(0));
    seen.insert({scope.index, node->output(0)});
  }
  for (const auto* node : walk.empty() ? nodes : walk) {
    for (const auto& in : node->input()) collect_upstream(in, scope, x, seen, out);
  }
  for (const auto& name : also) collect_upstream(name, scope, x, seen, out);
  return out;
}

namespace {

// The full pads of Pad `pad` of a rank-`rank` tensor ([begins..., ends...], none negative) in `mode`, or why not:
// pads that are not constant, an axes input, a non-zero value in constant mode, a crop, or pads out of range.
core::Result<std::vector<int64_t>> pads_of(const onnx::NodeProto& pad, const GraphScope& scope, ConstEvaluator& eval, size_t rank,
                                           const std::string& mode) {
  std::vector<int64_t> pads;
  double value = 0.0;
  if (pad.input_size() >= 2 && !pad.input(1).empty()) {  // opset 11 on: pads, constant_value, axes inputs
    auto p = eval.evaluate_flagged(pad.input(1), scope);
    if (!p) return declined("Pad pads not constant: " + p.error().message);
    if (auto ok = decidable(*p, "Pad pads are"); !ok) return ok.error();
    if (!p->is_integer()) return declined("Pad pads are not integers");
    pads = p->ints;
    if (pad.input_size() >= 3 && !pad.input(2).empty()) {
      auto v = eval.evaluate_flagged(pad.input(2), scope);
      if (!v) return declined("Pad value not constant: " + v.error().message);
      if (auto ok = decidable(*v, "Pad value is"); !ok) return ok.error();  // it must be 0 on every runtime
      if (v->size() != 1) return declined("Pad value is not one element");
      value = v->at(0);
    }
    if (pad.input_size() >= 4 && !pad.input(3).empty()) return declined("Pad with axes");
  } else {
    auto p = onnx_io::get_ints(pad, onnx_io::find_attribute(pad, "paddings") != nullptr ? "paddings" : "pads", {});
    if (!p) return p.error();
    pads = *p;
    if (const auto* v = onnx_io::find_attribute(pad, "value")) value = v->f();
  }
  if (mode == "constant" && value != 0.0) return declined("Pad value " + number(value) + ", not 0");
  if (pads.size() != 2 * rank) {
    return declined("Pad pads " + join(pads) + " are not those of a " + std::to_string(rank) + "-D tensor");
  }
  for (int64_t p : pads) {
    if (p < 0) return declined("Pad pads " + join(pads) + " crop");
    if (p > kMaxPad) return declined("Pad pads " + join(pads) + " are larger than any kernel this tool rewrites");
  }
  return pads;
}

}  // namespace

core::Result<std::vector<int64_t>> constant_zero_pads(const onnx::NodeProto& pad, const GraphScope& scope, ConstEvaluator& eval,
                                                      size_t rank) {
  auto mode = onnx_io::get_string(pad, "mode", "constant");
  if (!mode) return mode.error();
  if (*mode != "constant") return declined("Pad mode " + *mode);
  return pads_of(pad, scope, eval, rank, *mode);
}

core::Result<SpatialPad> spatial_pad(const onnx::NodeProto& pad, const GraphScope& scope, ConstEvaluator& eval, bool one_d) {
  auto mode = onnx_io::get_string(pad, "mode", "constant");
  if (!mode) return mode.error();
  if (*mode != "constant" && *mode != "reflect" && *mode != "edge") return declined("Pad mode " + *mode);
  auto pads = pads_of(pad, scope, eval, one_d ? 3 : 4, *mode);
  if (!pads) return pads.error();
  const auto& p = *pads;
  const size_t r = one_d ? 3 : 4;
  if (p[0] != 0 || p[1] != 0 || p[r] != 0 || p[r + 1] != 0) return declined("Pad pads " + join(p) + " pad the batch or channel axis");
  if (one_d) return SpatialPad{*mode, {0, p[2], 0, p[5]}};
  return SpatialPad{*mode, {p[2], p[3], p[6], p[7]}};
}

core::Result<std::array<int64_t, 4>> pad_amounts(const onnx::NodeProto& pad, const GraphScope& scope, ConstEvaluator& eval) {
  auto mode = onnx_io::get_string(pad, "mode", "constant");
  if (!mode) return mode.error();
  if (*mode != "constant") return declined("Pad mode " + *mode);
  auto spatial = spatial_pad(pad, scope, eval);
  if (!spatial) return spatial.error();
  return spatial->pads;
}

std::string auto_pad_conflict(const onnx::NodeProto& conv) {
  auto auto_pad = onnx_io::get_string(conv, "auto_pad", "NOTSET");
  if (!auto_pad) return auto_pad.error().message;
  if (*auto_pad == "NOTSET" || onnx_io::find_attribute(conv, "pads") == nullptr) return "";
  return "Conv has both auto_pad " + *auto_pad + " and pads, which the ONNX spec forbids";
}

std::string kernel_shape_conflict(const onnx::NodeProto& conv, const std::vector<int64_t>& weight_dims) {
  auto kernel_shape = onnx_io::get_ints(conv, "kernel_shape", {});
  if (!kernel_shape) return kernel_shape.error().message;
  if (kernel_shape->empty() || weight_dims.size() != 4) return "";
  if (*kernel_shape == std::vector<int64_t>{weight_dims[2], weight_dims[3]}) return "";
  return "Conv kernel_shape " + join(*kernel_shape) + " disagrees with its weight " + join(weight_dims);
}

core::Result<ConvTail> read_conv_tail(const onnx::NodeProto& conv, const GraphScope& scope, ConstEvaluator& eval, NodeSummary& summary,
                                      bool any_group) {
  auto group = onnx_io::get_int(conv, "group", 1);
  auto strides = onnx_io::get_ints(conv, "strides", {});
  auto dilations = onnx_io::get_ints(conv, "dilations", {});
  auto conv_pads = onnx_io::get_ints(conv, "pads", {});
  auto auto_pad = onnx_io::get_string(conv, "auto_pad", "NOTSET");
  for (const core::Error* e :
       {group.ok() ? nullptr : &group.error(), strides.ok() ? nullptr : &strides.error(), dilations.ok() ? nullptr : &dilations.error(),
        conv_pads.ok() ? nullptr : &conv_pads.error(), auto_pad.ok() ? nullptr : &auto_pad.error()}) {
    if (e != nullptr) return *e;
  }
  for (int64_t s : *strides) {
    if (s != 1) return declined("Conv stride " + std::to_string(s));
  }
  for (int64_t d : *dilations) {
    if (d != 1) return declined("Conv dilation " + std::to_string(d));
  }
  if (auto conflict = auto_pad_conflict(conv); !conflict.empty()) return declined(conflict);
  if (*auto_pad != "NOTSET" && *auto_pad != "VALID") return declined("Conv auto_pad " + *auto_pad);
  if (*auto_pad == "VALID") conv_pads->clear();
  if (!conv_pads->empty() && conv_pads->size() != 4) return declined("Conv pads " + join(*conv_pads) + " are not 2-D");
  for (int64_t p : *conv_pads) {
    if (p < 0 || p > kMaxPad) return declined("Conv pads " + join(*conv_pads) + " are out of range");
  }
  ConvTail tail;
  if (!conv_pads->empty()) tail.pads = {(*conv_pads)[0], (*conv_pads)[1], (*conv_pads)[2], (*conv_pads)[3]};
  auto weight = eval.evaluate_weight(conv.input(1), scope);
  if (!weight) return declined("Conv weight not constant: " + weight.error().message);
  if (weight->dims.size() != 4) return declined("not 2-D: Conv weight has rank " + std::to_string(weight->dims.size()));
  if (auto conflict = kernel_shape_conflict(conv, weight->dims); !conflict.empty()) return declined(conflict);
  if (*group < 1 || weight->dims[0] % *group != 0) {
    return declined("Conv group " + std::to_string(*group) + " does not divide its weight " + join(weight->dims));
  }
  tail.group = *group;
  tail.out_channels = weight->dims[0];
  tail.channels = weight->dims[1] * *group;
  summary.channels = tail.channels;
  summary.kernel = {weight->dims[2], weight->dims[3]};
  if (!any_group && !tail.depthwise()) {
    return declined("Conv is not depthwise: group " + std::to_string(*group) + ", weight " + join(weight->dims));
  }
  if (any_group && !tail.depthwise() && tail.group != 1) {
    // Depthwise (MI-GAN, upfirdn2d) and dense (FastDepth) were measured on every runtime; a grouped Conv was not.
    return declined("Conv is grouped (group " + std::to_string(*group) + " of " + std::to_string(tail.channels) +
                    " input channels): zero insertion before a grouped Conv was not measured on any runtime (depthwise and dense were)");
  }
  if (weight->is_integer()) return declined("unsupported element type " + onnx_io::data_type_name(weight->data_type));
  tail.weight = std::move(*weight);
  return tail;
}

namespace {
constexpr double kMinGain = 1.0 / (1 << 24), kMaxGain = 1 << 24;  // 2^-24 and 2^24
}  // namespace

core::Result<DeconvMatch> fold_zero_insertion(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                              const onnx_io::ScopedTypes& types, const std::string& x, const ConvTail& tail,
                                              const std::array<int64_t, 4>& pads, const ZeroInsertion& zi, NodeSummary& summary) {
  const ConstTensor& weight = tail.weight;
  const int64_t s = zi.s;
  summary.stride = s;
  summary.strides = {s, s};
  // Per axis: zero insertion at offset j, total pads P (begin) and E (end), kernel K:
  //   ConvTranspose k = K, Pb = K-1-j-P, Pe = K+j-s-E; clean exactly when P + E == K - 1.
  // A zero insertion `deficit` short of s*H counts as that much less end padding.
  std::array<core::AxisGeometry, 2> geo;
  for (size_t axis = 0; axis < 2; ++axis) {
    const int64_t k = weight.dims[2 + axis];
    const int64_t j = zi.j[axis];
    const int64_t p = pads[axis] + tail.pads[axis];
    const int64_t e = pads[axis + 2] + tail.pads[axis + 2] - zi.deficit[axis];
    if (p + e != k - 1) {
      const int64_t excess = p + e - (k - 1);
      return declined("not a clean upscale: output is " + std::to_string(s) + "*" + (axis == 0 ? "H" : "W") + (excess > 0 ? "+" : "") +
                      std::to_string(excess) + " on that axis (pads " + std::to_string(p) + "+" + std::to_string(e) + ", kernel " +
                      std::to_string(k) + ")");
    }
    geo[axis] = {k, s, k - 1 - j - p, k + j - s - e, 0};
    if (geo[axis].pad_begin < 0 || geo[axis].pad_end < 0) {
      return declined("the equivalent ConvTranspose would have negative pads (" + std::to_string(geo[axis].pad_begin) + ", " +
                      std::to_string(geo[axis].pad_end) + ")");
    }
  }
  summary.pads = std::array<int64_t, 4>{geo[0].pad_begin, geo[1].pad_begin, geo[0].pad_end, geo[1].pad_end};
  summary.output_padding = std::array<int64_t, 2>{0, 0};

  // The fold is exact where the original's intermediates are finite, which x * gain narrows to |x| < max / |gain|
  // (and rounds to zero below min / |gain|) while gain * f does not: a gain far from 1 changes the values the model
  // computes for inputs the export never meant to reach. Exporters write gains of 1 and s^2; 2^24 bounds both ways.
  for (const double gain : zi.gains) {
    if (!(std::fabs(gain) >= kMinGain && std::fabs(gain) <= kMaxGain)) {
      return declined("gain " + number(gain) +
                      " is outside [2^-24, 2^24]: folded into the weights it would remove "
                      "the overflow or underflow of the original's x * gain");
    }
  }
  // The derived kernel [C_in, C_out/g, Ky, Kx]: w[ci, co', ty, tx] = a[ci] * f[co, ci', Ky-1-ty, Kx-1-tx], the filter
  // flipped, times the gain of the input channel; co = group(ci) * C_out/g + co', ci' = ci mod C_in/g. Depthwise:
  // w[c, 0] = a[c] * flip(f[c, 0]).
  const int64_t c_in = tail.channels, cig = weight.dims[1], cog = tail.out_channels / tail.group, ky = weight.dims[2], kx = weight.dims[3];
  std::vector<double> w(weight.reals.size());
  for (int64_t ci = 0; ci < c_in; ++ci) {
    const double gain = zi.gains.size() == 1 ? zi.gains[0] : zi.gains[static_cast<size_t>(ci)];
    for (int64_t col = 0; col < cog; ++col) {
      const int64_t co = (ci / cig) * cog + col, cil = ci % cig;
      for (int64_t ty = 0; ty < ky; ++ty) {
        for (int64_t tx = 0; tx < kx; ++tx) {
          w[static_cast<size_t>(((ci * cog + col) * ky + ty) * kx + tx)] =
              gain * weight.reals[static_cast<size_t>(((co * cig + cil) * ky + (ky - 1 - ty)) * kx + (kx - 1 - tx))];
        }
      }
    }
  }
  if (auto why = derived_overflow(w, weight.data_type); !why.empty()) return declined(why);
  DeconvMatch d = derived_match(conv, scope, ir_version, types, x, weight.data_type, {c_in, cog, ky, kx}, w);
  if (!tail.depthwise()) {
    d.group = tail.group;
    d.out_channels = tail.out_channels;
  }
  d.y = geo[0];
  d.x = geo[1];
  return d;
}

std::string derived_overflow(const std::vector<double>& values, int32_t data_type) {
  for (const double v : values) {
    if (!std::isfinite(v)) continue;  // the original's own inf or NaN taps, which the rewrite keeps
    float stored = static_cast<float>(v);
    if (data_type == onnx::TensorProto::FLOAT16) stored = onnx_io::half_to_float(onnx_io::float_to_half(stored));
    if (data_type == onnx::TensorProto::BFLOAT16) stored = onnx_io::bfloat16_to_float(onnx_io::float_to_bfloat16(stored));
    if (data_type != onnx::TensorProto::DOUBLE && std::isinf(stored)) {
      return "a derived weight (" + number(v) + ") overflows " + onnx_io::data_type_name(data_type) +
             ": the rewrite would compute inf where the original is finite";
    }
  }
  return "";
}

DeconvMatch derived_match(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version, const onnx_io::ScopedTypes& types,
                          const std::string& x, int32_t data_type, const std::vector<int64_t>& dims, const std::vector<double>& values) {
  // Phase weights are stored where the Conv's weight is (inline or external data), so they follow its name.
  auto source = resolve_constant(conv.input(1), scope, ir_version);
  const std::string follows = source && source->sparse == nullptr ? source->name : conv.input(1);
  auto derived = std::make_shared<onnx::TensorProto>(onnx_io::make_tensor(follows, data_type, dims, values, true));

  DeconvMatch d;
  d.node = &conv;
  d.scope = &scope;
  d.name = conv.name();
  d.input = x;
  d.bias = conv.input_size() > 2 ? conv.input(2) : std::string();
  d.output = conv.output(0);
  d.channels = dims[0];
  d.weight.scope = &scope;
  d.weight.tensor = derived.get();
  d.weight.name = follows;
  d.derived_weight = std::move(derived);
  if (const auto* type = types.find(scope.index, x)) d.input_type = *type;
  return d;
}

std::optional<onnx::TypeProto> one_d_type(const onnx_io::ScopedTypes& types, const GraphScope& scope, const std::string& name) {
  const auto* type = types.find(scope.index, name);
  if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape() || type->tensor_type().shape().dim_size() != 3) {
    return std::nullopt;
  }
  onnx::TypeProto lifted = *type;
  auto* shape = lifted.mutable_tensor_type()->mutable_shape();
  shape->add_dim();
  shape->mutable_dim()->SwapElements(3, 2);
  shape->mutable_dim(2)->set_dim_value(1);
  return lifted;
}

NodeSummary conv_summary(const onnx::NodeProto& conv, const GraphScope& scope, Form form) {
  NodeSummary sum;
  sum.name = conv.name().empty() ? conv.output(0) : conv.name();
  sum.graph_path = scope.path;
  sum.form = form;
  return sum;
}

core::Result<int64_t> nearest_resize_factor(const onnx::NodeProto& resize, const GraphScope& scope, ConstEvaluator& eval,
                                            const onnx_io::ScopedTypes& types, bool one_d) {
  // Opset 10 takes (X, scales) and has no coordinate attributes: it replicates, x[floor(o/s)]. From opset 11 on
  // it takes (X, roi, scales, sizes), with half_pixel and round_prefer_floor as the defaults.
  const bool opset10 = resize.input_size() == 2;
  auto mode = onnx_io::get_string(resize, "mode", "nearest");
  auto ctm = onnx_io::get_string(resize, "coordinate_transformation_mode", opset10 ? "asymmetric" : "half_pixel");
  auto rounding = onnx_io::get_string(resize, "nearest_mode", opset10 ? "floor" : "round_prefer_floor");
  auto policy = onnx_io::get_string(resize, "keep_aspect_ratio_policy", "stretch");
  for (const auto* r : {&mode, &ctm, &rounding, &policy}) {
    if (!*r) return r->error();
  }
  if (*mode != "nearest") return declined("Resize mode " + *mode);
  if (onnx_io::find_attribute(resize, "axes") != nullptr) return declined("Resize with axes");
  if (resize.input_size() < 2 || resize.input(0).empty()) return declined("Resize without scales");

  // The per-axis factors, from the scales or else from the sizes and the input's known shape.
  const int scales_at = opset10 ? 1 : 2;
  const bool has_sizes = !opset10 && resize.input_size() > 3 && !resize.input(3).empty();
  std::vector<double> factors;
  if (resize.input_size() > scales_at && !resize.input(scales_at).empty()) {
    auto scales = eval.evaluate_flagged(resize.input(scales_at), scope);
    if (!scales) return declined("Resize scales not constant: " + scales.error().message);
    if (auto ok = decidable(*scales, "Resize scales are"); !ok) return ok.error();
    for (size_t i = 0; i < scales->size(); ++i) factors.push_back(scales->at(i));
  }
  if (!factors.empty() && has_sizes) return declined("Resize with both scales and sizes");
  if (factors.empty() && has_sizes) {
    if (*policy != "stretch") return declined("Resize by sizes with keep_aspect_ratio_policy " + *policy);
    auto sizes = eval.evaluate_flagged(resize.input(3), scope);
    if (!sizes) return declined("Resize sizes not constant: " + sizes.error().message);
    if (auto ok = decidable(*sizes, "Resize sizes are"); !ok) return ok.error();
    const auto* type = types.find(scope.index, resize.input(0));
    std::vector<int64_t> dims;
    if (type != nullptr && type->has_tensor_type() && type->tensor_type().has_shape()) {
      for (const auto& d : type->tensor_type().shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : 0);
    }
    if (dims.size() != sizes->size() || std::count(dims.begin(), dims.end(), 0) != 0) {
      return declined("Resize by sizes of an input whose shape is not known");
    }
    for (size_t i = 0; i < dims.size(); ++i) factors.push_back(sizes->at(i) / static_cast<double>(dims[i]));
  }
  if (factors.empty()) return declined("Resize without scales or sizes");
  const std::string text = std::string("Resize scales are not ") + (one_d ? "[1,1,s]" : "[1,1,s,s]") + " with an integer s >= 2";
  if (one_d) {
    // [1, 1, s] on [N, C, L]: the same test on L alone, as [1, 1, s, s].
    if (factors.size() != 3) return declined(text);
    factors = {factors[0], factors[1], factors[2], factors[2]};
  }
  if (factors.size() != 4) return declined(text);
  const double s = factors[2];
  if (factors[0] != 1.0 || factors[1] != 1.0 || factors[3] != s || s != std::floor(s) || s < 2 || s > 1024) {
    return declined(text + " (" + number(factors[0]) + "," + number(factors[1]) + "," + number(factors[2]) + "," + number(factors[3]) +
                    ")");
  }

  // Output o = h*s + a with a in [0, s) must read x[h]. Per coordinate mode, its source coordinate is
  //   asymmetric                       h + a/s                  floor: h; round_prefer_floor: h only for s == 2 (a tie)
  //   half_pixel, pytorch_half_pixel,  h + (a+0.5)/s - 0.5,     within (h-0.5, h+0.5): both round_prefer modes give h
  //   half_pixel_symmetric             (the same, as s*H is exactly the output size)
  //   tf_half_pixel_for_nn             h + (a+0.5)/s,           within (h, h+1): floor gives h
  // align_corners depends on H, tf_crop_and_resize on the roi: never replication for every input size.
  const std::string& c = *ctm;
  const std::string& r = *rounding;
  const bool exact = (c == "asymmetric" && (r == "floor" || (r == "round_prefer_floor" && s == 2))) ||
                     ((c == "half_pixel" || c == "pytorch_half_pixel" || c == "half_pixel_symmetric") &&
                      (r == "round_prefer_floor" || r == "round_prefer_ceil")) ||
                     (c == "tf_half_pixel_for_nn" && r == "floor");
  if (!exact) {
    return declined("Resize coordinate_transformation_mode " + c + " with nearest_mode " + r + " is not x[floor(o/" + number(s) + ")]");
  }
  return static_cast<int64_t>(s);
}

}  // namespace dwdeconv::rewrite::parts
