#include "runtime_check/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "internal.h"
#include "onnx_io/tensor.h"

namespace dwdeconv::runtime_check {

ToleranceValues default_tolerance(int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::DOUBLE: return {1e-6, 1e-4};
    case onnx::TensorProto::FLOAT16: return {1e-3, 1e-2};
    case onnx::TensorProto::BFLOAT16: return {1e-2, 2e-2};
    default: return {0.0, 0.0};
  }
}

namespace {

// |a - b| as a double, without the overflow of a - b in int64 (INT64_MAX - INT64_MIN).
double integer_distance(int64_t a, int64_t b) {
  const uint64_t d = a >= b ? static_cast<uint64_t>(a) - static_cast<uint64_t>(b) : static_cast<uint64_t>(b) - static_cast<uint64_t>(a);
  return static_cast<double>(d);
}

// Integer and bool outputs element by element as int64, never through double (which holds 53 bits: 2^60 and
// 2^60 + 1 are one double), and with no tolerance: an index, a shape or a count that is off by one is wrong.
void compare_integers(OutputComparison& c, const Tensor& actual, const Tensor& expected) {
  c.tolerance = {0.0, 0.0};
  double scale = 0.0;
  for (const int64_t e : expected.i) scale = std::max(scale, integer_distance(e, 0));
  c.scale = scale > 0.0 ? scale : 1.0;
  for (size_t k = 0; k < expected.i.size(); ++k) {
    const int64_t e = expected.i[k], a = actual.i[k];
    if (a == e) continue;
    if (c.message.empty()) {
      c.message = "element " + std::to_string(k) + " is " + std::to_string(a) + ", expected " + std::to_string(e) +
                  " (integers are compared exactly)";
    }
    c.max_abs_error = std::max(c.max_abs_error, integer_distance(a, e));
  }
  c.max_rel_error = c.max_abs_error / c.scale;
  c.passed = c.message.empty();
  c.compared = static_cast<int64_t>(expected.i.size());
}

}  // namespace

OutputComparison compare_tensor(const std::string& name, const Tensor& actual, const Tensor& expected, const Tolerances& tolerances) {
  OutputComparison c;
  c.name = name;
  const ToleranceValues defaults = default_tolerance(expected.dtype);
  c.tolerance = {tolerances.atol.value_or(defaults.atol), tolerances.rtol.value_or(defaults.rtol)};
  if (actual.dims != expected.dims) {
    c.message = "shape " + format_dims(actual.dims) + " != expected " + format_dims(expected.dims);
    return c;
  }
  if (actual.dtype != expected.dtype) {
    c.message = "type " + onnx_io::data_type_name(actual.dtype) + " != expected " + onnx_io::data_type_name(expected.dtype);
    return c;
  }
  if (!expected.is_float()) {
    compare_integers(c, actual, expected);
    return c;
  }
  double scale = 0.0;
  for (int64_t k = 0; k < expected.numel(); ++k) {
    const double e = expected.get(k);
    if (std::isfinite(e)) scale = std::max(scale, std::fabs(e));
  }
  c.scale = scale > 0.0 ? scale : 1.0;
  for (int64_t k = 0; k < expected.numel(); ++k) {
    const double e = expected.get(k), a = actual.get(k);
    if (std::isnan(e) || std::isnan(a) || std::isinf(e) || std::isinf(a)) {
      if ((std::isnan(e) && std::isnan(a)) || e == a) continue;
      c.message = "element " + std::to_string(k) + " is " + std::to_string(a) + ", expected " + std::to_string(e);
      c.max_abs_error = std::numeric_limits<double>::infinity();
      continue;
    }
    c.max_abs_error = std::max(c.max_abs_error, std::fabs(a - e));
    ++c.compared;
  }
  c.max_rel_error = c.max_abs_error / c.scale;
  const double bound = c.tolerance.atol + c.tolerance.rtol * c.scale;
  c.decided_by_size = c.message.empty();
  c.passed = c.decided_by_size && c.max_abs_error <= bound;
  if (!c.passed && c.message.empty()) {
    char text[160];
    std::snprintf(text, sizeof text, "max abs error %.3g exceeds %.3g + %.3g*%.3g", c.max_abs_error, c.tolerance.atol, c.tolerance.rtol,
                  c.scale);
    c.message = text;
  }
  return c;
}

ComparisonReport compare_outputs(const std::vector<NamedTensor>& actual, const std::vector<NamedTensor>& expected,
                                 const Tolerances& tolerances) {
  ComparisonReport report;
  report.passed = true;
  for (const auto& e : expected) {
    const NamedTensor* a = nullptr;
    for (const auto& candidate : actual) {
      if (candidate.name == e.name) a = &candidate;
    }
    if (a == nullptr) {
      OutputComparison missing;
      missing.name = e.name;
      missing.message = "missing from the actual outputs";
      report.outputs.push_back(missing);
      report.passed = false;
      continue;
    }
    report.outputs.push_back(compare_tensor(e.name, a->tensor, e.tensor, tolerances));
    report.passed = report.passed && report.outputs.back().passed;
  }
  return report;
}

namespace {

// fp16 and bf16: their dtype's default tolerances where `given` leaves one unset. fp16 weights at least (LiteRT),
// fp16 arithmetic too (ExecuTorch); bf16 arithmetic (OpenVINO's bf16 inference hint) has an 8-bit mantissa, a
// relative step of 2^-8 = 0.0039 against fp16's 2^-11, so looser bounds than fp16's.
Tolerances precision_tolerances(const std::string& precision, const Tolerances& given) {
  Tolerances used = given;
  int32_t dtype = onnx::TensorProto::UNDEFINED;
  if (precision == "fp16") dtype = onnx::TensorProto::FLOAT16;
  if (precision == "bf16") dtype = onnx::TensorProto::BFLOAT16;
  if (dtype == onnx::TensorProto::UNDEFINED) return used;
  const ToleranceValues defaults = default_tolerance(dtype);
  if (!used.atol) used.atol = defaults.atol;
  if (!used.rtol) used.rtol = defaults.rtol;
  return used;
}

// Clamps the float output `name` of `outputs` to the int8 range of `q`, which the quantised side cannot leave:
// saturation is the precision's doing, not the rewrite's.
void clamp_to_int8_range(std::vector<NamedTensor>& outputs, const std::string& name, const QuantStep& q) {
  const double low = (-128 - q.zero_point) * q.scale, high = (127 - q.zero_point) * q.scale;
  for (auto& out : outputs) {
    if (out.name != name || !out.tensor.is_float()) continue;
    for (auto& v : out.tensor.f) {
      if (std::isfinite(v)) v = static_cast<float>(std::clamp<double>(v, low, high));
    }
  }
}

// int8: each output's error judged in quantisation steps instead of the float tolerance (see judge_outputs).
void judge_in_steps(ComparisonReport& report, size_t expected_outputs, const PrecisionRule& rule) {
  // A side that ran some ops in float is not the other's function quantised alike: on a deep model (MI-GAN on
  // ExecuTorch: each int8 model 22-24 steps from fp32, 22 apart) the difference between them is quantisation error
  // more than any rewrite's, which a failure says rather than blaming the rewrite.
  const std::string float_inside = rule.float_side.empty()
                                       ? std::string()
                                       : "; the " + rule.float_side +
                                             " ran ops in float that the other quantises (its note says which), so the difference holds "
                                             "that quantisation's error as well as any of the rewrite: --verify at fp32 checks the "
                                             "rewrite (docs/runtime-checks.md, \"Precision\")";
  bool all = true;
  for (auto& c : report.outputs) {
    const auto o = rule.original_steps.find(c.name), r = rule.rewritten_steps.find(c.name);
    const bool one_side = (o == rule.original_steps.end()) != (r == rule.rewritten_steps.end());
    const double step =
        std::max(o != rule.original_steps.end() ? o->second.scale : 0.0, r != rule.rewritten_steps.end() ? r->second.scale : 0.0);
    if (step <= 0) {
      // Neither model quantised this output: it was computed in float on both, and the float tolerance judged it.
      c.message += std::string(c.message.empty() ? "" : "; ") + "no quantisation step on either side: judged in float";
      all = all && c.passed;
      continue;
    }
    c.quant_step = step;
    c.quant_steps = c.max_abs_error / step;
    // The size of the error is judged in steps instead of the float tolerance; anything else that failed it (a
    // shape, a dtype, a NaN or infinity in one model only, a missing output, nothing compared) keeps failing it.
    if (!c.decided_by_size || c.compared == 0) {
      all = false;
      continue;
    }
    c.message = one_side ? "one model computed it in float, clamped to the other's int8 range" : "";
    c.passed = std::isfinite(c.quant_steps) && c.quant_steps <= rule.max_steps;
    if (!c.passed) {
      char text[96];
      std::snprintf(text, sizeof text, "%.3g quantisation steps, over the bound of %g", c.quant_steps, rule.max_steps);
      c.message = std::string(text) + (c.message.empty() ? "" : "; " + c.message) + float_inside;
    }
    all = all && c.passed;
  }
  report.passed = all && report.outputs.size() == expected_outputs;
}

}  // namespace

ComparisonReport compare_model_outputs(const std::vector<NamedTensor>& actual, const std::vector<NamedTensor>& expected,
                                       const Tolerances& tolerances) {
  ComparisonReport cmp = compare_outputs(actual, expected, tolerances);
  for (const auto& a : actual) {
    const bool expected_too = std::any_of(expected.begin(), expected.end(), [&](const NamedTensor& e) { return e.name == a.name; });
    const bool twice = std::count_if(actual.begin(), actual.end(), [&](const NamedTensor& o) { return o.name == a.name; }) > 1;
    if (expected_too && !twice) continue;
    OutputComparison extra;
    extra.name = a.name;
    extra.message = twice ? "returned twice" : "not an output of the original";
    cmp.outputs.push_back(extra);
    cmp.passed = false;
  }
  // Outputs with no elements (a 0 dim), or none finite (NaN == NaN at every element), check nothing, and a verifier
  // must not pass what it did not check: each such output says so, and when no output compared a value, it fails.
  int64_t compared = 0;
  for (auto& o : cmp.outputs) {
    compared += o.compared;
    if (o.passed && o.compared == 0) {
      const auto e = std::find_if(expected.begin(), expected.end(), [&o](const NamedTensor& t) { return t.name == o.name; });
      o.message = e != expected.end() && e->tensor.numel() == 0 ? "0 elements: nothing compared" : "no finite element: nothing compared";
    }
  }
  if (compared == 0 && cmp.passed) {
    for (auto& o : cmp.outputs) o.passed = false;
    cmp.passed = false;
  }
  return cmp;
}

ComparisonReport judge_outputs(const std::vector<NamedTensor>& rewritten, const std::vector<NamedTensor>& original,
                               const Tolerances& tolerances, const PrecisionRule& rule) {
  const Tolerances used = precision_tolerances(rule.precision, tolerances);
  if (rule.precision != "int8") return compare_model_outputs(rewritten, original, used);
  // One side quantised and the other in float (ExecuTorch leaves a depthwise ConvTranspose in fp32): the float side
  // is clamped to the quantised side's range.
  std::vector<NamedTensor> original_outputs = original, rewritten_outputs = rewritten;
  for (const auto& [name, q] : rule.rewritten_steps) {
    if (rule.original_steps.count(name) == 0) clamp_to_int8_range(original_outputs, name, q);
  }
  for (const auto& [name, q] : rule.original_steps) {
    if (rule.rewritten_steps.count(name) == 0) clamp_to_int8_range(rewritten_outputs, name, q);
  }
  auto report = compare_model_outputs(rewritten_outputs, original_outputs, used);
  judge_in_steps(report, original.size(), rule);
  return report;
}

std::string ComparisonReport::summary() const {
  std::string text;
  for (const auto& c : outputs) {
    char line[256];
    std::snprintf(line, sizeof line, "%s: max abs %.3g, max rel %.3g (scale %.3g), tol %.3g + %.3g*scale: %s",
                  detail::printable_name(c.name).c_str(), c.max_abs_error, c.max_rel_error, c.scale, c.tolerance.atol, c.tolerance.rtol,
                  c.passed ? "pass" : "FAIL");
    text += line;
    if (!c.passed && !c.message.empty()) text += " (" + c.message + ")";
    text += "\n";
  }
  return text;
}

}  // namespace dwdeconv::runtime_check
