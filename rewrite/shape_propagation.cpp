#include "rewrite/shape_propagation.h"

#include <algorithm>
#include <map>
#include <utility>

#include "onnx_io/attributes.h"
#include "onnx_io/model_io.h"
#include "onnx_io/tensor.h"
#include "rewrite/const_eval.h"
#include "rewrite/graph_editor.h"

namespace dwdeconv::rewrite {
namespace {

// Inference runs at most: each moves the known shapes past one more chain (MI-GAN's 12 upsamplers take 13).
constexpr int kMaxRounds = 256;

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

// Replaces, in `skeleton`, every node whose outputs the folder evaluates (each at most kMaxPropagatedElements) by
// Constant nodes of those values; returns how many nodes it replaced.
int fold_into_constants(onnx::ModelProto& skeleton, const onnx_io::ScopedTypes& types) {
  GraphTree tree(skeleton);
  ConstEvaluator eval(skeleton.ir_version(), onnx_io::default_opset(skeleton), types);
  std::map<onnx::GraphProto*, std::map<int, std::vector<onnx::NodeProto>>> replacements;
  int replaced = 0;
  for (const auto& scope : tree.scopes()) {
    for (int k = 0; k < scope.graph->node_size(); ++k) {
      const onnx::NodeProto& node = scope.graph->node(k);
      if (node.op_type() == "Constant" || node.output_size() == 0 || holds_subgraph(node) ||
          !(node.domain().empty() || node.domain() == "ai.onnx")) {
        continue;
      }
      std::vector<onnx::NodeProto> constants;
      for (const auto& out : node.output()) {
        if (out.empty()) continue;
        auto value = eval.evaluate(out, scope);
        if (!value || static_cast<int64_t>(value->size()) > kMaxPropagatedElements) break;
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

PropagatedTypes propagate_types(const onnx::ModelProto& model) {
  PropagatedTypes result;
  onnx::ModelProto skeleton = onnx_io::inference_skeleton(model);
  for (result.rounds = 1;; ++result.rounds) {
    onnx::ModelProto inferred = skeleton;
    // Non-strict: partial information is still useful, and a crash only means there is none.
    (void)onnx_io::infer_shapes_isolated(inferred, /*strict=*/false, /*data_propagation=*/true);
    result.types = onnx_io::collect_types(inferred);
    if (result.rounds >= kMaxRounds || fold_into_constants(skeleton, result.types) == 0) break;
  }
  result.warnings = declared_disagreements(model, result.types);
  return result;
}

}  // namespace dwdeconv::rewrite
