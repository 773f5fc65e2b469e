#include "rewrite/emitter.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "emitter_parts.h"
#include "onnx_io/attributes.h"
#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::rewrite {
namespace {

using emitter_parts::make_node;

std::string axis_key(const core::AxisGeometry& g) {
  return std::to_string(g.kernel) + "," + std::to_string(g.stride) + "," + std::to_string(g.pad_begin) + "," + std::to_string(g.pad_end) +
         "," + std::to_string(g.output_padding) + "," + std::to_string(g.dilation);
}

onnx::AttributeProto tensor_attribute(const std::string& name, onnx::TensorProto value) {
  onnx::AttributeProto attribute;
  attribute.set_name(name);
  attribute.set_type(onnx::AttributeProto::TENSOR);
  *attribute.mutable_t() = std::move(value);
  return attribute;
}

// A stride-1 Conv with `group` groups (the channel count for a depthwise one), its own kernel and pads, and dilations
// only where an axis is dilated (a stride-1 ConvTranspose's). `one_d`: a Conv1d on [N, C, L], the x entries alone
// (the y axis of a 1-D match is the unit one: k 1, no pads, no dilation).
onnx::NodeProto conv_node(bool one_d, const std::string& name, std::vector<std::string> inputs, const std::string& output, int64_t group,
                          const std::array<int64_t, 2>& kernel, const std::array<int64_t, 4>& pads,
                          const std::array<int64_t, 2>& dilations = {1, 1}) {
  onnx::NodeProto conv = make_node("Conv", name, std::move(inputs), {output});
  const auto per_axis = [one_d](std::vector<int64_t> both) { return one_d ? std::vector<int64_t>{both[1]} : both; };
  if (dilations != std::array<int64_t, 2>{1, 1}) {
    *conv.add_attribute() = onnx_io::make_ints_attribute("dilations", per_axis({dilations[0], dilations[1]}));
  }
  *conv.add_attribute() = onnx_io::make_int_attribute("group", group);
  *conv.add_attribute() = onnx_io::make_ints_attribute("kernel_shape", per_axis({kernel[0], kernel[1]}));
  *conv.add_attribute() = onnx_io::make_ints_attribute(
      "pads", one_d ? std::vector<int64_t>{pads[1], pads[3]} : std::vector<int64_t>{pads[0], pads[1], pads[2], pads[3]});
  *conv.add_attribute() = onnx_io::make_ints_attribute("strides", per_axis({1, 1}));
  return conv;
}

// Flat indices into m's ConvTranspose weight for the whole phase weight, in Conv order.
std::vector<int64_t> phase_weight_indices(const DeconvMatch& m, const core::DeconvPlan& plan, const core::PhasePlan& phase) {
  return core::phase_weight_indices(plan, phase, m.channels, m.outputs(), m.groups());
}

}  // namespace

Emitter::Emitter(onnx::ModelProto& model, NameAllocator& names, EmitOptions options)
    : model_(model), names_(names), options_(options), opset_(onnx_io::default_opset(model)) {}

void Emitter::add_initializer(const GraphScope& scope, onnx::TensorProto tensor) {
  // Before IR 4 every initializer must also be a graph input.
  if (model_.ir_version() < 4 && scope.parent == nullptr) {
    auto* input = scope.graph->add_input();
    input->set_name(tensor.name());
    auto* type = input->mutable_type()->mutable_tensor_type();
    type->set_elem_type(tensor.data_type());
    for (int64_t d : tensor.dims()) type->mutable_shape()->add_dim()->set_dim_value(d);
  }
  *scope.graph->add_initializer() = std::move(tensor);
}

const char* phase_layout_name(PhaseLayout layout) {
  switch (layout) {
    case PhaseLayout::kDcr: return "dcr";
    case PhaseLayout::kGatherCrd: return "gather_crd";
    case PhaseLayout::kBatchCrd: return "batch_crd";
    case PhaseLayout::kNearest: return "nearest";
    case PhaseLayout::kInterleave: return "interleave";
    case PhaseLayout::kSingle: return "single";
  }
  return "";
}

std::optional<int64_t> known_dim(const DeconvMatch& m, int axis) {
  if (!m.input_type || !m.input_type->has_tensor_type() || !m.input_type->tensor_type().has_shape()) return std::nullopt;
  const auto& shape = m.input_type->tensor_type().shape();
  if (shape.dim_size() != 4 || !shape.dim(axis).has_dim_value()) return std::nullopt;
  return shape.dim(axis).dim_value();
}

bool known_batch_of_one(const DeconvMatch& m) {
  if (!m.input_type || !m.input_type->has_tensor_type() || !m.input_type->tensor_type().has_shape()) return false;
  const auto& shape = m.input_type->tensor_type().shape();
  return shape.dim_size() == 4 && shape.dim(0).has_dim_value() && shape.dim(0).dim_value() == 1;
}

std::string Emitter::keep_reason(const DeconvMatch& m, PhaseLayout layout) const {
  // A stride s emits s*s phases: each a Concat input, most a Conv. Compared without computing s*s, which
  // can overflow for a huge stride with a matching output_padding.
  const int64_t s = m.y.stride, sx = m.x.stride;
  if (s > options_.max_phases / sx) {
    const std::string phases = s <= 3037000499 && sx <= 3037000499 ? std::to_string(s * sx) : std::to_string(s) + "*" + std::to_string(sx);
    const std::string strides = s == sx ? "stride " + std::to_string(s) : "strides " + std::to_string(s) + "x" + std::to_string(sx);
    return strides + " would emit " + phases + " phases, over --max-phases " + std::to_string(options_.max_phases);
  }
  // An edge-padded phase whose window starts inside x would need an edge Pad with a negative (cropping) begin,
  // which runtimes take only in constant mode.
  if (m.edge_padding) {
    for (const auto& phase : core::plan_deconv(m.y, m.x).phases) {
      if (phase.y.pad_begin < 0 || phase.x.pad_begin < 0 || phase.y.pad_end < 0 || phase.x.pad_end < 0) {
        return "a phase of the edge-padded form would start inside x (an edge Pad cannot crop)";
      }
    }
  }
  if (layout == PhaseLayout::kNearest && opset_ < 10) {
    // Its phases would all be one Conv, s*s times: never emitted, kept instead.
    return "every phase computes the same, so the rewrite is the one Conv followed by a nearest Resize, which exists from "
           "opset 10 on; the model is opset " +
           std::to_string(opset_);
  }
  if (layout == PhaseLayout::kInterleave) {
    // Rows interleave by a Reshape to [N, C, s_y*H', W'*s_x], whose last extent must be written out.
    if (opset_ < 5)
      return "the join of strides that differ per axis needs Reshape with a shape input (opset 5); the model is opset " +
             std::to_string(opset_);
    if (s > 1 && !known_dim(m, 3)) {
      return "the join of strides that differ per axis interleaves rows by a Reshape that needs the width, and the width of '" + m.input +
             "' is not known (pass --input-shape)";
    }
  }
  if ((layout == PhaseLayout::kGatherCrd || layout == PhaseLayout::kBatchCrd) && s > 1 && opset_ < 11) {
    return std::string("the ") + phase_layout_name(layout) +
           " form needs DepthToSpace mode CRD, which exists from opset 11 on; "
           "the model is opset " +
           std::to_string(opset_);
  }
  if (options_.flatten_1d_join && m.one_d && sx > 1 && !known_batch_of_one(m)) {
    return "the 1-D join by Flatten and Unsqueeze (no Reshape, which onnx2torch cannot hand to torch.export) needs an input of "
           "batch 1, and the batch of '" +
           m.input + "' is not known to be 1";
  }
  if (options_.flatten_1d_join && m.one_d && m.edge_padding) {
    return "its edge padding would be a Pad or Slices, which onnx2torch makes modules that read their pads and starts as "
           "tensors, and torch.export refuses them";
  }
  if (layout == PhaseLayout::kBatchCrd && s > 1 && !known_batch_of_one(m)) {
    return "the batch_crd form needs an input of batch 1, and the batch of '" + m.input + "' is not known to be 1";
  }
  // Taps split by residue mod s, so some phase has none exactly when k < s on an axis.
  const bool tapless = m.y.kernel < s || m.x.kernel < sx;
  if (tapless && (core::phase_growth(m.y) != std::optional<int64_t>(0) || core::phase_growth(m.x) != std::optional<int64_t>(0))) {
    // Its bias-only phases are zeros of x's shape, and the phases here are H + q long.
    return "kernel " + std::to_string(m.y.kernel) + "x" + std::to_string(m.x.kernel) + " < stride " + std::to_string(std::max(s, sx)) +
           " leaves phases that see only the bias, and an output that is not s*H x s*W gives them another shape than x's, which "
           "the rewrite does not emit";
  }
  if (tapless && opset_ < 9) {
    return "kernel " + std::to_string(m.y.kernel) + "x" + std::to_string(m.x.kernel) + " < stride " + std::to_string(std::max(s, sx)) +
           " leaves phases that see only the bias; emitting them without reading x needs ConstantOfShape (opset 9), "
           "the model is opset " +
           std::to_string(opset_);
  }
  // A split Conv's other upsampled parts are emitted too (emit_split), each in its own layout.
  if (m.addend) {
    const PhaseLayout join = layout == PhaseLayout::kGatherCrd || layout == PhaseLayout::kBatchCrd ? layout : PhaseLayout::kDcr;
    for (const auto& part : m.addend->upsampled) {
      if (std::string why = keep_reason(part, layout_for(part, join)); !why.empty()) return "the part of '" + part.input + "': " + why;
    }
  }
  return "";
}

void Emitter::store_like_source(const ConstantSource& src, onnx::TensorProto tensor) {
  const std::string name = tensor.name();
  if (src.constant_node != nullptr) {
    onnx::NodeProto constant = make_node("Constant", names_.fresh(name + "_constant"), {}, {name});
    *constant.add_attribute() = tensor_attribute("value", std::move(tensor));
    constants_after_[src.constant_node].push_back(std::move(constant));
  } else {
    add_initializer(*src.scope, std::move(tensor));
  }
  derived_.emplace(name, src.name);
}

core::Result<std::string> Emitter::phase_weight(const DeconvMatch& m, const core::DeconvPlan& plan, size_t phase_index) {
  const ConstantSource& src = m.weight;
  // Phase kernels depend on the stride and pads as well as the weight: key on all of them (the reference
  // PR keyed on the weight alone and silently gave a second deconv the first one's kernels).
  // A recogniser's derived kernel belongs to its match alone: its address tells it apart from any other.
  const std::string origin = m.derived_weight ? std::to_string(reinterpret_cast<uintptr_t>(m.derived_weight.get())) : src.name;
  const std::string key = src.scope->path + "\n" + origin + "\n" + axis_key(plan.y) + "\n" + axis_key(plan.x) + "\n" +
                          std::to_string(phase_index) + (m.one_d ? "\n1-D" : "");
  if (auto it = phase_weights_.find(key); it != phase_weights_.end()) return it->second;

  const core::PhasePlan& phase = plan.phases[phase_index];
  const int64_t s = plan.y.stride, sx = plan.x.stride;
  const std::string strides = std::to_string(s) + (s == sx ? "" : "x" + std::to_string(sx));
  const std::string name =
      names_.fresh(src.name + "_s" + strides + "_p" + std::to_string(plan.y.pad_begin) + "_" + std::to_string(plan.x.pad_begin) + "_" +
                   std::to_string(plan.y.pad_end) + "_" + std::to_string(plan.x.pad_end) + "_phase_" + std::to_string(phase_index / sx) +
                   "_" + std::to_string(phase_index % sx));
  // A 1-D node's phase weight is [C_out, C_in/g, taps] (its y axis has one tap): the same elements in the same order.
  auto gathered =
      onnx_io::gather_elements(*src.tensor, phase_weight_indices(m, plan, phase),
                               m.one_d ? std::vector<int64_t>{m.outputs(), m.channels / m.groups(), phase.x.taps}
                                       : std::vector<int64_t>{m.outputs(), m.channels / m.groups(), phase.y.taps, phase.x.taps});
  if (!gathered) return gathered.error();
  gathered->set_name(name);
  store_like_source(src, std::move(*gathered));
  phase_weights_.emplace(key, name);
  return name;
}

std::string Emitter::zero_kernel(const DeconvMatch& m) {
  const ConstantSource& src = m.weight;
  // One per source weight and shape: it depends only on the channels, groups and the element type.
  std::vector<int64_t> dims{m.outputs(), m.channels / m.groups(), 1, 1};
  if (m.one_d) dims.pop_back();
  const std::string key =
      src.scope->path + "\n" + src.name + "\nzero " + std::to_string(dims[0]) + " " + std::to_string(dims[1]) + (m.one_d ? " 1-D" : "");
  if (auto it = phase_weights_.find(key); it != phase_weights_.end()) return it->second;
  const std::string name = names_.fresh(src.name + "_zero_1x1");
  onnx::TensorProto tensor = onnx_io::zeros_like_storage(*src.tensor, dims);
  tensor.set_name(name);
  store_like_source(src, std::move(tensor));
  phase_weights_.emplace(key, name);
  return name;
}

std::string Emitter::zeros_like(const DeconvMatch& m, const std::string& like, const std::string& base,
                                std::vector<onnx::NodeProto>& nodes) {
  const std::string shape_name = names_.fresh(base + "_shape");
  const std::string shape_out = names_.fresh(shape_name + "_out");
  nodes.push_back(make_node("Shape", shape_name, {like}, {shape_out}));
  const std::string zeros_name = names_.fresh(base + "_zeros");
  const std::string zeros_out = names_.fresh(zeros_name + "_out");
  onnx::NodeProto zeros = make_node("ConstantOfShape", zeros_name, {shape_out}, {zeros_out});
  // One 0 of the weight's element type (ConstantOfShape's default is a float 0, wrong for float16 and double).
  *zeros.add_attribute() = tensor_attribute("value", onnx_io::zeros_like_storage(*m.weight.tensor, {1}));
  nodes.push_back(std::move(zeros));
  add_value_info(m, zeros_out, m.channels, {0, 0, 0, 0});
  return zeros_out;
}

std::string Emitter::bias_only_phase(const DeconvMatch& m, const std::string& base, const std::string& bias,
                                     std::vector<onnx::NodeProto>& nodes) {
  const std::string zeros = zeros_like(m, m.input, base, nodes);
  if (bias.empty() && m.outputs() == m.channels) return zeros;
  // 0 * 0 + bias[c]: a 1x1 zero-kernel Conv over the zeros adds the bias as it is stored, in any form; without a
  // bias it turns C_in zero channels into C_out.
  const std::string name = names_.fresh(base + "_bias_only");
  const std::string output = names_.fresh(name + "_out");
  std::vector<std::string> inputs{zeros, zero_kernel(m)};
  if (!bias.empty()) inputs.push_back(bias);
  nodes.push_back(conv_node(m.one_d, name, std::move(inputs), output, m.groups(), {1, 1}, {0, 0, 0, 0}));
  add_value_info(m, output, m.outputs(), {0, 0, 0, 0});
  return output;
}

std::string Emitter::pad_node(const DeconvMatch& m, const std::string& base, const std::array<int64_t, 4>& pads,
                              std::vector<onnx::NodeProto>& nodes) {
  // A phase pads by at most about its kernel; past 16 samples a side the Concat would grow one input per sample: an
  // edge Pad then, as on every other target.
  constexpr int64_t kMaxEdgeSlices = 16;
  if (m.edge_padding && m.one_d && options_.edge_as_slices && opset_ >= 10 && pads[1] >= 0 && pads[3] >= 0 && pads[1] <= kMaxEdgeSlices &&
      pads[3] <= kMaxEdgeSlices) {
    // x's first and last samples, sliced once per node, repeated around x by one Concat on the length axis.
    auto it = edge_slices_.find(m.output);
    if (it == edge_slices_.end()) {
      const auto slice = [&](const char* which, int64_t start, int64_t end) {
        const std::string name = names_.fresh(m.name.empty() ? m.output + "_" + which : m.name + "_" + which);
        const std::string out = names_.fresh(name + "_out");
        onnx::NodeProto node = make_node("Slice", name, {m.input}, {out});
        for (const auto& [suffix, value] : std::vector<std::pair<const char*, int64_t>>{{"_starts", start}, {"_ends", end}, {"_axes", 2}}) {
          const std::string input = names_.fresh(name + suffix);
          add_initializer(*m.scope, onnx_io::make_int64_tensor(input, {1}, {value}));
          node.add_input(input);
        }
        nodes.push_back(std::move(node));  // one sample long: no value_info (add_value_info writes x's extents)
        return out;
      };
      // The last sample: from -1 to the end (INT64_MAX, "to the end" in every opset's Slice).
      const std::string first = slice("first_sample", 0, 1), last = slice("last_sample", -1, std::numeric_limits<int64_t>::max());
      it = edge_slices_.emplace(m.output, std::make_pair(first, last)).first;
    }
    // A sample repeated p times, by Concats of two inputs (halves, or p - 1 and one): LiteRT's XNNPACK delegate
    // takes a CONCATENATION of 2 to 4 inputs and leaves a wider one to the reference kernels.
    const std::function<std::string(const std::string&, int64_t)> repeat = [&](const std::string& sample, int64_t p) {
      if (p == 1) return sample;
      const auto key = std::make_tuple(m.output, sample, p);
      if (auto found = edge_repeats_.find(key); found != edge_repeats_.end()) return found->second;
      const std::string a = repeat(sample, p % 2 == 0 ? p / 2 : p - 1), b = p % 2 == 0 ? a : sample;
      const std::string name = names_.fresh(sample + "_x" + std::to_string(p));
      const std::string out = names_.fresh(name + "_out");
      onnx::NodeProto concat = make_node("Concat", name, {a, b}, {out});
      *concat.add_attribute() = onnx_io::make_int_attribute("axis", 2);
      nodes.push_back(std::move(concat));
      edge_repeats_.emplace(key, out);
      return out;
    };
    std::vector<std::string> parts;
    if (pads[1] > 0) parts.push_back(repeat(it->second.first, pads[1]));
    parts.push_back(m.input);
    if (pads[3] > 0) parts.push_back(repeat(it->second.second, pads[3]));
    const std::string node_name = names_.fresh(base);
    const std::string output = names_.fresh(node_name + "_out");
    onnx::NodeProto concat = make_node("Concat", node_name, parts, {output});
    *concat.add_attribute() = onnx_io::make_int_attribute("axis", 2);
    nodes.push_back(std::move(concat));
    add_value_info(m, output, m.channels, pads);
    return output;
  }
  std::string source = m.input;
  std::array<int64_t, 4> rest = pads;  // what the Pad still does
  const bool crops = std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; });
  if (options_.crop_as_slice && crops && !m.edge_padding) {
    // The crop as Slice(x, starts, ends, axes) on H and W (L in 1-D): a crop of k from the start starts at k, one from
    // the end ends at -k (counted from the end, so no extent needs to be known), an uncropped end past the dim; before
    // opset 10 the same bounds as Slice-1's attributes. What pads (with --explicit-pad) a Pad of the Slice then does.
    std::array<int64_t, 4> crop{};
    for (size_t k = 0; k < 4; ++k) {
      crop[k] = std::min<int64_t>(pads[k], 0);
      rest[k] = std::max<int64_t>(pads[k], 0);
    }
    const auto end = [](int64_t p) { return p < 0 ? p : std::numeric_limits<int64_t>::max(); };
    const std::vector<int64_t> starts = m.one_d ? std::vector<int64_t>{-crop[1]} : std::vector<int64_t>{-crop[0], -crop[1]};
    const std::vector<int64_t> ends = m.one_d ? std::vector<int64_t>{end(crop[3])} : std::vector<int64_t>{end(crop[2]), end(crop[3])};
    const std::vector<int64_t> axes = m.one_d ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 3};
    const std::string node_name = names_.fresh(base);
    const std::string output = names_.fresh(node_name + "_out");
    onnx::NodeProto slice = make_node("Slice", node_name, {m.input}, {output});
    for (const auto& [suffix, values] :
         {std::pair<const char*, const std::vector<int64_t>&>{"_starts", starts}, {"_ends", ends}, {"_axes", axes}}) {
      if (opset_ < 10) {
        *slice.add_attribute() = onnx_io::make_ints_attribute(suffix + 1, values);  // starts, ends, axes
        continue;
      }
      const std::string input = names_.fresh(node_name + suffix);
      add_initializer(*m.scope, onnx_io::make_int64_tensor(input, {static_cast<int64_t>(values.size())}, values));
      slice.add_input(input);
    }
    nodes.push_back(std::move(slice));
    add_value_info(m, output, m.channels, crop);
    if (rest == std::array<int64_t, 4>{0, 0, 0, 0}) return output;
    source = output;
  }
  // ONNX Pad on NCHW: [n_begin, c_begin, top, left, n_end, c_end, bottom, right]; on NCL: [0, 0, left, 0, 0, right].
  const std::vector<int64_t> full =
      m.one_d ? std::vector<int64_t>{0, 0, rest[1], 0, 0, rest[3]} : std::vector<int64_t>{0, 0, rest[0], rest[1], 0, 0, rest[2], rest[3]};
  const std::string node_name = names_.fresh(base);
  const std::string output = names_.fresh(node_name + "_out");
  onnx::NodeProto pad = make_node("Pad", node_name, {source}, {output});
  if (m.edge_padding) *pad.add_attribute() = onnx_io::make_string_attribute("mode", "edge");
  if (opset_ >= 11) {
    const std::string pads_name = names_.fresh(node_name + "_pads");
    add_initializer(*m.scope, onnx_io::make_int64_tensor(pads_name, {static_cast<int64_t>(full.size())}, full));
    pad.add_input(pads_name);
  } else {
    *pad.add_attribute() = onnx_io::make_ints_attribute(opset_ >= 2 ? "pads" : "paddings", full);
  }
  nodes.push_back(std::move(pad));
  add_value_info(m, output, m.channels, pads);  // x padded by all of pads, through the Slice or not
  return output;
}

void Emitter::add_value_info(const DeconvMatch& m, const std::string& name, int64_t channels, const std::array<int64_t, 4>& pads,
                             int64_t width_factor) {
  if (!m.input_type || !m.input_type->has_tensor_type() || !m.input_type->tensor_type().has_shape() ||
      m.input_type->tensor_type().shape().dim_size() != 4) {
    return;
  }
  const auto& in = m.input_type->tensor_type();
  auto* vi = m.scope->graph->add_value_info();
  vi->set_name(name);
  auto* type = vi->mutable_type()->mutable_tensor_type();
  type->set_elem_type(in.elem_type() != 0 ? in.elem_type() : m.weight.tensor->data_type());
  auto* shape = type->mutable_shape();
  *shape->add_dim() = in.shape().dim(0);
  shape->add_dim()->set_dim_value(channels);
  for (int axis = m.one_d ? 1 : 0; axis < 2; ++axis) {  // a 1-D node's input type is [N, C, 1, L]: L alone
    const auto& d = in.shape().dim(2 + axis);
    const int64_t grow = pads[static_cast<size_t>(axis)] + pads[static_cast<size_t>(axis) + 2];
    const int64_t factor = axis == 1 ? width_factor : 1;
    if (grow == 0 && factor == 1) {
      *shape->add_dim() = d;  // same extent, symbolic or not
    } else if (d.has_dim_value()) {
      shape->add_dim()->set_dim_value((d.dim_value() + grow) * factor);
    } else {
      shape->add_dim();  // unknown: H + pads has no symbol
    }
  }
}

bool Emitter::equal_phases(const DeconvMatch& m, const core::DeconvPlan& plan) const {
  if (plan.phases.size() < 2) return false;
  const core::PhasePlan& first = plan.phases.front();
  const auto same_shape = [&first](const core::PhasePlan& p) {
    return p.y.taps == first.y.taps && p.x.taps == first.x.taps && p.y.pad_begin == first.y.pad_begin &&
           p.x.pad_begin == first.x.pad_begin && p.y.pad_end == first.y.pad_end && p.x.pad_end == first.x.pad_end;
  };
  if (first.bias_only() || !std::all_of(plan.phases.begin(), plan.phases.end(), same_shape)) return false;
  // The same taps everywhere: the weights decide. Read once, only for a node whose phases already agree in shape.
  const auto values = onnx_io::to_doubles(*m.weight.tensor);
  if (!values) return false;
  const auto first_taps = phase_weight_indices(m, plan, first);
  for (size_t p = 1; p < plan.phases.size(); ++p) {
    const auto taps = phase_weight_indices(m, plan, plan.phases[p]);
    for (size_t k = 0; k < taps.size(); ++k) {
      const double a = (*values)[static_cast<size_t>(first_taps[k])], b = (*values)[static_cast<size_t>(taps[k])];
      if (!(a == b) || std::signbit(a) != std::signbit(b)) return false;  // bit for bit: -0 and NaN differ
    }
  }
  return true;
}

PhaseLayout Emitter::layout_for(const DeconvMatch& m, PhaseLayout join) const {
  // Over --max-phases the node is kept (keep_reason) and its s*s phases are never planned.
  const int64_t sy = m.y.stride, sx = m.x.stride;
  if (sy == 1 && sx == 1) return PhaseLayout::kSingle;
  if (sy > options_.max_phases / sx) return join;
  if (equal_phases(m, core::plan_deconv(m.y, m.x))) return PhaseLayout::kNearest;
  return sy == sx ? join : PhaseLayout::kInterleave;
}

core::Result<std::vector<onnx::NodeProto>> Emitter::emit_cropped(const DeconvMatch& m, PhaseLayout layout) {
  // The longer output under a name of its own, then y = Slice(it, ends -crop on H and W): the crop's ends count from
  // the end, so no extent needs to be known.
  DeconvMatch longer = m;
  longer.crop_end = {0, 0};
  const std::string base = m.name.empty() ? m.output : m.name;
  longer.output = names_.fresh(base + "_uncropped");
  auto nodes = emit(longer, layout);
  if (!nodes) return nodes;
  const std::string slice_name = names_.fresh(base + "_crop_end");
  std::vector<std::string> inputs{longer.output};
  const std::vector<std::vector<int64_t>> bounds{{0, 0}, {-m.crop_end[0], -m.crop_end[1]}, {2, 3}};
  const char* const what[] = {"_starts", "_ends", "_axes"};
  for (size_t i = 0; i < bounds.size(); ++i) {
    // An end of -0 would crop everything: an uncropped axis ends past its dim instead.
    std::vector<int64_t> values = bounds[i];
    for (size_t a = 0; i == 1 && a < 2; ++a) {
      if (values[a] == 0) values[a] = std::numeric_limits<int64_t>::max();
    }
    inputs.push_back(names_.fresh(slice_name + what[i]));
    add_initializer(*m.scope, onnx_io::make_int64_tensor(inputs.back(), {2}, values));
  }
  nodes->push_back(make_node("Slice", slice_name, std::move(inputs), {m.output}));
  return nodes;
}

core::Result<std::vector<onnx::NodeProto>> Emitter::emit(const DeconvMatch& m, PhaseLayout layout) {
  if (m.addend) return emit_split(m, layout);
  if (m.crop_end != std::array<int64_t, 2>{0, 0}) return emit_cropped(m, layout);
  core::DeconvPlan plan = core::plan_deconv(m.y, m.x);
  if (layout == PhaseLayout::kNearest) plan.phases.resize(1);  // the one phase; the Resize makes the others
  const int64_t s = plan.y.stride, sx = plan.x.stride;
  const std::string base = m.name.empty() ? m.output : m.name;
  const std::string& bias = m.bias;
  std::vector<onnx::NodeProto> nodes;
  std::map<std::array<int64_t, 4>, std::string> pad_outputs;  // identical Pads within one node are emitted once
  std::vector<std::string> phase_outputs;

  // Each phase yields H + qy by W + qx (qy = qx = 0 for a clean upscale), what its value_info says.
  const std::array<int64_t, 4> growth{0, 0, *core::phase_growth(plan.y), *core::phase_growth(plan.x)};
  std::string bias_only;  // the output every phase without taps shares, made on first use
  for (size_t i = 0; i < plan.phases.size(); ++i) {
    const core::PhasePlan& phase = plan.phases[i];
    // A phase without taps (k < s) sees only the bias, and must not read x's values. A phase whose taps are all
    // zero still reads x, as the original does: 0 x inf is NaN there, not the bias.
    if (phase.bias_only()) {
      if (bias_only.empty()) bias_only = bias_only_phase(m, base, bias, nodes);
      phase_outputs.push_back(bias_only);
      continue;
    }
    const std::string suffix = "_" + std::to_string(i / static_cast<size_t>(sx)) + "_" + std::to_string(i % static_cast<size_t>(sx));
    auto weight = phase_weight(m, plan, i);
    if (!weight) return weight.error();

    std::string input = m.input;
    const std::array<int64_t, 2> kernel{phase.y.taps, phase.x.taps};
    const std::array<int64_t, 2> dilations{phase.y.dilation, phase.x.dilation};
    const std::array<int64_t, 4> all{phase.y.pad_begin, phase.x.pad_begin, phase.y.pad_end, phase.x.pad_end};
    std::array<int64_t, 4> conv_pads{0, 0, 0, 0};
    std::array<int64_t, 4> pad_pads{0, 0, 0, 0};
    if (options_.explicit_pad || m.edge_padding) {
      pad_pads = all;  // an edge Pad cannot fold into the Conv, whose pads are zeros
    } else {
      // Conv pads cannot be negative: a negative pad is a crop done by Pad, the rest folds into the Conv.
      for (size_t k = 0; k < 4; ++k) {
        pad_pads[k] = std::min<int64_t>(all[k], 0);
        conv_pads[k] = std::max<int64_t>(all[k], 0);
      }
    }
    if (pad_pads != std::array<int64_t, 4>{0, 0, 0, 0}) {
      auto it = pad_outputs.find(pad_pads);
      if (it == pad_outputs.end()) {
        const char* kind = m.edge_padding ? "_edge" : options_.explicit_pad ? "_pad" : "_crop";
        it = pad_outputs.emplace(pad_pads, pad_node(m, base + kind + suffix, pad_pads, nodes)).first;
      }
      input = it->second;
    }
    // With s == 1 the single Conv takes the node's place: its name (if any) and its output.
    const bool last = s == 1 && sx == 1;
    if (layout == PhaseLayout::kNearest) {
      const std::string conv_name = names_.fresh(base + "_phase");
      const std::string output = names_.fresh(conv_name + "_out");
      std::vector<std::string> inputs{input, *weight};
      if (!bias.empty()) inputs.push_back(bias);
      nodes.push_back(conv_node(m.one_d, conv_name, std::move(inputs), output, m.groups(), kernel, conv_pads));
      add_value_info(m, output, m.outputs(), growth);
      nodes.push_back(nearest_resize(m, base, output, s, sx));
      return nodes;
    }
    const std::string conv_name = last && !m.name.empty() ? m.name : names_.fresh(base + "_phase" + suffix);
    const std::string output = last ? m.output : names_.fresh(conv_name + "_out");
    std::vector<std::string> inputs{input, *weight};
    if (!bias.empty()) inputs.push_back(bias);
    nodes.push_back(conv_node(m.one_d, conv_name, std::move(inputs), output, m.groups(), kernel, conv_pads, dilations));
    if (!last) {
      add_value_info(m, output, m.outputs(), growth);
      phase_outputs.push_back(output);
    }
  }
  if (s == 1 && sx == 1) return nodes;
  if (layout == PhaseLayout::kInterleave) {
    interleave(m, base, phase_outputs, growth, nodes);
    return nodes;
  }

  concat_join(m, base, phase_outputs, growth, layout, nodes);
  return nodes;
}

}  // namespace dwdeconv::rewrite
