#include "cli/tune.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "cli/report.h"
#include "core/text.h"
#include "runtime_check/bench.h"
#include "runtime_check/tensor_io.h"

namespace dwdeconv::cli {
namespace {

// The nodes outside the region that compute what its nodes read from constants only (torch's `Identity` of a weight two
// layers share, a Constant), closed upstream; an error naming the first tensor they read that is computed from the
// model's data instead, which the region cannot stand alone without.
core::Result<std::set<const onnx::NodeProto*>> constant_feeders(const onnx::GraphProto& graph, const UpsamplerRegion& region,
                                                                std::set<std::string> read) {
  std::map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : graph.node()) {
    for (const auto& o : n.output()) producer[o] = &n;
  }
  std::set<std::string> initializers;
  for (const auto& t : graph.initializer()) initializers.insert(t.name());
  std::set<const onnx::NodeProto*> members(region.original_nodes.begin(), region.original_nodes.end()), feeders;
  std::vector<std::string> pending(read.begin(), read.end());
  while (!pending.empty()) {
    const std::string name = pending.back();
    pending.pop_back();
    if (name.empty() || name == region.input) continue;
    const auto it = producer.find(name);
    if (it == producer.end()) {
      if (initializers.count(name) != 0) continue;
      return core::Error{core::ErrorKind::kCannotVerify,
                         "it reads '" + core::printable(name) + "', a graph input other than its own input"};
    }
    if (members.count(it->second) != 0 || !feeders.insert(it->second).second) continue;
    for (const auto& in : it->second->input()) {
      if (read.insert(in).second) pending.push_back(in);
    }
  }
  return feeders;
}

// The region cut out as a model: its nodes in graph order, the nodes and initializers that compute what they read from
// constants, its input as the graph input at its static shape and its output as the graph output. Errors say why it
// cannot stand alone.
core::Result<onnx::ModelProto> cut_out(const onnx::ModelProto& original, const UpsamplerRegion& region) {
  if (region.input.empty() || !region.input_type || !region.input_type->tensor_type().has_shape()) {
    return core::Error{core::ErrorKind::kCannotVerify, "the input's shape is not known"};
  }
  for (const auto& d : region.input_type->tensor_type().shape().dim()) {
    if (!d.has_dim_value())
      return core::Error{core::ErrorKind::kCannotVerify, "the input's shape " + region.input_shape + " is not static"};
  }
  std::set<const onnx::NodeProto*> members(region.original_nodes.begin(), region.original_nodes.end());
  std::set<std::string> read;
  for (const auto* n : region.original_nodes) read.insert(n->input().begin(), n->input().end());
  auto feeders = constant_feeders(original.graph(), region, read);
  if (!feeders) return feeders.error();
  for (const auto* n : *feeders) read.insert(n->input().begin(), n->input().end());
  onnx::ModelProto mini;
  mini.set_ir_version(original.ir_version());
  *mini.mutable_opset_import() = original.opset_import();
  *mini.mutable_functions() = original.functions();
  auto* g = mini.mutable_graph();
  g->set_name("tune");
  for (const auto& n : original.graph().node()) {
    if (members.count(&n) || feeders->count(&n)) *g->add_node() = n;
  }
  for (const auto& t : original.graph().initializer()) {
    if (read.count(t.name())) *g->add_initializer() = t;
  }
  auto* in = g->add_input();
  in->set_name(region.input);
  *in->mutable_type() = *region.input_type;
  auto* out = g->add_output();
  out->set_name(region.output);
  if (region.output_type) {
    *out->mutable_type() = *region.output_type;
  } else {
    out->mutable_type()->mutable_tensor_type()->set_elem_type(region.input_type->tensor_type().elem_type());
  }
  return mini;
}

std::string ratio_text(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2fx", x);
  return b;
}

}  // namespace

core::Result<std::vector<TuneFigure>> tune_upsamplers(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                                      const rewrite::RewriteResult& result, const rewrite::RewriteOptions& options,
                                                      const Options& opt, const std::vector<runtime_check::NamedTensor>& inputs,
                                                      RuntimeInfo& runtime) {
  std::vector<TuneFigure> figures;
  if (opt.runtime == kBuiltinRuntime) runtime = builtin_runtime_info();
  const auto regions = upsampler_regions(original, rewritten, result, inputs);
  std::map<std::pair<std::string, std::string>, int> named;  // rows per (graph, name): --tune decides by name
  for (const auto& node : result.nodes) ++named[{node.summary.graph_path, node.summary.name}];
  // Every upsampler the target rewrites gets a figure: timed alone, or why not (and then it is kept).
  for (const auto& node : result.nodes) {
    if (!node.rewritten) continue;
    TuneFigure f;
    f.name = node.summary.name;
    f.graph_path = node.summary.graph_path;
    f.input_shape = "?";
    const auto region = std::find_if(regions.begin(), regions.end(), [&](const UpsamplerRegion& r) { return r.name == f.name; });
    if (named[{f.graph_path, f.name}] > 1) {
      f.not_timed = "another upsampler has the same name, and --tune tells them apart by name";
    } else if (node.summary.graph_path != "main") {
      f.not_timed = "inside " + node.summary.graph_path + ": --tune cuts out main-graph upsamplers only";
    } else if (region == regions.end()) {
      f.not_timed = "its region of the original could not be found";
    }
    if (!f.not_timed.empty()) {
      f.rewritten = false;
      figures.push_back(f);
      continue;
    }
    f.input_shape = region->input_shape;
    auto mini = cut_out(original, *region);
    if (!mini) {
      f.not_timed = mini.error().message;
      f.rewritten = false;
      figures.push_back(f);
      continue;
    }
    // The same rewrite, of this upsampler only.
    onnx::ModelProto mini_rewritten = *mini;
    rewrite::RewriteOptions one = options;
    one.only = {region->name};
    one.skip.clear();
    auto again = rewrite::rewrite_model(mini_rewritten, one);
    if (!again || again->rewritten != 1) {
      f.not_timed = again ? "cut out, the rewrite does not take it" : again.error().message;
      f.rewritten = false;
      figures.push_back(f);
      continue;
    }
    if (opt.runtime == kBuiltinRuntime) {
      runtime_check::BenchOptions bo;
      bo.seed = opt.seed;
      bo.threads = opt.threads;
      bo.runs = opt.runs;
      bo.profile_runs = 0;
      auto timed = runtime_check::bench_models(*mini, mini_rewritten, bo);
      if (!timed) {
        f.not_timed = timed.error().message;
      } else {
        f.original_ms = timed->original_ms;
        f.rewritten_ms = timed->rewritten_ms;
        f.speedup = timed->speedup;
      }
    } else {
      auto mini_inputs = runtime_inputs(*mini, {}, {}, opt.seed);
      if (!mini_inputs) return mini_inputs.error();
      auto run = run_on_python_runtime(*mini, mini_rewritten, *mini_inputs, opt, opt.runs, 0);
      if (!run) {
        // The runtime unreachable fails the run; a converter refusing one piece is that piece's figure.
        if (run.error().kind == core::ErrorKind::kUsage) return run.error();
        f.not_timed = run.error().message;
      } else {
        runtime = run->runtime;
        const auto b = bench_from_run(*run, opt.threads);
        f.original_ms = b.original_ms;
        f.rewritten_ms = b.rewritten_ms;
        f.speedup = b.speedup;
      }
    }
    f.rewritten = f.not_timed.empty() && f.speedup >= 1.0;
    figures.push_back(f);
  }
  return figures;
}

std::function<std::string(const rewrite::NodeSummary&)> tune_keep_rule(const rewrite::RewriteResult& first,
                                                                       const std::vector<TuneFigure>& figures, const RuntimeInfo& runtime) {
  using Key = std::pair<std::string, std::string>;  // (graph path, plan name)
  std::map<Key, std::string> decided;               // every row of the first rewrite: "" to leave it to the target, else why it is kept
  for (const auto& n : first.nodes) decided[{n.summary.graph_path, n.summary.name}] = "";
  for (const auto& f : figures) decided[{f.graph_path, f.name}] = f.rewritten ? "" : tune_reason(f, runtime);
  return [decided](const rewrite::NodeSummary& s) -> std::string {
    if (const auto it = decided.find({s.graph_path, s.name}); it != decided.end()) return it->second;
    return "--tune: not timed alone (the first rewrite folded it into an upsampler that --tune keeps), so kept";
  };
}

std::string tune_line(const TuneFigure& f, const RuntimeInfo& runtime) {
  std::string line = "tune: " + json_string(f.name) + " (" + f.input_shape + ")";
  if (!f.not_timed.empty()) return core::printable_line(line + " not timed alone (" + f.not_timed + "): keep");
  char ms[96];
  std::snprintf(ms, sizeof ms, " %.3f ms -> %.3f ms, ", f.original_ms, f.rewritten_ms);
  return core::printable_line(line + ms + ratio_text(f.speedup) + " alone on " + runtime.label + ": " + (f.rewritten ? "rewrite" : "keep"));
}

std::string tune_reason(const TuneFigure& f, const RuntimeInfo& runtime) {
  if (!f.not_timed.empty()) return "--tune: not timed alone (" + f.not_timed + "), so kept: --tune rewrites only what it measured";
  return "--tune: measured " + ratio_text(f.speedup) + " alone on " + runtime.label + " at input " + f.input_shape +
         " (medians of interleaved runs), slower rewritten";
}

}  // namespace dwdeconv::cli
