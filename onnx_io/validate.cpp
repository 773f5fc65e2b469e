#include "onnx_io/validate.h"

#include <limits>
#include <map>
#include <vector>

#include <onnx/checker.h>
#include <onnx/common/version.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "onnx_io/attributes.h"
#include "onnx_io/graph_walk.h"
#include "onnx_io/model_io.h"
#include "onnx_io/shapes.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::onnx_io {
namespace {

core::Error check_failed(std::string message) { return {core::ErrorKind::kFailedValidation, std::move(message)}; }

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

// The names visible at a point of a graph, each with where it is defined ("an initializer of the main graph"),
// for messages.
using VisibleNames = std::map<std::string, std::string>;

// `graph`'s structure, with `visible` the names its enclosing graphs define before the node holding it (none for
// the main graph) and `attribute` the name of the attribute that holds it ("" for the main graph).
//
// A nested graph may not define a name visible from an outer scope, neither by a node output nor as an input or an
// initializer. The ONNX IR spec says so since onnx 1.19 (docs/IR.md, "Nodes": "In the case of a nested subgraph, a
// node output name and names of inputs and initializers of the subgraph MUST be distinct from the names from the
// outer scopes that are visible in the nested subgraph. That is, variable shadowing is not allowed"; onnx/onnx#6955,
// answering onnx/onnx#2303). The ONNX checker enforces it for node outputs only (libonnx 1.12 and onnx 1.23 alike:
// check_graph looks up a subgraph's inputs in its own graph, "TODO: If shadowing isn't allowed, this should maybe use
// this_or_ancestor_graph_has"), and runtimes disagree on the rest: ONNX Runtime 1.32 runs an If branch whose
// initializer 'W' shadows an outer 'W' with the OUTER tensor when the outer one has another reader and with the inner
// one otherwise, while the rewrite would fold whichever this tool's scoping picks.
core::Status check_scope(const onnx::GraphProto& graph, VisibleNames visible, const std::string& path, const std::string& attribute) {
  const std::string here = attribute.empty() ? "the " + path : path + " (" + attribute + ")";
  std::set<std::string> defined;
  // `what` names the kind of definition in messages, `where` says which one it is ("an initializer of the main graph").
  auto define = [&](const std::string& name, const std::string& what, const std::string& where) -> core::Status {
    if (name.empty()) return core::Ok{};
    if (!defined.insert(name).second) return check_failed(path + ": tensor '" + name + "' is defined twice (" + what + ")");
    visible[name] = where;
    return core::Ok{};
  };
  // Inputs and initializers of a nested graph: a name an outer scope defines would be ambiguous between the two.
  auto define_own = [&](const std::string& name, const std::string& what, const std::string& article) -> core::Status {
    if (const auto outer = visible.find(name); !attribute.empty() && outer != visible.end() && defined.count(name) == 0) {
      return check_failed(path + ": the " + attribute + " graph's " + what + " '" + name + "' shadows '" + name + "', " + outer->second +
                          " (ONNX forbids a nested graph's inputs and initializers to reuse a name visible from an outer "
                          "scope, and runtimes resolve such a name differently)");
    }
    return define(name, what, article + " " + what + " of " + here);
  };
  for (const auto& v : graph.input()) {
    if (auto s = define_own(v.name(), "graph input", "a"); !s) return s;
  }
  for (const auto& t : graph.initializer()) {
    if (defined.count(t.name()) != 0) continue;  // IR < 4 lists initializers as inputs too
    if (auto s = define_own(t.name(), "initializer", "an"); !s) return s;
  }
  for (const auto& t : graph.sparse_initializer()) {
    if (auto s = define_own(t.values().name(), "sparse initializer", "a"); !s) return s;
  }
  for (const auto& node : graph.node()) {
    for (const auto& in : node.input()) {
      if (!in.empty() && visible.count(in) == 0) {
        return check_failed(path + ": " + describe_node(node) + " reads '" + in + "', which is not defined before it");
      }
    }
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) {
        if (auto s = check_scope(attr.g(), visible, path + "/" + describe_node(node), attr.name()); !s) return s;
      }
      for (const auto& g : attr.graphs()) {
        if (auto s = check_scope(g, visible, path + "/" + describe_node(node), attr.name()); !s) return s;
      }
    }
    for (const auto& out : node.output()) {
      // ONNX allows no shadowing by a node either: its outputs may not reuse a name an outer graph defines.
      if (!out.empty() && visible.count(out) != 0 && defined.count(out) == 0) {
        return check_failed(path + ": " + describe_node(node) + " writes '" + out + "', which an outer graph already defines " +
                            "(ONNX requires single static assignment across subgraphs)");
      }
      if (auto s = define(out, describe_node(node), "the output of " + describe_node(node) + " in " + here); !s) return s;
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
const std::set<std::string> kInputsAddedAfterLibrary = {"Pad",       "ReduceL1",   "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp",
                                                        "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd",   "ReduceSumSquare",
                                                        "DFT"};

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
        return check_failed(path + ": " + describe_node(node) + " has " + counted(node.input_size(), "input") + ", but " + op + " takes " +
                            count_range(schema->min_input(), schema->max_input()) + " (opset " + std::to_string(opset) + " schema)");
      }
      if (node.output_size() < schema->min_output() || node.output_size() > schema->max_output()) {
        return check_failed(path + ": " + describe_node(node) + " has " + counted(node.output_size(), "output") + ", but " + op + " has " +
                            count_range(schema->min_output(), schema->max_output()) + " (opset " + std::to_string(opset) + " schema)");
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

// Every rank the graph declares for a tensor, where it says so: a tensor may be declared in several places
// (a graph input and its initializer, a Constant and a value_info entry), and they need not agree.
struct DeclaredRank {
  int rank;
  const char* source;  // "graph input", "initializer", "Constant", "value_info", ...
};
using DeclaredRanks = std::map<std::string, std::vector<DeclaredRank>>;

// The ranks `graph` declares, on top of those of the graphs around it (`outer`): a name this graph defines
// hides the outer one, as ONNX scoping does, whether or not this graph gives it a rank. Ranks from value_info
// are labelled `value_info_source`.
DeclaredRanks declared_ranks(const onnx::GraphProto& graph, DeclaredRanks outer, const char* value_info_source) {
  for (const auto& v : graph.input()) outer.erase(v.name());
  for (const auto& t : graph.initializer()) outer.erase(t.name());
  for (const auto& t : graph.sparse_initializer()) outer.erase(t.values().name());
  for (const auto& node : graph.node()) {
    for (const auto& out : node.output()) outer.erase(out);
  }
  auto declare = [&outer](const std::string& name, int rank, const char* source) {
    if (!name.empty()) outer[name].push_back({rank, source});
  };
  auto declare_value = [&declare](const onnx::ValueInfoProto& v, const char* source) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      declare(v.name(), v.type().tensor_type().shape().dim_size(), source);
  };
  for (const auto& v : graph.input()) declare_value(v, "graph input");
  for (const auto& t : graph.initializer()) declare(t.name(), t.dims_size(), "initializer");
  for (const auto& t : graph.sparse_initializer()) declare(t.values().name(), t.dims_size(), "sparse initializer");
  for (const auto& node : graph.node()) {
    const bool constant = node.op_type() == "Constant" && (node.domain().empty() || node.domain() == "ai.onnx");
    if (!constant || node.output_size() != 1 || node.attribute_size() != 1) continue;
    const auto& a = node.attribute(0);
    if (a.name() == "value") declare(node.output(0), a.t().dims_size(), "Constant");
    if (a.name() == "sparse_value") declare(node.output(0), a.sparse_tensor().dims_size(), "Constant");
    if (a.name() == "value_float" || a.name() == "value_int" || a.name() == "value_string") declare(node.output(0), 0, "Constant");
    if (a.name() == "value_floats" || a.name() == "value_ints" || a.name() == "value_strings") declare(node.output(0), 1, "Constant");
  }
  for (const auto& v : graph.value_info()) declare_value(v, value_info_source);
  for (const auto& v : graph.output()) declare_value(v, "graph output");
  return outer;
}

// The convolutions whose libonnx 1.12 shape inference takes the kernel's spatial rank from the weight and
// indexes the input's attributes and dims with it unchecked: input `data` is N x C x D1...Dn, input `weight`
// the kernel, laid out as `layout`.
struct ConvInputs {
  int data;
  int weight;
  const char* layout;
};
const std::map<std::string, ConvInputs> kConvInputs = {
    {"Conv", {0, 1, "M x C/group x k1...kn"}},
    {"ConvInteger", {0, 1, "M x C/group x k1...kn"}},
    {"QLinearConv", {0, 3, "M x C/group x k1...kn"}},
    {"ConvTranspose", {0, 1, "C x M/group x k1...kn"}},
};

// The ops whose libonnx 1.12 shape inference divides by each stride unchecked (SIGFPE on a zero stride). A
// ConvTranspose multiplies by its strides instead; the rewrite's matcher refuses a bad one with its own reason.
const std::set<std::string> kDividingStrides = {"Conv", "ConvInteger", "QLinearConv", "AveragePool", "MaxPool", "LpPool"};

std::string join_ints(const google::protobuf::RepeatedField<int64_t>& values) {
  std::string out = "[";
  for (int i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

std::string rank_text(const std::string& role, const std::string& name, const DeclaredRank& r) {
  return role + " '" + name + "' has rank " + std::to_string(r.rank) + " (" + r.source + ")";
}

// What libonnx 1.12's shape inference assumes and does not check, in `graph` and its subgraphs: every
// convolution whose input and weight ranks the graph declares has an input of rank >= 3, a weight of rank >= 3,
// and as many spatial dims in both (a ConvTranspose weight of rank 2 is a null read in its shape inference,
// other mismatches read past the end of its vectors); and the ops that divide by their strides have strides
// >= 1. ONNX Runtime refuses every model that breaks one of these.
core::Status check_inference_preconditions(const onnx::GraphProto& graph, const DeclaredRanks& outer, const std::string& path,
                                           const char* value_info_source) {
  const DeclaredRanks ranks = declared_ranks(graph, outer, value_info_source);
  auto declared = [&ranks](const onnx::NodeProto& node, int index) -> const std::vector<DeclaredRank>* {
    if (index >= node.input_size() || node.input(index).empty()) return nullptr;
    const auto it = ranks.find(node.input(index));
    return it == ranks.end() ? nullptr : &it->second;
  };
  for (const auto& node : graph.node()) {
    const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    const auto conv = default_domain ? kConvInputs.find(node.op_type()) : kConvInputs.end();
    if (conv != kConvInputs.end()) {
      const std::string who = path + ": " + describe_node(node) + ": ";
      const auto* data = declared(node, conv->second.data);
      const auto* weight = declared(node, conv->second.weight);
      for (const auto& d : data ? *data : std::vector<DeclaredRank>{}) {
        if (d.rank < 3) {
          return check_failed(who + rank_text("input", node.input(conv->second.data), d) + ", but a " + node.op_type() +
                              " input must have at least 3 dimensions (N x C x D1...Dn)");
        }
      }
      for (const auto& w : weight ? *weight : std::vector<DeclaredRank>{}) {
        if (w.rank < 3) {
          return check_failed(who + rank_text("weight", node.input(conv->second.weight), w) + ", but a " + node.op_type() +
                              " weight must have at least 3 dimensions (" + conv->second.layout + ")");
        }
        for (const auto& d : data ? *data : std::vector<DeclaredRank>{}) {
          if (w.rank != d.rank) {
            return check_failed(who + rank_text("weight", node.input(conv->second.weight), w) + " and " +
                                rank_text("input", node.input(conv->second.data), d) + ", but their spatial dimensions (" +
                                std::to_string(w.rank - 2) + " and " + std::to_string(d.rank - 2) + ") must agree");
          }
        }
      }
    }
    if (default_domain && kDividingStrides.count(node.op_type()) != 0) {
      for (const auto& attr : node.attribute()) {
        if (attr.name() != "strides") continue;
        for (int64_t stride : attr.ints()) {
          if (stride < 1) {
            return check_failed(path + ": " + describe_node(node) + ": stride " + std::to_string(stride) + " must be >= 1 (strides " +
                                join_ints(attr.ints()) + ")");
          }
        }
      }
    }
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) {
        if (auto s = check_inference_preconditions(attr.g(), ranks, path + "/" + describe_node(node), value_info_source); !s) return s;
      }
      for (const auto& g : attr.graphs()) {
        if (auto s = check_inference_preconditions(g, ranks, path + "/" + describe_node(node), value_info_source); !s) return s;
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

core::Status check_structure(const onnx::GraphProto& graph) { return check_scope(graph, {}, "main graph", ""); }

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
  // libonnx 1.12's checker does not check that every graph output is defined (ONNX Runtime refuses a model whose
  // output nothing writes); the structure check does, for every model.
  if (auto s = check_structure(model.graph()); !s) return s.error();
  // Before libonnx's shape inference sees the model: what it would crash on, with the ranks the graph declares.
  if (auto s = check_inference_preconditions(model.graph(), {}, "main graph", "value_info"); !s) return s.error();
  if (!newer) {
    onnx::ModelProto copy = skeleton_copy(model);  // inference needs types and dims, not weight data
    if (auto inferred = infer_shapes_isolated(copy, /*strict=*/true, /*data_propagation=*/false); !inferred) {
      // A declared shape that libonnx 1.12 infers otherwise is not by itself an invalid model: its inference is wrong
      // for some families (a ceil_mode pool, rewrite/shape_rules.h) where the file declares what ONNX Runtime
      // computes. Judged again without the declared shapes (the rewrite never uses them, and warns where they differ
      // from what it computes), the model stands or falls on its ops.
      onnx::ModelProto undeclared = inference_skeleton(model);
      if (inferred.error().message.find("Inferred shape and existing shape differ") == std::string::npos ||
          !infer_shapes_isolated(undeclared, /*strict=*/true, /*data_propagation=*/false)) {
        return check_failed("ONNX shape inference: " + one_line(inferred.error().message));
      }
      copy = std::move(undeclared);
    }
    // The same ranks as inference found them (a weight computed by a node, say), which libonnx 1.12 itself reads
    // past the end of its vectors on, without a crash.
    if (auto s = check_inference_preconditions(copy.graph(), {}, "main graph", "inferred by ONNX shape inference"); !s) return s.error();
    v.detail = "ONNX checker and strict shape inference passed";
    return v;
  }

  // A model newer than the library: check what it can, and say so.
  v.full = false;
  const int schema_opset = static_cast<int>(std::min(default_opset(model), library_max_opset()));
  if (auto s = check_arity(model.graph(), schema_opset, "main graph"); !s) return s.error();
  // Inference here uses the library's older schemas, so what it infers or refuses does not judge the model (the
  // rewrite runs it too, for what it can tell). A crash does: a model libonnx 1.12 crashes on is malformed in
  // every opset (a weight whose rank, computed by a node, is below its input's), and ONNX Runtime refuses it.
  {
    onnx::ModelProto copy = skeleton_copy(model);
    bool crashed = false;
    if (auto inferred = infer_shapes_isolated(copy, /*strict=*/false, /*data_propagation=*/true, &crashed); !inferred && crashed) {
      return check_failed("ONNX shape inference (libonnx " + std::string(onnx::LAST_RELEASE_VERSION) + ", opset " +
                          std::to_string(library_max_opset()) + " schemas): " + one_line(inferred.error().message));
    }
  }
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
              std::to_string(library_ir_version()) +
              "): checked graph structure, every node's input and output counts, convolution ranks and strides, that " +
              "ONNX shape inference does not crash on it, and the " + std::to_string(checked) + " emitted nodes against opset " +
              std::to_string(library_max_opset()) + " schemas";
  return v;
}

}  // namespace dwdeconv::onnx_io
