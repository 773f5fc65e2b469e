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
