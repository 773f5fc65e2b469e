// Form `upsample1d`: a 1-D depthwise ConvTranspose with the pads and crops around it, as BigVGAN's anti-aliased
// UpSample1d and Mimi's ConvTrUpsample1d export (see recognisers.h). The crop, the gain and the edge padding fold into
// the phases, which then compute only the samples kept.
#include <cmath>
#include <set>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "recogniser_parts.h"
#include "rewrite/recognisers.h"

namespace dwdeconv::rewrite {
namespace {

using core::declined;
using parts::join;
using parts::producer;
using parts::use_count;

// The Slice's crop of the last axis of a rank-3 tensor of (when known) `length` samples: [begin, end] samples cut, or
// why it is not one (another axis, a step, values that are not constant). nullopt: not a Slice this form reads.
core::Result<std::array<int64_t, 2>> last_axis_crop(const onnx::NodeProto& slice, const GraphScope& scope, ConstEvaluator& eval,
                                                    std::optional<int64_t> length) {
  if (slice.input_size() < 3) return declined("Slice with starts and ends as attributes (before opset 10)");
  const auto read = [&](int k, const char* what) -> core::Result<std::vector<int64_t>> {
    auto v = eval.evaluate_flagged(slice.input(k), scope);
    if (!v) return declined(std::string("Slice ") + what + " not constant: " + v.error().message);
    if (!v->is_integer() || !v->inexact.empty()) return declined(std::string("Slice ") + what + " are not exact integers");
    return v->ints;
  };
  auto starts = read(1, "starts");
  if (!starts) return starts.error();
  auto ends = read(2, "ends");
  if (!ends) return ends.error();
  std::vector<int64_t> axes{0};
  if (slice.input_size() > 3 && !slice.input(3).empty()) {
    auto a = read(3, "axes");
    if (!a) return a.error();
    axes = *a;
  } else {
    return declined("Slice without axes slices the batch axis first");
  }
  if (slice.input_size() > 4 && !slice.input(4).empty()) {
    auto steps = read(4, "steps");
    if (!steps) return steps.error();
    for (int64_t step : *steps) {
      if (step != 1) return declined("Slice step " + std::to_string(step));
    }
  }
  if (starts->size() != 1 || ends->size() != 1 || axes.size() != 1 || (axes[0] != 2 && axes[0] != -1)) {
    return declined("Slice of axes " + join(axes) + ", not of the last axis alone");
  }
  const int64_t start = (*starts)[0], end = (*ends)[0];
  if (start < 0) return declined("Slice start " + std::to_string(start) + " counts from the end");
  // An end at or past the length (INT64_MAX, as exporters write "to the end") cuts nothing; a negative one counts back.
  int64_t end_cut = 0;
  if (end >= (int64_t{1} << 40)) {
    end_cut = 0;  // INT64_MAX and its kin: to the end, whatever the length
  } else if (end < 0) {
    if (end < -(int64_t{1} << 40)) return declined("Slice end " + std::to_string(end) + " is out of range");
    end_cut = -end;
  } else if (!length || end < *length) {
    if (!length) return declined("Slice end " + std::to_string(end) + " with a length not known");
    end_cut = *length - end;
  }
  if (start > parts::kMaxPad || end_cut > parts::kMaxPad) return declined("Slice crop out of range");
  return std::array<int64_t, 2>{start, end_cut};
}

}  // namespace

std::optional<UpsamplerOutcome> match_upsample1d(const onnx::NodeProto& slice, const GraphScope& scope, int64_t ir_version,
                                                 const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                 const std::map<std::string, int>& uses) {
  // Cheap and selective first: a Slice reading a ConvTranspose, or a Mul of one.
  if (slice.op_type() != "Slice" || !parts::default_domain(slice) || slice.input_size() < 1 || slice.output_size() != 1) {
    return std::nullopt;
  }
  const onnx::NodeProto* gain = producer(scope, slice.input(0), "Mul");
  const onnx::NodeProto* ct = nullptr;
  int gain_operand = -1;  // the Mul's constant input
  if (gain != nullptr && gain->input_size() == 2) {
    for (int k = 0; k < 2 && ct == nullptr; ++k) {
      if ((ct = producer(scope, gain->input(k), "ConvTranspose")) != nullptr) gain_operand = 1 - k;
    }
  } else {
    gain = nullptr;
    ct = producer(scope, slice.input(0), "ConvTranspose");
  }
  if (ct == nullptr || !parts::default_domain(*ct) || ct->input_size() < 2) return std::nullopt;
  MatchOutcome deconv = match_deconv(*ct, scope, ir_version, types, false, &eval);
  // Only a 1-D ConvTranspose the matcher takes starts this form; any other has its own row, saying why.
  if (!deconv.match || !deconv.match->one_d) return std::nullopt;

  UpsamplerOutcome out;
  out.summary = deconv.summary;
  out.summary.form = Form::kUpsample1d;
  auto fail = [&out](core::Error e) -> std::optional<UpsamplerOutcome> {
    out.match = std::move(e);
    return out;
  };
  DeconvMatch d = std::move(*deconv.match);

  // The ConvTranspose's output (and the gain's) must feed only the next node of the form, or nothing is saved.
  if (use_count(uses, ct->output(0)) != 1) return fail(declined("ConvTranspose output has another reader"));
  if (gain != nullptr && use_count(uses, gain->output(0)) != 1) return fail(declined("Mul output has another reader"));

  // The crop: the CT's output length (when a positive end needs it) comes from shape inference.
  auto crop = last_axis_crop(slice, scope, eval, parts::known_dim(types, scope, ct->output(0), 2));
  if (!crop) return fail(crop.error());

  // The gain: one constant factor, folded into the weight (and the bias, which it scales too).
  double factor = 1.0;
  if (gain != nullptr) {
    auto g = eval.evaluate_weight(gain->input(gain_operand), scope);
    if (!g) return fail(declined("Mul factor not constant: " + g.error().message));
    if (g->size() != 1 || g->is_integer()) return fail(declined("Mul factor is not one float"));
    // A factor of rank 4 or more would broadcast the product to that rank: no longer [N, C, L].
    if (g->dims.size() > 3) return fail(declined("Mul factor has rank " + std::to_string(g->dims.size()) + ", more than the signal's 3"));
    factor = g->at(0);
    // inf x 0 is NaN where the ConvTranspose computed 0 and the Mul made it NaN, but not where a phase's weight holds the
    // inf: only a finite factor folds.
    if (!std::isfinite(factor)) return fail(declined("Mul factor " + parts::number(factor) + " is not finite"));
    if (!d.bias.empty()) return fail(declined("a gain after a ConvTranspose with a bias"));
  }

  // The Pad before it: constant zeros shift the ConvTranspose's pads; edge samples pad each phase with x's edge.
  const onnx::NodeProto* pad = producer(scope, ct->input(0), "Pad");
  std::array<int64_t, 2> edge{0, 0};
  std::string mode = "constant";
  if (pad != nullptr && use_count(uses, pad->output(0)) == 1 && pad->input_size() >= 1) {
    auto p = parts::spatial_pad(*pad, scope, eval, /*one_d=*/true);
    if (!p) return fail(p.error());
    if (p->mode != "constant" && p->mode != "edge") return fail(declined("Pad mode " + p->mode + " before a ConvTranspose"));
    mode = p->mode;
    edge = {p->pads[1], p->pads[3]};
  } else {
    pad = nullptr;
  }
  // On x: a Pad of e samples before a stride-s ConvTranspose is s*e output samples more, which the pads then crop.
  const int64_t s = d.x.stride;
  if (s > parts::kMaxPad || std::max(edge[0], edge[1]) > parts::kMaxPad / s) {
    return fail(declined("the Pad of " + join({edge[0], edge[1]}) + " samples before stride " + std::to_string(s) + " is out of range"));
  }
  const int64_t begin = d.x.pad_begin + (*crop)[0] - s * edge[0], end = d.x.pad_end + (*crop)[1] - s * edge[1];
  if (begin < 0 || end < 0) {
    return fail(declined("the Pad of " + join({edge[0], edge[1]}) + " samples reaches past the crop of " + join({(*crop)[0], (*crop)[1]}) +
                         ": the output keeps padded samples"));
  }
  d.x.pad_begin = begin;
  d.x.pad_end = end;
  out.summary.pads = std::array<int64_t, 4>{0, begin, 0, end};
  if (mode == "edge") {
    // Each phase reads x padded by its own pads; those samples are x's edge only within the Pad's reach (past it the
    // ConvTranspose read zeros), and a phase that starts inside x would need an edge Pad that crops.
    for (const auto& phase : core::plan_deconv(d.y, d.x).phases) {
      if (phase.x.pad_begin > edge[0] || phase.x.pad_end > edge[1]) {
        return fail(declined("a phase would pad x by " + join({phase.x.pad_begin, phase.x.pad_end}) + " samples, past the edge Pad's " +
                             join({edge[0], edge[1]})));
      }
    }
    d.edge_padding = true;
  }

  // The folded weight: the ConvTranspose's, times the gain, stored where it is.
  if (factor != 1.0) {
    auto values = onnx_io::to_doubles(*d.weight.tensor);
    if (!values) return fail(values.error());
    for (double& v : *values) v *= factor;
    if (auto why = parts::derived_overflow(*values, d.weight.tensor->data_type()); !why.empty()) return fail(declined(why));
    auto derived = std::make_shared<onnx::TensorProto>(
        onnx_io::make_tensor(d.weight.name, d.weight.tensor->data_type(), onnx_io::dims_of(*d.weight.tensor), *values, true));
    d.weight.tensor = derived.get();
    d.derived_weight = std::move(derived);
  }

  // The region: x (the Pad's input, or the ConvTranspose's) to the Slice's output, under the Slice's name.
  const std::string& x = pad != nullptr ? pad->input(0) : ct->input(0);
  d.node = &slice;
  d.name = slice.name();
  d.output = slice.output(0);
  d.input = x;
  d.input_type = parts::one_d_type(types, scope, x);  // as the matcher reads a 1-D node: [N, C, 1, L]

  UpsamplerMatch m;
  m.deconv = std::move(d);
  m.absorbs = ct;
  std::set<std::pair<size_t, std::string>> seen;
  std::vector<const onnx::NodeProto*> chain{ct};
  if (pad != nullptr) chain.push_back(pad);
  if (gain != nullptr) chain.push_back(gain);
  for (const auto* node : chain) {
    m.replaced.emplace_back(&scope, node->output(0));
    seen.insert({scope.index, node->output(0)});
  }
  for (const auto* node : chain) {
    for (const auto& in : node->input()) parts::collect_upstream(in, scope, x, seen, m.replaced);
  }
  for (int k = 1; k < slice.input_size(); ++k) parts::collect_upstream(slice.input(k), scope, x, seen, m.replaced);
  out.match = std::move(m);
  return out;
}

}  // namespace dwdeconv::rewrite
