#include "cli/model_stats.h"

#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "onnx_io/graph_walk.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::cli {
namespace {

// 1234567 -> "1.2 MB": decimal units, as file managers and onnxsim print sizes.
std::string bytes_text(int64_t bytes) {
  char buf[32];
  if (bytes < 1000) {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  } else if (bytes < 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f KB", bytes / 1e3);
  } else if (bytes < 1000LL * 1000 * 1000) {
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  }
  return buf;
}

// "a -> b (+13%)": the relative change, rounded to a whole percent, omitted when there is none.
std::string change_text(int64_t before, int64_t after) {
  std::string text = bytes_text(before) + " -> " + bytes_text(after);
  if (before > 0 && before != after) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%+.0f%%)", 100.0 * (static_cast<double>(after) - before) / before);
    text += buf;
  }
  return text;
}

// The op types whose count differs between the two models, in name order.
std::set<std::string> changed_ops(const ModelStats& before, const ModelStats& after) {
  std::set<std::string> names;
  for (const auto* stats : {&before, &after}) {
    for (const auto& [op, count] : stats->ops) names.insert(op);
  }
  std::set<std::string> changed;
  for (const auto& op : names) {
    const auto a = before.ops.count(op) ? before.ops.at(op) : 0, b = after.ops.count(op) ? after.ops.at(op) : 0;
    if (a != b) changed.insert(op);
  }
  return changed;
}

int64_t count_of(const ModelStats& stats, const std::string& op) {
  const auto it = stats.ops.find(op);
  return it == stats.ops.end() ? 0 : it->second;
}

}  // namespace

ModelStats model_stats(const onnx::ModelProto& model) {
  ModelStats stats;
  onnx_io::for_each_graph(model.graph(), [&stats](const onnx::GraphProto& g) {
    for (const auto& node : g.node()) {
      ++stats.ops[node.op_type()];
      ++stats.nodes;
    }
  });
  onnx_io::for_each_tensor(model.graph(), [&stats](const onnx::TensorProto& t) {
    const auto count = onnx_io::element_count(t);
    // Types without a fixed size (strings) count by their raw bytes, if any.
    const int64_t size = static_cast<int64_t>(onnx_io::element_size(t.data_type()));
    stats.weight_bytes += count && size > 0 ? *count * size : static_cast<int64_t>(t.raw_data().size());
  });
  stats.model_bytes = static_cast<int64_t>(model.ByteSizeLong());
  return stats;
}

std::string stats_change_text(const ModelStats& before, const ModelStats& after) {
  std::string ops;
  for (const auto& op : changed_ops(before, after)) {
    ops += (ops.empty() ? "" : ", ") + op + " " + std::to_string(count_of(before, op)) + " -> " + std::to_string(count_of(after, op));
  }
  if (ops.empty() && before.model_bytes == after.model_bytes) return "nothing";
  return (ops.empty() ? std::string() : ops + "; ") + std::to_string(before.nodes) + " -> " + std::to_string(after.nodes) +
         " nodes; model " + change_text(before.model_bytes, after.model_bytes) + ", weights " +
         change_text(before.weight_bytes, after.weight_bytes);
}

Json stats_change_json(const ModelStats& before, const ModelStats& after) {
  Json ops = Json::object();
  for (const auto& op : changed_ops(before, after)) ops[op] = {count_of(before, op), count_of(after, op)};
  return {{"ops", ops},
          {"nodes", {before.nodes, after.nodes}},
          {"model_bytes", {before.model_bytes, after.model_bytes}},
          {"weight_bytes", {before.weight_bytes, after.weight_bytes}}};
}

}  // namespace dwdeconv::cli
