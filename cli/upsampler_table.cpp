#include "cli/upsampler_table.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "cli/report.h"
#include "core/text.h"
#include "onnx_io/shapes.h"
#include "rewrite/shape_propagation.h"

namespace dwdeconv::cli {
namespace {

// The plan's name of a node: its name, or its first output's when unnamed.
std::string plan_name(const onnx::NodeProto& n) { return !n.name().empty() ? n.name() : (n.output_size() ? n.output(0) : ""); }

// The node name inside describe_node()'s text: "Conv 'c1'" -> c1, "Conv producing 'y'" -> y.
std::string quoted_name(const std::string& described) {
  const auto open = described.find('\'');
  const auto close = described.rfind('\'');
  if (open == std::string::npos || close <= open) return described;
  return described.substr(open + 1, close - open - 1);
}

// Whether a profiler's node name stands for `node`: the same name or first output, or one ONNX Runtime derived from
// it (its layout transformer names a converted node after the node or its output, plus a suffix such as "_nchwc").
bool profiled_as(const std::string& profiled, const onnx::NodeProto& node) {
  for (const std::string& name : {node.name(), node.output_size() ? node.output(0) : std::string()}) {
    if (name.empty()) continue;
    if (profiled == name) return true;
    if (profiled.size() > name.size() && profiled.compare(0, name.size(), name) == 0 && profiled[name.size()] == '_' &&
        profiled.find("_nchwc", name.size()) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// The profiled time of one region: the profiled nodes that stand for one of its nodes, then the layout reorders ONNX
// Runtime inserted around them (ReorderInput / ReorderOutput, which read a value those nodes write or write one they
// read). Each profiled node counts once, for the first region that takes it (`used`).
double time_of(const std::vector<const onnx::NodeProto*>& nodes, const std::vector<NodeMs>& times, std::set<size_t>& used) {
  double ms = 0;
  std::set<std::string> values;  // what the region's profiled nodes read and write
  for (size_t k = 0; k < times.size(); ++k) {
    if (used.count(k)) continue;
    for (const auto* n : nodes) {
      if (profiled_as(times[k].node, *n)) {
        ms += times[k].ms;
        used.insert(k);
        for (const auto* names : {&times[k].inputs, &times[k].outputs}) {
          for (const auto& v : *names) {
            if (!v.empty()) values.insert(v);  // an optional input left out names no value
          }
        }
        break;
      }
    }
  }
  for (size_t k = 0; k < times.size(); ++k) {
    if (used.count(k) || times[k].op.rfind("Reorder", 0) != 0) continue;
    const auto touches = [&](const std::vector<std::string>& names) {
      return std::any_of(names.begin(), names.end(), [&](const std::string& v) { return values.count(v) != 0; });
    };
    if (touches(times[k].inputs) || touches(times[k].outputs)) {
      ms += times[k].ms;
      used.insert(k);
    }
  }
  return ms;
}

}  // namespace

std::vector<NodeMs> executor_node_times(const runtime_check::ExecutorProfile& profile) {
  std::vector<NodeMs> out;
  const double runs = profile.runs > 0 ? static_cast<double>(profile.runs) : 1.0;
  for (const auto& n : profile.top_nodes) out.push_back({quoted_name(n.node), n.op_type, (n.ms + n.convert_ms) / runs, {}, {}});
  return out;
}

std::vector<UpsamplerRegion> upsampler_regions(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                               const rewrite::RewriteResult& result,
                                               const std::vector<runtime_check::NamedTensor>& inputs) {
  std::vector<UpsamplerRegion> regions;
  const auto& og = original.graph();
  std::map<std::string, const onnx::NodeProto*> first_output_of;
  for (const auto& n : og.node()) {
    if (n.output_size() > 0) first_output_of.emplace(n.output(0), &n);
  }
  // Types of the original's values at the inputs' dims, as the rewrite computes them (rewrite/shape_propagation.h).
  onnx::ModelProto skeleton = onnx_io::skeleton_copy(original);
  for (auto& in : *skeleton.mutable_graph()->mutable_input()) {
    for (const auto& t : inputs) {
      if (t.name != in.name() || !in.type().has_tensor_type()) continue;
      auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->clear_dim();
      for (int64_t d : t.tensor.dims) shape->add_dim()->set_dim_value(d);
    }
  }
  const auto propagated = rewrite::propagate_types(skeleton);
  const auto type_of = [&propagated](const std::string& name) { return propagated.types.find(0, name); };
  // A name two nodes share names no one region: such upsamplers get none (their times could be either's).
  std::map<std::string, const onnx::NodeProto*> by_plan_name;
  std::set<std::string> shared;
  for (const auto& n : og.node()) {
    if (!by_plan_name.emplace(plan_name(n), &n).second) shared.insert(plan_name(n));
  }
  for (const auto& name : shared) by_plan_name.erase(name);
  std::map<std::string, const onnx::NodeProto*> rewritten_by_name;
  for (const auto& n : rewritten.graph().node()) rewritten_by_name.emplace(plan_name(n), &n);
  for (const auto& n : result.nodes) {
    if (!n.rewritten || n.summary.graph_path != "main") continue;
    const auto anchor = by_plan_name.find(n.summary.name);
    if (anchor == by_plan_name.end()) continue;
    UpsamplerRegion region;
    region.name = n.summary.name;
    region.form = rewrite::form_name(n.summary.form);
    // What the rewriter recorded replacing: its nodes (by first output) and the one activation it reads.
    for (const auto& name : n.region.nodes) {
      const auto p = first_output_of.find(name);
      if (p != first_output_of.end()) region.original_nodes.push_back(p->second);
    }
    if (region.original_nodes.empty() || region.original_nodes.front() != anchor->second) continue;
    region.input = n.region.input;
    region.output = n.region.output;
    region.input_shape = "?";
    if (const auto* t = type_of(region.input); t != nullptr && t->has_tensor_type()) {
      region.input_type = *t;
      if (t->tensor_type().has_shape()) {
        std::string text;
        for (const auto& d : t->tensor_type().shape().dim()) {
          text += (text.empty() ? "" : "x") + (d.has_dim_value() ? std::to_string(d.dim_value()) : std::string("?"));
        }
        region.input_shape = text;
      }
    }
    if (const auto* t = type_of(region.output); t != nullptr && t->has_tensor_type()) region.output_type = *t;
    for (const auto& name : n.emitted_nodes) {
      if (const auto e = rewritten_by_name.find(name); e != rewritten_by_name.end()) region.emitted_nodes.push_back(e->second);
    }
    regions.push_back(std::move(region));
  }
  return regions;
}

std::vector<UpsamplerTime> upsampler_times(const onnx::ModelProto& original, const onnx::ModelProto& rewritten,
                                           const rewrite::RewriteResult& result, const std::vector<NodeMs>& original_nodes,
                                           const std::vector<NodeMs>& rewritten_nodes,
                                           const std::vector<runtime_check::NamedTensor>& inputs) {
  std::vector<UpsamplerTime> rows;
  std::set<size_t> used_original, used_rewritten;
  for (const auto& region : upsampler_regions(original, rewritten, result, inputs)) {
    UpsamplerTime row;
    row.name = region.name;
    row.form = region.form;
    row.input_shape = region.input_shape;
    row.original_ms = time_of(region.original_nodes, original_nodes, used_original);
    row.rewritten_ms = time_of(region.emitted_nodes, rewritten_nodes, used_rewritten);
    rows.push_back(row);
  }
  return rows;
}

std::string format_upsampler_times(const std::vector<UpsamplerTime>& rows) {
  size_t width = 9;
  for (const auto& r : rows) width = std::max(width, core::printable(r.name).size());
  char line[512];
  std::snprintf(line, sizeof line, "  %-*s  %-22s  %-16s %12s %13s %7s\n", static_cast<int>(width), "upsampler", "form", "input",
                "original ms", "rewritten ms", "ratio");
  std::string text = line;
  for (const auto& r : rows) {
    const std::string ratio = r.rewritten_ms > 0 ? [&] {
      char b[32];
      std::snprintf(b, sizeof b, "%.2fx", r.original_ms / r.rewritten_ms);
      return std::string(b);
    }() : std::string("-");
    std::snprintf(line, sizeof line, "  %-*s  %-22s  %-16s %12.3f %13.3f %7s\n", static_cast<int>(width), core::printable(r.name).c_str(),
                  r.form.c_str(), r.input_shape.c_str(), r.original_ms, r.rewritten_ms, ratio.c_str());
    text += line;
  }
  return text;
}

}  // namespace dwdeconv::cli
