// Data movement steps: constant Pad, channel Concat (copied or fused), DepthToSpace, innermost-axis Split.
#include <cstring>

#include "internal.h"
#include "onnx_io/attributes.h"
#include "ops/kernels.h"
#include "ops/ops.h"
#include "step.h"

namespace dwdeconv::runtime_check::detail {
namespace {

// Constant-mode Pad with non-negative pads on XNNPACK's constant_pad_nd_x32, in the input's layout.
class PadStep : public XnnStep {
 public:
  PadStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup_constant_pad_nd_x32") { y_ = y; }

  core::Status plan(Values& v, int x_id, const std::vector<int64_t>& begin, const std::vector<int64_t>& end, float value) {
    const Tensor& x = v.peek(x_id);
    if (x.dims.empty() || x.dims.size() > XNN_MAX_TENSOR_DIMS || x.numel() == 0) return node_error(node_, "rank or size");
    y_layout_ = v.layout(x_id);
    for (size_t a = 0; a < x.dims.size(); ++a) y_dims_.push_back(x.dims[a] + begin[a] + end[a]);
    std::vector<size_t> b, e;
    for (size_t a = 0; a < begin.size(); ++a) {
      b.push_back(static_cast<size_t>(begin[a]));
      e.push_back(static_cast<size_t>(end[a]));
    }
    if (y_layout_ == Layout::kNhwc) {
      b = {b[0], b[2], b[3], b[1]};
      e = {e[0], e[2], e[3], e[1]};
    }
    pre_ = b;
    post_ = e;
    shape_ = storage_shape(x.dims, y_layout_);
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    xnn_operator_t raw = nullptr;
    const xnn_status status = xnn_create_constant_pad_nd_x32(&bits, 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_constant_pad_nd_x32", status);
    add_operator(raw);
    add_input(v, x_id, y_layout_);
    return core::Ok{};
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    return xnn_setup_constant_pad_nd_x32(ops_[0].get(), shape_.size(), shape_.data(), pre_.data(), post_.data(), x[0], y, threadpool);
  }

 private:
  std::vector<size_t> shape_, pre_, post_;
};

// Concat on the channel axis of NHWC values: one strided copy_nc_x32 per input, each writing its channel slice
// (pixel stride C_total, offset = channels before it) of the output.
class ConcatChannelsStep : public XnnStep {
 public:
  ConcatChannelsStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup_copy_nc_x32") { y_ = y; }

  core::Status plan(Values& v, const std::vector<int>& in) {
    const Tensor& first = v.peek(in[0]);
    y_dims_ = first.dims;
    y_dims_[1] = 0;
    for (int id : in) {
      const Tensor& t = v.peek(id);
      if (!t.is_float() || t.dims.size() != 4 || t.dims[0] != first.dims[0] || t.dims[2] != first.dims[2] || t.dims[3] != first.dims[3]) {
        return node_error(node_, "inputs differ outside the channel axis");
      }
      offsets_.push_back(y_dims_[1]);
      y_dims_[1] += t.dims[1];
    }
    for (int id : in) {
      const auto c = static_cast<size_t>(v.peek(id).dims[1]);
      xnn_operator_t raw = nullptr;
      const xnn_status status = xnn_create_copy_nc_x32(c, c, static_cast<size_t>(y_dims_[1]), 0, &raw);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_copy_nc_x32", status);
      add_operator(raw);
      add_input(v, id, Layout::kNhwc);
    }
    return core::Ok{};
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    const auto pixels = static_cast<size_t>(y_dims_[0] * y_dims_[2] * y_dims_[3]);
    for (size_t k = 0; k < ops_.size(); ++k) {
      const xnn_status status = xnn_setup_copy_nc_x32(ops_[k].get(), pixels, x[k], y + offsets_[k], threadpool);
      if (status != xnn_status_success) return status;
    }
    return xnn_status_success;
  }

 private:
  std::vector<int64_t> offsets_;
};

// Split on the axis innermost in storage (channels of an NHWC value, else the last axis): one strided copy_nc_x32
// per output, reading its slice (row stride = the axis's extent, offset = the sizes before it), as Concat in reverse.
class SplitStep : public XnnStep {
 public:
  SplitStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup_copy_nc_x32") { y_ = y; }

  core::Status plan(Values& v, int x_id, const std::vector<int>& out, Layout layout, const std::vector<int64_t>& sizes) {
    const Tensor& x = v.peek(x_id);
    const size_t axis = layout == Layout::kNhwc ? 1 : x.dims.size() - 1;
    const auto extent = static_cast<size_t>(x.dims[axis]);
    rows_ = static_cast<size_t>(x.numel()) / extent;
    y_layout_ = layout;
    size_t offset = 0;
    for (size_t k = 0; k < out.size(); ++k) {
      std::vector<int64_t> dims = x.dims;
      dims[axis] = sizes[k];
      if (k == 0) y_dims_ = dims;
      else add_output(out[k], dims);
      const auto length = static_cast<size_t>(sizes[k]);
      xnn_operator_t raw = nullptr;
      const xnn_status status = xnn_create_copy_nc_x32(length, extent, length, 0, &raw);
      if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_copy_nc_x32", status);
      add_operator(raw);
      offsets_.push_back(offset);
      offset += length;
    }
    add_input(v, x_id, layout);
    return core::Ok{};
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    for (size_t k = 0; k < ops_.size(); ++k) {
      const xnn_status status = xnn_setup_copy_nc_x32(ops_[k].get(), rows_, x[0] + offsets_[k], k == 0 ? y : more_y_[k - 1], threadpool);
      if (status != xnn_status_success) return status;
    }
    return xnn_status_success;
  }

 private:
  size_t rows_ = 0;
  std::vector<size_t> offsets_;
};

// A channel Concat whose every input is written into its slice by the Conv producing it (write_into): nothing is
// left to copy, so run() only marks the output as written.
class FusedConcatStep : public Step {
 public:
  explicit FusedConcatStep(int y) : y_(y) {}
  core::Status run(Values& v) override {
    v.touch(y_, Layout::kNhwc);
    return core::Ok{};
  }
  void accesses(const Values&, std::vector<Access>& out) const override { out.push_back(Access{y_, Layout::kNhwc, true}); }

 private:
  int y_;
};

// DepthToSpace in DCR order (XNNPACK's order): NHWC [N, H, W, b*b*C] -> [N, H*b, W*b, C].
class DepthToSpaceStep : public XnnStep {
 public:
  DepthToSpaceStep(const onnx::NodeProto& node, int y) : XnnStep(node, "xnn_setup_depth_to_space_nhwc_x32") { y_ = y; }

  core::Status plan(Values& v, int x_id, int64_t block) {
    const Tensor& x = v.peek(x_id);
    const int64_t c = x.dims[1] / (block * block);
    y_dims_ = {x.dims[0], c, x.dims[2] * block, x.dims[3] * block};
    xnn_operator_t raw = nullptr;
    const xnn_status status = xnn_create_depth_to_space_nhwc_x32(static_cast<size_t>(c), static_cast<size_t>(x.dims[1]),
                                                                 static_cast<size_t>(c), static_cast<uint32_t>(block), 0, &raw);
    if (status != xnn_status_success) return xnn_failure(node_, "xnn_create_depth_to_space_nhwc_x32", status);
    add_operator(raw);
    add_input(v, x_id, Layout::kNhwc);
    return core::Ok{};
  }

 protected:
  xnn_status setup(const std::vector<const float*>& x, float* y, pthreadpool_t threadpool) override {
    const auto& d = inputs_[0].dims;
    return xnn_setup_depth_to_space_nhwc_x32(ops_[0].get(), static_cast<size_t>(d[0]), static_cast<size_t>(d[2]), static_cast<size_t>(d[3]),
                                             x[0], y, threadpool);
  }
};

// Channel permutations on NHWC values, as plain copies split by input row over the thread pool: a Gather on the
// channel axis with constant indices, and DepthToSpace in CRD order (XNNPACK's depth-to-space is DCR). The rewrite
// writes both for runtimes that take DepthToSpace in CRD only (onnx2torch): the Gather takes the phases from DCR
// to CRD order, and the pair computes what one DCR DepthToSpace computes, at one more copy.
struct ChannelPermuteJob {
  const float* x = nullptr;
  float* y = nullptr;
  size_t w = 0, c_in = 0;       // pixels per input row, channels per input pixel
  std::vector<size_t> index;    // Gather: the input channel of each output channel
  size_t block = 0, c_out = 0;  // DepthToSpace CRD: block size, output channels
};

// Gather: output pixel p, channel j reads input pixel p, channel index[j].
void gather_channels_row(void* context, size_t row) {
  const auto& job = *static_cast<const ChannelPermuteJob*>(context);
  const size_t c_out = job.index.size();
  const float* src = job.x + row * job.w * job.c_in;
  float* dst = job.y + row * job.w * c_out;
  for (size_t p = 0; p < job.w; ++p) {
    for (size_t j = 0; j < c_out; ++j) dst[p * c_out + j] = src[p * job.c_in + job.index[j]];
  }
}

// DepthToSpace CRD: output (h*b + i, w*b + j, c) reads input (h, w, c*b*b + i*b + j). Input row `row` (n*H + h)
// writes output rows row*b .. row*b + b-1.
void depth_to_space_crd_row(void* context, size_t row) {
  const auto& job = *static_cast<const ChannelPermuteJob*>(context);
  const size_t b = job.block, bb = b * b, out_w = job.w * b;
  const float* src = job.x + row * job.w * job.c_in;
  for (size_t i = 0; i < b; ++i) {
    float* dst = job.y + (row * b + i) * out_w * job.c_out;
    for (size_t px = 0; px < job.w; ++px) {
      for (size_t j = 0; j < b; ++j) {
        const float* in = src + px * job.c_in + i * b + j;
        float* out = dst + (px * b + j) * job.c_out;
        for (size_t c = 0; c < job.c_out; ++c) out[c] = in[c * bb];
      }
    }
  }
}

class ChannelPermuteStep : public Step {
 public:
  ChannelPermuteStep(const onnx::NodeProto& node, int x, int y, std::vector<int64_t> y_dims, ChannelPermuteJob job, const Values& v)
      : node_(node), x_(x), y_(y), x_dims_(v.peek(x).dims), y_dims_(std::move(y_dims)), job_(std::move(job)) {}

  core::Status run(Values& v) override {
    const Tensor& x = v.read(x_, Layout::kNhwc);
    RC_CHECK(check_dims(node_, x, x_dims_));
    Tensor& y = v.write(y_, Layout::kNhwc, x.dtype, y_dims_);
    job_.x = x.f.data();
    job_.y = y.f.data();
    const size_t rows = static_cast<size_t>(x_dims_[0] * x_dims_[2]);
    pthreadpool_parallelize_1d(v.threadpool, job_.block > 0 ? &depth_to_space_crd_row : &gather_channels_row, &job_, rows, 0);
    return core::Ok{};
  }

  void accesses(const Values&, std::vector<Access>& out) const override {
    out.push_back(Access{x_, Layout::kNhwc, false});
    out.push_back(Access{y_, Layout::kNhwc, true});
  }

 private:
  onnx::NodeProto node_;
  int x_, y_;
  std::vector<int64_t> x_dims_, y_dims_;
  ChannelPermuteJob job_;
};

}  // namespace

core::Result<Built> make_pad_step(const NodeIo& io, Values& v) {
  // Constant mode only: the family's attribute list (step_list_node.cpp) sends the others to the reference kernels.
  const auto rank = v.peek(io.input(0)).dims.size();
  std::vector<int64_t> pads, axes;
  float value = 0.0f;
  if (onnx_io::find_attribute(io.node, "pads") != nullptr) {
    RC_ASSIGN(pads, onnx_io::get_ints(io.node, "pads", {}));
    value = attr_float_or(io.node, "value", 0.0f);
  } else {
    for (size_t k = 1; k < 4; ++k) {
      if (io.input(k) >= 0 && !v.constant(io.input(k))) return declined("non-constant pads");
    }
    if (io.input(1) < 0) return declined("no pads");
    pads = int_values(v.peek(io.input(1)));
    if (io.input(2) >= 0 && v.peek(io.input(2)).numel() > 0) value = static_cast<float>(v.peek(io.input(2)).get(0));
    if (io.input(3) >= 0) axes = int_values(v.peek(io.input(3)));
  }
  std::vector<int64_t> begin(rank, 0), end(rank, 0);
  if (axes.empty()) {
    if (pads.size() != 2 * rank) return declined("pads length");
    for (size_t a = 0; a < rank; ++a) {
      begin[a] = pads[a];
      end[a] = pads[a + rank];
    }
  } else {
    if (pads.size() != 2 * axes.size()) return declined("pads length");
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = axes[k];
      if (!normalize_axis(a, static_cast<int64_t>(rank))) return declined("axis");
      begin[static_cast<size_t>(a)] = pads[k];
      end[static_cast<size_t>(a)] = pads[k + axes.size()];
    }
  }
  for (size_t a = 0; a < rank; ++a) {
    if (begin[a] < 0 || end[a] < 0) return declined("negative pads (a crop) have no XNNPACK operator");
  }
  auto step = std::make_unique<PadStep>(io.node, io.out[0]);
  auto planned = step->plan(v, io.input(0), begin, end, value);
  if (!planned.ok()) return declined(planned.error().message);
  return built(std::move(step));
}

core::Result<Built> make_concat_step(const NodeIo& io, Values& v) {
  RC_ASSIGN(int64_t axis, onnx_io::get_int(io.node, "axis", 0));
  if (v.peek(io.input(0)).dims.size() != 4 || !normalize_axis(axis, 4) || axis != 1) {
    return declined("not the channel axis of a rank-4 tensor");
  }
  if (v.layout(io.input(0)) != Layout::kNhwc) return declined("inputs are NCHW (a plain block copy)");
  for (int id : io.in) {
    if (id < 0) return declined("missing input");
  }
  auto step = std::make_unique<ConcatChannelsStep>(io.node, io.out[0]);
  auto planned = step->plan(v, io.in);
  if (!planned.ok()) return declined(planned.error().message);
  return built(std::move(step));
}

core::Result<Built> make_depth_to_space_step(const NodeIo& io, Values& v) {
  const Tensor& x = v.peek(io.input(0));
  // DCR only (CRD order has no XNNPACK operator): the family's attribute list sends CRD to the reference kernels.
  RC_ASSIGN(const int64_t block, onnx_io::get_int(io.node, "blocksize", 0));
  if (x.dims.size() != 4 || block <= 0 || x.dims[1] % (block * block) != 0) return declined("shape");
  if (block == 1) return declined("blocksize 1 (a copy; XNNPACK's depth-to-space refuses it)");
  auto step = std::make_unique<DepthToSpaceStep>(io.node, io.out[0]);
  RC_CHECK(step->plan(v, io.input(0), block));
  return built(std::move(step));
}

std::unique_ptr<Step> make_fused_concat_step(int y) { return std::make_unique<FusedConcatStep>(y); }

core::Result<Built> make_split_step(const NodeIo& io, Values& v) {
  const Tensor& x = v.peek(io.input(0));
  const auto rank = static_cast<int64_t>(x.dims.size());
  RC_ASSIGN(int64_t axis, onnx_io::get_int(io.node, "axis", 0));
  if (rank == 0 || !normalize_axis(axis, rank)) return declined("axis out of range");
  // The axis innermost in storage: channels when the value is NHWC, the last axis when it is stored in ONNX order.
  const Layout layout = v.layout(io.input(0));
  const bool innermost = layout == Layout::kNhwc ? axis == 1 : axis == rank - 1;
  if (!innermost) return declined("not the innermost axis in storage (a copy of whole blocks)");
  for (int id : io.out) {
    if (id < 0) return declined("an output is unused");
  }
  std::vector<const Tensor*> inputs;
  for (int id : io.in) inputs.push_back(id < 0 ? nullptr : &v.peek(id));
  if (inputs.size() > 1 && inputs[1] != nullptr && !v.constant(io.input(1))) return declined("split sizes are not constant");
  RC_ASSIGN(const auto sizes, split_sizes(io.node, inputs, x.dims[static_cast<size_t>(axis)], io.out.size()));
  for (int64_t s : sizes) {
    if (s == 0) return declined("an empty output");
  }
  auto step = std::make_unique<SplitStep>(io.node, io.out[0]);
  RC_CHECK(step->plan(v, io.input(0), io.out, layout, sizes));
  return built(std::move(step));
}

}  // namespace dwdeconv::runtime_check::detail

namespace dwdeconv::runtime_check::detail {

Built make_channel_permute_step(const NodeIo& io, Values& v) {
  Built none = declined("");
  const std::string& op = io.node.op_type();
  if ((op != "Gather" && op != "DepthToSpace") || io.in.empty() || io.input(0) < 0 || io.out.size() != 1 || io.out[0] < 0) return none;
  const Tensor& x = v.peek(io.input(0));
  if (!x.is_float() || x.dims.size() != 4 || x.numel() == 0) return none;
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3];
  ChannelPermuteJob job;
  job.w = static_cast<size_t>(w);
  job.c_in = static_cast<size_t>(c);
  std::vector<int64_t> y_dims;
  if (op == "Gather") {
    const auto axis = onnx_io::get_int(io.node, "axis", 0);
    if (!axis.ok() || (axis.value() != 1 && axis.value() != -3)) return none;
    if (io.input(1) < 0 || !v.constant(io.input(1))) return none;
    const Tensor& indices = v.peek(io.input(1));
    if (indices.is_float() || indices.dims.size() != 1) return none;  // a scalar index drops the axis
    for (int64_t k = 0; k < indices.numel(); ++k) {
      int64_t i = static_cast<int64_t>(indices.get(k));
      if (i < 0) i += c;
      if (i < 0 || i >= c) return none;  // the reference kernel names the bad index
      job.index.push_back(static_cast<size_t>(i));
    }
    if (job.index.empty()) return none;
    y_dims = {n, static_cast<int64_t>(job.index.size()), h, w};
  } else {
    const auto mode = onnx_io::get_string(io.node, "mode", "DCR");
    const auto block = onnx_io::get_int(io.node, "blocksize", 0);
    if (!mode.ok() || mode.value() != "CRD" || !block.ok() || block.value() <= 0) return none;
    const int64_t b = block.value();
    if (c % (b * b) != 0) return none;
    job.block = static_cast<size_t>(b);
    job.c_out = static_cast<size_t>(c / (b * b));
    y_dims = {n, c / (b * b), h * b, w * b};
  }
  Built b;
  b.step = std::make_unique<ChannelPermuteStep>(io.node, io.input(0), io.out[0], y_dims, std::move(job), v);
  b.note = std::string(kChannelPermuteNote) + (op == "Gather" ? " (channel Gather, NHWC)" : " (CRD DepthToSpace, NHWC)");
  return b;
}

}  // namespace dwdeconv::runtime_check::detail
