// An MI-GAN-like inpainting generator, following MI-GAN's block structure: a separable-conv encoder
// (depthwise 3x3, activation, blur downsample, pointwise) and a synthesis path whose separable convs
// upsample after the pointwise conv, with skip Adds from the encoder and an upsampled image path.
#pragma once

#include <cstdint>

#include <onnx/onnx_pb.h>

namespace dwdeconv::examples {

enum class UpsampleForm {
  kDeconv,       // (a) depthwise ConvTranspose k4 s2 p1 with the [1,3,3,1]x[1,3,3,1]/16 filter
  kHandWritten,  // (b) nearest 2x Resize, checkerboard mask, Pad [2,2,1,1], depthwise 4x4 Conv: the same function
};

// Input [1,4,R,R] ("image"), output [1,3,R,R] ("rgb"). Channels at resolution r are min(32768/r, 512) divided by
// `width_divisor` (at least 1). R must be a power of two >= 8; R=256 has 12 depthwise upsamplers.
onnx::ModelProto make_migan(int64_t resolution, UpsampleForm form, int64_t width_divisor, uint32_t seed);

}  // namespace dwdeconv::examples
