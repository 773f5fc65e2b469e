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
#include "rewrite/forms.h"
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
// Conv that reads the Resize (directly, through a Pad, a Concat or both, or through a mask Mul and a Pad).
NodeReport resize_row(const onnx::NodeProto& resize, const GraphScope& scope, const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                      const std::map<std::string, int>& uses) {
  NodeReport row;
  NodeSummary& s = row.summary;
  s.name = resize.name().empty() ? resize.output(0) : resize.name();
  s.graph_path = scope.path;
  s.form = Form::kNearestResize;
  if (auto c = parts::known_dim(types, scope, resize.input(0), 1)) s.channels = *c;
  if (auto factor = parts::nearest_resize_factor(resize, scope, eval, types)) {
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
               ", and a form needs a Conv reading it (directly, through a Pad, a Concat or both, or through a mask Mul and a Pad)";
  return row;
}

// What one pass reads while it selects, decides and applies: the model as it stands, and the tools over it.
struct Pass {
  Pass(onnx::ModelProto& m, const RewriteOptions& o)
      : model(m),
        options(o),
        target(*o.target),
        propagated(propagate_types(m)),
        opset(onnx_io::default_opset(m)),
        tree(m),
        names(m),
        eval(m.ir_version(), onnx_io::default_opset(m), propagated.types),
        uses(count_uses(m)),
        context{m.ir_version(), propagated.types, eval, uses, o.dense_conv_transpose},
        emitter(m, names, emit_options(o)) {}

  static EmitOptions emit_options(const RewriteOptions& o) {
    EmitOptions emit = o.emit;
    emit.edge_as_slices = o.target->edge_as_slices;
    emit.crop_as_slice = o.target->crop_as_slice;
    emit.flatten_1d_join = o.target->flatten_1d_join;
    return emit;
  }

  onnx::ModelProto& model;
  const RewriteOptions& options;
  const Target& target;
  // The shapes matching reads: computed from the graph inputs, the tool folding the shape chains libonnx cannot.
  PropagatedTypes propagated;
  const int64_t opset;
  GraphTree tree;
  NameAllocator names;
  ConstEvaluator eval;
  const std::map<std::string, int> uses;
  const MatchContext context;
  Emitter emitter;
  std::set<std::string> seen_names;                  // the plan's names, which --only and --skip may use
  std::set<const onnx::NodeProto*> claimed_resizes;  // the nearest Resizes a form starts from
};

// A selected upsampler the pass may rewrite: its plan row, and what the form matched.
struct Planned {
  size_t index;  // into RewriteResult::nodes
  DeconvMatch match;
  std::vector<std::pair<const GraphScope*, std::string>> replaced;  // a recognised form's own tensors
  PhaseLayout layout = PhaseLayout::kDcr;                           // decided by decide()
  std::optional<DeconvMatch> second;                                // a pair's second stage (UpsamplerMatch::second)
  PhaseLayout second_layout = PhaseLayout::kDcr;
};

// Decide, from the command line: why a selected upsampler is kept (--forms, the target's forms, --only, --skip, the
// caller's rule), or "" when it is selected.
std::string unselected(const Pass& pass, const NodeSummary& summary) {
  const auto& options = pass.options;
  const std::string form = form_name(summary.form);
  if (options.forms.count(summary.form) == 0) return "form " + form + " not selected by --forms";
  if (pass.target.forms.count(summary.form) == 0) return "form " + form + " is not rewritten for --target " + pass.target.name;
  if (!options.only.empty() && options.only.count(summary.name) == 0) return "not selected by --only";
  if (options.skip.count(summary.name) != 0) return "skipped by --skip";
  if (options.caller_keep) return options.caller_keep(summary);
  return "";
}

// The layout a selected match is emitted in.
PhaseLayout layout_of(const Pass& pass, const DeconvMatch& m) { return pass.emitter.layout_for(m, pass.target.layout(m, pass.opset)); }

// Decide, from the target: why a selected match is kept all the same (the target's rule, a join its runtime cannot
// take, what the emitter needs), or "". Decided before anything is emitted, so a kept node costs nothing.
std::string kept_by(const Pass& pass, const NodeSummary& summary, const DeconvMatch& m) {
  std::string reason = pass.target.keep(summary, m, pass.options.cpu);
  if (reason.empty()) reason = pass.target.join_refusal(layout_of(pass, m), summary.form);
  if (reason.empty()) reason = pass.emitter.keep_reason(m, layout_of(pass, m));
  return reason;
}

// The selection of the first form, in table order, whose recogniser selects `node`: `absorbing` picks the forms that
// fold a ConvTranspose in, which are tried before all others.
std::optional<FormSelection> select_form(Pass& pass, const onnx::NodeProto& node, const GraphScope& scope, bool absorbing) {
  for (const auto& form : forms()) {
    if (form.absorbs_conv_transpose != absorbing || !form.may_start_at(node, pass.opset)) continue;
    if (auto selection = form.recognise(pass.context, node, scope)) {
      selection->summary.form = form.form;  // the row names what it selected
      if (selection->resize != nullptr) pass.claimed_resizes.insert(selection->resize);
      pass.claimed_resizes.insert(selection->more_resizes.begin(), selection->more_resizes.end());
      return selection;
    }
  }
  return std::nullopt;
}

// The ConvTransposes the folds absorb, and the folds' selections by root node. A fold (zero_insertion, upsample1d)
// replaces a ConvTranspose that comes before its root: the ConvTranspose of one that will be rewritten gets no row of its
// own; any other is selected as written.
struct Folds {
  std::map<const onnx::NodeProto*, FormSelection> by_root;
  std::set<const onnx::NodeProto*> absorbed;
  // The ConvTransposes of kept folds whose row is named after them (FormRow::row_named_after_absorbed).
  std::set<const onnx::NodeProto*> folded_but_kept;
};

Folds select_folds(Pass& pass) {
  Folds folds;
  for (const auto& scope : pass.tree.scopes()) {
    for (const auto& node : scope.graph->node()) {
      auto selection = select_form(pass, node, scope, /*absorbing=*/true);
      if (!selection) continue;
      if (selection->match) {
        // The ConvTranspose keeps its own name on the command line: skipping it keeps the fold too, and a
        // folded one is no typo for --only/--skip.
        const onnx::NodeProto& ct = *selection->match->absorbs;
        const std::string ct_name = ct.name().empty() ? ct.output(0) : ct.name();
        if (pass.options.skip.count(ct_name) != 0) {
          selection->match = core::declined("its ConvTranspose '" + ct_name + "' is skipped by --skip");
        } else if (unselected(pass, selection->summary).empty() && kept_by(pass, selection->summary, selection->match->deconv).empty() &&
                   !invalid(match_deconv(ct, scope, pass.model.ir_version(), pass.propagated.types, false, &pass.eval))) {
          folds.absorbed.insert(&ct);
          pass.seen_names.insert(ct_name);
        } else if (form_info(selection->summary.form).row_named_after_absorbed) {
          folds.folded_but_kept.insert(&ct);
        }
      }
      folds.by_root.emplace(&node, std::move(*selection));
    }
  }
  return folds;
}

// The rows no form selects: a nearest Resize that no form starts from is an upsampler too, so a row says what reads it
// (a model full of upsamplers never gets only "rewrite 0 of 0"; it is not a name --only or --skip take), and each
// ConvTranspose of a model-local function is listed as kept. Then the --only/--skip names that name no row.
void list_unclaimed(Pass& pass, RewriteResult& result) {
  for (const auto& scope : pass.tree.scopes()) {
    for (const auto& node : scope.graph->node()) {
      if (node.op_type() != "Resize" || !(node.domain().empty() || node.domain() == "ai.onnx") || node.output_size() < 1 ||
          node.input_size() < 1 || pass.claimed_resizes.count(&node) != 0) {
        continue;
      }
      auto mode = onnx_io::get_string(node, "mode", "nearest");
      if (!mode || *mode != "nearest") continue;
      result.nodes.push_back(resize_row(node, scope, pass.propagated.types, pass.eval, pass.uses));
    }
  }
  for (const auto& function : pass.model.functions()) {
    const size_t first = result.nodes.size();
    list_function_deconvs(function.node(), "function '" + function.domain() + "." + function.name() + "'", result.nodes);
    for (size_t i = first; i < result.nodes.size(); ++i) pass.seen_names.insert(result.nodes[i].summary.name);
  }
  for (const auto* selection : {&pass.options.only, &pass.options.skip}) {
    for (const auto& name : *selection) {
      if (pass.seen_names.count(name) == 0) result.unmatched_names.push_back(name);
    }
  }
}

// Select: every upsampler of the model as it stands, a plan row each, and the ones the command line selects. Fails
// (kInvalidModel) when a form finds the model invalid.
core::Result<std::vector<Planned>> select(Pass& pass, RewriteResult& result) {
  Folds folds = select_folds(pass);
  std::vector<Planned> planned;
  for (const auto& scope : pass.tree.scopes()) {
    for (const auto& node : scope.graph->node()) {
      if (folds.absorbed.count(&node) != 0) continue;
      std::optional<FormSelection> selection;
      if (auto fold = folds.by_root.find(&node); fold != folds.by_root.end()) {
        selection = std::move(fold->second);
      } else {
        selection = select_form(pass, node, scope, /*absorbing=*/false);
      }
      if (!selection) continue;
      auto& match = selection->match;
      if (folds.folded_but_kept.count(&node) != 0 &&
          !(match && unselected(pass, selection->summary).empty() && kept_by(pass, selection->summary, match->deconv).empty())) {
        pass.seen_names.insert(selection->summary.name);
        continue;
      }
      if (!match && match.error().kind == core::ErrorKind::kInvalidModel) {
        return core::invalid_model(match.error().message + (scope.parent ? " (in " + scope.path + ")" : ""));
      }
      NodeReport report;
      report.summary = std::move(selection->summary);
      // --only/--skip take the name the plan and report show: the node's name, or its output's when unnamed.
      pass.seen_names.insert(report.summary.name);
      if (!match) {
        report.reason = match.error().message;
        // The matcher keeps a dense ConvTranspose on any target ("dense (group 1), C to M channels: <why>"); why is the
        // target's to say, from its own runtime's measurement, not the executor's figure on every target.
        const std::string dense = "dense (group 1), ";
        if (is_deconv(node) && report.reason.rfind(dense, 0) == 0 && report.reason.find(": ") != std::string::npos) {
          report.reason = pass.target.dense_reason(report.reason.substr(0, report.reason.find(": ")));
        }
      } else if (std::string why = unselected(pass, report.summary); !why.empty()) {
        report.reason = std::move(why);
      } else {
        planned.push_back({result.nodes.size(), std::move(match->deconv), std::move(match->replaced), PhaseLayout::kDcr,
                           std::move(match->second), PhaseLayout::kDcr});
      }
      result.nodes.push_back(std::move(report));
    }
  }
  list_unclaimed(pass, result);
  return planned;
}

// Decide, from the target: the layout each planned upsampler is emitted in (planned first, as it always was: a plan too
// large to hold fails here, kept or not), and each one the target keeps gets its reason and leaves the plan.
void decide(const Pass& pass, RewriteResult& result, std::vector<Planned>& planned) {
  std::vector<Planned> rewritten;
  for (auto& p : planned) {
    p.layout = layout_of(pass, p.match);
    std::string reason = kept_by(pass, result.nodes[p.index].summary, p.match);
    if (p.second) {
      // A pair is rewritten whole or kept whole: each stage answers the target's rules as the ConvTranspose it is.
      p.second_layout = layout_of(pass, *p.second);
      if (reason.empty()) reason = kept_by(pass, result.nodes[p.index].summary, *p.second);
    }
    if (!reason.empty()) {
      result.nodes[p.index].reason = std::move(reason);
    } else {
      rewritten.push_back(std::move(p));
    }
  }
  planned = std::move(rewritten);
}

// The matches `p` emits, in order, with their layouts: its one match, or a pair's two stages, the first writing a tensor
// named afresh (the pair's middle, which the original does not have) that the second reads.
std::vector<std::pair<DeconvMatch, PhaseLayout>> stages_of(Pass& pass, const Planned& p) {
  std::vector<std::pair<DeconvMatch, PhaseLayout>> stages{{p.match, p.layout}};
  if (p.second) {
    const std::string middle = pass.names.fresh(p.second->output + "_rows");
    stages[0].first.output = middle;
    stages.emplace_back(*p.second, p.second_layout);
    stages[1].first.input = middle;
  }
  return stages;
}

// Apply: emits each planned upsampler in its layout, rebuilds the graphs, removes what only the originals read and
// records each rewritten row's region (in the original's names).
core::Status apply(Pass& pass, RewriteResult& result, const std::vector<Planned>& planned) {
  std::map<const onnx::NodeProto*, std::vector<onnx::NodeProto>> replacements;
  std::vector<Candidate> candidates;
  std::map<size_t, std::vector<std::string>> region_candidates;  // per rewritten row: the values its region may hold
  for (const auto& p : planned) {
    const size_t index = p.index;
    std::vector<std::string> chains;  // the stages' weight chains, recorded after the form's own tensors
    for (const auto& [m, layout] : stages_of(pass, p)) {
      auto nodes = pass.emitter.emit(m, layout);
      if (!nodes) return nodes.error();
      for (const auto& n : *nodes) result.nodes[index].emitted_nodes.push_back(n.name());
      replacements.emplace(m.node, std::move(*nodes));
      // The weight's Identity chain, then the weight itself, may be orphaned now.
      for (const auto& [scope, identity] : m.weight.identities) candidates.push_back({scope, identity->output(0), false});
      if (!m.derived_weight) candidates.push_back({m.weight.scope, m.weight.name, m.weight.constant_node == nullptr});
      for (const auto& [scope, name] : m.weight_chain) candidates.push_back({scope, name, producer_index(*scope->graph, name) < 0});
      for (const auto& [scope, name] : m.weight_chain) chains.push_back(name);
    }
    result.nodes[index].rewritten = true;
    result.nodes[index].layout = p.layout;
    // For a recognised form, every node and constant that computed its input from x and its weight.
    for (const auto& [scope, name] : p.replaced) candidates.push_back({scope, name, producer_index(*scope->graph, name) < 0});
    // The record of what it replaced: x, y and the bias now (a pair's are its second stage's, and the tensor its first
    // stage replaced is one of its nodes); its other nodes once the orphans are known, below.
    const DeconvMatch& last = p.second ? *p.second : p.match;
    auto& region = result.nodes[index].region;
    region.input = p.match.input;
    region.output = last.output;
    region.bias = last.bias;
    region.nodes = {last.output};
    if (p.second) region.nodes.push_back(p.match.output);
    auto& names = region_candidates[index];
    for (const auto& [scope, name] : p.replaced) names.push_back(name);
    names.insert(names.end(), chains.begin(), chains.end());
  }
  // Children before parents: scopes() lists parents first, and rebuilding moves a parent's nodes.
  const auto& scopes = pass.tree.scopes();
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    rebuild(*it->graph, replacements, pass.emitter.constants_after());
  }
  const std::set<std::string> removed = remove_orphans(pass.model, std::move(candidates));
  for (const auto& [index, names] : region_candidates) {
    for (const auto& name : names) {
      if (removed.count(name) != 0) result.nodes[index].region.nodes.push_back(name);
    }
  }
  result.derived_tensors = pass.emitter.derived_tensors();
  return core::Ok{};
}

// One pass over the model: select every upsampler as the model stands, decide which are rewritten, then apply.
core::Result<RewriteResult> rewrite_pass(onnx::ModelProto& model, const RewriteOptions& options) {
  RewriteResult result;
  result.target = options.target;
  result.cpu = options.cpu;
  Pass pass(model, options);
  result.warnings = pass.propagated.warnings;
  auto planned = select(pass, result);
  if (!planned) return planned.error();
  decide(pass, result, *planned);
  if (auto applied = apply(pass, result, *planned); !applied) return applied.error();
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
    // A nearest Resize an earlier pass emitted (a split Conv's 1x1 part, then its Resize, read by the sum) is no
    // upsampler of the model's: no row of its own.
    if (!row.rewritten && row.summary.form == Form::kNearestResize && emitted_by.count(row.summary.name) != 0) continue;
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
