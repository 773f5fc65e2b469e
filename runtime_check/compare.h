// Output comparison with tolerances relative to the output's scale.
//
// For one output with expected values e and actual values a:
//   max_abs_error = max |a - e|
//   scale         = max |e| (1 when every expected value is 0)
//   max_rel_error = max_abs_error / scale          (error relative to the output's scale, not per element)
//   passed        = max_abs_error <= atol + rtol * scale, shapes and dtypes agree, NaNs in the same places.
// Integer and bool outputs are compared exactly, as int64 (no tolerance applies, whatever is given).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check {

// Unset fields take the per-dtype defaults of default_tolerance().
struct Tolerances {
  std::optional<double> atol;
  std::optional<double> rtol;
};

struct ToleranceValues {
  double atol = 0.0;
  double rtol = 0.0;
};

// FLOAT: rtol 1e-4, atol 1e-6. DOUBLE: the same (for callers comparing tensors of their own; the executor refuses to
// compute DOUBLE). FLOAT16: rtol 1e-2, atol 1e-3.
// BFLOAT16: rtol 2e-2, atol 1e-2. Integer and bool types: exact (0, 0), and compare_tensor() ignores any other.
ToleranceValues default_tolerance(int32_t data_type);

struct OutputComparison {
  std::string name;
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;
  double scale = 0.0;
  ToleranceValues tolerance;
  bool passed = false;
  std::string message;  // why it failed (shape, dtype, NaN, error size); empty when passed
  // Elements compared as values: the integers, or the floats finite on both sides (a NaN or an infinity in the same
  // place on both checks only that place). 0 means the output checked nothing (no elements, or none finite).
  int64_t compared = 0;
  // int8 (--precision int8 on a Python runtime): the quantisation step the output is judged in (output units) and
  // max_abs_error in steps; quant_steps < 0 when the output was not judged in steps.
  double quant_step = 0.0;
  // True when the values were compared and only the size of their difference decided `passed` (floats, same shape
  // and type, NaN and infinity in the same places): a judgement in other units (int8's steps) may replace it.
  bool decided_by_size = false;
  double quant_steps = -1.0;
};

struct ComparisonReport {
  std::vector<OutputComparison> outputs;
  bool passed = false;  // every output passed and the output lists match
  // One line per output: "y: max abs 1.2e-06, max rel 3.4e-07 (scale 3.5), tol 1e-06 + 1e-04*scale: pass".
  std::string summary() const;
};

// Compares one tensor against its expected value.
OutputComparison compare_tensor(const std::string& name, const Tensor& actual, const Tensor& expected, const Tolerances& tolerances);

// Compares outputs by name; an expected output missing from `actual` fails.
ComparisonReport compare_outputs(const std::vector<NamedTensor>& actual, const std::vector<NamedTensor>& expected,
                                 const Tolerances& tolerances);

// The outputs of a model run against the original's, by name, as verification judges them: compare_outputs(), and
// also an output the original lacks or one returned twice fails, and outputs with no elements at all (a 0 dim) fail
// as "nothing compared".
ComparisonReport compare_model_outputs(const std::vector<NamedTensor>& actual, const std::vector<NamedTensor>& expected,
                                       const Tolerances& tolerances);

// An int8 output's quantisation: value = (q - zero_point) * scale, q in [-128, 127].
struct QuantStep {
  double scale = 0;
  double zero_point = 0;
};

// The precision both models ran at and what judging their outputs there needs. The executor computes at fp32;
// a Python runtime converts to what --precision asks for.
struct PrecisionRule {
  std::string precision = "fp32";  // fp32, fp16, bf16 or int8
  // int8: the quantisation step of each output that comes out of an integer tensor, by output name, per side.
  std::map<std::string, QuantStep> original_steps;
  std::map<std::string, QuantStep> rewritten_steps;
  double max_steps = 2.0;  // int8: the most quantisation steps an output may differ by
  // int8: "original" or "rewritten" when that side ran ops in float that the other quantises, else "".
  std::string float_side;
};

// The rewritten model's outputs against the original's, the one rule for the executor and every Python runtime:
// compare_model_outputs() under `tolerances`, where fp16 and bf16 take the FLOAT16 and BFLOAT16 defaults for what
// `tolerances` leaves unset, whatever the outputs' dtype. int8: an output passes when the two differ by at most
// max_steps quantisation steps, the step being the larger of the two sides' (one side's when only one has one: the
// other side, computed in float, is first clamped to that side's int8 range, which it cannot leave); an output neither
// side quantised is judged under the float tolerances, and its message says so.
ComparisonReport judge_outputs(const std::vector<NamedTensor>& rewritten, const std::vector<NamedTensor>& original,
                               const Tolerances& tolerances, const PrecisionRule& rule = {});

}  // namespace dwdeconv::runtime_check
