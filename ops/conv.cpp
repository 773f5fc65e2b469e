// Conv, ConvTranspose and pool geometry (shared with the XNNPACK steps) and the conv, pool and matmul reference
// kernels.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/reference.h"
#include "onnx_io/attributes.h"
#include "ops/kernels.h"

namespace dwdeconv::ops {

using detail::attr_int;
using detail::node_error;

namespace {

// Spatial attribute with a default for every axis.
core::Result<std::vector<int64_t>> spatial_ints(const onnx::NodeProto& node, const std::string& name, size_t spatial, int64_t fallback) {
  RC_ASSIGN(auto v, onnx_io::get_ints(node, name, std::vector<int64_t>(spatial, fallback)));
  if (v.size() != spatial)
    return node_error(node, name + " has " + std::to_string(v.size()) + " values for " + std::to_string(spatial) + " spatial axes");
  return v;
}

core::Status read_pads(const onnx::NodeProto& node, size_t spatial, std::vector<int64_t>& begin, std::vector<int64_t>& end) {
  RC_ASSIGN(const auto pads, onnx_io::get_ints(node, "pads", std::vector<int64_t>(2 * spatial, 0)));
  if (pads.size() != 2 * spatial) return node_error(node, "pads must hold 2 values per spatial axis");
  begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(spatial));
  end.assign(pads.begin() + static_cast<std::ptrdiff_t>(spatial), pads.end());
  return core::Ok{};
}

core::Tensor4 to_tensor4(const Tensor& t, size_t spatial) {
  // [N, C, L] is treated as [N, C, 1, L].
  const int64_t h = spatial == 2 ? t.dims[2] : 1;
  const int64_t w = spatial == 2 ? t.dims[3] : t.dims[2];
  core::Tensor4 r(t.dims[0], t.dims[1], h, w);
  for (size_t k = 0; k < r.data.size(); ++k) r.data[k] = t.f[k];
  return r;
}

void from_tensor4(const core::Tensor4& r, int32_t dtype, size_t spatial, Tensor& y) {
  if (spatial == 2) y.reshape(dtype, {r.n, r.c, r.h, r.w});
  else y.reshape(dtype, {r.n, r.c, r.w});
  for (size_t k = 0; k < r.data.size(); ++k) y.f[k] = round_to_type(static_cast<float>(r.data[k]), dtype);
}

}  // namespace

namespace detail {

namespace {

// Conv or ConvTranspose (transpose) of X = in[0] by W = in[1], with the optional bias in[2].
core::Status convolve(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, Tensor& y, bool transpose) {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  if (!x.is_float() || !w.is_float()) return node_error(node, "needs float inputs");
  ConvGeometry g;
  if (transpose) {
    RC_ASSIGN(g, resolve_conv_transpose(node, x.dims, w.dims));
  } else {
    RC_ASSIGN(g, resolve_conv(node, x.dims, w.dims));
  }
  if (g.spatial != 1 && g.spatial != 2) {
    return node_error(node, std::to_string(g.spatial) + "-D convolution is not supported (only 1-D and 2-D)");
  }
  std::vector<int64_t> y_dims{x.dims[0], transpose ? w.dims[1] * g.group : w.dims[0]};
  y_dims.insert(y_dims.end(), g.output_size.begin(), g.output_size.end());
  RC_CHECK(check_element_count(ctx, node, y_dims));  // pads and strides are attributes: a hostile one is huge
  std::vector<double> bias;
  if (const Tensor* b = input_or_null(in, 2)) bias.assign(b->f.begin(), b->f.end());
  const auto axis = [&](const std::vector<int64_t>& v, size_t k, int64_t fill) { return g.spatial == 2 ? v[k] : (k == 0 ? fill : v[0]); };
  core::Tensor4 r;
  if (transpose) {
    r = core::conv_transpose2d_reference(to_tensor4(x, g.spatial), to_tensor4(w, g.spatial), bias, conv_transpose2d_params(g));
  } else {
    core::Conv2dParams p;
    p.strides = {axis(g.strides, 0, 1), axis(g.strides, 1, 1)};
    p.dilations = {axis(g.dilations, 0, 1), axis(g.dilations, 1, 1)};
    p.pads = {axis(g.pads_begin, 0, 0), axis(g.pads_begin, 1, 0), axis(g.pads_end, 0, 0), axis(g.pads_end, 1, 0)};
    p.group = g.group;
    r = core::conv2d_reference(to_tensor4(x, g.spatial), to_tensor4(w, g.spatial), bias, p);
  }
  from_tensor4(r, x.dtype, g.spatial, y);
  return core::Ok{};
}

}  // namespace

core::Status run_conv(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  return convolve(ctx, node, in, *out[0], /*transpose=*/false);
}

core::Status run_conv_transpose(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  return convolve(ctx, node, in, *out[0], /*transpose=*/true);
}

// ---------------------------------------------------------------- pooling

core::Status run_pool(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  const bool is_max = node.op_type() == "MaxPool";
  if (!x.is_float() && !is_max) return node_error(node, "needs a float input");
  RC_ASSIGN(const PoolGeometry g, resolve_pool(node, x.dims));
  std::vector<int64_t> dims = {x.dims[0], x.dims[1]};
  dims.insert(dims.end(), g.output_size.begin(), g.output_size.end());
  RC_CHECK(check_element_count(ctx, node, dims));
  y.reshape(x.dtype, dims);
  const auto in_strides = strides_of(x.dims);
  const size_t sp = g.spatial;
  for_each_index(dims, [&](int64_t k, const std::vector<int64_t>& idx) {
    double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    int64_t valid = 0, window = 1;
    std::vector<int64_t> lo(sp), hi(sp);
    for (size_t a = 0; a < sp; ++a) {
      const int64_t start = idx[2 + a] * g.strides[a] - g.pads_begin[a];
      // The window as clipped to input + pads, which count_include_pad counts.
      const int64_t end = std::min(start + (g.kernel[a] - 1) * g.dilations[a] + 1, x.dims[2 + a] + g.pads_end[a]);
      window *= (end - start + g.dilations[a] - 1) / g.dilations[a];
      lo[a] = start;
      hi[a] = end;
    }
    std::vector<int64_t> tap(sp, 0);
    for (;;) {
      bool inside = true;
      int64_t src = idx[0] * in_strides[0] + idx[1] * in_strides[1];
      for (size_t a = 0; a < sp; ++a) {
        const int64_t p = lo[a] + tap[a] * g.dilations[a];
        if (p < 0 || p >= x.dims[2 + a]) inside = false;
        src += p * in_strides[2 + a];
      }
      if (inside) {
        const double v = x.get(src);
        acc = is_max ? std::max(acc, v) : acc + v;
        ++valid;
      }
      size_t a = sp;
      while (a-- > 0) {
        if (lo[a] + (++tap[a]) * g.dilations[a] < hi[a]) break;
        tap[a] = 0;
      }
      if (a == static_cast<size_t>(-1)) break;
    }
    double r = acc;
    if (!is_max) r = acc / static_cast<double>(g.count_include_pad ? window : std::max<int64_t>(valid, 1));
    if (y.is_float()) y.f[static_cast<size_t>(k)] = round_to_type(static_cast<float>(r), x.dtype);
    else y.i[static_cast<size_t>(k)] = static_cast<int64_t>(r);
  });
  return core::Ok{};
}

core::Status run_global_average_pool(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& x = *in[0];
  Tensor& y = *out[0];
  if (!x.is_float() || x.dims.size() < 3) return node_error(node, "needs a float input of rank >= 3");
  std::vector<int64_t> dims(x.dims.size(), 1);
  dims[0] = x.dims[0];
  dims[1] = x.dims[1];
  y.reshape(x.dtype, dims);
  const int64_t inner = x.numel() / std::max<int64_t>(1, dims[0] * dims[1]);
  for (int64_t k = 0; k < dims[0] * dims[1]; ++k) {
    double sum = 0.0;
    for (int64_t j = 0; j < inner; ++j) sum += x.f[static_cast<size_t>(k * inner + j)];
    y.f[static_cast<size_t>(k)] = round_to_type(static_cast<float>(sum / static_cast<double>(inner)), x.dtype);
  }
  return core::Ok{};
}

// ---------------------------------------------------------------- matmul

core::Status run_matmul(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  const Tensor& a_in = *in[0];
  const Tensor& b_in = *in[1];
  Tensor& y = *out[0];
  if (!a_in.is_float() || !b_in.is_float()) return node_error(node, "needs float inputs");
  if (a_in.dims.empty() || b_in.dims.empty()) return node_error(node, "scalar inputs");
  std::vector<int64_t> ad = a_in.dims, bd = b_in.dims;
  const bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) ad.insert(ad.begin(), 1);
  if (b_vec) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  if (bd[bd.size() - 2] != k) return node_error(node, "inner dimensions differ");
  const std::vector<int64_t> a_batch(ad.begin(), ad.end() - 2), b_batch(bd.begin(), bd.end() - 2);
  RC_ASSIGN(const auto batch, broadcast_dims(node, a_batch, b_batch));
  std::vector<int64_t> dims = batch;
  if (!a_vec) dims.push_back(m);
  if (!b_vec) dims.push_back(n);
  RC_CHECK(check_element_count(ctx, node, dims));
  y.reshape(a_in.dtype, dims);
  const auto sa = broadcast_strides(a_batch, batch.size());
  const auto sb = broadcast_strides(b_batch, batch.size());
  for_each_index(batch, [&](int64_t bi, const std::vector<int64_t>& idx) {
    int64_t oa = 0, ob = 0;
    for (size_t q = 0; q < idx.size(); ++q) {
      oa += idx[q] * sa[q];
      ob += idx[q] * sb[q];
    }
    const float* pa = a_in.f.data() + oa * m * k;
    const float* pb = b_in.f.data() + ob * k * n;
    float* py = y.f.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (int64_t q = 0; q < k; ++q) sum += static_cast<double>(pa[i * k + q]) * pb[q * n + j];
        py[i * n + j] = round_to_type(static_cast<float>(sum), a_in.dtype);
      }
  });
  return core::Ok{};
}

core::Status run_gemm(const OpContext& ctx, const onnx::NodeProto& node, const Inputs& in, const Outputs& out) {
  Tensor& y = *out[0];
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  if (a.dims.size() != 2 || b.dims.size() != 2) return node_error(node, "needs 2-D A and B");
  RC_ASSIGN(const int64_t trans_a, attr_int(node, "transA", 0));
  RC_ASSIGN(const int64_t trans_b, attr_int(node, "transB", 0));
  const double alpha = attr_float(node, "alpha", 1.0f), beta = attr_float(node, "beta", 1.0f);
  const int64_t m = trans_a ? a.dims[1] : a.dims[0], k = trans_a ? a.dims[0] : a.dims[1];
  const int64_t n = trans_b ? b.dims[0] : b.dims[1];
  if ((trans_b ? b.dims[1] : b.dims[0]) != k) return node_error(node, "inner dimensions differ");
  const Tensor* c = input_or_null(in, 2);
  std::vector<int64_t> cs;
  if (c != nullptr) {
    RC_ASSIGN(const auto cd, broadcast_dims(node, c->dims, {m, n}));
    if (cd != std::vector<int64_t>{m, n}) return node_error(node, "C does not broadcast to [M, N]");
    cs = broadcast_strides(c->dims, 2);
  }
  RC_CHECK(check_element_count(ctx, node, {m, n}));
  y.reshape(a.dtype, {m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t q = 0; q < k; ++q) {
        const double av = a.f[static_cast<size_t>(trans_a ? q * m + i : i * k + q)];
        const double bv = b.f[static_cast<size_t>(trans_b ? j * k + q : q * n + j)];
        sum += av * bv;
      }
      double r = alpha * sum;
      if (c != nullptr) r += beta * c->get(i * cs[0] + j * cs[1]);
      y.f[static_cast<size_t>(i * n + j)] = round_to_type(static_cast<float>(r), a.dtype);
    }
  return core::Ok{};
}

}  // namespace detail

core::ConvTranspose2dParams conv_transpose2d_params(const ConvGeometry& g) {
  const auto axis = [&](const std::vector<int64_t>& v, size_t k, int64_t fill) { return g.spatial == 2 ? v[k] : (k == 0 ? fill : v[0]); };
  core::ConvTranspose2dParams p;
  p.strides = {axis(g.strides, 0, 1), axis(g.strides, 1, 1)};
  p.dilations = {axis(g.dilations, 0, 1), axis(g.dilations, 1, 1)};
  p.output_padding = {axis(g.output_padding, 0, 0), axis(g.output_padding, 1, 0)};
  p.pads = {axis(g.pads_begin, 0, 0), axis(g.pads_begin, 1, 0), axis(g.pads_end, 0, 0), axis(g.pads_end, 1, 0)};
  p.group = g.group;
  return p;
}

namespace {

// What Conv and ConvTranspose read alike: ranks, group, kernel_shape (which must agree with W), strides and
// dilations, and the channel check, where X's channels are W's dim 1 times group (Conv) or W's dim 0 (ConvTranspose).
core::Result<ConvGeometry> resolve_common(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims,
                                          const std::vector<int64_t>& w_dims, bool transposed) {
  if (x_dims.size() < 3 || w_dims.size() != x_dims.size()) return node_error(node, "X and W ranks do not match");
  ConvGeometry g;
  g.spatial = x_dims.size() - 2;
  RC_ASSIGN(g.group, attr_int(node, "group", 1));
  const std::vector<int64_t> w_kernel(w_dims.begin() + 2, w_dims.end());
  RC_ASSIGN(g.kernel, onnx_io::get_ints(node, "kernel_shape", w_kernel));
  if (g.kernel != w_kernel) return node_error(node, "kernel_shape disagrees with W");
  const int64_t x_channels = transposed ? w_dims[0] : w_dims[1] * g.group;
  if (g.group <= 0 || x_dims[1] != x_channels || w_dims[0] % g.group != 0) {
    return node_error(node, "channels do not match group " + std::to_string(g.group));
  }
  RC_ASSIGN(g.strides, spatial_ints(node, "strides", g.spatial, 1));
  RC_ASSIGN(g.dilations, spatial_ints(node, "dilations", g.spatial, 1));
  return g;
}

}  // namespace

core::Result<ConvGeometry> resolve_conv(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims,
                                        const std::vector<int64_t>& w_dims) {
  RC_ASSIGN(ConvGeometry g, resolve_common(node, x_dims, w_dims, /*transposed=*/false));
  RC_ASSIGN(const std::string auto_pad, onnx_io::get_string(node, "auto_pad", "NOTSET"));
  RC_CHECK(read_pads(node, g.spatial, g.pads_begin, g.pads_end));
  for (size_t a = 0; a < g.spatial; ++a) {
    const int64_t in = x_dims[2 + a];
    const int64_t eff = (g.kernel[a] - 1) * g.dilations[a] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t out = (in + g.strides[a] - 1) / g.strides[a];
      const int64_t total = std::max<int64_t>(0, (out - 1) * g.strides[a] + eff - in);
      const int64_t small = total / 2;
      g.pads_begin[a] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pads_end[a] = total - g.pads_begin[a];
    } else if (auto_pad == "VALID") {
      g.pads_begin[a] = g.pads_end[a] = 0;
    } else if (auto_pad != "NOTSET") {
      return node_error(node, "unknown auto_pad '" + auto_pad + "'");
    }
    const int64_t span = in + g.pads_begin[a] + g.pads_end[a] - eff;
    if (span < 0) return node_error(node, "kernel larger than the padded input");
    g.output_size.push_back(span / g.strides[a] + 1);
  }
  return g;
}

core::Result<ConvGeometry> resolve_conv_transpose(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims,
                                                  const std::vector<int64_t>& w_dims) {
  RC_ASSIGN(ConvGeometry g, resolve_common(node, x_dims, w_dims, /*transposed=*/true));
  RC_ASSIGN(g.output_padding, spatial_ints(node, "output_padding", g.spatial, 0));
  RC_ASSIGN(const std::string auto_pad, onnx_io::get_string(node, "auto_pad", "NOTSET"));
  RC_ASSIGN(auto output_shape, onnx_io::get_ints(node, "output_shape", {}));
  if (output_shape.size() == g.spatial + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != g.spatial) return node_error(node, "output_shape has the wrong length");
  RC_CHECK(read_pads(node, g.spatial, g.pads_begin, g.pads_end));
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "VALID" && auto_pad != "NOTSET") return node_error(node, "unknown auto_pad '" + auto_pad + "'");
  for (size_t a = 0; a < g.spatial; ++a) {
    const int64_t in = x_dims[2 + a];
    const int64_t eff = (g.kernel[a] - 1) * g.dilations[a] + 1;
    const int64_t natural = g.strides[a] * (in - 1) + g.output_padding[a] + eff;
    if (!output_shape.empty() || same) {
      // total = s*(in-1) + op + (k-1)*d + 1 - out; SAME_UPPER: begin = total/2, else begin = total - total/2.
      const int64_t out = !output_shape.empty() ? output_shape[a] : in * g.strides[a];
      const int64_t total = natural - out;
      // Floor division, as the ONNX reference computes it: an output_shape one larger than the natural size
      // gives pads (0, -1), i.e. one extra row at the end, the same as output_padding would.
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      g.pads_begin[a] = auto_pad == "SAME_UPPER" ? half : total - half;
      g.pads_end[a] = total - g.pads_begin[a];
    } else if (auto_pad == "VALID") {
      g.pads_begin[a] = g.pads_end[a] = 0;
    }
    const int64_t out = natural - g.pads_begin[a] - g.pads_end[a];
    if (out <= 0) return node_error(node, "output size is not positive");
    g.output_size.push_back(out);
  }
  return g;
}

core::Result<PoolGeometry> resolve_pool(const onnx::NodeProto& node, const std::vector<int64_t>& x_dims) {
  if (x_dims.size() < 3) return node_error(node, "needs a rank >= 3 input");
  PoolGeometry g;
  g.spatial = x_dims.size() - 2;
  RC_ASSIGN(g.kernel, onnx_io::get_ints(node, "kernel_shape", {}));
  if (g.kernel.size() != g.spatial) return node_error(node, "kernel_shape must hold one value per spatial axis");
  RC_ASSIGN(g.strides, spatial_ints(node, "strides", g.spatial, 1));
  RC_ASSIGN(g.dilations, spatial_ints(node, "dilations", g.spatial, 1));
  RC_ASSIGN(const int64_t ceil_mode, attr_int(node, "ceil_mode", 0));
  RC_ASSIGN(const int64_t include, attr_int(node, "count_include_pad", 0));
  g.count_include_pad = include != 0;
  RC_ASSIGN(const std::string auto_pad, onnx_io::get_string(node, "auto_pad", "NOTSET"));
  RC_CHECK(read_pads(node, g.spatial, g.pads_begin, g.pads_end));
  for (size_t a = 0; a < g.spatial; ++a) {
    const int64_t in = x_dims[2 + a];
    const int64_t eff = (g.kernel[a] - 1) * g.dilations[a] + 1;
    const int64_t s = g.strides[a];
    int64_t out = 0;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out = (in + s - 1) / s;
      const int64_t total = std::max<int64_t>(0, (out - 1) * s + eff - in);
      const int64_t small = total / 2;
      g.pads_begin[a] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pads_end[a] = total - g.pads_begin[a];
    } else if (auto_pad == "VALID") {
      g.pads_begin[a] = g.pads_end[a] = 0;
      out = (in - eff) / s + 1;
    } else {
      const int64_t span = in + g.pads_begin[a] + g.pads_end[a] - eff;
      out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
      // A last window that starts in the end padding is dropped.
      if (ceil_mode && (out - 1) * s >= in + g.pads_begin[a]) --out;
    }
    if (out <= 0) return node_error(node, "output size is not positive");
    g.output_size.push_back(out);
  }
  return g;
}
}  // namespace dwdeconv::ops
