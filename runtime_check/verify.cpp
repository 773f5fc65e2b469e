#include "runtime_check/verify.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "internal.h"
#include "onnx_io/attributes.h"
#include "onnx_io/shapes.h"
#include "runtime_check/executor.h"
#include "runtime_check/graph_match.h"
#include "runtime_check/tensor_io.h"

namespace dwdeconv::runtime_check {
namespace {

core::Error cannot_verify(const std::string& message) { return core::cannot_verify(message); }

bool is_deconv(const onnx::NodeProto& node) {
  return node.op_type() == "ConvTranspose" && (node.domain().empty() || node.domain() == "ai.onnx");
}

core::Error usage(const std::string& message) { return {core::ErrorKind::kUsage, message}; }

// The upsamplers `rewritten` replaced: the rewriter's record when the caller has it, else what matching the graphs
// finds. With a record, `disagreement` says where the graphs do not confirm it ("" when they do).
std::vector<Replacement> replaced_upsamplers(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                             const VerifyOptions& options, std::string* disagreement = nullptr) {
  auto found = find_replacements(original, rewritten);
  if (!options.regions) return found;
  auto recorded = replacements_from_record(original, *options.regions);
  if (disagreement != nullptr) *disagreement = record_difference(recorded, found);
  return recorded;
}

// --input names a graph input; --input-shape a graph input, or in per-node mode the input of a main-graph
// ConvTranspose or of an upsampler `rewritten` replaced.
core::Status check_verify_inputs(const onnx::ModelProto& model, const onnx::ModelProto& rewritten, const VerifyOptions& options) {
  std::set<std::string> deconv_inputs;
  for (const auto& node : model.graph().node()) {
    if (is_deconv(node) && node.input_size() > 0) deconv_inputs.insert(node.input(0));
  }
  if (!options.input_shapes.empty()) {
    for (const auto& r : replaced_upsamplers(model, rewritten, options)) {
      if (!r.input.empty()) deconv_inputs.insert(r.input);
    }
  }
  RC_CHECK(check_given_inputs(model, options.inputs, options.input_shapes, deconv_inputs));
  // A non-finite input makes whole-model mode fall back to per-node mode, which runs on random inputs: what was given
  // would be dropped, so it is refused here instead.
  for (const auto& given : options.inputs) {
    for (int64_t k = 0; given.tensor.is_float() && k < given.tensor.numel(); ++k) {
      if (const double x = given.tensor.get(k); !std::isfinite(x)) {
        return usage("--input " + given.name + ": element " + std::to_string(k) + " is " +
                     (std::isnan(x) ? "NaN"
                      : x > 0       ? "inf"
                                    : "-inf") +
                     "; " + kNonFiniteCaveat + ": give finite inputs");
      }
    }
  }
  return core::Ok{};
}

core::Result<VerifyResult> whole_model(const onnx::ModelProto& original, const onnx::ModelProto& rewritten, const VerifyOptions& options,
                                       std::string& why_not) {
  ExecutorOptions eo;
  eo.input_shapes = options.input_shapes;
  eo.inputs = options.inputs;
  eo.seed = options.seed;
  eo.threads = options.threads;
  // Graph inputs too large to hold make both models unrunnable, on their own or per node: an error, not a
  // reason to fall back to per-node mode.
  auto shapes = options.input_shapes;
  for (const auto& given : options.inputs) shapes[given.name] = given.tensor.dims;
  for (const auto* model : {&original, &rewritten}) {
    if (auto sized = check_input_sizes(*model, shapes); !sized) return sized.error();
  }
  if (options.progress) options.progress("verify: running the original model");
  // One model at a time: the original's outputs are kept and its executor released before the rewritten one is
  // created, so the two arenas are never held at once. Creating an executor runs its model on the creation inputs,
  // and those outputs are the ones compared: running it again would only repeat that work.
  std::string original_placement;
  std::vector<NamedTensor> ya;
  size_t original_runs = 0;
  {
    auto a = Executor::create(original, eo);
    if (!a) {
      why_not = "the original model cannot run whole: " + a.error().message;
      return a.error();
    }
    if (const auto& bad = a->first_non_finite()) {
      why_not = "the original model cannot be compared whole: " + bad->describe() + "; " + kNonFiniteCaveat;
      return cannot_verify(why_not);
    }
    eo.inputs = a->creation_inputs();  // the very same inputs for both
    ya = a->last_outputs();
    original_placement = a->placement_summary();
    original_runs = a->runs();
  }
  if (options.progress) options.progress("verify: running the rewritten model");
  auto b = Executor::create(rewritten, eo);
  if (!b) {
    why_not = "the rewritten model cannot run whole: " + b.error().message;
    return b.error();
  }
  if (const auto& bad = b->first_non_finite()) {
    why_not = "the rewritten model cannot be compared whole: " + bad->describe() + "; " + kNonFiniteCaveat;
    return cannot_verify(why_not);
  }
  VerifyResult r;
  r.mode = VerifyMode::kWholeModel;
  r.placement = "original: " + original_placement + "\nrewritten: " + b->placement_summary();
  r.original_runs = original_runs;
  r.rewritten_runs = b->runs();
  r.xnnpack_ops = b->count(Placement::kXnnpack);
  r.reference_ops = b->count(Placement::kReference);
  const ComparisonReport cmp = judge_outputs(b->last_outputs(), ya, options.tolerances);  // at fp32
  r.outputs = cmp.outputs;
  r.passed = cmp.passed;
  return r;
}

// What to pass when the shape of `tensor` (a region's input) is unknown: the graph inputs whose dims are not all
// known, each as --input-shape NAME=DIMS with its symbolic dims named, since fixing those is what lets shape
// inference reach `tensor`; or `tensor` itself when every graph input is known (inference stops somewhere between).
std::string unknown_shape_hint(const onnx::ModelProto& model, const std::string& tensor, const VerifyOptions& options) {
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::vector<std::string> hints;
  for (const auto& input : model.graph().input()) {
    if (initializers.count(input.name()) != 0 || options.input_shapes.count(input.name()) != 0) continue;
    if (!input.type().has_tensor_type()) continue;
    const auto& type = input.type().tensor_type();
    if (type.has_shape() && !onnx_io::known_dims(input.type()).empty()) continue;
    std::string dims;
    if (!type.has_shape()) {
      dims = "NxCxHxW";
    } else {
      for (int axis = 0; axis < type.shape().dim_size(); ++axis) {
        const auto& d = type.shape().dim(axis);
        dims += (axis ? "x" : "") + (d.has_dim_value()        ? std::to_string(d.dim_value())
                                     : !d.dim_param().empty() ? "<" + d.dim_param() + ">"
                                                              : "<?>");
      }
    }
    hints.push_back("--input-shape " + input.name() + "=" + dims);
  }
  if (hints.empty()) return "pass --input-shape " + tensor + "=NxCxHxW (its dims)";
  std::string text = "give the graph input's dims, ";
  for (size_t k = 0; k < hints.size(); ++k) text += (k ? " " : "") + hints[k];
  return text + " (with the numbers it runs at)";
}

// The input shape of a node for per-node mode: given by name, or inferred with the graph inputs' dims fixed (empty
// when neither says). A given shape fixes the dims inference does not know, as for a graph input: one contradicting
// a known dim would check the upsampler on an input it never gets (a usage error).
core::Result<std::vector<int64_t>> node_input_shape(const std::string& input, const onnx_io::ScopedTypes& types,
                                                    const VerifyOptions& options) {
  const auto* type = types.find(0, input);  // nodes of the main graph
  const auto given = options.input_shapes.find(input);
  if (given == options.input_shapes.end()) {
    std::vector<int64_t> dims = type != nullptr ? onnx_io::known_dims(*type) : std::vector<int64_t>{};
    if (const auto computed = options.region_shapes.find(input); dims.empty() && computed != options.region_shapes.end()) {
      dims = computed->second;
    }
    return dims;
  }
  const std::vector<int64_t>& dims = given->second;
  if (type == nullptr || !type->tensor_type().has_shape()) return dims;
  const auto& shape = type->tensor_type().shape();
  bool agrees = shape.dim_size() == static_cast<int>(dims.size());
  std::string inferred;
  for (int axis = 0; axis < shape.dim_size(); ++axis) {
    const auto& d = shape.dim(axis);
    inferred += (axis ? "x" : "") + (d.has_dim_value() ? std::to_string(d.dim_value()) : std::string("?"));
    agrees = agrees && (!d.has_dim_value() || d.dim_value() == dims[static_cast<size_t>(axis)]);
  }
  if (!agrees) {
    return usage("--input-shape " + input + "=" + format_dims(dims) + ": shape inference gives '" + input + "' the dims " + inferred +
                 " (--input-shape fixes unknown dims only)");
  }
  return dims;
}

core::Result<VerifyResult> per_node(const onnx::ModelProto& original, const onnx::ModelProto& rewritten, const VerifyOptions& options,
                                    const std::string& reason) {
  std::string disagreement;
  const auto nodes = replaced_upsamplers(original, rewritten, options, &disagreement);
  if (!disagreement.empty()) {
    VerifyResult r;
    r.mode = VerifyMode::kPerNode;
    r.mode_reason = reason;
    r.difference = disagreement;
    return r;
  }
  if (nodes.empty()) {
    return cannot_verify(reason + "; and no rewritten upsampler of the main graph can be checked on its own");
  }
  // Shape inference with the given graph-input dims fixed, so inner shapes become numbers.
  onnx::ModelProto fixed = original;
  for (auto& input : *fixed.mutable_graph()->mutable_input()) {
    auto it = options.input_shapes.find(input.name());
    if (it == options.input_shapes.end()) continue;
    auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (int64_t d : it->second) shape->add_dim()->set_dim_value(d);
  }
  const auto types = onnx_io::infer_types(fixed);
  // And as the model declares them: which regions' inputs may take other sizes than the one checked.
  const auto model_types = onnx_io::infer_types(original);

  VerifyResult r;
  r.mode = VerifyMode::kPerNode;
  r.mode_reason = reason;
  // Only the replaced upsamplers are checked below, so everything else must be the same in both models.
  r.difference = difference_outside_replacements(original, rewritten, nodes);
  r.passed = r.difference.empty();
  if (!r.passed) return r;
  size_t index = 0;
  for (const auto& node : nodes) {
    ++index;
    RC_ASSIGN(const auto shape, node_input_shape(node.input, types, options));
    if (shape.empty()) {
      return cannot_verify(reason + "; and the shape of '" + node.input + "', the input of the upsampler that ends at " + node.label +
                           ", is unknown: " + unknown_shape_hint(original, node.input, options));
    }
    const std::string label = "input '" + node.input + "' of " + node.label + " [" + format_dims(shape) + "]";
    if (auto sized = checked_element_count(shape, storage_bytes(onnx::TensorProto::FLOAT), label); !sized) return sized.error();
    if (options.progress) {
      options.progress("verify: node " + std::to_string(index) + "/" + std::to_string(nodes.size()) + " '" + node.node->name() + "'");
    }
    auto v = verify_node(original, rewritten, node.output, node.input, shape, model_types, options.seed, options.tolerances);
    if (!v) return cannot_verify(reason + "; and " + v.error().message);
    // A region whose output has no element (a 0 dim) or none finite checked nothing: per node, every upsampler must
    // have been compared on something, or it is not verified.
    if (v->passed && (v->rewritten.compared == 0 || v->original.compared == 0)) {
      v->passed = false;
      v->rewritten.passed = false;
      v->rewritten.message = "nothing compared: its output holds no finite element at input [" + format_dims(shape) + "]";
    }
    OutputComparison worst = v->rewritten.max_abs_error >= v->original.max_abs_error ? v->rewritten : v->original;
    if (!v->passed && worst.passed) worst = v->rewritten;
    worst.name = node.output;
    worst.passed = v->passed;
    r.outputs.push_back(worst);
    r.passed = r.passed && v->passed;
    r.placement += v->rewritten_placement + "\n";
    r.nodes.push_back(std::move(*v));
  }
  for (const auto& n : r.nodes) {
    r.xnnpack_ops += n.rewritten_xnnpack_ops;
    r.reference_ops += n.rewritten_reference_ops;
  }
  return r;
}

}  // namespace

core::Status check_given_inputs(const onnx::ModelProto& model, const std::vector<NamedTensor>& given_inputs,
                                const std::map<std::string, std::vector<int64_t>>& input_shapes,
                                const std::set<std::string>& inner_inputs) {
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  std::map<std::string, const onnx::ValueInfoProto*> inputs;
  std::string listed;
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name()) != 0) continue;
    inputs[in.name()] = &in;
    listed += (listed.empty() ? "" : ", ") + in.name();
  }
  // Why `dims` do not fit input `name` as the model declares it ("" when they do): another rank, or another value
  // on an axis declared static. Both --input-shape and --input files answer to it.
  const auto misfit = [&](const std::string& name, const std::vector<int64_t>& dims) -> std::string {
    const auto& type = inputs.at(name)->type().tensor_type();
    if (!type.has_shape()) return "";
    if (type.shape().dim_size() != static_cast<int>(dims.size())) {
      return "input '" + name + "' is declared with " + std::to_string(type.shape().dim_size()) + " dims, not " +
             std::to_string(dims.size());
    }
    for (int axis = 0; axis < type.shape().dim_size(); ++axis) {
      const auto& d = type.shape().dim(axis);
      if (d.has_dim_value() && d.dim_value() != dims[static_cast<size_t>(axis)]) {
        return "axis " + std::to_string(axis) + " of input '" + name + "' is declared " + std::to_string(d.dim_value()) + ", not " +
               std::to_string(dims[static_cast<size_t>(axis)]);
      }
    }
    return "";
  };
  std::set<std::string> given_names;
  for (const auto& given : given_inputs) {
    if (inputs.count(given.name) == 0) {
      return usage("--input '" + given.name + "' names no graph input of the model (its inputs: " + listed + ")");
    }
    if (!given_names.insert(given.name).second) return usage("--input '" + given.name + "' is given twice");
    // A file that does not fit its input would make the model unrunnable whole, and verification would fall back
    // to per-node mode on random inputs: what the user gave would be dropped without a word.
    const std::string what = "--input " + given.name + ": the file holds " + describe_tensor(given.tensor) + ", but ";
    if (std::string why = misfit(given.name, given.tensor.dims); !why.empty()) return usage(what + why);
    const int32_t declared = inputs.at(given.name)->type().tensor_type().elem_type();
    if (declared != onnx::TensorProto::UNDEFINED && is_float_type(declared) != given.tensor.is_float()) {
      return usage(what + "input '" + given.name + "' is declared " + onnx_io::data_type_name(declared));
    }
    // Integers of another width are fed in the declared type: each value must fit it, or the model is fed another value.
    if (is_integer_type(declared) && !given.tensor.is_float() && given.tensor.dtype != declared) {
      for (size_t k = 0; k < given.tensor.i.size(); ++k) {
        if (const int64_t v = given.tensor.i[k]; wrap_to_type(v, declared) != v) {
          return usage(what + "element " + std::to_string(k) + " (" + std::to_string(v) + ") does not fit input '" + given.name +
                       "', declared " + onnx_io::data_type_name(declared));
        }
      }
    }
  }
  for (const auto& [name, dims] : input_shapes) {
    const auto it = inputs.find(name);
    if (it == inputs.end()) {
      if (inner_inputs.count(name) != 0) continue;
      if (inner_inputs.empty()) return usage("--input-shape '" + name + "' names no graph input of the model (its inputs: " + listed + ")");
      return usage("--input-shape '" + name + "' names neither a graph input of the model (" + listed +
                   ") nor the input of a ConvTranspose or replaced upsampler in its main graph");
    }
    std::string given = "--input-shape " + name + "=";
    for (size_t k = 0; k < dims.size(); ++k) given += (k ? "x" : "") + std::to_string(dims[k]);
    if (std::string why = misfit(name, dims); !why.empty()) {
      const bool static_axis = why.rfind("axis ", 0) == 0;
      return usage(given + ": " + why + (static_axis ? " (--input-shape fixes symbolic dims only)" : ""));
    }
  }
  return core::Ok{};
}

const char* verify_mode_name(VerifyMode mode) {
  switch (mode) {
    case VerifyMode::kWholeModel: return "whole-model";
    case VerifyMode::kPerNode: return "per-node";
    case VerifyMode::kNone: return "none";
  }
  return "";
}

double VerifyResult::max_abs_error() const {
  double worst = 0;
  for (const auto& o : outputs) worst = std::max(worst, o.max_abs_error);
  return worst;
}

std::string VerifyResult::summary() const {
  std::ostringstream s;
  s << "verify (" << verify_mode_name(mode) << ")";
  if (!mode_reason.empty()) s << ": " << mode_reason;
  s << "\n";
  for (const auto& o : outputs) {
    s << "  " << detail::printable_name(o.name) << ": max abs " << o.max_abs_error << ", max rel " << o.max_rel_error << " (scale "
      << o.scale << ")";
    if (o.quant_steps >= 0) s << ", " << o.quant_steps << " quantisation steps of " << o.quant_step;
    s << ": " << (o.passed ? "pass" : "FAIL") << (o.message.empty() ? "" : " (" + o.message + ")") << "\n";
  }
  for (const auto& n : nodes) s << n.summary() << "\n";
  if (!difference.empty()) {
    s << "  the models differ " << (mode == VerifyMode::kPerNode ? "outside the rewritten nodes" : "in their graph inputs or outputs")
      << ": " << difference << "\n";
  }
  s << (passed ? "verification passed" : "verification FAILED");
  return s.str();
}

core::Status check_verifiable_inputs(const onnx::ModelProto& model, const std::vector<NamedTensor>& given) {
  std::set<std::string> initializers;
  for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name()) != 0 || !in.type().has_tensor_type()) continue;
    const int32_t type = in.type().tensor_type().elem_type();
    const std::string what = "graph input '" + core::printable(in.name()) + "' is " + onnx_io::data_type_name(type);
    if (type == onnx::TensorProto::DOUBLE) {
      // As for every float64 model (the executor holds float64 values in float32): it cannot be verified, exit 1.
      return cannot_verify(what +
                           ": inputs are held in float32 here, so a float64 model cannot be fed "
                           "its exact values (an --input file of float64 would be rounded); float64 models are not verified");
    }
    const bool named = std::any_of(given.begin(), given.end(), [&in](const NamedTensor& t) { return t.name == in.name(); });
    if (is_integer_type(type) && !named) {
      return usage(what +
                   ": seeded random values are made for float inputs only, and a constant would check one case of "
                   "the model (one If branch, one index); give its values with --input " +
                   core::printable(in.name()) + "=FILE");
    }
  }
  return core::Ok{};
}

VerifyResult interface_mismatch(const std::string& difference) {
  VerifyResult r;
  r.mode = VerifyMode::kWholeModel;
  r.mode_reason = "the models' graph inputs or outputs differ: nothing was run";
  r.difference = difference;
  r.passed = false;
  return r;
}

core::Result<VerifyResult> verify_models(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                         const VerifyOptions& options) {
  // Outputs are compared by name: the same values under other input names or types are another model to its
  // callers. Judged before anything runs, as on every runtime.
  if (std::string d = interface_difference(original, rewritten); !d.empty()) return interface_mismatch(d);
  RC_CHECK(check_verifiable_inputs(original, options.inputs));
  if (auto given = check_verify_inputs(original, rewritten, options); !given) return given.error();
  std::string why_not;
  auto whole = whole_model(original, rewritten, options, why_not);
  if (whole) return whole;
  if (why_not.empty()) return whole.error();  // both ran but a run failed: nothing to fall back to
  return per_node(original, rewritten, options, why_not);
}

}  // namespace dwdeconv::runtime_check
