#include "rewrite/rewriter.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

#include "onnx_io/attributes.h"
#include "onnx_io/model_io.h"
#include "onnx_io/shapes.h"
#include "recogniser_parts.h"
#include "rewrite/const_eval.h"
#include "rewrite/recognisers.h"
#include "rewrite/shape_propagation.h"

namespace dwdeconv::rewrite {
namespace {

bool is_deconv(const onnx::NodeProto& node) {
  return node.op_type() == "ConvTranspose" && (node.domain().empty() || node.domain() == "ai.onnx");
}

// Whether the matcher rejects the model over this node: a ConvTranspose a fold absorbs must pass it too.
bool invalid(const MatchOutcome& outcome) { return !outcome.match && outcome.match.error().kind == core::ErrorKind::kInvalidModel; }

// Lists every ConvTranspose of a model-local function body, and of the subgraphs inside it, as kept: the body
// is a template that each call instantiates, and this tool rewrites graphs only.
void list_function_deconvs(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes, const std::string& path,
                           std::vector<NodeReport>& reports) {
  for (const auto& node : nodes) {
    if (is_deconv(node)) {
      NodeReport report;
      report.summary.name = node.name().empty() ? (node.output_size() > 0 ? node.output(0) : std::string()) : node.name();
      report.summary.graph_path = path;
      report.reason = "inside a model-local function";
      reports.push_back(std::move(report));
    }
    for (const auto& attr : node.attribute()) {
      const std::string prefix = path + "/" + onnx_io::describe_node(node) + "/" + attr.name();
      if (attr.has_g()) list_function_deconvs(attr.g().node(), prefix, reports);
      for (int i = 0; i < attr.graphs_size(); ++i) {
        list_function_deconvs(attr.graphs(i).node(), prefix + "[" + std::to_string(i) + "]", reports);
      }
    }
  }
}

// Replaces each matched node by its emitted nodes and inserts phase Constants after their source Constant.
void rebuild(onnx::GraphProto& graph, const std::map<const onnx::NodeProto*, std::vector<onnx::NodeProto>>& replacements,
             const std::map<const onnx::NodeProto*, std::vector<onnx::NodeProto>>& constants_after) {
  google::protobuf::RepeatedPtrField<onnx::NodeProto> old;
  old.Swap(graph.mutable_node());
  for (auto& node : old) {
    const onnx::NodeProto* key = &node;
    if (auto it = replacements.find(key); it != replacements.end()) {
      for (const auto& n : it->second) *graph.add_node() = n;
    } else {
      graph.add_node()->Swap(&node);  // keeps any subgraph object in place
    }
    if (auto it = constants_after.find(key); it != constants_after.end()) {
      for (const auto& n : it->second) *graph.add_node() = n;
    }
  }
}

// Something a rewrite may have orphaned: a node output or an initializer, in a given graph.
struct Candidate {
  const GraphScope* scope;
  std::string name;  // the tensor the candidate defines
  bool initializer;
};

// The position of the node that outputs `name` in `graph`, or -1.
int producer_index(const onnx::GraphProto& graph, const std::string& name) {
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const auto& out : graph.node(i).output()) {
      if (out == name) return i;
    }
  }
  return -1;
}

// Removes initializer `name` of `g` (and, before IR 4, its graph input).
void remove_initializer(onnx::GraphProto& g, const std::string& name) {
  for (int i = 0; i < g.initializer_size(); ++i) {
    if (g.initializer(i).name() == name) {
      g.mutable_initializer()->DeleteSubrange(i, 1);
      break;
    }
  }
  for (int i = 0; i < g.input_size(); ++i) {  // IR < 4 lists initializers as inputs too
    if (g.input(i).name() == name) {
      g.mutable_input()->DeleteSubrange(i, 1);
      break;
    }
  }
}

bool is_initializer(const onnx::GraphProto& g, const std::string& name) {
  return std::any_of(g.initializer().begin(), g.initializer().end(), [&](const onnx::TensorProto& t) { return t.name() == name; });
}

// Removes every candidate that nothing reads any more. Readers go before what they read: nodes of inner graphs
// first, then later nodes before earlier ones (graphs are topologically sorted), initializers last. A removed node's
// inputs lose a use, and what then has none in its graph goes too (nodes whose outputs nothing reads, initializers),
// so whole chains go: a mask's constant Slice/Reshape/Add chain with the Mul it fed.
std::set<std::string> remove_orphans(onnx::ModelProto& model, std::vector<Candidate> candidates) {
  std::set<std::string> removed;  // the first outputs of the nodes removed, Constant nodes left out
  auto uses = count_uses(model);
  std::vector<std::pair<std::tuple<int, size_t, int>, Candidate>> ordered;
  for (auto& c : candidates) {
    const int at = c.initializer ? -1 : producer_index(*c.scope->graph, c.name);
    ordered.push_back({{c.initializer ? 1 : 0, ~c.scope->index, -at}, std::move(c)});
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::function<void(onnx::GraphProto&, int)> remove_node = [&](onnx::GraphProto& g, int i) {
    const onnx::NodeProto node = g.node(i);
    if (node.op_type() != "Constant" && node.output_size() > 0) removed.insert(node.output(0));
    g.mutable_node()->DeleteSubrange(i, 1);
    // Shape inference's notes about tensors that no longer exist go too.
    for (const auto& out : node.output()) {
      for (int v = 0; v < g.value_info_size(); ++v) {
        if (g.value_info(v).name() == out) {
          g.mutable_value_info()->DeleteSubrange(v, 1);
          break;
        }
      }
    }
    for (const auto& in : node.input()) {
      if (in.empty() || --uses[in] > 0) continue;
      const int p = producer_index(g, in);
      if (p >= 0) {
        const auto& producer = g.node(p);
        const bool unread = std::all_of(producer.output().begin(), producer.output().end(),
                                        [&](const std::string& o) { return o.empty() || uses[o] <= 0; });
        if (unread) remove_node(g, p);
      } else if (is_initializer(g, in)) {
        remove_initializer(g, in);
      }
    }
  };
  for (const auto& [order, c] : ordered) {
    if (uses[c.name] > 0) continue;
    auto& g = *c.scope->graph;
    if (c.initializer) {
      remove_initializer(g, c.name);
      continue;
    }
    for (int i = 0; i < g.node_size(); ++i) {
      if (g.node(i).output_size() == 1 && g.node(i).output(0) == c.name) {
        remove_node(g, i);
        break;
      }
    }
  }
  return removed;
}

// The plan row of a nearest Resize that starts no form: kept, with what reads its output. A form starts at a
// Conv that reads the Resize (directly, through a Pad, or through a mask Mul and a Pad).
NodeReport resize_row(const onnx::NodeProto& resize, const GraphScope& scope, const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                      const std::map<std::string, int>& uses) {
  NodeReport row;
  NodeSummary& s = row.summary;
  s.name = resize.name().empty() ? resize.output(0) : resize.name();
  s.graph_path = scope.path;
  s.form = Form::kNearestResize;
  if (auto c = parts::known_dim(types, scope, resize.input(0), 1)) s.channels = *c;
  if (auto factor = nearest_resize_factor(resize, scope, eval, types)) {
    s.stride = *factor;
    s.strides = {*factor, *factor};
  }
  std::string readers;
  int nodes = 0, reads = 0;  // reading nodes, and their inputs that name the output (a node may read it twice)
  for (const auto& node : scope.graph->node()) {
    const auto n = std::count(node.input().begin(), node.input().end(), resize.output(0));
    if (n == 0) continue;
    reads += static_cast<int>(n);
    if (++nodes <= 3) readers += (readers.empty() ? "" : ", ") + onnx_io::describe_node(node);
  }
  if (nodes > 3) readers += " and " + std::to_string(nodes - 3) + " more";
  const int read = parts::use_count(uses, resize.output(0));
  if (nodes == 0) {
    readers = read > 0 ? "a graph output or a subgraph" : "nothing";
  } else if (read > reads) {
    readers += ", and a graph output or a subgraph";
  }
  row.reason = "no upsampler form starts at this nearest Resize: its output is read by " + readers +
               ", and a form needs a Conv reading it (directly, through a Pad, or through a mask Mul and a Pad)";
  return row;
}

// One pass over the model: match every upsampler as the model stands, then emit, rebuild and clean up.
core::Result<RewriteResult> rewrite_pass(onnx::ModelProto& model, const RewriteOptions& options) {
  RewriteResult result;
  result.target = options.target;
  result.cpu = options.cpu;
  // The shapes matching reads: computed from the graph inputs, the tool folding the shape chains libonnx cannot.
  PropagatedTypes propagated = propagate_types(model);
  const onnx_io::ScopedTypes& types = propagated.types;
  result.warnings = std::move(propagated.warnings);
  const int64_t opset = onnx_io::default_opset(model);
  GraphTree tree(model);
  NameAllocator names(model);

  // Match every node before changing any, so deconvs that feed each other are all seen as the user wrote them.
  struct Planned {
    size_t index;  // into result.nodes
    DeconvMatch match;
    std::vector<std::pair<const GraphScope*, std::string>> replaced;  // a recognised form's own tensors
  };
  std::vector<Planned> matches;
  std::set<std::string> seen_names;
  ConstEvaluator eval(model.ir_version(), onnx_io::default_opset(model), types);
  const auto uses = count_uses(model);
  // Why the command line keeps a matched upsampler, or "" when it is selected.
  const Target& target = *options.target;
  auto unselected = [&options, &target](const NodeSummary& summary) -> std::string {
    const std::string form = form_name(summary.form);
    if (options.forms.count(summary.form) == 0) return "form " + form + " not selected by --forms";
    if (target.forms.count(summary.form) == 0) return "form " + form + " is not rewritten for --target " + target.name;
    if (!options.only.empty() && options.only.count(summary.name) == 0) return "not selected by --only";
    if (options.skip.count(summary.name) != 0) return "skipped by --skip";
    if (options.caller_keep) return options.caller_keep(summary);
    return "";
  };
  // The recognisers that start from a Conv and stand alone (zero_insertion, which absorbs a ConvTranspose, is
  // matched first, below): the first whose form the Conv starts says what it is.
  std::set<const onnx::NodeProto*> claimed_resizes;  // the nearest Resizes a form starts from
  auto recognise_handwritten = [&](const onnx::NodeProto& node, const GraphScope& scope) -> std::optional<UpsamplerOutcome> {
    for (const auto& form : forms()) {
      if (form.recognise == nullptr || form.absorbs_conv_transpose) continue;
      if (auto outcome = form.recognise(node, scope, model.ir_version(), types, eval, uses)) {
        if (outcome->resize != nullptr) claimed_resizes.insert(outcome->resize);
        return outcome;
      }
    }
    return std::nullopt;
  };
  EmitOptions emit = options.emit;
  emit.edge_as_slices = target.edge_as_slices;
  emit.flatten_1d_join = target.flatten_1d_join;
  Emitter emitter(model, names, emit);
  // The layout a selected match is emitted in, and why it is kept all the same (the target's rule, a join its runtime
  // cannot take, what the emitter needs), or "": decided before anything is emitted, so a kept node costs nothing.
  auto layout_of = [&](const DeconvMatch& m) { return emitter.layout_for(m, target.layout(m, opset)); };
  auto kept_by = [&](const NodeSummary& summary, const DeconvMatch& m) {
    std::string reason = target.keep(summary, m, options.cpu);
    if (reason.empty()) reason = target.join_refusal(layout_of(m), summary.form);
    if (reason.empty()) reason = emitter.keep_reason(m, layout_of(m));
    return reason;
  };
  // A fold (zero_insertion) replaces a ConvTranspose that comes before its Conv. Find the folds first: the
  // ConvTranspose of one that will be rewritten gets no row of its own; any other is matched as written.
  std::map<const onnx::NodeProto*, UpsamplerOutcome> folds;
  std::set<const onnx::NodeProto*> absorbed;
  // The ConvTransposes of upsample1d folds that are kept: the fold's row (named after the ConvTranspose) says why, and
  // the ConvTranspose gets a row of its own only where it is rewritten alone (one upsampler, one row).
  std::set<const onnx::NodeProto*> folded_but_kept;
  const auto fold_of = [&](const onnx::NodeProto& node, const GraphScope& scope) -> std::optional<UpsamplerOutcome> {
    for (const auto& form : forms()) {
      if (!form.absorbs_conv_transpose) continue;
      if (auto outcome = form.recognise(node, scope, model.ir_version(), types, eval, uses)) return outcome;
    }
    return std::nullopt;
  };
  for (const auto& scope : tree.scopes()) {
    for (const auto& node : scope.graph->node()) {
      auto outcome = fold_of(node, scope);
      if (!outcome) continue;
      if (outcome->match) {
        // The ConvTranspose keeps its own name on the command line: skipping it keeps the fold too, and a
        // folded one is no typo for --only/--skip.
        const onnx::NodeProto& ct = *outcome->match->absorbs;
        const std::string ct_name = ct.name().empty() ? ct.output(0) : ct.name();
        if (options.skip.count(ct_name) != 0) {
          outcome->match = core::declined("its ConvTranspose '" + ct_name + "' is skipped by --skip");
        } else if (unselected(outcome->summary).empty() && kept_by(outcome->summary, outcome->match->deconv).empty() &&
                   !invalid(match_deconv(ct, scope, model.ir_version(), types, false, &eval))) {
          absorbed.insert(&ct);
          seen_names.insert(ct_name);
        } else if (outcome->summary.form == Form::kUpsample1d) {
          folded_but_kept.insert(&ct);
        }
      }
      folds.emplace(&node, std::move(*outcome));
    }
  }
  for (const auto& scope : tree.scopes()) {
    for (const auto& node : scope.graph->node()) {
      // Each form gives a summary and a match or the reason it declined.
      NodeSummary summary;
      core::Result<UpsamplerMatch> match = core::declined("not matched");
      if (is_deconv(node) && absorbed.count(&node) != 0) {
        continue;
      } else if (is_deconv(node)) {
        MatchOutcome outcome = match_deconv(node, scope, model.ir_version(), types, options.dense_conv_transpose, &eval);
        if (folded_but_kept.count(&node) != 0 &&
            !(outcome.match && unselected(outcome.summary).empty() && kept_by(outcome.summary, *outcome.match).empty())) {
          seen_names.insert(outcome.summary.name);
          continue;
        }
        summary = std::move(outcome.summary);
        if (outcome.match) {
          match = UpsamplerMatch{std::move(*outcome.match), {}};
        } else {
          match = outcome.match.error();
        }
      } else if (auto fold = folds.find(&node); fold != folds.end()) {
        summary = std::move(fold->second.summary);
        match = std::move(fold->second.match);
      } else if (auto outcome = recognise_handwritten(node, scope)) {
        summary = std::move(outcome->summary);
        match = std::move(outcome->match);
      } else {
        continue;
      }
      if (!match && match.error().kind == core::ErrorKind::kInvalidModel) {
        return core::invalid_model(match.error().message + (scope.parent ? " (in " + scope.path + ")" : ""));
      }
      NodeReport report;
      report.summary = std::move(summary);
      // --only/--skip take the name the plan and report show: the node's name, or its output's when unnamed.
      const std::string& shown = report.summary.name;
      seen_names.insert(shown);
      if (!match) {
        report.reason = match.error().message;
        // The matcher keeps a dense ConvTranspose on any target ("dense (group 1), C to M channels: <why>"); why is the
        // target's to say, from its own runtime's measurement, not the executor's figure on every target.
        const std::string dense = "dense (group 1), ";
        if (is_deconv(node) && report.reason.rfind(dense, 0) == 0 && report.reason.find(": ") != std::string::npos) {
          report.reason = target.dense_reason(report.reason.substr(0, report.reason.find(": ")));
        }
      } else if (std::string why = unselected(report.summary); !why.empty()) {
        report.reason = std::move(why);
      } else {
        matches.push_back({result.nodes.size(), std::move(match->deconv), std::move(match->replaced)});
      }
      result.nodes.push_back(std::move(report));
    }
  }
  // A nearest Resize that no form starts from is an upsampler too: a row says what reads it, so that a model full
  // of upsamplers never gets only "rewrite 0 of 0". It is not a name --only or --skip take.
  for (const auto& scope : tree.scopes()) {
    for (const auto& node : scope.graph->node()) {
      if (node.op_type() != "Resize" || !(node.domain().empty() || node.domain() == "ai.onnx") || node.output_size() < 1 ||
          node.input_size() < 1 || claimed_resizes.count(&node) != 0) {
        continue;
      }
      auto mode = onnx_io::get_string(node, "mode", "nearest");
      if (!mode || *mode != "nearest") continue;
      result.nodes.push_back(resize_row(node, scope, types, eval, uses));
    }
  }
  for (const auto& function : model.functions()) {
    const size_t first = result.nodes.size();
    list_function_deconvs(function.node(), "function '" + function.domain() + "." + function.name() + "'", result.nodes);
    for (size_t i = first; i < result.nodes.size(); ++i) seen_names.insert(result.nodes[i].summary.name);
  }
  for (const auto* selection : {&options.only, &options.skip}) {
    for (const auto& name : *selection) {
      if (seen_names.count(name) == 0) result.unmatched_names.push_back(name);
    }
  }

  std::map<const onnx::NodeProto*, std::vector<onnx::NodeProto>> replacements;
  std::vector<Candidate> candidates;
  std::map<size_t, std::vector<std::string>> region_candidates;  // per rewritten row: the values its region may hold
  for (auto& [index, m, replaced] : matches) {
    const PhaseLayout layout = layout_of(m);
    if (std::string reason = kept_by(result.nodes[index].summary, m); !reason.empty()) {
      result.nodes[index].reason = std::move(reason);
      continue;
    }
    auto nodes = emitter.emit(m, layout);
    if (!nodes) return nodes.error();
    for (const auto& n : *nodes) result.nodes[index].emitted_nodes.push_back(n.name());
    result.nodes[index].rewritten = true;
    result.nodes[index].layout = layout;
    replacements.emplace(m.node, std::move(*nodes));
    // The weight's Identity chain, then the weight itself, may be orphaned now; for a recognised form, every
    // node and constant that computed its input from x and its weight.
    for (const auto& [scope, identity] : m.weight.identities) candidates.push_back({scope, identity->output(0), false});
    if (!m.derived_weight) candidates.push_back({m.weight.scope, m.weight.name, m.weight.constant_node == nullptr});
    for (const auto& [scope, name] : m.weight_chain) candidates.push_back({scope, name, producer_index(*scope->graph, name) < 0});
    for (const auto& [scope, name] : replaced) candidates.push_back({scope, name, producer_index(*scope->graph, name) < 0});
    // The record of what it replaced: x, y and the bias now; its nodes once the orphans are known, below.
    auto& region = result.nodes[index].region;
    region.input = m.input;
    region.output = m.output;
    region.bias = m.bias;
    region.nodes = {m.output};
    auto& names = region_candidates[index];
    for (const auto& [scope, name] : replaced) names.push_back(name);
    for (const auto& [scope, name] : m.weight_chain) names.push_back(name);
  }
  // Children before parents: scopes() lists parents first, and rebuilding moves a parent's nodes.
  const auto& scopes = tree.scopes();
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    rebuild(*it->graph, replacements, emitter.constants_after());
  }
  const std::set<std::string> removed = remove_orphans(model, std::move(candidates));
  for (const auto& [index, names] : region_candidates) {
    for (const auto& name : names) {
      if (removed.count(name) != 0) result.nodes[index].region.nodes.push_back(name);
    }
  }
  result.derived_tensors = emitter.derived_tensors();

  for (const auto& n : result.nodes) (n.rewritten ? result.rewritten : result.kept) += 1;
  return result;
}

// Whether `result` rewrote a node in the nearest layout, whose Resize, now below the node's Conv, may start a form.
bool moved_a_resize(const RewriteResult& result) {
  return std::any_of(result.nodes.begin(), result.nodes.end(),
                     [](const NodeReport& n) { return n.rewritten && n.layout == PhaseLayout::kNearest; });
}

// Adds the rows of a later pass to `result`: a row rewritten earlier stays as it was, any other takes the later pass's
// word, and a new row (an upsampler that a moved Resize starts) is added. Returns whether the later pass rewrote any.
bool merge_pass(RewriteResult& result, RewriteResult&& later) {
  bool rewrote = false;
  // A later row's region may read or hold what an earlier row emitted (the Resize it moved, the Conv it wrote): in the
  // original's names those are that row's input and nodes.
  std::map<std::string, const NodeReport*> emitted_by;
  for (const auto& n : result.nodes) {
    if (!n.rewritten) continue;
    emitted_by[n.region.output] = &n;
    for (const auto& name : n.emitted_nodes) emitted_by[name] = &n;
  }
  for (auto& row : later.nodes) {
    if (row.rewritten) {
      std::vector<std::string> nodes;
      for (const auto& name : row.region.nodes) {
        const auto earlier = emitted_by.find(name);
        if (earlier == emitted_by.end()) {
          nodes.push_back(name);
        } else {
          for (const auto& n : earlier->second->region.nodes) {
            if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
          }
        }
      }
      row.region.nodes = std::move(nodes);
      for (const NodeReport* earlier = nullptr;;) {  // follow x back through the rows that wrote it
        const auto it = emitted_by.find(row.region.input);
        if (it == emitted_by.end() || it->second == earlier) break;
        earlier = it->second;
        row.region.input = earlier->region.input;
      }
    }
    const auto same = [&row](const NodeReport& n) {
      return n.summary.graph_path == row.summary.graph_path && n.summary.name == row.summary.name;
    };
    const auto it = std::find_if(result.nodes.begin(), result.nodes.end(), same);
    rewrote = rewrote || row.rewritten;
    if (it == result.nodes.end()) {
      result.nodes.push_back(std::move(row));
    } else if (!it->rewritten) {
      *it = std::move(row);
    }
  }
  result.derived_tensors.insert(later.derived_tensors.begin(), later.derived_tensors.end());
  // A name is a typo only when no pass found it (an upsampler a moved Resize starts is found by a later one).
  std::vector<std::string> unmatched;
  for (const auto& name : result.unmatched_names) {
    if (std::count(later.unmatched_names.begin(), later.unmatched_names.end(), name) != 0) unmatched.push_back(name);
  }
  result.unmatched_names = std::move(unmatched);
  result.rewritten = result.kept = 0;
  for (const auto& n : result.nodes) (n.rewritten ? result.rewritten : result.kept) += 1;
  return rewrote;
}

}  // namespace

core::Result<RewriteResult> rewrite_model(onnx::ModelProto& model, const RewriteOptions& options) {
  auto result = rewrite_pass(model, options);
  if (!result) return result;
  // The nearest layout moves a Resize below the Conv it came before (Conv 1x1, then Resize), where it may start another
  // form (nearest + the 3x3 Conv that read the 1x1's output). Passes repeat until none moves one, so the output is
  // what a run on it would leave as it is. Each pass moves a Resize past one Conv: the node count bounds them.
  const int most = model.graph().node_size() + 1;
  for (int pass = 1; pass < most && moved_a_resize(*result); ++pass) {
    auto later = rewrite_pass(model, options);
    if (!later) return later.error();
    const bool moved = moved_a_resize(*later);
    if (!merge_pass(*result, std::move(*later)) || !moved) break;
  }
  return result;
}

std::set<std::string> emitted_node_names(const RewriteResult& result) {
  std::set<std::string> names;
  for (const auto& n : result.nodes) names.insert(n.emitted_nodes.begin(), n.emitted_nodes.end());
  return names;
}

}  // namespace dwdeconv::rewrite
