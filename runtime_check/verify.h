// Verification of a rewrite: is the rewritten model still the same model when XNNPACK runs it?
//
// Whole-model mode runs both models through the Executor on the same seeded (or given) inputs and compares
// every graph output. When either model cannot run whole (an op outside the executor's set, shapes that stay
// unknown, a DOUBLE value) or cannot be compared whole (a value of its run holds inf or NaN, which the executor does
// not compute faithfully: Executor::first_non_finite()), per-node mode checks each replaced upsampler (a
// ConvTranspose or a hand-written form) on its own with verify_node(), which also compares both sides against an
// output computed another way.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/region.h"
#include "core/result.h"
#include "runtime_check/compare.h"
#include "runtime_check/tensor.h"
#include "runtime_check/verify_node.h"

namespace dwdeconv::runtime_check {

struct VerifyOptions {
  // Dims by tensor name: graph inputs (symbolic dims), or, in per-node mode, a ConvTranspose's or replaced
  // upsampler's input.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  std::vector<NamedTensor> inputs;  // explicit graph inputs; the rest are seeded random
  uint64_t seed = 0;
  Tolerances tolerances;
  size_t threads = 1;
  std::function<void(const std::string&)> progress;  // short status lines for long runs; may be empty
  // What the rewrite replaced, as the rewriter recorded it (main graph), when the tool wrote `rewritten`: per-node
  // mode checks these regions, confirmed by matching the graphs. Unset for two files the tool did not write
  // (--compare): the regions are then found by matching the graphs alone.
  std::optional<std::vector<core::ReplacedRegion>> regions;
  // Each recorded region's input dims (for --compare, every main-graph node's) as the rewrite computed them
  // (rewrite/shape_propagation.h, at the graph inputs' dims): per-node mode sizes a region with them where libonnx's
  // inference does not know its input.
  std::map<std::string, std::vector<int64_t>> region_shapes;
};

// kNone: nothing was rewritten, so the output is the input and there is nothing to verify (the caller decides
// this; verify_models never returns it).
enum class VerifyMode { kWholeModel, kPerNode, kNone };

// "whole-model", "per-node" or "none".
const char* verify_mode_name(VerifyMode mode);

struct VerifyResult {
  VerifyMode mode = VerifyMode::kWholeModel;
  std::string mode_reason;  // why per-node mode ran; empty in whole-model mode
  bool passed = false;
  // Whole-model: one entry per graph output (rewritten vs original). Per-node: one entry per node, named by
  // the node's output, holding the worse of its two comparisons against the double reference.
  std::vector<OutputComparison> outputs;
  std::vector<NodeVerification> nodes;  // per-node mode only
  // The first difference between the models that fails the check before anything runs; empty when there is
  // none. Whole-model: in their graph inputs or outputs (interface_difference()). Per-node: outside the rewritten
  // nodes.
  std::string difference;
  size_t xnnpack_ops = 0;  // nodes of the rewritten side that ran on XNNPACK / reference kernels
  size_t reference_ops = 0;
  std::string placement;  // where the rewritten side's nodes ran, for the log
  // Whole-model: how many times each model's steps ran. 1 each: the outputs compared are those of the run that
  // creating the executor makes anyway.
  size_t original_runs = 0;
  size_t rewritten_runs = 0;

  double max_abs_error() const;
  // A few lines for the log: mode (and why), each output's errors, placements, verdict.
  std::string summary() const;
};

// The given --input tensors and --input-shape dims checked against `model` before anything runs: a name that
// matches nothing would otherwise be ignored and the run use random data, and a dim that contradicts a declared
// one would run another model than the one given. --input names a graph input; --input-shape a graph input or
// one of `inner_inputs` (per-node mode: an upsampler's input), and fixes symbolic dims only. Usage errors.
core::Status check_given_inputs(const onnx::ModelProto& model, const std::vector<NamedTensor>& given_inputs,
                                const std::map<std::string, std::vector<int64_t>>& input_shapes,
                                const std::set<std::string>& inner_inputs = {});

// Whether `model`'s graph inputs can be fed for a verification whose values mean something, on any runtime: a DOUBLE
// input cannot (inputs are held in float32, so its exact values would be rounded: kCannotVerify, as for every float64
// model), and an integer or bool input needs its values given (`given` names it): seeded random values are made for
// float inputs only, and a constant would check one case of the model (one If branch, one index): a usage error.
core::Status check_verifiable_inputs(const onnx::ModelProto& model, const std::vector<NamedTensor>& given);

// A failed verification that ran nothing: the models' graph inputs or outputs differ (interface_difference()).
VerifyResult interface_mismatch(const std::string& difference);

// Verifies `rewritten` against `original`. Errors (kCannotVerify) when nothing could be verified: the whole
// models cannot run or be compared and no rewritten node can be checked on its own; errors (kInvalidModel) when a
// graph input, or the input of a node checked on its own, is too large to hold; errors (kUsage) when a given input
// holds inf or NaN. A numeric mismatch is passed == false.
core::Result<VerifyResult> verify_models(const onnx::ModelProto& original, const onnx::ModelProto& rewritten, const VerifyOptions& options);

}  // namespace dwdeconv::runtime_check
