// Building the executor's step list: placement (XNNPACK, reference or folded), layout and fusion decisions.
// Not part of the library's API (executor.h is).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>
#include <pthreadpool.h>

#include "core/result.h"
#include "ops/ops.h"
#include "runtime_check/executor.h"
#include "step.h"

namespace dwdeconv::runtime_check::detail {

using ThreadPool = std::unique_ptr<pthreadpool, decltype(&pthreadpool_destroy)>;

// A model planned into steps, with its values.
struct StepList {
  Values values;
  ThreadPool threadpool{nullptr, &pthreadpool_destroy};
  std::vector<std::unique_ptr<Step>> steps;
  std::vector<size_t> step_node;  // per step, the index of its node in placements
  std::vector<NodePlacement> placements;
  std::vector<NamedTensor> creation_inputs;
  std::vector<std::pair<std::string, int>> inputs;   // graph inputs (name, slot)
  std::vector<std::pair<std::string, int>> outputs;  // graph outputs (name, slot)
  std::unordered_map<std::string, int> slot_of;
  std::vector<float> arena;                   // every activation when memory is planned (place_in_arena)
  const onnx::NodeProto* planning = nullptr;  // the node being planned, for errors thrown while sizing its values
  MemoryPlan memory;
  std::optional<NonFiniteValue> non_finite;  // Executor::first_non_finite()

  // Copies every graph input into its slot (NCHW). With check_against_creation, dims and kind must match the
  // creation inputs.
  core::Status load_inputs(const std::vector<NamedTensor>& given, bool check_against_creation);
};

// Plans `model`: folds its constant subgraphs, builds a step per remaining node and runs each once on the creation
// inputs to fix the shapes the next one is planned for. Errors name the node and op.
core::Status build_step_list(const onnx::ModelProto& model, const ExecutorOptions& options, StepList& list);

// Per op with an XNNPACK family, the attributes and values its steps implement (a node with any other runs on the
// reference kernels). For the test that holds them to the op table.
std::vector<std::pair<std::string, std::vector<ops::AttributeSpec>>> xnnpack_family_attributes();

}  // namespace dwdeconv::runtime_check::detail
