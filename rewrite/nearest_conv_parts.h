// What the nearest_conv form and the split of a Conv behind a Concat (nearest_concat_conv) share (internal to
// rewrite/): the Conv's pads and group, the Pad folded into them, and the ConvTranspose a nearest Resize by s and a
// stride-1 Conv compute. Defined in form_nearest_conv.cpp.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/geometry.h"
#include "core/result.h"
#include "rewrite/const_eval.h"
#include "rewrite/forms.h"

namespace dwdeconv::rewrite::parts {

// The Concat of one input that outputs `name` (torch writes one for torch.cat([u], 1): an identity), or nullptr.
const onnx::NodeProto* one_input_concat(const GraphScope& scope, const std::string& name);

// The Conv's [top, left, bottom, right] pads for a stride-1 Conv with kernel [ky, kx], auto_pad included, or why not.
// `one_d`: a Conv1d's [left, right] as [0, left, 0, right] (its kernel ky is 1).
core::Result<std::array<int64_t, 4>> conv_pads(const onnx::NodeProto& conv, int64_t ky, int64_t kx, bool one_d);

// The group of a stride-1, undilated Conv, or why it is not one.
core::Result<int64_t> stride_one_group(const onnx::NodeProto& conv);

// The Pad `between` a nearest Resize by `s` and the Conv folded into the Conv's [top, left, bottom, right] `pads`:
// constant zeros add up; a reflect Pad within the first cell of the upsampling, or an edge Pad, repeats x's edge
// sample, which each phase then pads x with (`edge_padding`, the Conv's own pads then 0). Declines for any other Pad.
core::Status fold_pad(const MatchContext& context, const onnx::NodeProto& between, const GraphScope& scope, int64_t s, bool one_d,
                      std::array<int64_t, 4>& pads, bool& edge_padding);

// Per axis, the ConvTranspose that nearest by `sy` (H) and `s` (W) then a stride-1 Conv of kernel dims[2..3] and
// `pads` computes, or why the Conv does not keep the upsampled size (not a clean upscale).
core::Result<std::array<core::AxisGeometry, 2>> nearest_conv_geometry(const std::vector<int64_t>& dims, const std::array<int64_t, 4>& pads,
                                                                      int64_t sy, int64_t s);

// The ConvTranspose kernel [C_in, C_out/g, wy, wx] that the Conv weight `f` ([C_out, C_in/g, Ky, Kx]) after a nearest
// upsampling by `sy` and `s` computes: each axis box-summed over s taps, flipped, the layout turned around.
core::Result<std::vector<double>> boxed_kernel(const ConstTensor& f, int64_t group, int64_t c_in, int64_t wy, int64_t wx, int64_t sy,
                                               int64_t s);

}  // namespace dwdeconv::rewrite::parts
