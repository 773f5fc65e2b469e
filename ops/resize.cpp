// Resize and Upsample: their geometry (shared with the XNNPACK bilinear and nearest-upsample steps) and their one
// separable reference kernel. Upsample-7 and -9 are Resize-10 (asymmetric coordinates, nearest rounds down) for
// scales >= 1, with the scales in an attribute (7) or an input (9).
#include <algorithm>
#include <cmath>

#include "onnx_io/attributes.h"
#include "ops/kernels.h"

namespace dwdeconv::ops {

using detail::attr_float;
using detail::attr_int;
using detail::check_element_count;
using detail::input_or_null;
using detail::node_error;
using detail::truncate_to_int64;

namespace {

struct ResizeMode {
  std::string mode, coordinate, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

// The source coordinate of output index `o` on one axis, in arithmetic T. The ONNX reference computes in double
// with x / scale; runtimes compute in float32, some as x * (1 / scale) (ONNX Runtime): `reciprocal` selects that.
template <typename T>
T source_coordinate_in(const ResizeMode& m, int64_t o, int64_t in, int64_t out, T scale, double roi_start, double roi_end,
                       bool reciprocal) {
  const T x = static_cast<T>(o), half = static_cast<T>(0.5), n = static_cast<T>(in);
  const T inv = static_cast<T>(1) / scale;
  auto over_scale = [&](T a) { return reciprocal ? a * inv : a / scale; };
  if (m.coordinate == "half_pixel") return over_scale(x + half) - half;
  if (m.coordinate == "half_pixel_symmetric") {
    // Opset 19: the implicit ROI's center stays at the output's center when in*scale is not a whole number.
    const T width = n * scale;  // output_width, possibly fractional
    const T offset = n / static_cast<T>(2) * (static_cast<T>(1) - static_cast<T>(out) / width);
    return offset + over_scale(x + half) - half;
  }
  if (m.coordinate == "pytorch_half_pixel") return out > 1 ? over_scale(x + half) - half : static_cast<T>(0);
  // length_resized is in*scale, unfloored, as the ONNX reference uses it (sizes given: scale = out/in).
  if (m.coordinate == "align_corners") return out == 1 ? static_cast<T>(0) : x * static_cast<T>(in - 1) / (n * scale - static_cast<T>(1));
  if (m.coordinate == "tf_half_pixel_for_nn") return over_scale(x + half);
  if (m.coordinate == "tf_crop_and_resize") {
    const T start = static_cast<T>(roi_start), end = static_cast<T>(roi_end), last = static_cast<T>(in - 1);
    return out > 1 ? start * last + x * (end - start) * last / static_cast<T>(out - 1) : half * (start + end) * last;
  }
  return over_scale(x);  // asymmetric
}

// The coordinate the executor uses: the ONNX reference's.
double source_coordinate(const ResizeMode& m, int64_t o, int64_t in, int64_t out, double scale, double roi_start, double roi_end) {
  return source_coordinate_in<double>(m, o, in, out, scale, roi_start, roi_end, false);
}

// The input index nearest mode reads for source coordinate `src` on an axis of `in` elements.
int64_t nearest_index(const ResizeMode& m, double src, int64_t in) {
  double r;
  const double frac = src - std::floor(src);
  if (m.nearest == "floor") r = std::floor(src);
  else if (m.nearest == "ceil") r = std::ceil(src);
  else if (m.nearest == "round_prefer_ceil") r = frac == 0.5 ? std::ceil(src) : std::round(src);
  else r = frac == 0.5 ? std::floor(src) : std::round(src);  // round_prefer_floor
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, in - 1);
}

// Why runtimes may compute another answer than the ONNX reference for this axis, or "" when they cannot:
//  - nearest: an output reads another input element when the coordinate is computed in float32, through a
//    reciprocal, or with the scale out/in instead of the one given (a source coordinate on a rounding boundary:
//    asymmetric + round_prefer_ceil at scale 0.4 reads x[2] in the reference, x[3] in ONNX Runtime);
//  - linear and cubic: align_corners and half_pixel_symmetric read in*scale, which ONNX Runtime replaces by the
//    output length when in*scale is not a whole number.
// The executor follows the reference; where the two part it cannot stand for the runtime, so it refuses.
std::string ambiguous_axis(const ResizeMode& m, int64_t in, int64_t out, double scale, double roi_start, double roi_end) {
  const double exact_out = static_cast<double>(in) * scale;
  if (m.mode != "nearest") {
    if ((m.coordinate == "align_corners" || m.coordinate == "half_pixel_symmetric") && exact_out != static_cast<double>(out)) {
      return m.coordinate + " with in * scale = " + std::to_string(exact_out) + " not the output length " + std::to_string(out) +
             ": runtimes differ on which they use";
    }
    return "";
  }
  if (m.coordinate == "tf_crop_and_resize") return "";  // its coordinates come from the roi, not the scale
  const double ratio = static_cast<double>(out) / static_cast<double>(in);
  for (int64_t o = 0; o < out; ++o) {
    const double src = source_coordinate(m, o, in, out, scale, roi_start, roi_end);
    const int64_t i = nearest_index(m, src, in);
    const double variants[] = {
        static_cast<double>(source_coordinate_in<float>(m, o, in, out, static_cast<float>(scale), roi_start, roi_end, false)),
        static_cast<double>(source_coordinate_in<float>(m, o, in, out, static_cast<float>(scale), roi_start, roi_end, true)),
        source_coordinate(m, o, in, out, ratio, roi_start, roi_end)};
    for (const double v : variants) {
      if (const int64_t j = nearest_index(m, v, in); j != i) {
        return "output " + std::to_string(o) + " reads source coordinate " + std::to_string(src) + ", which rounds to input " +
               std::to_string(i) + " or " + std::to_string(j) + " depending on the arithmetic (float32 or double, the scale " +
               "or out/in): runtimes differ there";
      }
    }
  }
  return "";
}

// Resizes one axis of `x` (row-major, logical order): the ONNX Resize is separable per axis.
void resize_axis(const ResizeMode& m, const Tensor& x, size_t axis, int64_t out, double scale, double roi_start, double roi_end,
                 Tensor& y) {
  std::vector<int64_t> dims = x.dims;
  const int64_t in = dims[axis];
  dims[axis] = out;
  y.reshape(x.dtype, dims);
  int64_t outer = 1, inner = 1;
  for (size_t a = 0; a < axis; ++a) outer *= dims[a];
  for (size_t a = axis + 1; a < dims.size(); ++a) inner *= dims[a];
  // Per output index: source indices and weights (-1 index: extrapolation value).
  std::vector<std::vector<std::pair<int64_t, double>>> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    auto& t = taps[static_cast<size_t>(o)];
    const double src = source_coordinate(m, o, in, out, scale, roi_start, roi_end);
    if (m.coordinate == "tf_crop_and_resize" && (src < 0.0 || src > static_cast<double>(in - 1))) {
      t.push_back({-1, 1.0});
      continue;
    }
    if (m.mode == "nearest") {
      t.push_back({nearest_index(m, src, in), 1.0});
      continue;
    }
    const auto base = static_cast<int64_t>(std::floor(src));
    const double r = src - static_cast<double>(base);
    std::vector<std::pair<int64_t, double>> raw;
    if (m.mode == "linear") {
      raw = {{base, 1.0 - r}, {base + 1, r}};
    } else {  // cubic, Keys with coefficient A
      const double a = m.cubic_a;
      auto c_far = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < d < 2
      auto c_near = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // d <= 1
      raw = {{base - 1, c_far(r + 1)}, {base, c_near(r)}, {base + 1, c_near(1 - r)}, {base + 2, c_far(2 - r)}};
    }
    double total = 0.0;
    for (auto& [i, wgt] : raw) {
      if (m.exclude_outside && (i < 0 || i >= in)) wgt = 0.0;
      total += wgt;
    }
    for (auto& [i, wgt] : raw) {
      if (m.exclude_outside && total != 0.0) wgt /= total;
      t.push_back({std::clamp<int64_t>(i, 0, in - 1), wgt});  // edge padding outside the input
    }
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < out; ++j)
      for (int64_t q = 0; q < inner; ++q) {
        double v = 0.0;
        for (const auto& [i, wgt] : taps[static_cast<size_t>(j)]) {
          v += i < 0 ? m.extrapolation * wgt : wgt * x.get((o * in + i) * inner + q);
        }
        const auto dst = static_cast<size_t>((o * out + j) * inner + q);
        if (y.is_float()) y.f[dst] = static_cast<float>(v);
        else y.i[dst] = static_cast<int64_t>(std::llround(v));
      }
}

// Resize's attributes with the defaults of `opset`; for Upsample, its mode with Resize-10's fixed rest.
core::Result<ResizeMode> resize_mode(const onnx::NodeProto& node, int64_t opset) {
  ResizeMode m;
  RC_ASSIGN(m.mode, onnx_io::get_string(node, "mode", "nearest"));
  if (node.op_type() == "Upsample") {
    m.coordinate = "asymmetric";
    m.nearest = "floor";
    return m;
  }
  RC_ASSIGN(m.coordinate, onnx_io::get_string(node, "coordinate_transformation_mode", opset < 11 ? "asymmetric" : "half_pixel"));
  RC_ASSIGN(m.nearest, onnx_io::get_string(node, "nearest_mode", opset < 11 ? "floor" : "round_prefer_floor"));
  m.cubic_a = attr_float(node, "cubic_coeff_a", -0.75f);
  RC_ASSIGN(const int64_t exclude, attr_int(node, "exclude_outside", 0));
  m.exclude_outside = exclude != 0;
  m.extrapolation = attr_float(node, "extrapolation_value", 0.0f);
  return m;
}

// run_resize leaves an axis alone when its size and scale are unchanged (tf_crop_and_resize still crops it).
bool resize_skips_axis(const ResizeMode& m, const ResizeGeometry& g, int64_t in, size_t axis) {
  return g.output_dims[axis] == in && g.scales[axis] == 1.0 && m.coordinate != "tf_crop_and_resize";
}

// Refuses a Resize whose answer the runtimes and the reference do not agree on (ambiguous_axis), naming the axis.
core::Status check_unambiguous(const onnx::NodeProto& node, const ResizeMode& m, const ResizeGeometry& g,
                               const std::vector<int64_t>& dims) {
  const size_t rank = dims.size();
  for (size_t a = 0; a < rank; ++a) {
    if (resize_skips_axis(m, g, dims[a], a)) continue;
    const double roi_start = g.roi.empty() ? 0.0 : g.roi[a];
    const double roi_end = g.roi.empty() ? 1.0 : g.roi[a + rank];
    if (std::string why = ambiguous_axis(m, dims[a], g.output_dims[a], g.scales[a], roi_start, roi_end); !why.empty()) {
      return node_error(node, "axis " + std::to_string(a) + ": " + why + ", so it is not run");
    }
  }
  return core::Ok{};
}

// The kernel of both ops: x resized axis by axis to g's sizes in mode m.
core::Status resize(const OpContext& ctx, const onnx::NodeProto& node, const ResizeMode& m, const ResizeGeometry& g, const Tensor& x,
                    Tensor& y) {
  RC_CHECK(check_element_count(ctx, node, g.output_dims));
  RC_CHECK(check_unambiguous(node, m, g, x.dims));
  const size_t rank = x.dims.size();
  Tensor current = x, next;
  for (size_t a = 0; a < rank; ++a) {
    const double roi_start = g.roi.empty() ? 0.0 : g.roi[a];
    const double roi_end = g.roi.empty() ? 1.0 : g.roi[a + rank];
    if (resize_skips_axis(m, g, x.dims[a], a)) continue;
    resize_axis(m, current, a, g.output_dims[a], g.scales[a], roi_start, roi_end, next);
    std::swap(current, next);
  }
  y.reshape(x.dtype, current.dims);
  y.f = current.f;
  y.i = current.i;
  for (float& v : y.f) v = round_to_type(v, x.dtype);
  return core::Ok{};
}

}  // namespace

core::Status detail::run_resize(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  RC_ASSIGN(const ResizeMode m, resize_mode(node, ctx.opset));
  RC_ASSIGN(const ResizeGeometry g, resolve_resize(node, ctx.opset, in));
  return resize(ctx, node, m, g, *in[0], *out[0]);
}

core::Status detail::run_upsample(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  RC_ASSIGN(const ResizeMode m, resize_mode(node, ctx.opset));
  const Tensor& x = *in[0];
  // The spec leaves the rounding of an interpolated integer open (ONNX Runtime truncates): not implemented.
  if (m.mode == "linear" && !x.is_float()) return node_error(node, "linear mode on " + describe_tensor(x) + " is not implemented");
  RC_ASSIGN(const ResizeGeometry g, resolve_resize(node, ctx.opset, in));
  return resize(ctx, node, m, g, x, *out[0]);
}

namespace {

// Upsample's geometry: one scale >= 1 per axis, from the attribute (Upsample-7) or the input (Upsample-9), and
// output_dimension = floor(input_dimension * scale).
core::Result<ResizeGeometry> resolve_upsample(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& inputs) {
  const Tensor& x = *inputs[0];
  const Tensor* scales_input = input_or_null(inputs, 1);
  const onnx::AttributeProto* attribute = onnx_io::find_attribute(node, "scales");
  std::vector<double> scales;
  if (opset < 9) {
    if (scales_input != nullptr) return node_error(node, "Upsample-7 takes its scales as an attribute, not an input");
    if (attribute == nullptr || attribute->type() != onnx::AttributeProto::FLOATS) {
      return node_error(node, "needs the scales attribute (floats)");
    }
    scales.assign(attribute->floats().begin(), attribute->floats().end());
  } else {
    if (attribute != nullptr) return node_error(node, "Upsample-9 takes its scales as an input; the scales attribute is Upsample-7's");
    if (scales_input == nullptr) return node_error(node, "needs the scales input");
    for (int64_t k = 0; k < scales_input->numel(); ++k) scales.push_back(scales_input->get(k));
  }
  if (scales.size() != x.dims.size()) {
    return node_error(node, std::to_string(scales.size()) + " scales for a rank-" + std::to_string(x.dims.size()) + " input");
  }
  ResizeGeometry g;
  for (size_t a = 0; a < scales.size(); ++a) {
    const double s = scales[a];
    if (!(std::isfinite(s) && s >= 1.0)) return node_error(node, "scale " + std::to_string(s) + " is not a finite number >= 1");
    g.scales.push_back(s);
    g.output_dims.push_back(truncate_to_int64(std::floor(static_cast<double>(x.dims[a]) * s)));
  }
  // The scales are attribute or input values: a hostile one must not reach an allocation.
  RC_CHECK(check_element_count(OpContext{opset}, node, g.output_dims));
  return g;
}

}  // namespace

core::Result<ResizeGeometry> resolve_resize(const onnx::NodeProto& node, int64_t opset, const std::vector<const Tensor*>& inputs) {
  if (node.op_type() == "Upsample") return resolve_upsample(node, opset, inputs);
  const Tensor& x = *inputs[0];
  const size_t rank = x.dims.size();
  const Tensor* roi = nullptr;
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
  if (opset < 11 || inputs.size() == 2) {
    scales = input_or_null(inputs, 1);
  } else {
    roi = input_or_null(inputs, 1);
    scales = input_or_null(inputs, 2);
    sizes = input_or_null(inputs, 3);
  }
  if (scales != nullptr && scales->numel() == 0) scales = nullptr;
  if (sizes != nullptr && sizes->numel() == 0) sizes = nullptr;
  ResizeGeometry g;
  if (roi != nullptr)
    for (int64_t k = 0; k < roi->numel(); ++k) g.roi.push_back(roi->get(k));
  if (!g.roi.empty() && g.roi.size() != 2 * rank) g.roi.clear();
  if (sizes != nullptr) {
    g.output_dims = int_values(*sizes);
    if (g.output_dims.size() != rank) return node_error(node, "sizes has the wrong length");
    for (size_t a = 0; a < rank; ++a) g.scales.push_back(static_cast<double>(g.output_dims[a]) / static_cast<double>(x.dims[a]));
  } else if (scales != nullptr) {
    if (static_cast<size_t>(scales->numel()) != rank) return node_error(node, "scales has the wrong length");
    for (size_t a = 0; a < rank; ++a) {
      const double s = scales->get(static_cast<int64_t>(a));
      if (!std::isfinite(s)) return node_error(node, "scale " + std::to_string(s) + " is not a finite number");
      g.scales.push_back(s);
      g.output_dims.push_back(truncate_to_int64(std::floor(static_cast<double>(x.dims[a]) * s)));
    }
  } else {
    return node_error(node, "needs scales or sizes");
  }
  // Scales and sizes are input values: a hostile one must not reach an allocation.
  RC_CHECK(check_element_count(OpContext{opset}, node, g.output_dims));
  return g;
}

core::Result<std::vector<std::vector<int64_t>>> nearest_resize_sources(const onnx::NodeProto& node, int64_t opset,
                                                                       const std::vector<const Tensor*>& inputs) {
  // Callable on any node (the XNNPACK steps prove their mapping with it): refuse what the kernel would.
  if (std::string why = unsupported_reason(node, opset); !why.empty()) return node_error(node, why);
  RC_ASSIGN(const ResizeMode m, resize_mode(node, opset));
  if (m.mode != "nearest") return node_error(node, "mode '" + m.mode + "' is not nearest");
  RC_ASSIGN(const ResizeGeometry g, resolve_resize(node, opset, inputs));
  const Tensor& x = *inputs[0];
  RC_CHECK(check_unambiguous(node, m, g, x.dims));
  const size_t rank = x.dims.size();
  std::vector<std::vector<int64_t>> sources(rank);
  for (size_t a = 0; a < rank; ++a) {
    const int64_t in = x.dims[a], out = g.output_dims[a];
    auto& axis = sources[a];
    if (resize_skips_axis(m, g, in, a)) {
      for (int64_t o = 0; o < out; ++o) axis.push_back(o);
      continue;
    }
    const double roi_start = g.roi.empty() ? 0.0 : g.roi[a];
    const double roi_end = g.roi.empty() ? 1.0 : g.roi[a + rank];
    // The same mapping as resize_axis: source coordinate, extrapolation outside a crop, then the rounding.
    for (int64_t o = 0; o < out; ++o) {
      const double src = source_coordinate(m, o, in, out, g.scales[a], roi_start, roi_end);
      const bool outside = m.coordinate == "tf_crop_and_resize" && (src < 0.0 || src > static_cast<double>(in - 1));
      axis.push_back(outside ? -1 : nearest_index(m, src, in));
    }
  }
  return sources;
}

}  // namespace dwdeconv::ops
