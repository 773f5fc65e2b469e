#include "rewrite/recognisers.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::rewrite {
namespace {

using core::declined;

// Larger pads cannot give a clean upscale with a kernel this tool folds; bounding them keeps sums exact.
constexpr int64_t kMaxPad = int64_t{1} << 30;

bool default_domain(const onnx::NodeProto& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

}  // namespace

const onnx::NodeProto* producer(const GraphScope& scope, const std::string& name, const std::string& op) {
  if (name.empty()) return nullptr;
  for (const auto& node : scope.graph->node()) {
    for (const auto& out : node.output()) {
      if (out == name) return node.op_type() == op && default_domain(node) && node.output_size() == 1 ? &node : nullptr;
    }
  }
  return nullptr;
}

namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return "[" + s + "]";
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

int use_count(const std::map<std::string, int>& uses, const std::string& name) {
  auto it = uses.find(name);
  return it == uses.end() ? 0 : it->second;
}

// Node outputs and initializers, walking to enclosing graphs; a Shape's input is not followed, as the constant
// never read its values.
void collect_upstream(const std::string& name, const GraphScope& scope, const std::string& stop,
                      std::set<std::pair<size_t, std::string>>& seen,
                      std::vector<std::pair<const GraphScope*, std::string>>& out) {
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

core::Result<int64_t> nearest_resize_factor(const onnx::NodeProto& resize, const GraphScope& scope, ConstEvaluator& eval,
                                            const onnx_io::ScopedTypes& types) {
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
    auto scales = eval.evaluate(resize.input(scales_at), scope);
    if (!scales) return declined("Resize scales not constant: " + scales.error().message);
    for (size_t i = 0; i < scales->size(); ++i) factors.push_back(scales->at(i));
  }
  if (!factors.empty() && has_sizes) return declined("Resize with both scales and sizes");
  if (factors.empty() && has_sizes) {
    if (*policy != "stretch") return declined("Resize by sizes with keep_aspect_ratio_policy " + *policy);
    auto sizes = eval.evaluate(resize.input(3), scope);
    if (!sizes) return declined("Resize sizes not constant: " + sizes.error().message);
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
  const std::string text = "Resize scales are not [1,1,s,s] with an integer s >= 2";
  if (factors.size() != 4) return declined(text);
  const double s = factors[2];
  if (factors[0] != 1.0 || factors[1] != 1.0 || factors[3] != s || s != std::floor(s) || s < 2 || s > 1024) {
    return declined(text + " (" + number(factors[0]) + "," + number(factors[1]) + "," + number(factors[2]) + "," +
                    number(factors[3]) + ")");
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
    return declined("Resize coordinate_transformation_mode " + c + " with nearest_mode " + r + " is not x[floor(o/" +
                    number(s) + ")]");
  }
  return static_cast<int64_t>(s);
}

namespace {

// Where the one non-zero of every s x s cell of the mask is, and its value.
struct MaskTap {
  int64_t jy = 0, jx = 0;
  double gain = 0;
};

// The mask test: a constant that is s-periodic in both spatial axes with exactly one non-zero per s x s cell,
// the same in every channel (or broadcast over channels).
core::Result<MaskTap> mask_tap(const ConstTensor& mask, int64_t s, int64_t channels) {
  if (mask.is_integer()) return declined("mask is not a float tensor");
  const size_t rank = mask.dims.size();
  if (rank < 2 || rank > 4) return declined("mask has rank " + std::to_string(rank) + ", wants [1,1,sH,sW] or [1,C,sH,sW]");
  const int64_t mh = mask.dims[rank - 2], mw = mask.dims[rank - 1];
  if (mh % s != 0 || mw % s != 0 || mh == 0 || mw == 0) {
    return declined("mask is " + std::to_string(mh) + "x" + std::to_string(mw) + ", not a whole number of " + std::to_string(s) + "x" +
                    std::to_string(s) + " cells");
  }
  // Leading dims may only broadcast over the batch (1) and repeat a plane per channel (1 or C).
  if (rank == 4 && mask.dims[0] != 1) return declined("mask has batch dim " + std::to_string(mask.dims[0]) + ", not 1");
  if (rank >= 3 && mask.dims[rank - 3] != 1 && mask.dims[rank - 3] != channels) {
    return declined("mask has " + std::to_string(mask.dims[rank - 3]) + " channels, not 1 or " + std::to_string(channels));
  }
  const int64_t plane = mh * mw;
  const auto planes = static_cast<int64_t>(mask.size()) / plane;
  for (int64_t p = 1; p < planes; ++p) {
    for (int64_t i = 0; i < plane; ++i) {
      if (mask.reals[static_cast<size_t>(p * plane + i)] != mask.reals[static_cast<size_t>(i)]) {
        return declined("mask differs between channels");
      }
    }
  }
  std::optional<MaskTap> tap;
  for (int64_t cy = 0; cy < mh; cy += s) {
    for (int64_t cx = 0; cx < mw; cx += s) {
      int64_t count = 0;
      MaskTap here;
      for (int64_t jy = 0; jy < s; ++jy) {
        for (int64_t jx = 0; jx < s; ++jx) {
          const double v = mask.reals[static_cast<size_t>((cy + jy) * mw + cx + jx)];
          if (v != 0.0) {
            ++count;
            here = {jy, jx, v};
          }
        }
      }
      if (count != 1) {
        return declined("mask has " + std::to_string(count) + " non-zeros per " + std::to_string(s) + "x" + std::to_string(s) + " cell");
      }
      if (!tap) {
        tap = here;
      } else if (tap->jy != here.jy || tap->jx != here.jx) {
        return declined("mask's non-zero moves between " + std::to_string(s) + "x" + std::to_string(s) + " cells");
      } else if (tap->gain != here.gain) {
        return declined("mask's non-zero value differs between cells (" + number(tap->gain) + " and " + number(here.gain) + ")");
      }
    }
  }
  return *tap;
}

// The Pad's spatial [top, left, bottom, right], or why it is not a constant-zero pad of H and W.
core::Result<std::array<int64_t, 4>> pad_amounts(const onnx::NodeProto& pad, const GraphScope& scope, ConstEvaluator& eval) {
  auto mode = onnx_io::get_string(pad, "mode", "constant");
  if (!mode) return mode.error();
  if (*mode != "constant") return declined("Pad mode " + *mode);
  std::vector<int64_t> pads;
  double value = 0.0;
  if (pad.input_size() >= 2 && !pad.input(1).empty()) {  // opset 11 on: pads, constant_value, axes inputs
    auto p = eval.evaluate(pad.input(1), scope);
    if (!p) return declined("Pad pads not constant: " + p.error().message);
    if (!p->is_integer()) return declined("Pad pads are not integers");
    pads = p->ints;
    if (pad.input_size() >= 3 && !pad.input(2).empty()) {
      auto v = eval.evaluate(pad.input(2), scope);
      if (!v) return declined("Pad value not constant: " + v.error().message);
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
  if (value != 0.0) return declined("Pad value " + number(value) + ", not 0");
  if (pads.size() != 8) return declined("Pad pads " + join(pads) + " are not those of a 4-D tensor");
  if (pads[0] != 0 || pads[1] != 0 || pads[4] != 0 || pads[5] != 0) return declined("Pad pads " + join(pads) + " pad the batch or channel axis");
  for (int64_t p : pads) {
    if (p < 0) return declined("Pad pads " + join(pads) + " crop");
    if (p > kMaxPad) return declined("Pad pads " + join(pads) + " are larger than any kernel this tool rewrites");
  }
  return std::array<int64_t, 4>{pads[2], pads[3], pads[6], pads[7]};
}

}  // namespace

std::optional<UpsamplerOutcome> match_nearest_mask(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                                   const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                   const std::map<std::string, int>& uses) {
  // Cheap and selective first: the four ops in a chain, in this graph.
  if (conv.op_type() != "Conv" || !default_domain(conv) || conv.input_size() < 2 || conv.output_size() != 1) return std::nullopt;
  const onnx::NodeProto* pad = producer(scope, conv.input(0), "Pad");
  if (pad == nullptr || pad->input_size() < 1) return std::nullopt;
  const onnx::NodeProto* mul = producer(scope, pad->input(0), "Mul");
  if (mul == nullptr || mul->input_size() != 2) return std::nullopt;
  int upsampled = 0;
  const onnx::NodeProto* resize = producer(scope, mul->input(0), "Resize");
  if (resize == nullptr) {
    upsampled = 1;
    resize = producer(scope, mul->input(1), "Resize");
  }
  if (resize == nullptr || resize->input_size() < 2 || resize->input(0).empty()) return std::nullopt;

  UpsamplerOutcome out;
  NodeSummary& sum = out.summary;
  sum.name = conv.name().empty() ? conv.output(0) : conv.name();
  sum.graph_path = scope.path;
  sum.form = "nearest_mask";
  auto fail = [&out](core::Error e) -> std::optional<UpsamplerOutcome> {
    out.match = std::move(e);
    return out;
  };
  const std::string& x = resize->input(0);

  // The Conv: depthwise, stride 1, dilation 1, with a constant [C,1,Ky,Kx] weight.
  auto group = onnx_io::get_int(conv, "group", 1);
  auto strides = onnx_io::get_ints(conv, "strides", {});
  auto dilations = onnx_io::get_ints(conv, "dilations", {});
  auto conv_pads = onnx_io::get_ints(conv, "pads", {});
  auto auto_pad = onnx_io::get_string(conv, "auto_pad", "NOTSET");
  for (const core::Error* e : {group.ok() ? nullptr : &group.error(), strides.ok() ? nullptr : &strides.error(),
                               dilations.ok() ? nullptr : &dilations.error(), conv_pads.ok() ? nullptr : &conv_pads.error(),
                               auto_pad.ok() ? nullptr : &auto_pad.error()}) {
    if (e != nullptr) return fail(*e);
  }
  for (int64_t s : *strides) {
    if (s != 1) return fail(declined("Conv stride " + std::to_string(s)));
  }
  for (int64_t d : *dilations) {
    if (d != 1) return fail(declined("Conv dilation " + std::to_string(d)));
  }
  if (*auto_pad != "NOTSET" && *auto_pad != "VALID") return fail(declined("Conv auto_pad " + *auto_pad));
  if (*auto_pad == "VALID") conv_pads->clear();
  if (!conv_pads->empty() && conv_pads->size() != 4) return fail(declined("Conv pads " + join(*conv_pads) + " are not 2-D"));
  for (int64_t p : *conv_pads) {
    if (p < 0 || p > kMaxPad) return fail(declined("Conv pads " + join(*conv_pads) + " are out of range"));
  }
  auto weight = eval.evaluate(conv.input(1), scope);
  if (!weight) return fail(declined("Conv weight not constant: " + weight.error().message));
  if (weight->dims.size() != 4) return fail(declined("not 2-D: Conv weight has rank " + std::to_string(weight->dims.size())));
  const int64_t channels = weight->dims[0];
  sum.channels = channels;
  sum.kernel = {weight->dims[2], weight->dims[3]};
  if (*group != channels || weight->dims[1] != 1) {
    return fail(declined("Conv is not depthwise: group " + std::to_string(*group) + ", weight " + join(weight->dims)));
  }
  if (weight->is_integer()) return fail(declined("unsupported element type " + onnx_io::data_type_name(weight->data_type)));

  // Every intermediate must feed only the next step, or the high-resolution tensors stay and nothing is saved.
  for (const auto& [node, what] : {std::pair<const onnx::NodeProto*, const char*>{resize, "Resize"}, {mul, "Mul"}, {pad, "Pad"}}) {
    if (use_count(uses, node->output(0)) != 1) return fail(declined(std::string(what) + " output has another reader"));
  }

  auto s = nearest_resize_factor(*resize, scope, eval, types);
  if (!s) return fail(s.error());
  sum.stride = *s;
  sum.strides = {*s, *s};
  auto pads = pad_amounts(*pad, scope, eval);
  if (!pads) return fail(pads.error());
  auto mask = eval.evaluate(mul->input(1 - upsampled), scope);
  if (!mask) return fail(declined("mask not constant: " + mask.error().message));
  auto tap = mask_tap(*mask, *s, channels);
  if (!tap) return fail(tap.error());

  // Per axis: zero insertion at offset j, total pads P (begin) and E (end), kernel K:
  //   ConvTranspose k = K, Pb = K-1-j-P, Pe = K+j-s-E; clean exactly when P + E == K - 1.
  std::array<core::AxisGeometry, 2> geo;
  for (size_t axis = 0; axis < 2; ++axis) {
    const int64_t k = weight->dims[2 + axis];
    const int64_t j = axis == 0 ? tap->jy : tap->jx;
    const int64_t p = (*pads)[axis] + (conv_pads->empty() ? 0 : (*conv_pads)[axis]);
    const int64_t e = (*pads)[axis + 2] + (conv_pads->empty() ? 0 : (*conv_pads)[axis + 2]);
    if (p + e != k - 1) {
      const int64_t excess = p + e - (k - 1);
      return fail(declined("not a clean upscale: output is " + std::to_string(*s) + "*" + (axis == 0 ? "H" : "W") +
                           (excess > 0 ? "+" : "") + std::to_string(excess) + " on that axis (pads " + std::to_string(p) + "+" +
                           std::to_string(e) + ", kernel " + std::to_string(k) + ")"));
    }
    geo[axis] = {k, *s, k - 1 - j - p, k + j - *s - e, 0};
    if (geo[axis].pad_begin < 0 || geo[axis].pad_end < 0) {
      return fail(declined("the equivalent ConvTranspose would have negative pads (" + std::to_string(geo[axis].pad_begin) + ", " +
                           std::to_string(geo[axis].pad_end) + ")"));
    }
  }
  sum.pads = {geo[0].pad_begin, geo[1].pad_begin, geo[0].pad_end, geo[1].pad_end};

  // The derived kernel: w[c, 0, ty, tx] = a * f[c, 0, Ky-1-ty, Kx-1-tx] (the filter flipped, times the gain).
  const int64_t ky = weight->dims[2], kx = weight->dims[3];
  std::vector<double> w(weight->reals.size());
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t ty = 0; ty < ky; ++ty) {
      for (int64_t tx = 0; tx < kx; ++tx) {
        w[static_cast<size_t>((c * ky + ty) * kx + tx)] =
            tap->gain * weight->reals[static_cast<size_t>((c * ky + (ky - 1 - ty)) * kx + (kx - 1 - tx))];
      }
    }
  }
  // Phase weights are stored where the Conv's weight is (inline or external data), so they follow its name.
  auto source = resolve_constant(conv.input(1), scope, ir_version);
  const std::string follows = source && source->sparse == nullptr ? source->name : conv.input(1);
  auto derived = std::make_shared<onnx::TensorProto>(onnx_io::make_tensor(follows, weight->data_type, weight->dims, w, true));

  UpsamplerMatch m;
  DeconvMatch& d = m.deconv;
  d.node = &conv;
  d.scope = &scope;
  d.name = conv.name();
  d.input = x;
  d.bias = conv.input_size() > 2 ? conv.input(2) : std::string();
  d.output = conv.output(0);
  d.channels = channels;
  d.y = geo[0];
  d.x = geo[1];
  d.weight.scope = &scope;
  d.weight.tensor = derived.get();
  d.weight.name = follows;
  d.derived_weight = std::move(derived);
  if (const auto* type = types.find(scope.index, x)) d.input_type = *type;

  // What only this upsampler reads: the three intermediate nodes and every constant chain feeding them.
  std::set<std::pair<size_t, std::string>> seen;
  for (const auto* node : {pad, mul, resize}) {
    m.replaced.emplace_back(&scope, node->output(0));
    seen.insert({scope.index, node->output(0)});
  }
  for (const auto* node : {pad, mul, resize}) {
    for (const auto& in : node->input()) collect_upstream(in, scope, x, seen, m.replaced);
  }
  collect_upstream(conv.input(1), scope, x, seen, m.replaced);
  out.match = std::move(m);
  return out;
}

}  // namespace dwdeconv::rewrite
