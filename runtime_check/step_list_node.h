// Planning one node of the executor's step list (step_list_node.cpp) for build_step_list (step_list.cpp), and the
// checks both files make. Not part of the library's API (executor.h is).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "runtime_check/executor.h"
#include "step.h"
#include "step_list.h"

namespace dwdeconv::runtime_check::detail {

// Every float type is held in f32 (ops/tensor.h). FLOAT16 and BFLOAT16 round to their type where a runtime would, but
// a DOUBLE computed in f32 is another computation: (x + 1e10) - 1e10 gives 0 for every |x| < 512, not x. So no node
// may read a DOUBLE value (a Shape reads only its dims) or write one, as the constant folder folds none.
inline constexpr const char* kNoDouble =
    "the executor holds float64 values in float32 and would judge a float64 computation in float32, so it does not run "
    "DOUBLE values";

// Why `node` is refused for a DOUBLE input (empty when it has none); `in` are its input slots.
inline std::string double_input_reason(const onnx::NodeProto& node, const std::vector<int>& in, const Values& v) {
  if (node.op_type() == "Shape") return {};
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] >= 0 && v.peek(in[k]).dtype == onnx::TensorProto::DOUBLE) {
      return "reads '" + node.input(static_cast<int>(k)) + "', which is DOUBLE: " + kNoDouble;
    }
  }
  return {};
}

// Why `node` is refused for a DOUBLE output it has just written (empty when it wrote none).
inline std::string double_output_reason(const onnx::NodeProto& node, const std::vector<int>& out, const Values& v) {
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] >= 0 && v.peek(out[k]).dtype == onnx::TensorProto::DOUBLE) {
      return "writes '" + node.output(static_cast<int>(k)) + "', which is DOUBLE: " + kNoDouble;
    }
  }
  return {};
}

// Records the first non-finite output of `node` (see note_non_finite in step_list.cpp).
void note_non_finite_outputs(StepList& list, const onnx::NodeProto& node, const std::vector<int>& out);

// A Conv step already built, with the index of its node's placement.
struct ConvProducer {
  ConvStep* conv = nullptr;
  Step* step = nullptr;  // the same step
  size_t placement = 0;
};

// What planning a node reads from the stages before it, and the Conv steps a later node may fuse into.
struct NodePlanner {
  int64_t opset;
  const ExecutorOptions& options;
  const std::unordered_map<std::string, int>& readers;   // how many times each value is read (a graph output counts)
  std::unordered_map<int, ConvProducer> conv_producers;  // by output slot
};

// Plans `node` (not in a group normalization chain): folded when its inputs are constants, fused into the Convs it
// reads, or a step of its own run once on the creation values, so the next node is planned for its outputs' dims.
core::Status plan_node(const onnx::NodeProto& node, NodePlanner& planner, StepList& list);

// GroupNorm as PyTorch exports it (step_norm.cpp): per chain its nodes' indices, Reshape, InstanceNormalization,
// Reshape, then a Mul and an Add when they follow. Structure only: each value inside the chain has the next node as
// its one reader (not another node, not a graph output), so no other step can miss it. The values decide at the
// chain's last node whether it is a group normalization (make_group_norm_step); when they do not, its nodes run
// there one by one.
std::vector<std::vector<int>> group_norm_chains(const onnx::GraphProto& graph, const std::unordered_map<std::string, int>& readers);

// Plans a group normalization chain at its last node (group_norm_chains()): one step when the values make it one,
// else each of its nodes on the reference kernels, in order. `skipped` are the placements of the nodes before the
// last, pushed where those nodes stand.
core::Status plan_group_norm(const onnx::GraphProto& graph, const std::vector<int>& chain, const std::vector<size_t>& skipped,
                             const std::unordered_map<std::string, int>& slot_of, int64_t opset, StepList& list);

}  // namespace dwdeconv::runtime_check::detail
