// The joins of the emitted phases (rewrite/emitter.h): the Concat joins (DepthToSpace DCR, Gather + DepthToSpace CRD,
// the batch-axis CRD), the nearest Resize of a layout whose phases are all the same, the interleaves of strides that
// differ per axis and of 1-D phases, and the Reshape / Unsqueeze-style nodes they use.
#include "rewrite/emitter.h"

#include "emitter_parts.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::rewrite {

using emitter_parts::make_node;

onnx::NodeProto Emitter::nearest_resize(const DeconvMatch& m, const std::string& base, const std::string& input, int64_t sy, int64_t sx) {
  const std::string name = m.name.empty() ? names_.fresh(base + "_nearest") : m.name;
  onnx::NodeProto resize = make_node("Resize", name, {input}, {m.output});
  const std::string scales = names_.fresh(base + "_nearest_scales");
  const std::vector<double> factors = m.one_d ? std::vector<double>{1.0, 1.0, static_cast<double>(sx)}
                                              : std::vector<double>{1.0, 1.0, static_cast<double>(sy), static_cast<double>(sx)};
  add_initializer(*m.scope, onnx_io::make_tensor(scales, onnx::TensorProto::FLOAT, {static_cast<int64_t>(factors.size())}, factors,
                                                 /*raw=*/false));
  if (opset_ >= 13) {
    resize.add_input("");  // roi, unused by nearest
  } else if (opset_ >= 11) {
    const std::string roi = names_.fresh(base + "_nearest_roi");
    add_initializer(*m.scope, onnx_io::make_tensor(roi, onnx::TensorProto::FLOAT, {0}, {}, /*raw=*/false));
    resize.add_input(roi);
  }
  resize.add_input(scales);
  *resize.add_attribute() = onnx_io::make_string_attribute("mode", "nearest");
  if (opset_ >= 11) {
    // x[floor(o/s)] exactly: the source coordinate of output h*s + a is h + a/s, rounded down.
    *resize.add_attribute() = onnx_io::make_string_attribute("coordinate_transformation_mode", "asymmetric");
    *resize.add_attribute() = onnx_io::make_string_attribute("nearest_mode", "floor");
  }
  return resize;
}

onnx::NodeProto Emitter::reshape(const DeconvMatch& m, const std::string& name, const std::string& input, const std::string& output,
                                 const std::vector<int64_t>& shape) {
  onnx::NodeProto node = make_node("Reshape", name, {input}, {output});
  const std::string shape_name = names_.fresh(name + "_shape");
  add_initializer(*m.scope, onnx_io::make_int64_tensor(shape_name, {static_cast<int64_t>(shape.size())}, shape));
  node.add_input(shape_name);
  return node;
}

void Emitter::interleave(const DeconvMatch& m, const std::string& base, const std::vector<std::string>& phases,
                         const std::array<int64_t, 4>& growth, std::vector<onnx::NodeProto>& nodes) {
  const int64_t sy = m.y.stride, sx = m.x.stride;
  if (m.one_d) {
    interleave_1d(m, base, phases, growth, nodes);
    return;
  }
  const auto last_name = [&](const std::string& suffix) { return m.name.empty() ? names_.fresh(base + suffix) : m.name; };
  // Along W: the s_x phases of each row stacked on a new last axis, [N, C, H', W', s_x], then [N, C, H', W'*s_x]: phase
  // ax's pixel w lands at w*s_x + ax. Reshape's 0s copy N, C and H', so no extent needs to be known.
  std::vector<std::string> rows;
  for (int64_t ay = 0; ay < sy; ++ay) {
    if (sx == 1) {
      rows.push_back(phases[static_cast<size_t>(ay)]);
      continue;
    }
    const std::string row = "_row" + std::to_string(ay);
    std::vector<std::string> stacked;
    for (int64_t ax = 0; ax < sx; ++ax) {
      const std::string& phase = phases[static_cast<size_t>(ay * sx + ax)];
      const std::string name = names_.fresh(base + row + "_unsqueeze_" + std::to_string(ax));
      const std::string out = names_.fresh(name + "_out");
      nodes.push_back(axes_node(m, "Unsqueeze", name, phase, out, 4));
      stacked.push_back(out);
    }
    const std::string concat_name = names_.fresh(base + row + "_stack");
    const std::string concat_out = names_.fresh(concat_name + "_out");
    onnx::NodeProto concat = make_node("Concat", concat_name, stacked, {concat_out});
    *concat.add_attribute() = onnx_io::make_int_attribute("axis", 4);
    nodes.push_back(std::move(concat));
    const bool final_node = sy == 1;
    const std::string name = final_node ? last_name("_interleave_w") : names_.fresh(base + row + "_interleave_w");
    const std::string out = final_node ? m.output : names_.fresh(name + "_out");
    nodes.push_back(reshape(m, name, concat_out, out, {0, 0, 0, -1}));
    // A row is H + q_y lines of (W + q_x) * s_x: both growths, the width's before the stride multiplies it.
    if (!final_node) add_value_info(m, out, m.outputs(), {0, 0, growth[2], growth[3]}, sx);
    rows.push_back(out);
  }
  if (sy == 1) return;
  // Along H: the rows side by side on W, [N, C, H', s_y*W''], then [N, C, H'*s_y, W'']: row ay's line h lands at
  // h*s_y + ay. W'' = (W + q_x)*s_x is written out (keep_reason requires W known).
  const int64_t width = (*known_dim(m, 3) + growth[3]) * sx;
  const std::string concat_name = names_.fresh(base + "_rows");
  const std::string concat_out = names_.fresh(concat_name + "_out");
  onnx::NodeProto concat = make_node("Concat", concat_name, rows, {concat_out});
  *concat.add_attribute() = onnx_io::make_int_attribute("axis", 3);
  nodes.push_back(std::move(concat));
  nodes.push_back(reshape(m, last_name("_interleave_h"), concat_out, m.output, {0, 0, -1, width}));
}

void Emitter::interleave_1d(const DeconvMatch& m, const std::string& base, const std::vector<std::string>& phases,
                            const std::array<int64_t, 4>& growth, std::vector<onnx::NodeProto>& nodes) {
  // The s phases [N, C, L'] stacked on a new last axis, [N, C, L', s], then [N, C, L'*s]: phase a's sample l lands at
  // l*s + a. The Reshape's target is written out where the extents are known (converters that move the channels
  // last, as onnx2tf does, cannot follow a 0 that copies an extent), else 0 copies N and -1 takes the length.
  const int64_t s = m.x.stride;
  std::vector<std::string> stacked;
  for (int64_t a = 0; a < s; ++a) {
    const std::string name = names_.fresh(base + "_unsqueeze_" + std::to_string(a));
    const std::string out = names_.fresh(name + "_out");
    nodes.push_back(axes_node(m, "Unsqueeze", name, phases[static_cast<size_t>(a)], out, 3));
    stacked.push_back(out);
  }
  const std::string concat_name = names_.fresh(base + "_stack");
  const std::string concat_out = names_.fresh(concat_name + "_out");
  onnx::NodeProto concat = make_node("Concat", concat_name, stacked, {concat_out});
  *concat.add_attribute() = onnx_io::make_int_attribute("axis", 3);
  nodes.push_back(std::move(concat));
  const std::string last_name = m.name.empty() ? names_.fresh(base + "_interleave") : m.name;
  if (options_.flatten_1d_join && known_batch_of_one(m)) {
    // [1, C, L', s] -> Flatten(axis 2) -> [C, L'*s] -> Unsqueeze(0) -> [1, C, L'*s]: no shape read from a tensor.
    const std::string flatten_name = names_.fresh(base + "_flatten");
    const std::string flatten_out = names_.fresh(flatten_name + "_out");
    onnx::NodeProto flatten = make_node("Flatten", flatten_name, {concat_out}, {flatten_out});
    *flatten.add_attribute() = onnx_io::make_int_attribute("axis", 2);
    nodes.push_back(std::move(flatten));
    nodes.push_back(axes_node(m, "Unsqueeze", last_name, flatten_out, m.output, 0));
    return;
  }
  const auto n = known_dim(m, 0), length = known_dim(m, 3);
  const int64_t joined = length && *length + growth[3] <= std::numeric_limits<int64_t>::max() / s ? (*length + growth[3]) * s : -1;
  nodes.push_back(reshape(m, last_name, concat_out, m.output, {n.value_or(0), m.outputs(), joined}));
}

onnx::NodeProto Emitter::axes_node(const DeconvMatch& m, const std::string& op, const std::string& name, const std::string& input,
                                   const std::string& output, int64_t axis) {
  onnx::NodeProto node = make_node(op, name, {input}, {output});
  if (opset_ >= 13) {
    const std::string axes = names_.fresh(name + "_axes");
    add_initializer(*m.scope, onnx_io::make_int64_tensor(axes, {1}, {axis}));
    node.add_input(axes);
  } else {
    *node.add_attribute() = onnx_io::make_ints_attribute("axes", {axis});
  }
  return node;
}

// The Concat joins (kDcr, kGatherCrd, kBatchCrd) of the phase outputs into m.output, after the phase Convs.
void Emitter::concat_join(const DeconvMatch& m, const std::string& base, const std::vector<std::string>& phase_outputs,
                          const std::array<int64_t, 4>& growth, PhaseLayout layout, std::vector<onnx::NodeProto>& nodes) {
  const int64_t s = m.y.stride;  // the stride on both axes: a Concat join serves equal strides only
  // The last node takes the node's name (or a fresh one) and writes its output.
  const auto last_name = [&](const std::string& suffix) { return m.name.empty() ? names_.fresh(base + suffix) : m.name; };
  const auto depth_to_space = [&](const std::string& name, const std::string& in, const std::string& out, const char* mode) {
    onnx::NodeProto d2s = make_node("DepthToSpace", name, {in}, {out});
    *d2s.add_attribute() = onnx_io::make_int_attribute("blocksize", s);
    if (opset_ >= 11) *d2s.add_attribute() = onnx_io::make_string_attribute("mode", mode);  // before 11, DCR is the only mode
    nodes.push_back(std::move(d2s));
  };
  const auto transpose_01 = [&](const std::string& name, const std::string& in, const std::string& out) {
    onnx::NodeProto t = make_node("Transpose", name, {in}, {out});
    *t.add_attribute() = onnx_io::make_ints_attribute("perm", {1, 0, 2, 3});  // swaps N and C
    nodes.push_back(std::move(t));
  };
  const std::string concat_name = names_.fresh(base + "_concat");
  const std::string concat_out = names_.fresh(concat_name + "_out");
  onnx::NodeProto concat = make_node("Concat", concat_name, phase_outputs, {concat_out});
  *concat.add_attribute() = onnx_io::make_int_attribute("axis", layout == PhaseLayout::kBatchCrd ? 0 : 1);
  nodes.push_back(std::move(concat));

  if (layout == PhaseLayout::kBatchCrd) {
    // [s*s, C, H, W] -> [C, s*s, H, W]: channel c's phases side by side, CRD's order -> [C, 1, sH, sW] -> [1, C, sH, sW].
    const std::string per_channel = names_.fresh(base + "_per_channel");
    const std::string per_channel_out = names_.fresh(per_channel + "_out");
    transpose_01(per_channel, concat_out, per_channel_out);
    const std::string d2s_name = names_.fresh(base + "_depth_to_space");
    const std::string d2s_out = names_.fresh(d2s_name + "_out");
    depth_to_space(d2s_name, per_channel_out, d2s_out, "CRD");
    transpose_01(last_name("_batch_to_channel"), d2s_out, m.output);
    return;
  }
  add_value_info(m, concat_out, m.outputs() * s * s, growth);
  if (layout == PhaseLayout::kGatherCrd) {
    // Channel p*C + c (phase-major, as concatenated) moves to c*s*s + p (channel-major), the order CRD reads.
    const int64_t c_out = m.outputs(), phases = s * s;
    std::vector<int64_t> perm(static_cast<size_t>(c_out * phases));
    for (int64_t c = 0; c < c_out; ++c) {
      for (int64_t p = 0; p < phases; ++p) perm[static_cast<size_t>(c * phases + p)] = p * c_out + c;
    }
    const std::string gather_name = names_.fresh(base + "_to_crd");
    const std::string perm_name = names_.fresh(gather_name + "_perm");
    add_initializer(*m.scope, onnx_io::make_int64_tensor(perm_name, {c_out * phases}, perm));
    const std::string gathered = names_.fresh(gather_name + "_out");
    onnx::NodeProto gather = make_node("Gather", gather_name, {concat_out, perm_name}, {gathered});
    *gather.add_attribute() = onnx_io::make_int_attribute("axis", 1);
    nodes.push_back(std::move(gather));
    add_value_info(m, gathered, c_out * phases, growth);
    depth_to_space(last_name("_depth_to_space"), gathered, m.output, "CRD");
    return;
  }
  depth_to_space(last_name("_depth_to_space"), concat_out, m.output, "DCR");
}

}  // namespace dwdeconv::rewrite
