// GroupNorm as PyTorch exports it before opset 18 (torch.nn.GroupNorm, and the 30 of Stable Diffusion's VAE decoder):
//
//   r = Reshape(x, [N, G, -1]);  n = InstanceNormalization(r, ones[G], zeros[G]);  y = Reshape(n, Shape(x))
//   y = Mul(y, gamma[C, 1, 1]);  y = Add(y, beta[C, 1, 1])                          (affine=True)
//
// run as one step in the layout x is stored in. On the reference kernels the chain reads x in NCHW (a conversion
// from the NHWC a Conv wrote), copies it twice (the Reshapes), normalizes, and converts back for the next Conv: four
// passes over the activation besides the statistics, and four values of its size alive at once. Here it is one pass
// for the statistics and one that writes y = x * a[n, c] + b[n, c], with a and b folded from the group's mean and
// variance, the InstanceNormalization's scale and B, and the Mul's and Add's constants.
#include <cmath>
#include <utility>

#include "internal.h"
#include "onnx_io/attributes.h"
#include "step.h"

namespace dwdeconv::runtime_check::detail {
namespace {

// The dims a Reshape to `shape` gives `in` (0 copies the input dim unless allowzero; one -1 is inferred), or empty
// when the shape is not one of those.
std::vector<int64_t> reshaped(const std::vector<int64_t>& in, const Tensor& shape, bool allowzero) {
  if (shape.is_float() || shape.dims.size() != 1) return {};
  int64_t total = 1, known = 1;
  for (int64_t d : in) total *= d;
  std::vector<int64_t> out;
  int inferred = -1;
  for (size_t k = 0; k < shape.i.size(); ++k) {
    int64_t d = shape.i[k];
    if (d == 0 && !allowzero) {
      if (k >= in.size()) return {};
      d = in[k];
    }
    if (d == -1) {
      if (inferred >= 0) return {};
      inferred = static_cast<int>(k);
    } else if (d < 0) {
      return {};
    } else {
      known *= d;
    }
    out.push_back(d);
  }
  if (inferred >= 0) {
    if (known == 0 || total % known != 0) return {};
    out[static_cast<size_t>(inferred)] = total / known;
  } else if (known != total) {
    return {};  // another element count: the Reshape itself fails, on the reference kernel, as in every runtime
  }
  return out;
}

// One value per channel of an [N, C, H, W] value under broadcasting (a scalar, [C, 1, 1], [1, C, 1, 1], ...), as C
// doubles; empty when `t` broadcasts any other way.
std::vector<double> per_channel(const Tensor& t, int64_t channels) {
  if (!t.is_float() || t.dims.size() > 4) return {};
  if (t.numel() == 1) return std::vector<double>(static_cast<size_t>(channels), t.get(0));
  const size_t rank = t.dims.size();
  for (size_t a = 0; a < rank; ++a) {
    const size_t axis = 4 - rank + a;  // right-aligned
    if (t.dims[a] != (axis == 1 ? channels : 1)) return {};
  }
  std::vector<double> out(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) out[static_cast<size_t>(c)] = t.get(c);
  return out;
}

struct ApplyJob {
  const float* x = nullptr;
  float* y = nullptr;
  const float* a = nullptr;  // [N, C]
  const float* b = nullptr;
  size_t channels = 0, pixels = 0;  // per image
  bool nhwc = true;
};

// NHWC: row `k` is pixel block k of all images (one image's pixels split in rows of 64); NCHW: plane k = (n, c).
constexpr size_t kPixelsPerTask = 64;

void apply_nhwc(void* context, size_t task) {
  const auto& job = *static_cast<const ApplyJob*>(context);
  const size_t blocks = (job.pixels + kPixelsPerTask - 1) / kPixelsPerTask;
  const size_t n = task / blocks, first = task % blocks * kPixelsPerTask;
  const size_t last = std::min(job.pixels, first + kPixelsPerTask);
  const float* a = job.a + n * job.channels;
  const float* b = job.b + n * job.channels;
  for (size_t p = first; p < last; ++p) {
    const float* x = job.x + (n * job.pixels + p) * job.channels;
    float* y = job.y + (n * job.pixels + p) * job.channels;
    for (size_t c = 0; c < job.channels; ++c) y[c] = x[c] * a[c] + b[c];
  }
}

void apply_nchw(void* context, size_t plane) {
  const auto& job = *static_cast<const ApplyJob*>(context);
  const float a = job.a[plane], b = job.b[plane];
  const float* x = job.x + plane * job.pixels;
  float* y = job.y + plane * job.pixels;
  for (size_t p = 0; p < job.pixels; ++p) y[p] = x[p] * a + b;
}

class GroupNormStep : public Step {
 public:
  GroupNormStep(const onnx::NodeProto& last, int x, int y, std::vector<int64_t> dims, int64_t groups, double epsilon,
                std::vector<double> scale, std::vector<double> bias, std::vector<double> gamma, std::vector<double> beta)
      : node_(last),
        x_(x),
        y_(y),
        dims_(std::move(dims)),
        groups_(groups),
        epsilon_(epsilon),
        scale_(std::move(scale)),
        bias_(std::move(bias)),
        gamma_(std::move(gamma)),
        beta_(std::move(beta)) {
    const auto nc = static_cast<size_t>(dims_[0] * dims_[1]);
    a_.resize(nc);
    b_.resize(nc);
  }

  core::Status run(Values& v) override {
    const Layout layout = v.layout(x_);
    const Tensor& x = v.read(x_, layout);
    RC_CHECK(check_dims(node_, x, dims_));
    const auto batch = static_cast<size_t>(dims_[0]), channels = static_cast<size_t>(dims_[1]);
    const auto pixels = static_cast<size_t>(dims_[2] * dims_[3]);
    const auto groups = static_cast<size_t>(groups_), per_group = channels / groups;
    const bool nhwc = layout == Layout::kNhwc;
    // Statistics in double: the mean and the mean square per (image, group), then a and b per (image, channel).
    std::vector<double>& channel_sum = channel_sum_;
    std::vector<double>& channel_sq = channel_sq_;
    channel_sum.resize(channels);
    channel_sq.resize(channels);
    for (size_t n = 0; n < batch; ++n) {
      std::fill(channel_sum.begin(), channel_sum.end(), 0.0);
      std::fill(channel_sq.begin(), channel_sq.end(), 0.0);
      const float* image = x.f.data() + n * pixels * channels;
      if (nhwc) {
        for (size_t p = 0; p < pixels; ++p) {
          const float* px = image + p * channels;
          for (size_t c = 0; c < channels; ++c) {
            const double value = px[c];
            channel_sum[c] += value;
            channel_sq[c] += value * value;
          }
        }
      } else {
        for (size_t c = 0; c < channels; ++c) {
          const float* plane = image + c * pixels;
          double s = 0, q = 0;
          for (size_t p = 0; p < pixels; ++p) {
            const double value = plane[p];
            s += value;
            q += value * value;
          }
          channel_sum[c] = s;
          channel_sq[c] = q;
        }
      }
      const auto count = static_cast<double>(per_group * pixels);
      for (size_t g = 0; g < groups; ++g) {
        double s = 0, q = 0;
        for (size_t c = g * per_group; c < (g + 1) * per_group; ++c) {
          s += channel_sum[c];
          q += channel_sq[c];
        }
        const double mean = s / count;
        const double var = std::max(0.0, q / count - mean * mean);  // population variance, as InstanceNormalization
        const double gain = scale_[g] / std::sqrt(var + epsilon_);
        for (size_t c = g * per_group; c < (g + 1) * per_group; ++c) {
          a_[n * channels + c] = static_cast<float>(gain * gamma_[c]);
          b_[n * channels + c] = static_cast<float>((bias_[g] - mean * gain) * gamma_[c] + beta_[c]);
        }
      }
    }
    Tensor& y = v.write(y_, layout, x.dtype, dims_);
    ApplyJob job{x.f.data(), y.f.data(), a_.data(), b_.data(), channels, pixels, nhwc};
    if (nhwc) {
      const size_t blocks = (pixels + kPixelsPerTask - 1) / kPixelsPerTask;
      pthreadpool_parallelize_1d(v.threadpool, &apply_nhwc, &job, batch * blocks, 0);
    } else {
      pthreadpool_parallelize_1d(v.threadpool, &apply_nchw, &job, batch * channels, 0);
    }
    return core::Ok{};
  }

  void accesses(const Values& v, std::vector<Access>& out) const override {
    out.push_back(Access{x_, v.layout(x_), false});
    out.push_back(Access{y_, v.layout(x_), true});
  }

 private:
  onnx::NodeProto node_;
  int x_, y_;
  std::vector<int64_t> dims_;
  int64_t groups_;
  double epsilon_;
  std::vector<double> scale_, bias_, gamma_, beta_;  // per group, per group, per channel, per channel
  std::vector<float> a_, b_;                         // this run's y = x * a + b, per (image, channel)
  std::vector<double> channel_sum_, channel_sq_;     // this run's sums of x and x^2 per channel of one image
};

}  // namespace

Built make_group_norm_step(const std::vector<const onnx::NodeProto*>& chain, const std::vector<NodeIo>& io, Values& v) {
  Built none = declined("");
  if (chain.size() < 3 || io.size() != chain.size()) return none;
  const NodeIo& r1 = io[0];
  const NodeIo& norm = io[1];
  const NodeIo& r2 = io[2];
  const int x = r1.input(0);
  if (x < 0 || r1.input(1) < 0 || norm.input(1) < 0 || norm.input(2) < 0 || r2.input(1) < 0) return none;
  for (int id : {r1.input(1), norm.input(1), norm.input(2), r2.input(1)}) {
    if (!v.constant(id)) return none;
  }
  const Tensor& xt = v.peek(x);
  if (xt.dtype != onnx::TensorProto::FLOAT || xt.dims.size() != 4 || xt.numel() == 0) return none;
  const std::vector<int64_t>& dims = xt.dims;
  const int64_t channels = dims[1];
  const auto allowzero = [](const onnx::NodeProto& node) {
    const auto a = onnx_io::get_int(node, "allowzero", 0);
    return !a.ok() || a.value() != 0;
  };
  // x [N, C, H, W] -> [N, G, C/G * H * W] -> normalized per (n, g) -> [N, C, H, W] again.
  const std::vector<int64_t> grouped = reshaped(dims, v.peek(r1.input(1)), allowzero(*chain[0]));
  if (grouped.size() != 3 || grouped[0] != dims[0] || grouped[1] <= 0 || channels % grouped[1] != 0) return none;
  const int64_t groups = grouped[1];
  if (reshaped(grouped, v.peek(r2.input(1)), allowzero(*chain[2])) != dims) return none;
  const Tensor& scale = v.peek(norm.input(1));
  const Tensor& bias = v.peek(norm.input(2));
  if (!scale.is_float() || !bias.is_float() || scale.numel() != groups || bias.numel() != groups) return none;
  const auto epsilon = onnx_io::find_attribute(*chain[1], "epsilon");
  for (const auto& a : chain[1]->attribute()) {
    if (a.name() != "epsilon" || a.type() != onnx::AttributeProto::FLOAT) return none;
  }
  std::vector<double> s(static_cast<size_t>(groups)), b(static_cast<size_t>(groups));
  for (int64_t g = 0; g < groups; ++g) {
    s[static_cast<size_t>(g)] = scale.get(g);
    b[static_cast<size_t>(g)] = bias.get(g);
  }
  std::vector<double> gamma(static_cast<size_t>(channels), 1.0), beta(static_cast<size_t>(channels), 0.0);
  int y = r2.out.empty() ? -1 : r2.out[0];
  for (size_t k = 3; k < chain.size(); ++k) {
    // The chain value is one input; the constant is the other.
    const NodeIo& op = io[k];
    if (op.in.size() != 2 || op.out.size() != 1 || op.in[0] < 0 || op.in[1] < 0) return none;
    const int other = op.in[0] == y ? op.in[1] : op.in[0];
    if ((op.in[0] == y) == (op.in[1] == y) || !v.constant(other)) return none;
    const std::vector<double> values = per_channel(v.peek(other), channels);
    if (values.empty()) return none;
    for (size_t c = 0; c < values.size(); ++c) {
      if (chain[k]->op_type() == "Mul") {
        gamma[c] *= values[c];
        beta[c] *= values[c];
      } else {
        beta[c] += values[c];
      }
    }
    y = op.out[0];
  }
  if (y < 0) return none;
  const double eps = epsilon != nullptr ? epsilon->f() : 1e-5;
  auto step = std::make_unique<GroupNormStep>(*chain.back(), x, y, dims, groups, eps, std::move(s), std::move(b), std::move(gamma),
                                              std::move(beta));
  std::string note = std::string(kGroupNormNote) + " (" + std::to_string(groups) + " groups of " + std::to_string(channels / groups) +
                     " channels, " + (v.layout(x) == Layout::kNhwc ? "NHWC" : "NCHW") + "; the step of " + std::to_string(chain.size()) +
                     " nodes)";
  return built(std::move(step), std::move(note));
}

}  // namespace dwdeconv::runtime_check::detail
