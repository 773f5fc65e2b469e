#include "rewrite/shape_propagation.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "onnx_io/attributes.h"
#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"
#include "rewrite/const_eval.h"
#include "rewrite/graph_editor.h"
#include "rewrite/shape_rules.h"

namespace dwdeconv::rewrite {
namespace {

// Inference runs at most: each moves the known shapes past one more chain (MI-GAN's 12 upsamplers take 13).
constexpr int kMaxRounds = 256;
// Nodes inferred over all rounds at most (each run infers the whole skeleton): a large model gets fewer rounds, so
// planning time grows with its size, not with its size x 256.
constexpr int64_t kMaxInferredNodes = int64_t{1} << 22;

int64_t count_nodes(const onnx::GraphProto& g) {
  int64_t n = g.node_size();
  for (const auto& node : g.node()) {
    for (const auto& a : node.attribute()) {
      if (a.has_g()) n += count_nodes(a.g());
      for (const auto& sub : a.graphs()) n += count_nodes(sub);
    }
  }
  return n;
}

// A folded value as a Constant's tensor, in its own type; nullopt for a type not written here.
std::optional<onnx::TensorProto> constant_tensor(const std::string& name, const ConstTensor& v) {
  using onnx::TensorProto;
  switch (v.data_type) {
    case TensorProto::INT64: return onnx_io::make_int64_tensor(name, v.dims, v.ints);
    case TensorProto::FLOAT:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16: return onnx_io::make_tensor(name, v.data_type, v.dims, v.reals, /*raw=*/false);
    case TensorProto::INT32:
    case TensorProto::BOOL: {
      TensorProto t;
      t.set_name(name);
      t.set_data_type(v.data_type);
      for (int64_t d : v.dims) t.add_dims(d);
      for (int64_t x : v.ints) t.add_int32_data(static_cast<int32_t>(x));
      return t;
    }
    default: return std::nullopt;
  }
}

bool holds_subgraph(const onnx::NodeProto& node) {
  return std::any_of(node.attribute().begin(), node.attribute().end(),
                     [](const onnx::AttributeProto& a) { return a.has_g() || a.graphs_size() > 0; });
}

// The domain a node of the skeleton is moved to where the spec's output types replace libonnx's: no schema, so libonnx
// leaves its outputs as the value_info entries set them, and the folder does not evaluate it.
constexpr const char* kSpecTypedDomain = "dwdeconv.spec_typed";

bool known_larger_than(const onnx::TypeProto* type, int64_t limit) {
  if (type == nullptr) return false;
  const auto dims = onnx_io::known_dims(*type);
  if (dims.empty()) return false;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > limit / d)) return true;
    n *= d;
  }
  return n > limit;
}

// The spec's output types of `node` (rewrite/shape_rules.h), its inputs typed and evaluated as `scope` reads them.
std::optional<std::vector<onnx::TypeProto>> spec_types(const onnx::NodeProto& node, const GraphScope& scope,
                                                       const onnx_io::ScopedTypes& types, ConstEvaluator& eval) {
  std::vector<const onnx::TypeProto*> inputs;
  for (const auto& in : node.input()) inputs.push_back(in.empty() ? nullptr : types.find(scope.index, in));
  const ConstantInput constant = [&](int k) -> std::optional<std::vector<int64_t>> {
    auto v = eval.evaluate(node.input(k), scope);
    if (!v || !v->is_integer()) return std::nullopt;
    return v->ints;
  };
  return spec_output_types(node, eval.opset(), inputs, constant);
}

bool spec_leaves_unknown(const onnx::NodeProto& node, const GraphScope& scope, const onnx_io::ScopedTypes& types, ConstEvaluator& eval) {
  const auto spec = spec_types(node, scope, types, eval);
  if (!spec) return false;
  return std::any_of(spec->begin(), spec->end(), [](const onnx::TypeProto& t) {
    const auto& dims = t.tensor_type().shape().dim();
    return std::any_of(dims.begin(), dims.end(), [](const auto& d) { return !d.has_dim_value(); });
  });
}

// What one round may change: the names whose type inference gave anew this round, and what the folder has tried
// and computed so far. A node is tried again only when one of its inputs changed (its type, or its value became
// known earlier in the same pass, the nodes being in topological order): a round costs what it can change, not the
// whole model again.
struct Frontier {
  std::set<std::string> changed;                               // names whose type or value became known this round
  std::set<std::pair<size_t, std::string>> tried, computed;    // nodes (scope, first output) tried, and evaluated
  std::map<std::pair<size_t, std::string>, std::string> seen;  // each value's type as the last round gave it
  std::set<std::string> values;                                // initializers with their data and Constant outputs, in any graph

  // Sets `values` from `skeleton` (the folder's Constants included), and `changed` to the names whose types differ
  // from the last round's.
  void new_round(const GraphTree& tree, const onnx_io::ScopedTypes& types) {
    values.clear();
    for (const auto& scope : tree.scopes()) {
      for (const auto& t : scope.graph->initializer()) {
        if (!onnx_io::validate_tensor_data(t, t.name()).ok()) continue;  // its data was left out of the skeleton
        values.insert(t.name());
      }
      for (const auto& node : scope.graph->node()) {
        if (node.op_type() == "Constant" && node.output_size() == 1) values.insert(node.output(0));
      }
    }
    changed_types(tree, types);
  }

  void changed_types(const GraphTree& tree, const onnx_io::ScopedTypes& types) {
    changed.clear();
    for (const auto& scope : tree.scopes()) {
      for (const auto& node : scope.graph->node()) {
        for (const auto& out : node.output()) {
          if (out.empty()) continue;
          const auto* t = types.find(scope.index, out);
          std::string sig = t == nullptr ? std::string() : t->SerializeAsString();
          auto& slot = seen[{scope.index, out}];
          if (slot != sig) {
            slot = std::move(sig);
            changed.insert(out);
          }
        }
      }
    }
  }
  bool worth_trying(const onnx::NodeProto& node, size_t scope) const {
    if (tried.count({scope, node.output(0)}) == 0) return true;
    return std::any_of(node.input().begin(), node.input().end(), [this](const std::string& in) { return changed.count(in) != 0; });
  }
};

// Replaces, in `skeleton`, every node whose outputs the folder evaluates (each at most kMaxPropagatedElements) by
// Constant nodes of those values; returns how many nodes it replaced. A node whose output inference already knows to
// be larger is not evaluated at all: it could not be kept.
int fold_into_constants(onnx::ModelProto& skeleton, const onnx_io::ScopedTypes& types, ConstEvaluator& eval, Frontier& frontier) {
  GraphTree tree(skeleton);
  frontier.new_round(tree, types);
  std::map<onnx::GraphProto*, std::map<int, std::vector<onnx::NodeProto>>> replacements;
  int replaced = 0;
  for (const auto& scope : tree.scopes()) {
    for (int k = 0; k < scope.graph->node_size(); ++k) {
      const onnx::NodeProto& node = scope.graph->node(k);
      if (node.op_type() == "Constant" || node.output_size() == 0 || holds_subgraph(node) ||
          !(node.domain().empty() || node.domain() == "ai.onnx") || !frontier.worth_trying(node, scope.index)) {
        continue;
      }
      frontier.tried.insert({scope.index, node.output(0)});
      // Cheap first: a node with an input that is no known value cannot fold (a Shape or Size needs only its input's
      // dims, which inference gives). The evaluator would find that out too, but walking the graph for each input.
      const bool reads_dims_only = node.op_type() == "Shape" || node.op_type() == "Size";
      if (!reads_dims_only && std::any_of(node.input().begin(), node.input().end(), [&](const std::string& in) {
            return !in.empty() && frontier.values.count(in) == 0 && frontier.computed.count({scope.index, in}) == 0;
          })) {
        continue;
      }
      if (std::any_of(node.output().begin(), node.output().end(), [&](const std::string& out) {
            return !out.empty() && known_larger_than(types.find(scope.index, out), kMaxPropagatedElements);
          })) {
        continue;
      }
      // A node whose output dims the runtimes disagree on (shape_rules.h leaves one unknown, a Slice to INT64_MAX
      // backwards) has no value they agree on either: the folder's kernel computes one of them.
      if (spec_leaves_unknown(node, scope, types, eval)) continue;
      std::vector<onnx::NodeProto> constants;
      for (const auto& out : node.output()) {
        if (out.empty()) continue;
        auto value = eval.evaluate(out, scope);
        if (!value || static_cast<int64_t>(value->size()) > kMaxPropagatedElements) break;
        // Known now: what reads it is worth trying again, folded or not (a type no Constant here holds).
        if (frontier.computed.insert({scope.index, out}).second) frontier.changed.insert(out);
        auto tensor = constant_tensor(out, *value);
        if (!tensor) break;
        onnx::NodeProto constant;
        constant.set_op_type("Constant");
        constant.add_output(out);
        auto* attr = constant.add_attribute();
        attr->set_name("value");
        attr->set_type(onnx::AttributeProto::TENSOR);
        *attr->mutable_t() = std::move(*tensor);
        constants.push_back(std::move(constant));
      }
      const auto outputs =
          static_cast<size_t>(std::count_if(node.output().begin(), node.output().end(), [](const std::string& o) { return !o.empty(); }));
      if (constants.size() != outputs) continue;
      replacements[scope.graph][k] = std::move(constants);
      ++replaced;
    }
  }
  for (auto& [graph, by_index] : replacements) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> old;
    old.Swap(graph->mutable_node());
    for (int k = 0; k < old.size(); ++k) {
      const auto it = by_index.find(k);
      if (it == by_index.end()) {
        graph->add_node()->Swap(&old[k]);
      } else {
        for (auto& c : it->second) graph->add_node()->Swap(&c);
      }
    }
  }
  return replaced;
}

// The dims both `inferred` (libonnx 1.12) and `spec` (rewrite/shape_rules.h) give, or that only the spec gives: a dim
// the two give different values is unknown, and so is every dim when even the ranks differ. A runtime's kernel
// computes the spec's dims, but its optimiser may fold a Shape of the tensor from ONNX's own inference: ONNX Runtime
// 1.32 runs a ceil_mode MaxPool to 5x5 and folds Shape of its output to 6x6 (a Resize by twice that Shape then makes
// 12x12, not 10x10). Neither may decide a rewrite.
onnx::TypeProto agreed_type(const onnx::TypeProto& inferred, const onnx::TypeProto& spec) {
  onnx::TypeProto out = spec;
  if (!inferred.has_tensor_type() || !inferred.tensor_type().has_shape() || !spec.has_tensor_type() || !spec.tensor_type().has_shape()) {
    return out;
  }
  const auto& a = inferred.tensor_type().shape();
  auto* b = out.mutable_tensor_type()->mutable_shape();
  for (int k = 0; k < b->dim_size(); ++k) {
    const bool same = a.dim_size() == b->dim_size() &&
                      (!a.dim(k).has_dim_value() || (b->dim(k).has_dim_value() && a.dim(k).dim_value() == b->dim(k).dim_value()));
    if (!same) b->mutable_dim(k)->Clear();
  }
  return out;
}

// Sets, in `skeleton`, the output types both agree on (agreed_type) of every node where libonnx inferred a dim the spec
// does not give: the node moves to kSpecTypedDomain and its outputs get those types as value_info, so the next
// inference carries no disputed dim downstream. Returns how many nodes it moved; each note names the node and both
// shapes.
int set_spec_types(onnx::ModelProto& skeleton, const onnx_io::ScopedTypes& types, ConstEvaluator& eval, const Frontier& frontier,
                   std::vector<std::string>& notes) {
  GraphTree tree(skeleton);
  int moved = 0;
  for (const auto& scope : tree.scopes()) {
    for (auto& node : *scope.graph->mutable_node()) {
      if (!(node.domain().empty() || node.domain() == "ai.onnx") || node.input_size() == 0) continue;
      // Only a node whose inputs or outputs inference or the folder typed anew can have a new contradiction.
      const auto touched = [&frontier](const std::string& n) { return frontier.changed.count(n) != 0; };
      if (std::none_of(node.input().begin(), node.input().end(), touched) &&
          std::none_of(node.output().begin(), node.output().end(), touched)) {
        continue;
      }
      const auto spec = spec_types(node, scope, types, eval);
      if (!spec) continue;
      bool contradicted = false;
      for (int k = 0; k < node.output_size() && static_cast<size_t>(k) < spec->size(); ++k) {
        const auto* inferred = types.find(scope.index, node.output(k));
        if (!node.output(k).empty() && inferred != nullptr && contradicts(*inferred, (*spec)[static_cast<size_t>(k)])) {
          notes.push_back(onnx_io::describe_node(node) + ": ONNX shape inference (libonnx 1.12) gives '" + node.output(k) + "' " +
                          onnx_io::describe_type(*inferred) + ", the ONNX spec " + onnx_io::describe_type((*spec)[static_cast<size_t>(k)]) +
                          ": runtimes compute either (ONNX Runtime's kernel the spec's, its folded Shape inference's), so "
                          "the dims they differ on are not known, and an upsampler that depends on them is kept");
          contradicted = true;
        }
      }
      if (!contradicted) continue;
      for (int k = 0; k < node.output_size() && static_cast<size_t>(k) < spec->size(); ++k) {
        if (node.output(k).empty()) continue;
        auto* vi = scope.graph->add_value_info();
        vi->set_name(node.output(k));
        const auto* inferred = types.find(scope.index, node.output(k));
        *vi->mutable_type() =
            inferred == nullptr ? (*spec)[static_cast<size_t>(k)] : agreed_type(*inferred, (*spec)[static_cast<size_t>(k)]);
      }
      node.set_domain(kSpecTypedDomain);
      ++moved;
    }
  }
  if (moved > 0 && std::none_of(skeleton.opset_import().begin(), skeleton.opset_import().end(),
                                [](const onnx::OperatorSetIdProto& o) { return o.domain() == kSpecTypedDomain; })) {
    auto* import = skeleton.add_opset_import();
    import->set_domain(kSpecTypedDomain);
    import->set_version(1);
  }
  return moved;
}

// Gives back, in `skeleton`, the dims of a Loop body's loop-carried input that every iteration keeps: where inference
// gave the body's carried output on an axis the very symbol it gave the input there (a Relu, an Add of the same
// shape), the value never changes on that axis, and the Loop's initial value says how long it is. Axes that may
// change (a Concat that grows the value) stay unknown. Returns how many axes it gave back.
int settle_loop_carried(onnx::ModelProto& skeleton, const onnx_io::ScopedTypes& types) {
  GraphTree tree(skeleton);
  std::map<const onnx::GraphProto*, size_t> scope_of;
  for (const auto& scope : tree.scopes()) scope_of[scope.graph] = scope.index;
  int settled = 0;
  for (const auto& scope : tree.scopes()) {
    for (auto& node : *scope.graph->mutable_node()) {
      if (node.op_type() != "Loop" || !(node.domain().empty() || node.domain() == "ai.onnx")) continue;
      for (auto& attr : *node.mutable_attribute()) {
        if (attr.name() != "body" || !attr.has_g()) continue;
        auto& body = *attr.mutable_g();
        const size_t index = scope_of.at(&body);
        // Body inputs: iteration, condition, carried...; outputs: condition, carried..., scan outputs.
        for (int k = 2; k < body.input_size() && k < node.input_size() && k - 1 < body.output_size(); ++k) {
          auto* declared = body.mutable_input(k)->mutable_type();
          if (!declared->has_tensor_type() || !declared->tensor_type().has_shape()) continue;
          const auto* in = types.find(index, body.input(k).name());
          const auto* out = types.find(index, body.output(k - 1).name());
          const auto* initial = types.find(scope.index, node.input(k));
          if (in == nullptr || out == nullptr || initial == nullptr || !in->tensor_type().has_shape() || !out->tensor_type().has_shape() ||
              !initial->tensor_type().has_shape()) {
            continue;
          }
          const auto& a = in->tensor_type().shape();
          const auto& b = out->tensor_type().shape();
          const auto& c = initial->tensor_type().shape();
          auto* dims = declared->mutable_tensor_type()->mutable_shape();
          if (a.dim_size() != b.dim_size() || a.dim_size() != c.dim_size() || a.dim_size() != dims->dim_size()) continue;
          for (int d = 0; d < a.dim_size(); ++d) {
            const bool kept = a.dim(d).has_dim_param() && b.dim(d).has_dim_param() && a.dim(d).dim_param() == b.dim(d).dim_param();
            if (kept && c.dim(d).has_dim_value() && !dims->dim(d).has_dim_value()) {
              dims->mutable_dim(d)->set_dim_value(c.dim(d).dim_value());
              ++settled;
            }
          }
        }
      }
    }
  }
  return settled;
}

// "'v' is declared FLOAT[1,8,16,16], computed FLOAT[1,8,32,32]" for each declared shape (value_info, graph outputs)
// that a computed one contradicts: another rank, or another value on an axis both know.
std::vector<std::string> declared_disagreements(const onnx::ModelProto& model, const onnx_io::ScopedTypes& types) {
  std::vector<std::string> out;
  const auto& g = model.graph();
  for (const auto* list : {&g.value_info(), &g.output()}) {
    for (const auto& v : *list) {
      const auto* computed = types.find(0, v.name());
      if (computed == nullptr || !v.type().has_tensor_type() || !v.type().tensor_type().has_shape() || !computed->has_tensor_type() ||
          !computed->tensor_type().has_shape()) {
        continue;
      }
      const auto& a = v.type().tensor_type().shape();
      const auto& b = computed->tensor_type().shape();
      bool differs = a.dim_size() != b.dim_size();
      for (int k = 0; !differs && k < a.dim_size(); ++k) {
        differs = a.dim(k).has_dim_value() && b.dim(k).has_dim_value() && a.dim(k).dim_value() != b.dim(k).dim_value();
      }
      if (differs) {
        out.push_back("'" + v.name() + "' is declared " + onnx_io::describe_type(v.type()) + " but computes as " +
                      onnx_io::describe_type(*computed) + " from the graph inputs: the declared shape is not used");
      }
    }
  }
  return out;
}

}  // namespace

namespace {

// The fixpoint of inference and folding on `skeleton`: the last inferred skeleton, rounds and notes in `out`. With
// `in_process`, libonnx runs in this process (a child of run_isolated's, where a crash ends only that child); else
// each inference runs in a child of its own.
onnx::ModelProto run_rounds(onnx::ModelProto skeleton, bool in_process, int& rounds, bool& capped, std::vector<std::string>& notes) {
  // One evaluator for every round, bounded to what could be kept: each value is computed once, and no value larger
  // than a Constant the skeleton would take is computed at all.
  onnx_io::ScopedTypes types;
  ConstEvaluator eval(skeleton.ir_version(), onnx_io::default_opset(skeleton), types, kMaxPropagatedElements);
  const int64_t nodes = std::max<int64_t>(1, count_nodes(skeleton.graph()));
  const int max_rounds = static_cast<int>(std::clamp<int64_t>(kMaxInferredNodes / nodes, 16, kMaxRounds));
  capped = false;
  Frontier frontier;
  onnx::ModelProto inferred;
  for (rounds = 1;; ++rounds) {
    inferred = skeleton;
    // Non-strict: partial information is still useful, and a failure only means there is none.
    if (in_process) {
      if (!onnx_io::infer_shapes_in_process(inferred, /*strict=*/false, /*data_propagation=*/true)) inferred = skeleton;
    } else {
      (void)onnx_io::infer_shapes_isolated(inferred, /*strict=*/false, /*data_propagation=*/true);
    }
    types = onnx_io::collect_types(inferred);
    eval.forget_refusals();
    const int folded = fold_into_constants(skeleton, types, eval, frontier);
    const int respecified = set_spec_types(skeleton, types, eval, frontier, notes);
    const int settled = settle_loop_carried(skeleton, types);
    if (folded == 0 && respecified == 0 && settled == 0) break;
    if (rounds >= max_rounds) {
      capped = true;
      break;
    }
  }
  return inferred;
}

constexpr const char* kRoundsKey = "dwdeconv.propagation.rounds";
constexpr const char* kCappedKey = "dwdeconv.propagation.capped";
constexpr const char* kNoteKey = "dwdeconv.propagation.note";

}  // namespace

PropagatedTypes propagate_types(const onnx::ModelProto& model) {
  PropagatedTypes result;
  const onnx::ModelProto skeleton = onnx_io::inference_skeleton(model);
  const int64_t nodes = std::max<int64_t>(1, count_nodes(skeleton.graph()));
  bool capped = false;
  std::vector<std::string> notes;
  // Every round in one child (one fork, no copy of the skeleton through a pipe per round); only where libonnx crashes
  // there, round by round, each inference in a child of its own, so what inferred before the crash still counts.
  auto reply = onnx_io::run_isolated([&]() {
    int rounds = 0;
    bool cut = false;
    std::vector<std::string> said;
    onnx::ModelProto inferred = run_rounds(skeleton, /*in_process=*/true, rounds, cut, said);
    const auto add = [&inferred](const char* key, const std::string& value) {
      auto* entry = inferred.add_metadata_props();
      entry->set_key(key);
      entry->set_value(value);
    };
    add(kRoundsKey, std::to_string(rounds));
    add(kCappedKey, cut ? "1" : "0");
    for (const auto& note : said) add(kNoteKey, note);
    return inferred.SerializeAsString();
  });
  onnx::ModelProto inferred;
  if (reply && inferred.ParseFromString(*reply)) {
    for (const auto& entry : inferred.metadata_props()) {
      if (entry.key() == kRoundsKey) result.rounds = std::stoi(entry.value());
      if (entry.key() == kCappedKey) capped = entry.value() == "1";
      if (entry.key() == kNoteKey) notes.push_back(entry.value());
    }
  } else {
    inferred = run_rounds(skeleton, /*in_process=*/false, result.rounds, capped, notes);
  }
  result.types = onnx_io::collect_types(inferred);
  result.warnings = declared_disagreements(model, result.types);
  result.warnings.insert(result.warnings.end(), notes.begin(), notes.end());
  result.spec_overrides = std::move(notes);
  if (capped) {
    result.warnings.push_back("shape propagation stopped after " + std::to_string(result.rounds) + " rounds of shape inference (" +
                              std::to_string(nodes) + " nodes, at most " + std::to_string(kMaxInferredNodes) +
                              " inferred in all): the shapes that needed more rounds are not known, and an upsampler that "
                              "depends on one is kept");
  }
  return result;
}

}  // namespace dwdeconv::rewrite
