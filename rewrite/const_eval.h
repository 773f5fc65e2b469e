// Constant folding for the recognisers: the value of a tensor that a chain of shape and layout ops computes from
// constants (PyTorch exports a Pad's pads as an 8-op chain, and weights as Tile(Expand(Unsqueeze(...)))).
// It evaluates; it never changes the model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"
#include "onnx_io/shapes.h"
#include "rewrite/graph_editor.h"

namespace dwdeconv::rewrite {

// A folded value. Integer and bool types keep exact int64 elements in `ints`; float types keep `reals`.
struct ConstTensor {
  int32_t data_type = onnx::TensorProto::FLOAT;
  std::vector<int64_t> dims;
  std::vector<int64_t> ints;
  std::vector<double> reals;
  // Whether every runtime computes these elements as the folder did. Empty for constants and for what ops that move
  // elements or round once exactly (Add, Mul, Div, Sqrt, Floor, Cast, Slice, Concat, ...) compute from them; else the
  // first op on the way whose result runtimes compute their own way ("Sigmoid 'gate'": approximated transcendentals,
  // sums added in another order), so that a size floored from it may be another integer on ONNX Runtime. Such a value
  // may be a weight (the rewrite's numbers are compared, and differ by rounding), but it decides nothing: no size,
  // scale, pads, index or zero pattern (ConstEvaluator::evaluate refuses it).
  std::string inexact;
  // Set (to the same kind of op) when even the dims are computed from an inexact value: a Reshape to a shape computed
  // through Sigmoid. Then the value is not even a weight (evaluate_weight refuses it).
  std::string inexact_dims;

  bool is_integer() const;
  size_t size() const { return is_integer() ? ints.size() : reals.size(); }
  // Element i as a double, whatever the type.
  double at(size_t i) const { return is_integer() ? static_cast<double>(ints[i]) : reals[i]; }
};

// The most elements a folded value may have; a larger one is declined, so a hostile ConstantOfShape or Expand
// cannot make the tool allocate without bound.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 24;
// The most elements one evaluator computes in all (each cached): a chain of values each under kMaxFoldedElements
// (60 Adds of a [2048,2048] ConstantOfShape, 4.2 KB of model) would otherwise hold them all, 2 GB. 2^25 elements, as
// doubles, are 256 MiB.
constexpr int64_t kMaxComputedElements = int64_t{1} << 25;

// Folds values as seen from graph scopes of one model: initializers and Constants (behind Identity too), and every
// node the op library's table implements (ops/ops.h), computed by its kernels, the ones the executor runs, so the
// folder and the executor cannot disagree on an op. Shape reads the dims shape inference knows. DOUBLE values are
// not folded (the library computes in float). Results are cached per name.
class ConstEvaluator {
 public:
  // `opset` is the model's default-domain opset, which picks each op's version. `max_elements` bounds every value it
  // reads, computes or caches (shape propagation keeps only small ones, so it computes no larger one either).
  ConstEvaluator(int64_t ir_version, int64_t opset, const onnx_io::ScopedTypes& types, int64_t max_elements = kMaxFoldedElements)
      : ir_version_(ir_version), opset_(opset), types_(types), max_elements_(max_elements) {}

  // The value of `name` as `scope` reads it, or a reason it is not a constant this evaluator can fold, for a value a
  // decision rests on (a size, a scale, pads, indices, a zero pattern): one computed through an op that runtimes
  // round differently (ConstTensor::inexact) is refused, naming that op.
  core::Result<ConstTensor> evaluate(const std::string& name, const GraphScope& scope);
  // The value of `name` as a weight: its elements may be inexact (the rewrite's result is compared by value, and runtimes
  // differ by rounding only), its dims may not (they decide the kernel).
  core::Result<ConstTensor> evaluate_weight(const std::string& name, const GraphScope& scope);
  // Every value this evaluator folds, with its flags: for a caller that words the refusal of an inexact one itself
  // (see decidable()).
  core::Result<ConstTensor> evaluate_flagged(const std::string& name, const GraphScope& scope);
  // The model's default-domain opset, which the op library's kernels are run at.
  int64_t opset() const { return opset_; }
  // Drops every cached refusal and keeps every cached value: once the types it reads know more (the next round of
  // shape propagation), what was refused may fold, and what folded holds. Each value is computed once.
  void forget_refusals();

 private:
  core::Result<ConstTensor> evaluate_node(const onnx::NodeProto& node, const std::string& name, const GraphScope& scope);
  // The dims of `name` as shape inference knows them, all of them known, or why not.
  core::Result<std::vector<int64_t>> known_dims(const std::string& name, const GraphScope& scope) const;

  int64_t ir_version_;
  int64_t opset_;
  const onnx_io::ScopedTypes& types_;
  int64_t max_elements_;
  int64_t computed_elements_ = 0;  // of every value evaluate_node computed, held in cache_: at most kMaxComputedElements
  std::map<std::pair<size_t, std::string>, core::Result<ConstTensor>> cache_;
  int depth_ = 0;  // recursion guard against cyclic (invalid) graphs
};

// Ok when `value` may decide a rewrite; else a refusal "<subject> computed through Sigmoid 'gate', which runtimes round
// differently ...", `subject` saying what it is ("Resize sizes are").
core::Status decidable(const ConstTensor& value, const std::string& subject);

// Converts a dense TensorProto (any numeric type, raw or typed fields) into a ConstTensor.
core::Result<ConstTensor> to_const_tensor(const onnx::TensorProto& tensor);

}  // namespace dwdeconv::rewrite
