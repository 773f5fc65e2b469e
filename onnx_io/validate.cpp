#include "onnx_io/validate.h"

#include <limits>

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx_io/attributes.h"
#include "onnx_io/graph_walk.h"
#include "onnx_io/model_io.h"
#include "onnx_io/shapes.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::onnx_io {
namespace {

core::Error check_failed(std::string message) { return {core::ErrorKind::kCheckFailed, std::move(message)}; }

// ONNX's messages span lines; a CI log reads better with one line per error.
std::string one_line(const std::string& text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    const bool blank = c == '\n' || c == '\r' || c == ' ' || c == '\t';
    if (blank) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// Dims whose product overflows would make the checker report a misleading "0-element" tensor; say it plainly.
core::Status check_tensor_dims(const onnx::GraphProto& graph) {
  core::Status status = core::Ok{};
  for_each_tensor(graph, [&status](const onnx::TensorProto& t) {
    if (!status) return;
    if (auto count = element_count(t); !count) status = check_failed(count.error().message);
  });
  return status;
}

core::Status check_scope(const onnx::GraphProto& graph, std::set<std::string> visible, const std::string& path) {
  std::set<std::string> defined;
  auto define = [&](const std::string& name, const std::string& what) -> core::Status {
    if (name.empty()) return core::Ok{};
    if (!defined.insert(name).second) return check_failed(path + ": tensor '" + name + "' is defined twice (" + what + ")");
    visible.insert(name);
    return core::Ok{};
  };
  for (const auto& v : graph.input()) {
    if (auto s = define(v.name(), "graph input"); !s) return s;
  }
  for (const auto& t : graph.initializer()) {
    if (defined.count(t.name()) != 0) continue;  // IR < 4 lists initializers as inputs too
    if (auto s = define(t.name(), "initializer"); !s) return s;
  }
  for (const auto& t : graph.sparse_initializer()) {
    if (auto s = define(t.values().name(), "sparse initializer"); !s) return s;
  }
  for (const auto& node : graph.node()) {
    for (const auto& in : node.input()) {
      if (!in.empty() && visible.count(in) == 0) {
        return check_failed(path + ": " + describe_node(node) + " reads '" + in + "', which is not defined before it");
      }
    }
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) {
        if (auto s = check_scope(attr.g(), visible, path + "/" + describe_node(node)); !s) return s;
      }
      for (const auto& g : attr.graphs()) {
        if (auto s = check_scope(g, visible, path + "/" + describe_node(node)); !s) return s;
      }
    }
    for (const auto& out : node.output()) {
      if (auto s = define(out, describe_node(node)); !s) return s;
    }
  }
  for (const auto& out : graph.output()) {
    if (visible.count(out.name()) == 0) return check_failed(path + ": graph output '" + out.name() + "' is never defined");
  }
  return core::Ok{};
}

// Default-domain ops whose versions after opset 17 (the newest libonnx 1.12 knows) take more inputs than their
// newest schema there: Pad-18 (`axes`), the Reduce ops of opset 18 (`axes` became an input), DFT-20
// (`dft_length` and `axis` became inputs). Their maximum input count is not checked.
const std::set<std::string> kInputsAddedAfterLibrary = {"Pad",        "ReduceL1",        "ReduceL2",  "ReduceLogSum",
                                                        "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
                                                        "ReduceProd", "ReduceSumSquare", "DFT"};

// "2", "2 to 3" or "at least 1".
std::string count_range(int lo, int hi) {
  if (hi == std::numeric_limits<int>::max()) return "at least " + std::to_string(lo);
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
}

std::string counted(int n, const std::string& what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); }

// Every default-domain node of `graph` and its subgraphs has as many inputs and outputs as the newest schema
// this library has for its op at `opset` allows. The checker does this for models it accepts.
core::Status check_arity(const onnx::GraphProto& graph, int opset, const std::string& path) {
  for (const auto& node : graph.node()) {
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    const auto* schema = default_domain ? onnx::OpSchemaRegistry::Schema(node.op_type(), opset, "") : nullptr;
    if (schema != nullptr && !schema->Deprecated()) {
      const std::string& op = node.op_type();
      const bool max_known = kInputsAddedAfterLibrary.count(op) == 0;
      if (node.input_size() < schema->min_input() || (max_known && node.input_size() > schema->max_input())) {
        return check_failed(path + ": " + describe_node(node) + " has " + counted(node.input_size(), "input") + ", but " + op +
                            " takes " + count_range(schema->min_input(), schema->max_input()) + " (opset " +
                            std::to_string(opset) + " schema)");
      }
      if (node.output_size() < schema->min_output() || node.output_size() > schema->max_output()) {
        return check_failed(path + ": " + describe_node(node) + " has " + counted(node.output_size(), "output") + ", but " + op +
                            " has " + count_range(schema->min_output(), schema->max_output()) + " (opset " +
                            std::to_string(opset) + " schema)");
      }
    }
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) {
        if (auto s = check_arity(attr.g(), opset, path + "/" + describe_node(node)); !s) return s;
      }
      for (const auto& g : attr.graphs()) {
        if (auto s = check_arity(g, opset, path + "/" + describe_node(node)); !s) return s;
      }
    }
  }
  return core::Ok{};
}

}  // namespace

int64_t library_max_opset() {
  const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto it = map.find(onnx::ONNX_DOMAIN);
  return it == map.end() ? 0 : it->second.second;
}

int64_t library_ir_version() { return onnx::Version::IR_VERSION; }

core::Status check_structure(const onnx::GraphProto& graph) { return check_scope(graph, {}, "main graph"); }

core::Result<Validation> validate_model(const onnx::ModelProto& model, const std::set<std::string>& emitted) {
  const bool newer = default_opset(model) > library_max_opset() || model.ir_version() > library_ir_version();
  Validation v;
  if (auto dims = check_tensor_dims(model.graph()); !dims) return dims.error();
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    if (!newer) return check_failed("ONNX checker: " + one_line(e.what()));
    v.full = false;
    v.detail = "the checker could not judge it (" + one_line(e.what()) + "); ";
  }
  if (!newer) {
    onnx::ModelProto copy = skeleton_copy(model);  // inference needs types and dims, not weight data
    if (auto inferred = infer_shapes_isolated(copy, /*strict=*/true, /*data_propagation=*/false); !inferred) {
      return check_failed("ONNX shape inference: " + one_line(inferred.error().message));
    }
    v.detail = "ONNX checker and strict shape inference passed";
    return v;
  }

  // A model newer than the library: check what it can, and say so.
  v.full = false;
  if (auto s = check_structure(model.graph()); !s) return s.error();
  const int schema_opset = static_cast<int>(std::min(default_opset(model), library_max_opset()));
  if (auto s = check_arity(model.graph(), schema_opset, "main graph"); !s) return s.error();
  onnx::checker::CheckerContext ctx;
  ctx.set_ir_version(static_cast<int>(std::min<int64_t>(model.ir_version(), library_ir_version())));
  ctx.set_opset_imports({{onnx::ONNX_DOMAIN, schema_opset}});
  onnx::checker::LexicalScopeContext lex;
  size_t checked = 0;
  std::string failure;
  for_each_graph(model.graph(), [&](const onnx::GraphProto& graph) {
    for (const auto& node : graph.node()) {
      if (emitted.count(node.name()) == 0 || !failure.empty()) continue;
      try {
        onnx::checker::check_node(node, ctx, lex);
        ++checked;
      } catch (const std::exception& e) {
        failure = describe_node(node) + ": " + one_line(e.what());
      }
    }
  });
  if (!failure.empty()) return check_failed("ONNX checker on an emitted node: " + failure);
  v.detail += "the model (opset " + std::to_string(default_opset(model)) + ", IR " + std::to_string(model.ir_version()) +
              ") is newer than this ONNX library (opset " + std::to_string(library_max_opset()) + ", IR " +
              std::to_string(library_ir_version()) + "): checked graph structure, every node's input and output counts, and the " + std::to_string(checked) +
              " emitted nodes against opset " + std::to_string(library_max_opset()) + " schemas";
  return v;
}

}  // namespace dwdeconv::onnx_io
