#include "runtime_check/executor.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <new>

#include "internal.h"
#include "memory_plan.h"
#include "step_list.h"

namespace dwdeconv::runtime_check {

using detail::Clock;
using detail::Layout;
using detail::ms_between;

const char* placement_name(Placement placement) {
  switch (placement) {
    case Placement::kXnnpack: return "xnnpack";
    case Placement::kReference: return "reference";
    case Placement::kFolded: return "folded";
  }
  return "?";
}

// ---------------------------------------------------------------- Executor

// The step list, and what profiling adds up over runs.
struct Executor::Impl : detail::StepList {
  // Profiling (ExecutorProfile): per step, its own time and its input conversions, summed over profiled runs.
  bool profiling = false;
  size_t profiled_runs = 0;
  double profiled_ms = 0;
  std::vector<double> step_ms, step_convert_ms;
  size_t runs = 0;  // Executor::runs()

  core::Status run_steps();
};

core::Status Executor::Impl::run_steps() {
  ++runs;
  if (!profiling) {
    for (auto& step : steps) RC_CHECK(step->run(values));
    return core::Ok{};
  }
  step_ms.resize(steps.size(), 0.0);
  step_convert_ms.resize(steps.size(), 0.0);
  for (size_t k = 0; k < steps.size(); ++k) {
    const double converted_before = values.conversion_ms;
    const Clock::time_point start = Clock::now();
    RC_CHECK(steps[k]->run(values));
    const double wall = ms_between(start, Clock::now());
    const double converting = values.conversion_ms - converted_before;
    step_ms[k] += wall - converting;
    step_convert_ms[k] += converting;
  }
  return core::Ok{};
}

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::Executor(Executor&&) noexcept = default;
Executor& Executor::operator=(Executor&&) noexcept = default;
Executor::~Executor() = default;

core::Result<Executor> Executor::create(const onnx::ModelProto& model, const ExecutorOptions& options) {
  auto impl = std::make_unique<Impl>();
  try {
    RC_CHECK(detail::build_step_list(model, options, *impl));
    impl->runs = 1;            // building ran every step once, on the creation inputs
    impl->planning = nullptr;  // what fails from here on is the arena, not a node
    if (options.plan_memory) detail::place_in_arena(*impl);
  } catch (const TensorSizeError& e) {
    // A value too large to hold (Tensor::reshape checks every one): refused with its node, never a crash.
    if (impl->planning == nullptr) return core::invalid_model(e.what());
    return detail::node_error(*impl->planning, std::string("a value of ") + e.what());
  } catch (const std::bad_alloc&) {
    return core::invalid_model("out of memory while planning the model (its activations do not fit this machine)");
  }
  // Profiling starts now, so the creation run (first touches, one-time setup) is never counted.
  impl->profiling = options.profile;
  impl->values.time_conversions = options.profile;
  return Executor(std::move(impl));
}

core::Result<std::vector<NamedTensor>> Executor::run(const std::vector<NamedTensor>& inputs) {
  const Clock::time_point start = impl_->profiling ? Clock::now() : Clock::time_point{};
  RC_CHECK(impl_->load_inputs(inputs, true));
  RC_CHECK(impl_->run_steps());
  std::vector<NamedTensor> result = last_outputs();
  if (impl_->profiling) {
    impl_->profiled_ms += ms_between(start, Clock::now());
    ++impl_->profiled_runs;
  }
  return result;
}

std::vector<NamedTensor> Executor::last_outputs() {
  std::vector<NamedTensor> result;
  for (const auto& [name, id] : impl_->outputs) {
    NamedTensor t{name, impl_->values.read(id, Layout::kNchw)};
    if (t.tensor.dtype == onnx::TensorProto::FLOAT16 || t.tensor.dtype == onnx::TensorProto::BFLOAT16) {
      for (float& x : t.tensor.f) x = round_to_type(x, t.tensor.dtype);
    }
    result.push_back(std::move(t));
  }
  return result;
}

size_t Executor::runs() const { return impl_->runs; }

core::Status Executor::run_steps() {
  const Clock::time_point start = impl_->profiling ? Clock::now() : Clock::time_point{};
  RC_CHECK(impl_->run_steps());
  if (impl_->profiling) {
    impl_->profiled_ms += ms_between(start, Clock::now());
    ++impl_->profiled_runs;
  }
  return core::Ok{};
}

void Executor::set_profiling(bool on) {
  impl_->profiling = on;
  impl_->values.time_conversions = on;
}

void Executor::reset_profile() {
  impl_->profiled_runs = 0;
  impl_->profiled_ms = 0;
  impl_->step_ms.assign(impl_->steps.size(), 0.0);
  impl_->step_convert_ms.assign(impl_->steps.size(), 0.0);
}

ExecutorProfile Executor::profile(size_t top_nodes) const {
  const Impl& impl = *impl_;
  ExecutorProfile p;
  p.runs = impl.profiled_runs;
  p.total_ms = impl.profiled_ms;
  const auto share = [&](double ms) { return p.total_ms > 0 ? ms / p.total_ms : 0.0; };
  std::map<std::string, OpTime> by_op;
  OpTime conversion{kLayoutConversionRow, 0, 0, 0};
  double in_steps = 0;
  std::vector<NodeTime> nodes;
  for (size_t k = 0; k < impl.steps.size(); ++k) {
    const NodePlacement& placement = impl.placements[impl.step_node[k]];
    const double ms = k < impl.step_ms.size() ? impl.step_ms[k] : 0.0;
    const double convert_ms = k < impl.step_convert_ms.size() ? impl.step_convert_ms[k] : 0.0;
    OpTime& op = by_op[placement.op_type];
    op.op_type = placement.op_type;
    op.ms += ms;
    ++op.nodes;
    if (convert_ms > 0) {
      conversion.ms += convert_ms;
      ++conversion.nodes;
    }
    in_steps += ms + convert_ms;
    nodes.push_back(NodeTime{placement.node, placement.op_type, placement.placement, ms, convert_ms, share(ms)});
  }
  for (auto& [name, op] : by_op) p.by_op.push_back(op);
  if (conversion.nodes > 0) p.by_op.push_back(conversion);
  // What run() did outside the steps: the clock's total minus every step's wall time.
  if (p.runs > 0) p.by_op.push_back(OpTime{kGraphIoRow, std::max(0.0, p.total_ms - in_steps), 0, 0});
  for (auto& op : p.by_op) op.share = share(op.ms);
  const auto slower = [](const auto& a, const auto& b) { return a.ms > b.ms; };
  std::stable_sort(p.by_op.begin(), p.by_op.end(), slower);
  std::stable_sort(nodes.begin(), nodes.end(), slower);
  if (nodes.size() > top_nodes) nodes.resize(top_nodes);
  p.top_nodes = std::move(nodes);
  return p;
}

const std::vector<NamedTensor>& Executor::creation_inputs() const { return impl_->creation_inputs; }

const std::optional<NonFiniteValue>& Executor::first_non_finite() const { return impl_->non_finite; }

std::string NonFiniteValue::describe() const {
  const std::string what = std::isnan(number) ? "NaN" : number > 0 ? "inf" : "-inf";
  std::string at = " at element " + std::to_string(element) + " [";
  for (size_t a = 0; a < index.size(); ++a) at += (a ? ", " : "") + std::to_string(index[a]);
  at += "]";
  if (!node.empty()) return node + " writes " + what + " to '" + value + "'" + at;
  return std::string(graph_input ? "graph input '" : "initializer '") + value + "' holds " + what + at;
}

const MemoryPlan& Executor::memory_plan() const { return impl_->memory; }

const std::vector<NodePlacement>& Executor::placements() const { return impl_->placements; }

size_t Executor::count(Placement placement) const {
  return static_cast<size_t>(
      std::count_if(impl_->placements.begin(), impl_->placements.end(), [&](const NodePlacement& p) { return p.placement == placement; }));
}

size_t Executor::count(const std::string& op_type, Placement placement) const {
  return static_cast<size_t>(std::count_if(impl_->placements.begin(), impl_->placements.end(),
                                           [&](const NodePlacement& p) { return p.placement == placement && p.op_type == op_type; }));
}

size_t Executor::count_fused(const std::string& op_type) const {
  return static_cast<size_t>(std::count_if(impl_->placements.begin(), impl_->placements.end(),
                                           [&](const NodePlacement& p) { return !p.fusion.empty() && p.op_type == op_type; }));
}

std::string describe_placement(const NodePlacement& placement) {
  std::string text = placement_name(placement.placement);
  std::string details = placement.fusion;
  if (!placement.note.empty()) details += (details.empty() ? "" : "; ") + placement.note;
  if (!details.empty()) text += " (" + details + ")";
  return text;
}

std::string Executor::placement_summary() const {
  std::string text;
  for (Placement p : {Placement::kXnnpack, Placement::kReference, Placement::kFolded}) {
    std::map<std::string, size_t> by_op;
    for (const auto& n : impl_->placements) {
      if (n.placement == p) ++by_op[n.op_type];
    }
    if (!text.empty()) text += "; ";
    text += std::string(placement_name(p)) + " " + std::to_string(count(p));
    if (by_op.empty()) continue;
    text += " (";
    bool first = true;
    for (const auto& [op, n] : by_op) {
      text += (first ? "" : ", ") + op + " " + std::to_string(n);
      first = false;
    }
    text += ")";
  }
  if (const size_t fused = count_fused("Concat"); fused > 0) {
    text += "; fused " + std::to_string(fused) + " (Concat " + std::to_string(fused) + ": input Convs write into its channel slices)";
  }
  std::string activations;
  size_t fused_activations = 0;
  for (const auto& n : impl_->placements) {
    if (n.fusion.rfind(detail::kFusedIntoNote, 0) != 0) continue;
    activations += (fused_activations++ == 0 ? "" : ", ") + n.node + " " + n.fusion;
  }
  if (fused_activations > 0) text += "; fused activations " + std::to_string(fused_activations) + " (" + activations + ")";
  const auto noted = [&](const char* what) {
    return static_cast<size_t>(std::count_if(impl_->placements.begin(), impl_->placements.end(),
                                             [&](const NodePlacement& p) { return p.note.find(what) != std::string::npos; }));
  };
  if (const size_t extended = noted("zero-extended"); extended > 0) {
    text += "; zero-extended depthwise kernels " + std::to_string(extended);
  }
  if (const size_t upsamples = noted(detail::kNearestUpsampleNote); upsamples > 0) {
    text += "; " + std::string(detail::kNearestUpsampleNote) + " " + std::to_string(upsamples);
  }
  if (const size_t norms = noted(detail::kGroupNormNote); norms > 0) {
    const std::string step_note = std::string(detail::kGroupNormNote) + " (";
    const auto steps = static_cast<size_t>(std::count_if(impl_->placements.begin(), impl_->placements.end(),
                                                         [&](const NodePlacement& p) { return p.note.rfind(step_note, 0) == 0; }));
    text += "; " + std::string(detail::kGroupNormNote) + " " + std::to_string(steps) + " (" + std::to_string(norms) + " nodes)";
  }
  if (const size_t permutes = noted(detail::kChannelPermuteNote); permutes > 0) {
    text += "; " + std::string(detail::kChannelPermuteNote) + " " + std::to_string(permutes);
  }
  return text;
}

}  // namespace dwdeconv::runtime_check
