#include "examples/migan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "examples/model_builder.h"

namespace dwdeconv::examples {
namespace {

// outer([1,3,3,1], [1,3,3,1]) / divisor, a 4x4 plane.
std::vector<double> binomial_plane(double divisor) {
  const double taps[4] = {1, 3, 3, 1};
  std::vector<double> plane;
  for (double a : taps) {
    for (double b : taps) plane.push_back(a * b / divisor);
  }
  return plane;
}

class Migan {
 public:
  Migan(int64_t resolution, UpsampleForm form, int64_t divisor, uint32_t seed)
      : b_("migan_like_" + std::to_string(resolution), 13, seed), r_(resolution), form_(form), divisor_(divisor) {
    sqrt2_ = b_.constant("act.gain", {}, {std::sqrt(2.0)});
    clip_lo_ = b_.constant("act.clip_min", {}, {-256.0});
    clip_hi_ = b_.constant("act.clip_max", {}, {256.0});
  }

  onnx::ModelProto build() {
    b_.input("image", {"1", "4", std::to_string(r_), std::to_string(r_)});
    b_.output("rgb", {"1", "3", std::to_string(r_), std::to_string(r_)});

    // Encoder: from_rgb, then per resolution two separable convs, the second one downsampling. The first
    // one's output is the skip feature for the synthesis block of that resolution.
    std::string h = act("enc.from_rgb", b_.conv("enc.from_rgb", "image", 4, ch(r_), 1, 1, {0, 0, 0, 0}, 1));
    std::map<int64_t, std::string> feats;
    for (int64_t r = r_; r >= 4; r /= 2) {
      const std::string p = "enc." + std::to_string(r);
      feats[r] = separable(p + ".conv1", h, ch(r), ch(r), r, Resample::kNone);
      h = separable(p + ".conv2", feats[r], ch(r), r > 4 ? ch(r / 2) : ch(r), r, r > 4 ? Resample::kDown : Resample::kNone);
    }

    // Synthesis: per resolution a separable conv that upsamples after its pointwise conv, the encoder skip,
    // a second separable conv, and the image path: upsampled image plus to_rgb.
    std::string x = separable("syn.4.conv1", h, ch(4), ch(4), 4, Resample::kNone);
    b_.node("Add", "syn.4.skip", {x, feats.at(4)}, "syn.4.skip_out");
    x = separable("syn.4.conv2", "syn.4.skip_out", ch(4), ch(4), 4, Resample::kNone);
    std::string img = b_.conv("syn.4.to_rgb", x, ch(4), 3, 1, 1, {0, 0, 0, 0}, 1);
    for (int64_t r = 8; r <= r_; r *= 2) {
      const std::string p = "syn." + std::to_string(r);
      x = separable(p + ".conv1", x, ch(r / 2), ch(r), r / 2, Resample::kUp);
      b_.node("Add", p + ".skip", {x, feats.at(r)}, p + ".skip_out");
      x = separable(p + ".conv2", p + ".skip_out", ch(r), ch(r), r, Resample::kNone);
      const std::string img_up = upsample(p + ".img_up", img, 3, r / 2);
      const std::string rgb = b_.conv(p + ".to_rgb", x, ch(r), 3, 1, 1, {0, 0, 0, 0}, 1);
      img = r == r_ ? "rgb" : p + ".img";
      b_.node("Add", p + ".img_add", {img_up, rgb}, img);
    }
    return b_.model();
  }

 private:
  enum class Resample { kNone, kDown, kUp };

  int64_t ch(int64_t r) const { return std::max<int64_t>(1, std::min<int64_t>(32768 / r, 512) / divisor_); }

  // MI-GAN's separable conv at resolution r: depthwise 3x3, activation, [4x4 blur downsample], pointwise
  // cin -> cout, [2x upsample of the cout channels], activation. Upsampling after the pointwise conv keeps
  // the 1x1 conv at the low resolution.
  std::string separable(const std::string& name, const std::string& x, int64_t cin, int64_t cout, int64_t r, Resample resample) {
    std::string h = act(name + ".dw", b_.conv(name + ".dw", x, cin, cin, 3, 1, {1, 1, 1, 1}, cin));
    if (resample == Resample::kDown) h = b_.depthwise_conv(name + ".down", h, cin, binomial_plane(64.0), 4, 2, {1, 1, 1, 1});
    h = b_.conv(name + ".pw", h, cin, cout, 1, 1, {0, 0, 0, 0}, 1);
    if (resample == Resample::kUp) h = upsample(name + ".up", h, cout, r);
    return act(name, h);
  }

  // LeakyRelu(0.2) * sqrt(2), clipped to [-256, 256].
  std::string act(const std::string& name, const std::string& x) {
    auto& lrelu = b_.node("LeakyRelu", name + ".lrelu", {x}, name + ".lrelu_out");
    set_float(lrelu, "alpha", 0.2f);
    b_.node("Mul", name + ".gain", {name + ".lrelu_out", sqrt2_}, name + ".gain_out");
    b_.node("Clip", name + ".clip", {name + ".gain_out", clip_lo_, clip_hi_}, name + ".act");
    return name + ".act";
  }

  // 2x upsampling of a c-channel r x r tensor, in the model's form.
  std::string upsample(const std::string& name, const std::string& x, int64_t c, int64_t r) {
    const auto filter = binomial_plane(16.0);  // sums to 4: the gain of inserting zeros
    if (form_ == UpsampleForm::kDeconv) return b_.depthwise_deconv(name, x, c, filter, 4, 2, {1, 1, 1, 1});
    // Nearest 2x, keep pixel (0,0) of each 2x2 block, pad begin 2 / end 1, then correlate with the filter
    // (flipped, but it is symmetric): exactly ConvTranspose k4 s2 p1.
    auto& resize = b_.node("Resize", name + ".nearest", {x, "", scales_()}, name + ".nearest_out");
    set_string(resize, "mode", "nearest");
    set_string(resize, "coordinate_transformation_mode", "asymmetric");
    set_string(resize, "nearest_mode", "floor");
    b_.node("Mul", name + ".mask", {name + ".nearest_out", mask_(2 * r)}, name + ".mask_out");
    b_.node("Pad", name + ".pad", {name + ".mask_out", pads_()}, name + ".pad_out");
    return b_.depthwise_conv(name + ".conv", name + ".pad_out", c, filter, 4, 1, {0, 0, 0, 0});
  }

  std::string scales_() {
    if (scales_name_.empty()) scales_name_ = b_.constant("up.scales", {4}, {1, 1, 2, 2});
    return scales_name_;
  }
  std::string pads_() {
    if (pads_name_.empty()) pads_name_ = b_.int64s("up.pads", {0, 0, 2, 2, 0, 0, 1, 1});
    return pads_name_;
  }
  std::string mask_(int64_t size) {
    auto& name = masks_[size];
    if (name.empty()) {
      std::vector<double> mask(static_cast<size_t>(size * size), 0.0);
      for (int64_t y = 0; y < size; y += 2) {
        for (int64_t x = 0; x < size; x += 2) mask[static_cast<size_t>(y * size + x)] = 1.0;
      }
      name = b_.constant("up.mask_" + std::to_string(size), {1, 1, size, size}, mask);
    }
    return name;
  }

  ModelBuilder b_;
  int64_t r_;
  UpsampleForm form_;
  int64_t divisor_;
  std::string sqrt2_, clip_lo_, clip_hi_, scales_name_, pads_name_;
  std::map<int64_t, std::string> masks_;
};

}  // namespace

onnx::ModelProto make_migan(int64_t resolution, UpsampleForm form, int64_t width_divisor, uint32_t seed) {
  return Migan(resolution, form, width_divisor, seed).build();
}

}  // namespace dwdeconv::examples
