// Form `upsample1d`: a 1-D depthwise ConvTranspose with the pads and crops around it, as BigVGAN's anti-aliased
// UpSample1d and Mimi's ConvTrUpsample1d export (see its row below). The crop, the gain and the edge padding fold into
// the phases, which then compute only the samples kept.
#include <cmath>
#include <set>

#include "core/geometry.h"
#include "core/polyphase.h"
#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "recogniser_parts.h"
#include "rewrite/forms.h"

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

// The one constant float factor of the gain Mul's operand `name`, or why it does not fold: a bias (which the gain would
// scale too, `has_bias`), a factor that broadcasts past [N, C, L], or one that is not finite.
core::Result<double> gain_factor(ConstEvaluator& eval, const std::string& name, const GraphScope& scope, bool has_bias) {
  auto g = eval.evaluate_weight(name, scope);
  if (!g) return declined("Mul factor not constant: " + g.error().message);
  if (g->size() != 1 || g->is_integer()) return declined("Mul factor is not one float");
  // A factor of rank 4 or more would broadcast the product to that rank: no longer [N, C, L].
  if (g->dims.size() > 3) return declined("Mul factor has rank " + std::to_string(g->dims.size()) + ", more than the signal's 3");
  const double factor = g->at(0);
  // inf x 0 is NaN where the ConvTranspose computed 0 and the Mul made it NaN, but not where a phase's weight holds the
  // inf: only a finite factor folds.
  if (!std::isfinite(factor)) return declined("Mul factor " + parts::number(factor) + " is not finite");
  if (has_bias) return declined("a gain after a ConvTranspose with a bias");
  return factor;
}

// `d`'s weight times `factor`, as a derived weight stored where the original is; declines when a product overflows the
// element type.
core::Status scale_weight(DeconvMatch& d, double factor) {
  auto values = onnx_io::to_doubles(*d.weight.tensor);
  if (!values) return values.error();
  for (double& v : *values) v *= factor;
  if (auto why = parts::derived_overflow(*values, d.weight.tensor->data_type()); !why.empty()) return declined(why);
  auto derived = std::make_shared<onnx::TensorProto>(
      onnx_io::make_tensor(d.weight.name, d.weight.tensor->data_type(), onnx_io::dims_of(*d.weight.tensor), *values, true));
  d.weight.tensor = derived.get();
  d.derived_weight = std::move(derived);
  return core::Ok{};
}

// Why the phases of `d` cannot pad x with its edge after an edge Pad of `edge` samples, or "": each phase reads x padded
// by its own pads; those samples are x's edge only within the Pad's reach (past it the ConvTranspose read zeros), and a
// phase that starts inside x would need an edge Pad that crops.
std::string edge_reach(const DeconvMatch& d, const std::array<int64_t, 2>& edge) {
  for (const auto& phase : core::plan_deconv(d.y, d.x).phases) {
    if (phase.x.pad_begin > edge[0] || phase.x.pad_end > edge[1]) {
      return "a phase would pad x by " + join({phase.x.pad_begin, phase.x.pad_end}) + " samples, past the edge Pad's " +
             join({edge[0], edge[1]});
    }
  }
  return "";
}

std::optional<FormSelection> select_upsample1d(const MatchContext& context, const onnx::NodeProto& slice, const GraphScope& scope) {
  const onnx_io::ScopedTypes& types = context.types;
  ConstEvaluator& eval = context.eval;
  // Cheap and selective first (the row's root op and arity are checked already): a Slice reading a ConvTranspose, or a Mul of one.
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
  MatchOutcome deconv = match_deconv(*ct, scope, context.ir_version, types, false, &eval);
  // Only a 1-D ConvTranspose the matcher takes starts this form; any other has its own row, saying why.
  if (!deconv.match || !deconv.match->one_d) return std::nullopt;

  FormSelection out;
  out.summary = deconv.summary;
  out.summary.form = Form::kUpsample1d;
  DeconvMatch d = std::move(*deconv.match);

  // The ConvTranspose's output (and the gain's) must feed only the next node of the form, or nothing is saved.
  if (use_count(context.uses, ct->output(0)) != 1) return out.fail(declined("ConvTranspose output has another reader"));
  if (gain != nullptr && use_count(context.uses, gain->output(0)) != 1) return out.fail(declined("Mul output has another reader"));

  // The crop: the CT's output length (when a positive end needs it) comes from shape inference.
  auto crop = last_axis_crop(slice, scope, eval, parts::known_dim(types, scope, ct->output(0), 2));
  if (!crop) return out.fail(crop.error());

  // The gain: one constant factor, folded into the weight (and the bias, which it scales too).
  double factor = 1.0;
  if (gain != nullptr) {
    auto g = gain_factor(eval, gain->input(gain_operand), scope, !d.bias.empty());
    if (!g) return out.fail(g.error());
    factor = *g;
  }

  // The Pad before it: constant zeros shift the ConvTranspose's pads; edge samples pad each phase with x's edge.
  const onnx::NodeProto* pad = producer(scope, ct->input(0), "Pad");
  std::array<int64_t, 2> edge{0, 0};
  std::string mode = "constant";
  if (pad != nullptr && use_count(context.uses, pad->output(0)) == 1 && pad->input_size() >= 1) {
    auto p = parts::spatial_pad(*pad, scope, eval, /*one_d=*/true);
    if (!p) return out.fail(p.error());
    if (p->mode != "constant" && p->mode != "edge") return out.fail(declined("Pad mode " + p->mode + " before a ConvTranspose"));
    mode = p->mode;
    edge = {p->pads[1], p->pads[3]};
  } else {
    pad = nullptr;
  }
  // On x: a Pad of e samples before a stride-s ConvTranspose is s*e output samples more, which the pads then crop.
  const int64_t s = d.x.stride;
  if (s > parts::kMaxPad || std::max(edge[0], edge[1]) > parts::kMaxPad / s) {
    return out.fail(
        declined("the Pad of " + join({edge[0], edge[1]}) + " samples before stride " + std::to_string(s) + " is out of range"));
  }
  const int64_t begin = d.x.pad_begin + (*crop)[0] - s * edge[0], end = d.x.pad_end + (*crop)[1] - s * edge[1];
  if (begin < 0 || end < 0) {
    return out.fail(declined("the Pad of " + join({edge[0], edge[1]}) + " samples reaches past the crop of " +
                             join({(*crop)[0], (*crop)[1]}) + ": the output keeps padded samples"));
  }
  d.x.pad_begin = begin;
  d.x.pad_end = end;
  out.summary.pads = std::array<int64_t, 4>{0, begin, 0, end};
  // The phases interleave into s*(L + q) samples: a crop that leaves another length (2L-1) has no phase form.
  if (!core::plannable(d.x)) {
    return out.fail(declined("not a clean upscale: with the crop folded the output is " + core::describe_output_length(d.x, "L") +
                             ", not a whole number of strides"));
  }
  if (mode == "edge") {
    if (auto why = edge_reach(d, edge); !why.empty()) return out.fail(declined(why));
    d.edge_padding = true;
  }

  // The folded weight: the ConvTranspose's, times the gain, stored where it is.
  if (factor != 1.0) {
    if (auto scaled = scale_weight(d, factor); !scaled) return out.fail(scaled.error());
  }

  // The region: x (the Pad's input, or the ConvTranspose's) to the Slice's output, under the Slice's name.
  const std::string& x = pad != nullptr ? pad->input(0) : ct->input(0);
  d.node = &slice;
  d.name = slice.name();
  d.output = slice.output(0);
  d.input = x;
  d.input_type = parts::one_d_type(types, scope, x);  // as the matcher reads a 1-D node: [N, C, 1, L]

  std::vector<const onnx::NodeProto*> chain{ct};
  if (pad != nullptr) chain.push_back(pad);
  if (gain != nullptr) chain.push_back(gain);
  return out.succeed(std::move(d), parts::replaced_tensors(scope, x, chain, {slice.input().begin() + 1, slice.input().end()}), ct);
}

}  // namespace

// Form `upsample1d` (BigVGAN's anti-aliased UpSample1d, Mimi's ConvTrUpsample1d):
//   Before: [p = Pad(x, e)]          optional: edge or constant 0, on the length axis only (e_b + e_e samples)
//            u = ConvTranspose(p|x)  1-D, depthwise, stride s, as match_deconv takes it
//           [g = Mul(u, a)]          optional: one constant factor (no bias on the ConvTranspose)
//            y = Slice(u|g)          the length axis only, step 1: a crop of c_b samples at the begin, c_e at the end
//   After:   y = ConvTranspose(x, a*w) with pads P + c - s*e per end, each phase padding x with its edge (edge Pad)
//            when every phase's pads are within the Pad's e: the phases compute only the samples kept.
// Starts from the Slice; the match's `absorbs` is the ConvTranspose.
const FormRow& upsample1d_form() {
  static const FormRow row = [] {
    FormRow row;
    row.form = Form::kUpsample1d;
    row.name = "upsample1d";
    row.described =
        "an edge or zero Pad, a 1-D depthwise ConvTranspose, a gain and a crop, folded into phases that compute only the samples kept "
        "(BigVGAN's UpSample1d, Mimi's causal crop)";
    // Its ops: the chain, the weight's Identity, and the Slice's bounds.
    row.ops = {"Pad", "ConvTranspose", "Mul", "Slice", "Identity", "Constant"};
    row.recognise = select_upsample1d;
    row.root_op = "Slice";
    row.root_min_inputs = 1;
    row.absorbs_conv_transpose = true;
    row.row_named_after_absorbed = true;
    return row;
  }();
  return row;
}

}  // namespace dwdeconv::rewrite
