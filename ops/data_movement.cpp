// Data-movement reference kernels: they move, pick or repeat elements and never compute new values (Transpose,
// DepthToSpace, Gather, Slice, Concat, Split, Pad, Expand, Tile), and ScatterND, which writes slices of updates by
// index. The kernels that only change or read a value's dims are in shape.cpp.
#include <algorithm>
#include <limits>

#include "onnx_io/attributes.h"
#include "ops/kernels.h"

namespace dwdeconv::ops::detail {

// The length of each Split output along the axis of `extent` elements, for the opset forms: a `split` input
// (13+, and opset 1's optional input), a `split` attribute (2 to 12), `num_outputs` (18+: ceil-sized chunks, the
// last one smaller), else equal parts.
core::Result<std::vector<int64_t>> split_sizes(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, int64_t extent,
                                               size_t outputs) {
  const auto parts = static_cast<int64_t>(outputs);
  std::vector<int64_t> sizes;
  if (const Tensor* t = input_or_null(in, 1)) {
    sizes = int_values(*t);
  } else if (onnx_io::find_attribute(node, "split") != nullptr) {
    RC_ASSIGN(sizes, onnx_io::get_ints(node, "split", {}));
  } else if (onnx_io::find_attribute(node, "num_outputs") != nullptr) {
    RC_ASSIGN(const int64_t n, attr_int(node, "num_outputs", 0));
    if (n != parts) {
      return node_error(node, "num_outputs is " + std::to_string(n) + " but the node has " + std::to_string(parts) + " outputs");
    }
    const int64_t chunk = (extent + n - 1) / n;
    sizes.assign(outputs, chunk);
    sizes.back() = extent - chunk * (n - 1);
    if (sizes.back() < 0) {
      return node_error(node, "num_outputs " + std::to_string(n) + " leaves a negative last chunk of an axis of " + std::to_string(extent));
    }
  } else {
    if (extent % parts != 0) {
      return node_error(node, "axis of " + std::to_string(extent) + " does not split into " + std::to_string(parts) + " equal parts");
    }
    sizes.assign(outputs, extent / parts);
  }
  if (sizes.size() != outputs) {
    return node_error(node, "split has " + std::to_string(sizes.size()) + " sizes but the node has " + std::to_string(parts) + " outputs");
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    // Each size is checked against the extent first, so the running total cannot overflow.
    if (s < 0 || s > extent) {
      return node_error(node, "split size " + std::to_string(s) + " is outside [0, " + std::to_string(extent) + "]");
    }
    total += s;
  }
  if (total != extent) {
    return node_error(node, "split sizes sum to " + std::to_string(total) + ", not the axis's " + std::to_string(extent));
  }
  return sizes;
}

core::Status run_transpose(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const size_t rank = x.dims.size();
  std::vector<int64_t> reverse(rank);
  for (size_t k = 0; k < rank; ++k) reverse[k] = static_cast<int64_t>(rank - 1 - k);
  RC_ASSIGN(const auto perm, onnx_io::get_ints(node, "perm", reverse));
  if (perm.size() != rank) return node_error(node, "perm has the wrong length");
  std::vector<int64_t> out_dims(rank);
  for (size_t k = 0; k < rank; ++k) out_dims[k] = x.dims[static_cast<size_t>(perm[k])];
  y.reshape(x.dtype, out_dims);
  const auto in_strides = strides_of(x.dims);
  for_each_index(out_dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t src = 0;
    for (size_t a = 0; a < rank; ++a) src += idx[a] * in_strides[static_cast<size_t>(perm[a])];
    if (x.is_float()) y.f[static_cast<size_t>(k)] = x.f[static_cast<size_t>(src)];
    else y.i[static_cast<size_t>(k)] = x.i[static_cast<size_t>(src)];
  });
  return core::Ok{};
}

core::Status run_gather(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  const Tensor& indices = *in[1];
  Tensor& y = *out[0];
  RC_ASSIGN(int64_t axis, attr_int(node, "axis", 0));
  const auto rank = static_cast<int64_t>(x.dims.size());
  if (!normalize_axis(axis, rank)) return node_error(node, "axis out of range");
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  RC_CHECK(check_element_count(ctx, node, dims));
  y.reshape(x.dtype, dims);
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= x.dims[static_cast<size_t>(a)];
  for (int64_t a = axis + 1; a < rank; ++a) inner *= x.dims[static_cast<size_t>(a)];
  const int64_t extent = x.dims[static_cast<size_t>(axis)];
  const auto idx = int_values(indices);
  const auto count = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < count; ++j) {
      int64_t src = idx[static_cast<size_t>(j)];
      if (src < 0) src += extent;
      if (src < 0 || src >= extent) return node_error(node, "index " + std::to_string(idx[static_cast<size_t>(j)]) + " out of range");
      for (int64_t k = 0; k < inner; ++k) {
        const auto from = static_cast<size_t>((o * extent + src) * inner + k);
        const auto to = static_cast<size_t>((o * count + j) * inner + k);
        if (x.is_float()) y.f[to] = x.f[from];
        else y.i[to] = x.i[from];
      }
    }
  }
  return core::Ok{};
}

core::Status run_slice(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
  const Tensor& x = *in[0];
  const auto rank = static_cast<int64_t>(x.dims.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (onnx_io::find_attribute(node, "starts") != nullptr) {  // opset < 10: attributes
    RC_ASSIGN(starts, onnx_io::get_ints(node, "starts", {}));
    RC_ASSIGN(ends, onnx_io::get_ints(node, "ends", {}));
    RC_ASSIGN(axes, onnx_io::get_ints(node, "axes", {}));
  } else {
    if (input_or_null(in, 1) == nullptr || input_or_null(in, 2) == nullptr) return node_error(node, "needs starts and ends");
    starts = int_values(*in[1]);
    ends = int_values(*in[2]);
    if (const Tensor* t = input_or_null(in, 3)) axes = int_values(*t);
    if (const Tensor* t = input_or_null(in, 4)) steps = int_values(*t);
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return node_error(node, "starts, ends, axes and steps differ in length");
  }
  std::vector<int64_t> first(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1), dims = x.dims;
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t a = axes[k];
    if (!normalize_axis(a, rank)) return node_error(node, "axis out of range");
    const int64_t extent = x.dims[static_cast<size_t>(a)];
    const int64_t s = steps[k];
    if (s == 0) return node_error(node, "step 0");
    if (s == std::numeric_limits<int64_t>::min()) return node_error(node, "step " + std::to_string(s) + " is out of range");
    // The schema's clamping: start to [0, n] stepping forward and [0, n-1] backward, end to [0, n] and [-1, n-1].
    int64_t b = starts[k], e = ends[k];
    if (b < 0) b = b < -extent ? 0 : b + extent;  // written to avoid overflow at INT64_MIN
    if (e < 0) e = e < -extent ? -1 : e + extent;
    int64_t len = 0;
    if (extent > 0 && s > 0) {
      b = std::clamp<int64_t>(b, 0, extent);
      e = std::clamp<int64_t>(e, 0, extent);
      len = e > b ? 1 + (e - b - 1) / s : 0;  // ceil((e - b) / s), without overflow for a huge step
    } else if (extent > 0) {
      b = std::clamp<int64_t>(b, 0, extent - 1);
      e = std::clamp<int64_t>(e, -1, extent - 1);
      // A start before the first element, stepping back to the end: the schema's clamp (and ONNX Runtime) take
      // element 0, the ONNX reference (numpy) takes nothing. Not one answer, so not run.
      if (starts[k] < -extent && e < 0) {
        return node_error(node, "start " + std::to_string(starts[k]) + " with a negative step on an axis of " + std::to_string(extent) +
                                    " selects element 0 in ONNX Runtime and nothing in the "
                                    "ONNX reference");
      }
      len = b > e ? 1 + (b - e - 1) / (-s) : 0;
    }
    first[static_cast<size_t>(a)] = b;
    step[static_cast<size_t>(a)] = s;
    dims[static_cast<size_t>(a)] = len;
  }
  y.reshape(x.dtype, dims);
  const auto in_strides = strides_of(x.dims);
  for_each_index(dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t src = 0;
    for (size_t a = 0; a < idx.size(); ++a) src += (first[a] + idx[a] * step[a]) * in_strides[a];
    if (x.is_float()) y.f[static_cast<size_t>(k)] = x.f[static_cast<size_t>(src)];
    else y.i[static_cast<size_t>(k)] = x.i[static_cast<size_t>(src)];
  });
  return core::Ok{};
}

core::Status run_concat(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
  RC_ASSIGN(int64_t axis, attr_int(node, "axis", 0));
  const Tensor& first = *in[0];
  const auto rank = static_cast<int64_t>(first.dims.size());
  if (!normalize_axis(axis, rank)) return node_error(node, "axis out of range");
  std::vector<int64_t> dims = first.dims;
  dims[static_cast<size_t>(axis)] = 0;
  for (const Tensor* t : in) {
    if (t == nullptr || t->dims.size() != first.dims.size()) return node_error(node, "inputs differ in rank");
    if (t->dtype != first.dtype) return node_error(node, "inputs differ in element type");
    for (int64_t a = 0; a < rank; ++a) {
      if (a != axis && t->dims[static_cast<size_t>(a)] != first.dims[static_cast<size_t>(a)]) {
        return node_error(node, "inputs differ outside the concat axis");
      }
    }
    dims[static_cast<size_t>(axis)] += t->dims[static_cast<size_t>(axis)];
  }
  RC_CHECK(check_element_count(ctx, node, dims));
  y.reshape(first.dtype, dims);
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= dims[static_cast<size_t>(a)];
  for (int64_t a = axis + 1; a < rank; ++a) inner *= dims[static_cast<size_t>(a)];
  const int64_t out_row = dims[static_cast<size_t>(axis)] * inner;
  int64_t offset = 0;
  for (const Tensor* t : in) {
    const int64_t row = t->dims[static_cast<size_t>(axis)] * inner;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < row; ++k) {
        const auto from = static_cast<size_t>(o * row + k);
        const auto to = static_cast<size_t>(o * out_row + offset + k);
        if (y.is_float()) y.f[to] = t->f[from];
        else y.i[to] = t->i[from];
      }
    }
    offset += row;
  }
  return core::Ok{};
}

// ONNX Pad on any rank: constant, reflect or edge. Negative pads crop.
core::Status run_pad(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
  const Tensor& x = *in[0];
  const auto rank = static_cast<int64_t>(x.dims.size());
  RC_ASSIGN(const std::string mode, onnx_io::get_string(node, "mode", "constant"));
  std::vector<int64_t> pads;
  double value = 0.0;
  std::vector<int64_t> axes;
  if (onnx_io::find_attribute(node, "pads") != nullptr) {  // opset < 11: attributes
    RC_ASSIGN(pads, onnx_io::get_ints(node, "pads", {}));
    value = attr_float(node, "value", 0.0f);
  } else {
    if (input_or_null(in, 1) == nullptr) return node_error(node, "needs pads");
    pads = int_values(*in[1]);
    if (const Tensor* t = input_or_null(in, 2); t != nullptr && t->numel() > 0) value = t->get(0);
    if (const Tensor* t = input_or_null(in, 3)) axes = int_values(*t);
  }
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), end(static_cast<size_t>(rank), 0);
  if (axes.empty()) {
    if (static_cast<int64_t>(pads.size()) != 2 * rank) return node_error(node, "pads length is not 2*rank");
    for (int64_t a = 0; a < rank; ++a) {
      begin[static_cast<size_t>(a)] = pads[static_cast<size_t>(a)];
      end[static_cast<size_t>(a)] = pads[static_cast<size_t>(a + rank)];
    }
  } else {
    const auto n = axes.size();
    if (pads.size() != 2 * n) return node_error(node, "pads length is not 2*len(axes)");
    for (size_t k = 0; k < n; ++k) {
      int64_t a = axes[k];
      if (!normalize_axis(a, rank)) return node_error(node, "axis out of range");
      begin[static_cast<size_t>(a)] = pads[k];
      end[static_cast<size_t>(a)] = pads[k + n];
    }
  }
  if (mode != "constant" && mode != "reflect" && mode != "edge") return node_error(node, "mode '" + mode + "' is not supported");
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int64_t a = 0; a < rank; ++a) {
    const auto k = static_cast<size_t>(a);
    dims[k] = x.dims[k] + begin[k] + end[k];
    if (dims[k] < 0) return node_error(node, "pads crop more than the input holds");
  }
  RC_CHECK(check_element_count(ctx, node, dims));
  y.reshape(x.dtype, dims);
  const auto in_strides = strides_of(x.dims);
  for_each_index(dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t src = 0;
    bool inside = true;
    for (size_t a = 0; a < idx.size(); ++a) {
      int64_t p = idx[a] - begin[a];
      const int64_t n = x.dims[a];
      if (p < 0 || p >= n) {
        if (mode == "constant" || n == 0) {
          inside = false;
          break;
        }
        if (mode == "edge") {
          p = std::clamp<int64_t>(p, 0, n - 1);
        } else {  // reflect without repeating the edge
          const int64_t period = std::max<int64_t>(1, 2 * (n - 1));
          p = ((p % period) + period) % period;
          if (p >= n) p = period - p;
        }
      }
      src += p * in_strides[a];
    }
    const auto o = static_cast<size_t>(k);
    if (y.is_float()) y.f[o] = inside ? x.f[static_cast<size_t>(src)] : static_cast<float>(value);
    else y.i[o] = inside ? x.i[static_cast<size_t>(src)] : static_cast<int64_t>(value);
  });
  return core::Ok{};
}

core::Status run_depth_to_space(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  if (x.dims.size() != 4) return node_error(node, "needs a rank-4 input");
  RC_ASSIGN(const int64_t b, attr_int(node, "blocksize", 0));
  RC_ASSIGN(const std::string mode, onnx_io::get_string(node, "mode", "DCR"));
  if (b <= 0 || x.dims[1] % (b * b) != 0) return node_error(node, "channels are not a multiple of blocksize^2");
  const int64_t n = x.dims[0], c = x.dims[1] / (b * b), h = x.dims[2], w = x.dims[3];
  y.reshape(x.dtype, {n, c, h * b, w * b});
  const bool dcr = mode != "CRD";
  for (int64_t in = 0; in < n; ++in)
    for (int64_t oc = 0; oc < c; ++oc)
      for (int64_t oy = 0; oy < h * b; ++oy)
        for (int64_t ox = 0; ox < w * b; ++ox) {
          const int64_t by = oy % b, bx = ox % b;
          // DCR: channel (by*b + bx)*C + c; CRD: c*b*b + by*b + bx.
          const int64_t ic = dcr ? (by * b + bx) * c + oc : oc * b * b + by * b + bx;
          const auto src = static_cast<size_t>(((in * c * b * b + ic) * h + oy / b) * w + ox / b);
          const auto dst = static_cast<size_t>(((in * c + oc) * h * b + oy) * w * b + ox);
          if (x.is_float()) y.f[dst] = x.f[src];
          else y.i[dst] = x.i[src];
        }
  return core::Ok{};
}

core::Status run_expand(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  const Tensor& shape = *in[1];
  Tensor& y = *out[0];
  // numpy broadcast of the input against the requested shape: a 1 in `shape` keeps the input's dimension.
  RC_ASSIGN(const auto dims, broadcast_dims(node, x.dims, int_values(shape)));
  RC_CHECK(check_element_count(ctx, node, dims));
  y.reshape(x.dtype, dims);
  const auto strides = broadcast_strides(x.dims, dims.size());
  for_each_index(dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t src = 0;
    for (size_t a = 0; a < idx.size(); ++a) src += idx[a] * strides[a];
    if (x.is_float()) y.f[static_cast<size_t>(k)] = x.f[static_cast<size_t>(src)];
    else y.i[static_cast<size_t>(k)] = x.i[static_cast<size_t>(src)];
  });
  return core::Ok{};
}

core::Status run_tile(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const int64_t opset = ctx.opset;
  Tensor& y = *out[0];
  const Tensor& x = *in[0];
  const auto rank = static_cast<int64_t>(x.dims.size());
  const Tensor* repeats_in = input_or_null(in, 1);
  if (repeats_in == nullptr) return node_error(node, "needs repeats");
  std::vector<int64_t> repeats = int_values(*repeats_in);
  if (opset < 6) {  // Tile-1: inputs `tiles` and `axis`, one copy count for one axis
    const Tensor* axis_in = input_or_null(in, 2);
    if (axis_in == nullptr || axis_in->numel() != 1 || repeats.size() != 1) {
      return node_error(node, "needs scalar tiles and axis");
    }
    int64_t axis = int_values(*axis_in)[0];
    RC_CHECK(resolve_axis(node, axis, rank));
    const int64_t tiles = repeats[0];
    repeats.assign(static_cast<size_t>(rank), 1);
    repeats[static_cast<size_t>(axis)] = tiles;
  }
  if (static_cast<int64_t>(repeats.size()) != rank) {
    return node_error(node, "repeats has " + std::to_string(repeats.size()) + " values for a rank-" + std::to_string(rank) + " input");
  }
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (size_t a = 0; a < dims.size(); ++a) {
    if (repeats[a] < 0) {
      return node_error(node, "repeats must not be negative (axis " + std::to_string(a) + " has " + std::to_string(repeats[a]) + ")");
    }
    if (__builtin_mul_overflow(x.dims[a], repeats[a], &dims[a])) {
      return node_error(node, "output dimension overflows on axis " + std::to_string(a));
    }
  }
  RC_CHECK(check_element_count(ctx, node, dims));
  y.reshape(x.dtype, dims);
  const auto in_strides = strides_of(x.dims);
  for_each_index(dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    int64_t src = 0;  // an empty output visits nothing, so x.dims[a] is never 0 here
    for (size_t a = 0; a < idx.size(); ++a) src += (idx[a] % x.dims[a]) * in_strides[a];
    if (x.is_float()) y.f[static_cast<size_t>(k)] = x.f[static_cast<size_t>(src)];
    else y.i[static_cast<size_t>(k)] = x.i[static_cast<size_t>(src)];
  });
  return core::Ok{};
}

core::Status run_split(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  const auto rank = static_cast<int64_t>(x.dims.size());
  RC_ASSIGN(int64_t axis, attr_int(node, "axis", 0));
  RC_CHECK(resolve_axis(node, axis, rank));
  const int64_t extent = x.dims[static_cast<size_t>(axis)];
  RC_ASSIGN(const auto sizes, split_sizes(node, in, extent, out.size()));
  int64_t outer = 1, inner = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= x.dims[static_cast<size_t>(a)];
  for (int64_t a = axis + 1; a < rank; ++a) inner *= x.dims[static_cast<size_t>(a)];
  int64_t offset = 0;  // along the axis
  for (size_t p = 0; p < out.size(); ++p) {
    const int64_t len = sizes[p];
    if (Tensor* y = out[p]) {
      std::vector<int64_t> dims = x.dims;
      dims[static_cast<size_t>(axis)] = len;
      y->reshape(x.dtype, dims);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t k = 0; k < len * inner; ++k) {
          const auto from = static_cast<size_t>((o * extent + offset) * inner + k);
          const auto to = static_cast<size_t>(o * len * inner + k);
          if (x.is_float()) y->f[to] = x.f[from];
          else y->i[to] = x.i[from];
        }
      }
    }
    offset += len;
  }
  return core::Ok{};
}

}  // namespace dwdeconv::ops::detail

namespace dwdeconv::ops::detail {

core::Status run_scatter_nd(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& data = *in[0];
  const Tensor& indices = *in[1];
  const Tensor& updates = *in[2];
  Tensor& y = *out[0];
  RC_ASSIGN(const std::string reduction, onnx_io::get_string(node, "reduction", "none"));
  if (indices.is_float() || indices.dims.empty()) return node_error(node, "indices must be an integer tensor of rank >= 1");
  if (updates.dtype != data.dtype) return node_error(node, "updates and data differ in element type");
  // indices [i_1..i_q-1, k] address slices data[idx] of data.dims[k:]; updates has dims indices.dims[:-1] + data.dims[k:].
  const auto r = data.dims.size();
  const auto k = static_cast<size_t>(indices.dims.back());
  if (k < 1 || k > r) return node_error(node, "the last dim of indices (" + std::to_string(k) + ") must be in [1, rank of data]");
  std::vector<int64_t> want(indices.dims.begin(), indices.dims.end() - 1);
  want.insert(want.end(), data.dims.begin() + static_cast<std::ptrdiff_t>(k), data.dims.end());
  if (updates.dims != want) return node_error(node, "updates are " + format_dims(updates.dims) + ", want " + format_dims(want));
  copy_data(data, y, data.dims);
  int64_t slice = 1;
  for (size_t a = k; a < r; ++a) slice *= data.dims[a];
  const auto strides = strides_of(data.dims);
  const int64_t rows = indices.numel() / static_cast<int64_t>(k);
  std::vector<bool> written(static_cast<size_t>(data.numel() / std::max<int64_t>(slice, 1)), false);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offset = 0, flat = 0;
    for (size_t a = 0; a < k; ++a) {
      int64_t i = indices.i[static_cast<size_t>(row * static_cast<int64_t>(k) + static_cast<int64_t>(a))];
      const int64_t extent = data.dims[a];
      if (i < 0) i += extent;
      if (i < 0 || i >= extent)
        return node_error(node, "index " + std::to_string(i) + " is out of range for a dim of " + std::to_string(extent));
      offset += i * strides[a];
      flat = flat * extent + i;
    }
    if (reduction == "none") {
      // Duplicate indices leave the result to the order of the writes, which the spec does not fix.
      if (written[static_cast<size_t>(flat)]) return node_error(node, "indices address one slice twice (reduction none)");
      written[static_cast<size_t>(flat)] = true;
    }
    for (int64_t e = 0; e < slice; ++e) {
      const auto to = static_cast<size_t>(offset + e), from = static_cast<size_t>(row * slice + e);
      if (y.is_float()) {
        float& v = y.f[to];
        const float u = updates.f[from];
        v = reduction == "add"   ? round_to_type(v + u, y.dtype)
            : reduction == "mul" ? round_to_type(v * u, y.dtype)
            : reduction == "max" ? std::max(v, u)
            : reduction == "min" ? std::min(v, u)
                                 : u;
      } else {
        int64_t& v = y.i[to];
        const int64_t u = updates.i[from];
        const auto sum = static_cast<int64_t>(static_cast<uint64_t>(v) + static_cast<uint64_t>(u));
        const auto product = static_cast<int64_t>(static_cast<uint64_t>(v) * static_cast<uint64_t>(u));
        v = reduction == "add"   ? wrap_to_type(sum, y.dtype)
            : reduction == "mul" ? wrap_to_type(product, y.dtype)
            : reduction == "max" ? std::max(v, u)
            : reduction == "min" ? std::min(v, u)
                                 : u;
      }
    }
  }
  return core::Ok{};
}

}  // namespace dwdeconv::ops::detail
