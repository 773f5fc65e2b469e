// Spatial steps: pooling, bilinear Resize and the integer-factor nearest upsample; and MatMul / Gemm.
#include <algorithm>
#include <array>
#include <cstring>

#include "internal.h"
#include "onnx_io/attributes.h"
#include "ops/ops.h"
#include "step.h"

namespace dwdeconv::runtime_check::detail {
namespace {

// MaxPool / AveragePool (2-D), GlobalAveragePool and bilinear Resize: NHWC in, NHWC out, one input.
class SpatialStep : public XnnStep {
 public:
  enum class Kind { kMaxPool, kAveragePool, kGlobalAveragePool, kResizeBilinear };

  SpatialStep(const onnx::NodeProto& node, Kind kind, int x, int y, Values& v, std::vector<int64_t> y_dims, xnn_operator_t raw)
      : XnnStep(node, "xnn_setup (pooling/resize)"), kind_(kind) {
    y_ = y;
    y_dims_ = std::move(y_dims);
    add_operator(raw);
    add_input(v, x, Layout::kNhwc);
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    const auto& d = inputs_[0].dims;
    const auto n = static_cast<size_t>(d[0]), h = static_cast<size_t>(d[2]), w = static_cast<size_t>(d[3]);
    xnn_operator_t op = ops_[0].get();
    switch (kind_) {
      case Kind::kMaxPool: return xnn_setup_max_pooling2d_nhwc_f32(op, n, h, w, x[0], y, threadpool);
      case Kind::kAveragePool: return xnn_setup_average_pooling2d_nhwc_f32(op, n, h, w, x[0], y, threadpool);
      case Kind::kGlobalAveragePool: return xnn_setup_global_average_pooling_nwc_f32(op, n, h * w, x[0], y, threadpool);
      case Kind::kResizeBilinear:
        return xnn_setup_resize_bilinear2d_nhwc_f32(op, n, h, w, static_cast<size_t>(y_dims_[2]), static_cast<size_t>(y_dims_[3]), x[0], y,
                                                    threadpool);
    }
    return xnn_status_invalid_parameter;
  }

 private:
  Kind kind_;
};

// MatMul / Gemm with a constant B: XNNPACK fully_connected_nc_f32 over the rows of A.
class FullyConnectedStep : public XnnStep {
 public:
  FullyConnectedStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup_fully_connected_nc_f32") {
    y_ = y;
    y_layout_ = Layout::kNchw;
  }

  core::Status plan(Values& v, int a_id, const Tensor& b, bool b_is_k_by_n, std::vector<float> bias) {
    const Tensor& a = v.peek(a_id);
    const int64_t k = a.dims.back();
    const int64_t n = b_is_k_by_n ? b.dims[1] : b.dims[0];
    y_dims_ = a.dims;
    y_dims_.back() = n;
    rows_ = static_cast<size_t>(a.numel() / std::max<int64_t>(k, 1));
    weights_.assign(b.f.begin(), b.f.end());
    bias_ = std::move(bias);
    xnn_operator_t raw = nullptr;
    // B [K, N] is XNNPACK's transposed-weights form; B [N, K] (Gemm transB=1) is its native form.
    const xnn_status status = xnn_create_fully_connected_nc_f32(
        static_cast<size_t>(k), static_cast<size_t>(n), static_cast<size_t>(k), static_cast<size_t>(n), weights_.data(),
        bias_.empty() ? nullptr : bias_.data(), kNoMin, kNoMax, b_is_k_by_n ? XNN_FLAG_TRANSPOSE_WEIGHTS : 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_fully_connected_nc_f32", status);
    add_operator(raw);
    add_input(v, a_id, Layout::kNchw);
    // XNNPACK packed its own copy of both.
    std::vector<float>().swap(weights_);
    std::vector<float>().swap(bias_);
    return core::Ok{};
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    return xnn_setup_fully_connected_nc_f32(ops_[0].get(), rows_, x[0], y, threadpool);
  }

 private:
  size_t rows_ = 0;
  std::vector<float> weights_, bias_;
};

// MatMul whose B is computed (attention's Q x K^T and its x V): one XNNPACK fully-connected operator per batch
// matrix, whose weights are that matrix of B, created again whenever B's value changes (XNNPACK packs weights at
// creation). A [..., M, K] x B [..., K, N] with the same batch dims, or a 2-D B for every batch.
class DynamicMatMulStep : public XnnStep {
 public:
  DynamicMatMulStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup_fully_connected_nc_f32") {
    y_ = y;
    y_layout_ = Layout::kNchw;
  }

  // `b_is_n_by_k`: Gemm's transB, B given as [N, K]. `bias`: Gemm's beta * C as a row of N (or empty).
  core::Status plan(Values& v, int a_id, int b_id, bool b_is_n_by_k = false, std::vector<float> bias = {}) {
    const Tensor& a = v.peek(a_id);
    const Tensor& b = v.peek(b_id);
    m_ = static_cast<size_t>(a.dims[a.dims.size() - 2]);
    k_ = static_cast<size_t>(a.dims.back());
    n_ = static_cast<size_t>(b_is_n_by_k ? b.dims[b.dims.size() - 2] : b.dims.back());
    // XNNPACK's fully-connected weights are [N, K]; a [K, N] B is transposed as it is packed.
    flags_ = b_is_n_by_k ? 0 : XNN_FLAG_TRANSPOSE_WEIGHTS;
    bias_ = std::move(bias);
    batches_ = static_cast<size_t>(a.numel()) / std::max<size_t>(m_ * k_, 1);
    b_batched_ = b.dims.size() > 2;
    b_ = b_id;
    y_dims_ = a.dims;
    y_dims_.back() = static_cast<int64_t>(n_);
    add_input(v, a_id, Layout::kNchw);
    add_input(v, b_id, Layout::kNchw);
    return core::Ok{};
  }

 protected:
  core::Status prepare(Values& v) override {
    const uint64_t version = v.slots[static_cast<size_t>(b_)].version;
    if (!ops_.empty() && version == b_version_) return core::Ok{};
    ops_.clear();
    const float* b = v.peek(b_).f.data();
    for (size_t i = 0; i < (b_batched_ ? batches_ : 1); ++i) {
      xnn_operator_t raw = nullptr;
      const xnn_status status = xnn_create_fully_connected_nc_f32(k_, n_, k_, n_, b + i * k_ * n_, bias_.empty() ? nullptr : bias_.data(),
                                                                  kNoMin, kNoMax, flags_, &raw);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_fully_connected_nc_f32", status);
      add_operator(raw);
    }
    b_version_ = version;
    invalidate_setup();
    return core::Ok{};
  }

  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    if (!b_batched_) return xnn_setup_fully_connected_nc_f32(ops_[0].get(), batches_ * m_, x[0], y, threadpool);
    for (size_t i = 0; i < batches_; ++i) {
      const xnn_status status = xnn_setup_fully_connected_nc_f32(ops_[i].get(), m_, x[0] + i * m_ * k_, y + i * m_ * n_, threadpool);
      if (status != xnn_status_success) return status;
    }
    return xnn_status_success;
  }

 private:
  size_t m_ = 0, k_ = 0, n_ = 0, batches_ = 0;
  uint32_t flags_ = XNN_FLAG_TRANSPOSE_WEIGHTS;
  std::vector<float> bias_;
  bool b_batched_ = false;
  int b_ = -1;
  uint64_t b_version_ = 0;
};

// One nearest upsample over the storage [outer, h, w, inner]: NHWC is [N, H, W, C], NCHW is [N*C, H, W, 1].
struct NearestUpsampleJob {
  const float* x = nullptr;
  float* y = nullptr;
  size_t h = 0, w = 0, inner = 0;  // input rows per image, pixels per row, floats per pixel
  size_t fh = 1, fw = 1;           // integer factors on H and W
};

// Writes the fh output rows of input row `row` (in [0, outer * h)): the first by replicating each pixel fw
// times, the others as copies of the first.
void nearest_upsample_row(void* context, size_t row) {
  const auto& job = *static_cast<const NearestUpsampleJob*>(context);
  const size_t out_row = job.w * job.fw * job.inner;  // floats per output row
  const float* src = job.x + row * job.w * job.inner;
  float* dst = job.y + row * job.fh * out_row;  // image * h * fh + iy * fh == row * fh
  if (job.fw == 1) {
    std::memcpy(dst, src, out_row * sizeof(float));
  } else if (job.inner == 1) {
    for (size_t ix = 0; ix < job.w; ++ix) {
      for (size_t k = 0; k < job.fw; ++k) dst[ix * job.fw + k] = src[ix];
    }
  } else {
    const size_t pixel_bytes = job.inner * sizeof(float);
    for (size_t ix = 0; ix < job.w; ++ix) {
      for (size_t k = 0; k < job.fw; ++k) std::memcpy(dst + (ix * job.fw + k) * job.inner, src + ix * job.inner, pixel_bytes);
    }
  }
  for (size_t r = 1; r < job.fh; ++r) std::memcpy(dst + r * out_row, dst, out_row * sizeof(float));
}

// Before: Resize(mode=nearest) whose every output pixel (y, x) reads input (y / fh, x / fw), e.g. 2x with
//         asymmetric/floor or half_pixel/round_prefer_floor (checked index by index against the reference mapping).
// After:  row and pixel replication with memcpy, in the input's layout (no conversion around it), split by input
//         rows over the threadpool. Exact: it only copies values.
class NearestUpsampleStep : public Step {
 public:
  NearestUpsampleStep(const onnx::NodeProto& node, int x, int y, int64_t fh, int64_t fw, const Values& v)
      : node_(node), x_(x), y_(y), fh_(fh), fw_(fw) {
    x_dims_ = v.peek(x_).dims;
    y_dims_ = {x_dims_[0], x_dims_[1], x_dims_[2] * fh_, x_dims_[3] * fw_};
  }

  // "optimized nearest upsample (2x2 replication, NHWC)", with the layout the step saw at creation.
  std::string note(const Values& v) const {
    return std::string(kNearestUpsampleNote) + " (" + std::to_string(fh_) + "x" + std::to_string(fw_) + " replication, " +
           (v.layout(x_) == Layout::kNhwc ? "NHWC" : "NCHW") + ")";
  }

  core::Status run(Values& v) override {
    const Layout layout = v.layout(x_);
    const Tensor& x = v.read(x_, layout);
    RC_CHECK(check_dims(node_, x, x_dims_));
    Tensor& y = v.write(y_, layout, x.dtype, y_dims_);
    const auto n = static_cast<size_t>(x_dims_[0]), c = static_cast<size_t>(x_dims_[1]);
    NearestUpsampleJob job;
    job.x = x.f.data();
    job.y = y.f.data();
    job.h = static_cast<size_t>(x_dims_[2]);
    job.w = static_cast<size_t>(x_dims_[3]);
    job.inner = layout == Layout::kNhwc ? c : 1;
    job.fh = static_cast<size_t>(fh_);
    job.fw = static_cast<size_t>(fw_);
    const size_t outer = layout == Layout::kNhwc ? n : n * c;
    pthreadpool_parallelize_1d(v.threadpool, &nearest_upsample_row, &job, outer * job.h, 0);
    return core::Ok{};
  }

  void accesses(const Values& v, std::vector<Access>& out) const override {
    out.push_back(Access{x_, v.layout(x_), false});
    out.push_back(Access{y_, v.layout(x_), true});
  }

 private:
  onnx::NodeProto node_;
  int x_, y_;
  int64_t fh_, fw_;
  std::vector<int64_t> x_dims_, y_dims_;
};

}  // namespace

core::Result<Built> make_pool_step(const NodeIo& io, Values& v) {
  const std::string& op = io.node.op_type();
  const Tensor& x = v.peek(io.input(0));
  if (x.dims.size() != 4) return declined("only 2-D pooling runs on XNNPACK");
  RC_ASSIGN(const PoolGeometry g, resolve_pool(io.node, x.dims));
  std::array<int64_t, 2> end_pad{};
  for (size_t a = 0; a < 2; ++a) {
    const int64_t eff = (g.kernel[a] - 1) * g.dilations[a] + 1;
    // Extra end padding makes XNNPACK's floor formula give the ceil_mode size (padding never wins a max and is
    // not counted by the average).
    end_pad[a] = std::max(g.pads_end[a], (g.output_size[a] - 1) * g.strides[a] + eff - x.dims[2 + a] - g.pads_begin[a]);
    if (g.pads_begin[a] < 0 || end_pad[a] < 0) return declined("negative pads");
    if (op == "AveragePool" && g.dilations[a] != 1) return declined("dilated average pooling");
  }
  const auto c = static_cast<size_t>(x.dims[1]);
  xnn_operator_t raw = nullptr;
  xnn_status status;
  if (op == "MaxPool") {
    status = xnn_create_max_pooling2d_nhwc_f32(
        static_cast<uint32_t>(g.pads_begin[0]), static_cast<uint32_t>(end_pad[1]), static_cast<uint32_t>(end_pad[0]),
        static_cast<uint32_t>(g.pads_begin[1]), static_cast<uint32_t>(g.kernel[0]), static_cast<uint32_t>(g.kernel[1]),
        static_cast<uint32_t>(g.strides[0]), static_cast<uint32_t>(g.strides[1]), static_cast<uint32_t>(g.dilations[0]),
        static_cast<uint32_t>(g.dilations[1]), c, c, c, kNoMin, kNoMax, 0, &raw);
  } else {
    status = xnn_create_average_pooling2d_nhwc_f32(
        static_cast<uint32_t>(g.pads_begin[0]), static_cast<uint32_t>(end_pad[1]), static_cast<uint32_t>(end_pad[0]),
        static_cast<uint32_t>(g.pads_begin[1]), static_cast<uint32_t>(g.kernel[0]), static_cast<uint32_t>(g.kernel[1]),
        static_cast<uint32_t>(g.strides[0]), static_cast<uint32_t>(g.strides[1]), c, c, c, kNoMin, kNoMax, 0, &raw);
  }
  if (status != xnn_status_success) {
    return declined("XNNPACK refused the pooling parameters (status " + std::to_string(static_cast<int>(status)) + ")");
  }
  const auto kind = op == "MaxPool" ? SpatialStep::Kind::kMaxPool : SpatialStep::Kind::kAveragePool;
  return built(std::make_unique<SpatialStep>(io.node, kind, io.input(0), io.out[0], v,
                                             std::vector<int64_t>{x.dims[0], x.dims[1], g.output_size[0], g.output_size[1]}, raw));
}

core::Result<Built> make_global_average_pool_step(const NodeIo& io, Values& v) {
  const Tensor& x = v.peek(io.input(0));
  if (x.dims.size() != 4 || x.numel() == 0) return declined("only rank 4");
  const auto c = static_cast<size_t>(x.dims[1]);
  xnn_operator_t raw = nullptr;
  const xnn_status status = xnn_create_global_average_pooling_nwc_f32(c, c, c, kNoMin, kNoMax, 0, &raw);
  if (status != xnn_status_success) return xnn_failure(io.node, "xnn_create_global_average_pooling_nwc_f32", status);
  return built(std::make_unique<SpatialStep>(io.node, SpatialStep::Kind::kGlobalAveragePool, io.input(0), io.out[0], v,
                                             std::vector<int64_t>{x.dims[0], x.dims[1], 1, 1}, raw));
}

core::Result<Built> make_reduce_mean_step(const NodeIo& io, Values& v) {
  const Tensor& x = v.peek(io.input(0));
  if (x.dims.size() != 4) return declined("only rank 4");
  RC_ASSIGN(const int64_t keepdims, onnx_io::get_int(io.node, "keepdims", 1));
  if (keepdims == 0) return declined("keepdims is 0");
  // From opset 18 the axes are an optional input (none: every axis); before, an attribute.
  std::vector<int64_t> axes;
  if (io.opset >= 18) {
    if (io.input(1) < 0 || !v.constant(io.input(1))) return declined("the axes are not a constant input");
    axes = int_values(v.peek(io.input(1)));
  } else {
    RC_ASSIGN(axes, onnx_io::get_ints(io.node, "axes", {}));
  }
  for (int64_t& a : axes) {
    if (!normalize_axis(a, 4)) return declined("axis out of range");
  }
  std::sort(axes.begin(), axes.end());
  if (axes != std::vector<int64_t>{2, 3}) return declined("only the mean over H and W (global average pooling)");
  return make_global_average_pool_step(io, v);
}

core::Result<Built> make_resize_step(const NodeIo& io, Values& v) {
  const Tensor& x = v.peek(io.input(0));
  // Bilinear, in the coordinate modes the family's attribute list names (step_list_node.cpp). The list checks a mode
  // that is set; an absent one means nearest, which this step does not run.
  RC_ASSIGN(const std::string mode, onnx_io::get_string(io.node, "mode", "nearest"));
  if (mode != "linear") return declined("only bilinear resize runs on XNNPACK");
  RC_ASSIGN(const std::string coordinate,
            onnx_io::get_string(io.node, "coordinate_transformation_mode", io.opset < 11 ? "asymmetric" : "half_pixel"));
  if (x.dims.size() != 4) return declined("rank");
  for (size_t k = 1; k < io.in.size(); ++k) {
    if (io.in[k] >= 0 && !v.constant(io.in[k])) return declined("non-constant scales or sizes");
  }
  std::vector<const Tensor*> inputs;
  for (int id : io.in) inputs.push_back(id < 0 ? nullptr : &v.peek(id));
  RC_ASSIGN(const ResizeGeometry g, resolve_resize(io.node, io.opset, inputs));
  if (g.output_dims[0] != x.dims[0] || g.output_dims[1] != x.dims[1]) return declined("resizes N or C");
  for (size_t a = 2; a < 4; ++a) {
    // XNNPACK derives the scale from the sizes; ONNX uses the given scale, so they must agree.
    if (static_cast<double>(g.output_dims[a]) != g.scales[a] * static_cast<double>(x.dims[a])) return declined("scale is not out/in");
    if (coordinate == "pytorch_half_pixel" && g.output_dims[a] == 1) return declined("pytorch_half_pixel with size 1");
  }
  uint32_t flags = 0;
  if (coordinate == "align_corners") flags = XNN_FLAG_ALIGN_CORNERS;
  else if (coordinate == "asymmetric") flags = XNN_FLAG_TENSORFLOW_LEGACY_MODE;
  const auto c = static_cast<size_t>(x.dims[1]);
  xnn_operator_t raw = nullptr;
  const xnn_status status = xnn_create_resize_bilinear2d_nhwc_f32(c, c, c, flags, &raw);
  if (status != xnn_status_success) return xnn_failure(io.node, "xnn_create_resize_bilinear2d_nhwc_f32", status);
  return built(std::make_unique<SpatialStep>(io.node, SpatialStep::Kind::kResizeBilinear, io.input(0), io.out[0], v, g.output_dims, raw));
}

core::Result<Built> make_fully_connected_step(const NodeIo& io, Values& v) {
  const std::string& op = io.node.op_type();
  const Tensor& x = v.peek(io.input(0));
  if (io.input(1) < 0) return declined("no B");
  // Gemm's C as a bias row: beta * C when C is a constant row of N values or one value (none when absent).
  const auto gemm_bias = [&](int64_t n, std::vector<float>& bias) -> std::string {
    if (io.input(2) < 0) return {};
    const Tensor& c = v.peek(io.input(2));
    if (!v.constant(io.input(2)) || !c.is_float()) return "C is not constant";
    const float beta = attr_float_or(io.node, "beta", 1.0f);
    if (c.numel() == n && (c.dims.size() == 1 || (c.dims.size() == 2 && c.dims[0] == 1))) {
      for (float value : c.f) bias.push_back(beta * value);
    } else if (c.numel() == 1) {
      bias.assign(static_cast<size_t>(n), beta * c.f[0]);
    } else {
      return "C is not a row vector";
    }
    return {};
  };
  if (!v.constant(io.input(1)) && op == "Gemm") {
    // Gemm of two computed values: A [M, K] (transA 0, alpha 1), B [K, N] or, with transB, [N, K].
    const Tensor& b = v.peek(io.input(1));
    RC_ASSIGN(const int64_t trans_a, onnx_io::get_int(io.node, "transA", 0));
    RC_ASSIGN(const int64_t trans_b, onnx_io::get_int(io.node, "transB", 0));
    if (trans_a != 0 || attr_float_or(io.node, "alpha", 1.0f) != 1.0f) return declined("transA or alpha");
    if (x.dims.size() != 2 || b.dims.size() != 2 || !x.is_float() || !b.is_float() || x.numel() == 0 || b.numel() == 0 ||
        x.dims[1] != (trans_b != 0 ? b.dims[1] : b.dims[0])) {
      return declined("B is computed and the shapes are not matrices XNNPACK's fully-connected operator runs");
    }
    std::vector<float> bias;
    if (std::string why = gemm_bias(trans_b != 0 ? b.dims[0] : b.dims[1], bias); !why.empty()) return declined(why);
    auto step = std::make_unique<DynamicMatMulStep>(io.node, io.out[0]);
    RC_CHECK(step->plan(v, io.input(0), io.input(1), trans_b != 0, std::move(bias)));
    return built(std::move(step), "B computed: one fully-connected operator, packed again when B changes");
  }
  if (!v.constant(io.input(1))) {
    // MatMul of two computed values: A [..., M, K], B [..., K, N] with A's batch dims, or a 2-D B.
    const Tensor& b = v.peek(io.input(1));
    const bool same_batch =
        b.dims.size() == 2 || (b.dims.size() == x.dims.size() && std::equal(b.dims.begin(), b.dims.end() - 2, x.dims.begin()));
    if (op != "MatMul" || x.dims.size() < 2 || b.dims.size() < 2 || !x.is_float() || !b.is_float() || !same_batch ||
        x.dims.back() != b.dims[b.dims.size() - 2] || x.numel() == 0 || b.numel() == 0) {
      return declined("B is computed and the shapes are not batch matrices XNNPACK's fully-connected operator runs");
    }
    auto step = std::make_unique<DynamicMatMulStep>(io.node, io.out[0]);
    RC_CHECK(step->plan(v, io.input(0), io.input(1)));
    return built(std::move(step), "B computed: one fully-connected operator per batch matrix, packed again when B changes");
  }
  const Tensor& b = v.peek(io.input(1));
  if (b.dims.size() != 2 || x.dims.size() < 2 || !b.is_float()) return declined("shapes");
  bool k_by_n = true;
  std::vector<float> bias;
  if (op == "Gemm") {
    RC_ASSIGN(const int64_t trans_a, onnx_io::get_int(io.node, "transA", 0));
    RC_ASSIGN(const int64_t trans_b, onnx_io::get_int(io.node, "transB", 0));
    if (trans_a != 0 || attr_float_or(io.node, "alpha", 1.0f) != 1.0f) return declined("transA or alpha");
    k_by_n = trans_b == 0;
    if (std::string why = gemm_bias(k_by_n ? b.dims[1] : b.dims[0], bias); !why.empty()) return declined(why);
  }
  if (x.dims.back() != (k_by_n ? b.dims[0] : b.dims[1])) return declined("inner dimensions differ");
  auto step = std::make_unique<FullyConnectedStep>(io.node, io.out[0]);
  RC_CHECK(step->plan(v, io.input(0), b, k_by_n, std::move(bias)));
  return built(std::move(step));
}

Built make_nearest_upsample_step(const NodeIo& io, Values& v) {
  const auto& in = io.in;
  const auto& out = io.out;
  Built none = declined("");
  const auto mode = onnx_io::get_string(io.node, "mode", "nearest");
  if (!mode.ok() || mode.value() != "nearest" || in.empty() || in[0] < 0 || out.empty() || out[0] < 0) return none;
  for (size_t k = 1; k < out.size(); ++k) {
    if (out[k] >= 0) return none;
  }
  const Tensor& x = v.peek(in[0]);
  if (!x.is_float() || x.dims.size() != 4 || x.numel() == 0) return none;
  for (size_t k = 1; k < in.size(); ++k) {
    if (in[k] >= 0 && !v.constant(in[k])) return none;
  }
  std::vector<const Tensor*> inputs;
  for (int id : in) inputs.push_back(id < 0 ? nullptr : &v.peek(id));
  auto sources = nearest_resize_sources(io.node, io.opset, inputs);
  if (!sources.ok()) return none;
  // Output index o of each axis must read o / factor (factor 1 on N and C).
  std::array<int64_t, 4> factor{};
  for (size_t a = 0; a < 4; ++a) {
    const auto& axis = sources.value()[a];
    const auto extent = static_cast<int64_t>(axis.size());
    if (extent == 0 || extent % x.dims[a] != 0) return none;
    factor[a] = extent / x.dims[a];
    for (int64_t o = 0; o < extent; ++o) {
      if (axis[static_cast<size_t>(o)] != o / factor[a]) return none;
    }
  }
  if (factor[0] != 1 || factor[1] != 1) return none;
  auto step = std::make_unique<NearestUpsampleStep>(io.node, in[0], out[0], factor[2], factor[3], v);
  std::string note = step->note(v);
  return built(std::move(step), std::move(note));
}

}  // namespace dwdeconv::runtime_check::detail
