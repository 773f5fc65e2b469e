#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "cli/version.h"
#include "core/text.h"

namespace dwdeconv::cli {
namespace {

template <typename Array>
std::string json_ints(const Array& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

// JSON number; non-finite values (a NaN error) become null.
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string verify_json(const runtime_check::VerifyResult& v) {
  std::ostringstream o;
  o << "{\n    \"mode\": \"" << runtime_check::verify_mode_name(v.mode) << "\",\n";
  o << "    \"reason\": " << json_string(v.mode_reason) << ",\n";
  o << "    \"passed\": " << (v.passed ? "true" : "false") << ",\n";
  o << "    \"difference\": " << (v.difference.empty() ? std::string("null") : json_string(v.difference)) << ",\n";
  o << "    \"outputs\": [";
  for (size_t i = 0; i < v.outputs.size(); ++i) {
    const auto& out = v.outputs[i];
    o << (i ? "," : "") << "\n      {\"name\": " << json_string(out.name) << ", \"max_abs_error\": " << json_number(out.max_abs_error)
      << ", \"max_rel_error\": " << json_number(out.max_rel_error) << ", \"passed\": " << (out.passed ? "true" : "false")
      << ", \"compared\": " << out.compared << "}";
  }
  o << (v.outputs.empty() ? "" : "\n    ") << "],\n";
  o << "    \"xnnpack_ops\": " << v.xnnpack_ops << ",\n    \"reference_ops\": " << v.reference_ops << "\n  }";
  return o.str();
}

}  // namespace

namespace {

// Appends the UTF-8 sequence at s[i] when it is well-formed, else U+FFFD for its first byte; returns the bytes used.
size_t append_utf8(const std::string& s, size_t i, std::string& out) {
  const size_t len = core::utf8_sequence_length(s, i);
  out += len == 0 ? std::string("\xEF\xBF\xBD") : s.substr(i, len);
  return len == 0 ? 1 : len;
}

}  // namespace

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      i += append_utf8(s, i, out);
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {  // DEL too: JSON allows it raw, but a terminal showing the plan does not show it
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

// A count the report states when it is known (non-zero), else null.
std::string known(int64_t value) { return value > 0 ? std::to_string(value) : "null"; }

}  // namespace

std::string report_json(const RunInfo& run, const rewrite::RewriteResult& result) {
  std::ostringstream o;
  o << "{\n  \"tool_version\": " << json_string(kVersion) << ",\n";
  o << "  \"exit_code\": " << run.exit_code << ",\n";
  o << "  \"error\": " << (run.error.empty() ? "null" : json_string(run.error)) << ",\n";
  o << "  \"input\": " << json_string(run.input) << ",\n";
  o << "  \"output\": " << (run.output.empty() ? "null" : json_string(run.output)) << ",\n";
  o << "  \"opset\": " << run.opset << ",\n";
  o << "  \"target\": " << (result.target ? json_string(result.target->name) : "null") << ",\n";
  o << "  \"cpu\": " << (result.target ? json_string(result.cpu.describe()) : "null") << ",\n";
  o << "  \"outside_delegate\": "
    << (result.target && !result.target->outside_delegate.empty() ? json_string(result.target->outside_delegate) : "null") << ",\n";
  o << "  \"nodes\": [";
  for (size_t i = 0; i < result.nodes.size(); ++i) {
    const auto& n = result.nodes[i];
    const auto& s = n.summary;
    o << (i ? "," : "") << "\n    {\"name\": " << json_string(s.name) << ", \"graph\": " << json_string(s.graph_path)
      << ", \"decision\": " << (n.rewritten ? "\"rewritten\"" : "\"kept\"") << ", \"reason\": " << json_string(n.reason)
      << ", \"channels\": " << known(s.channels) << ", \"kernel\": " << (s.kernel[0] > 0 ? json_ints(s.kernel) : "null")
      << ", \"stride\": " << known(s.stride) << ", \"pads\": " << (s.pads ? json_ints(*s.pads) : "null")
      << ", \"output_padding\": " << (s.output_padding ? json_ints(*s.output_padding) : "null")
      << ", \"form\": " << json_string(rewrite::form_name(s.form))
      << ", \"layout\": " << (n.rewritten ? json_string(rewrite::phase_layout_name(n.layout)) : "null")
      << ", \"note\": " << (n.note.empty() ? std::string("null") : json_string(n.note)) << "}";
  }
  o << (result.nodes.empty() ? "" : "\n  ") << "],\n";
  o << "  \"rewritten\": " << result.rewritten << ",\n  \"kept\": " << result.kept << ",\n";
  if (!run.changes.empty()) o << "  \"changes\": " << run.changes << ",\n";
  o << "  \"validation\": " << (run.validation.empty() ? "null" : json_string(run.validation));
  if (!run.compared.empty()) o << ",\n  \"compared\": " << json_string(run.compared);
  if (run.verify) o << ",\n  \"verify\": " << verify_json(*run.verify);
  if (run.bench) {
    const auto& b = *run.bench;
    o << ",\n  \"bench\": {\"threads\": " << b.threads << ", \"runs\": " << b.runs << ", \"original_ms\": " << json_number(b.original_ms)
      << ", \"rewritten_ms\": " << json_number(b.rewritten_ms) << ", \"speedup\": " << json_number(b.speedup);
    // The spread of each side and the number of interleaved pairs, so a reader can judge the medians.
    for (const auto& [side, samples] : {std::pair<const char*, const std::vector<double>&>{"original", b.original_samples_ms},
                                        {"rewritten", b.rewritten_samples_ms}}) {
      const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
      o << ", \"" << side << "_min_ms\": " << (samples.empty() ? "null" : json_number(*lo)) << ", \"" << side
        << "_max_ms\": " << (samples.empty() ? "null" : json_number(*hi));
    }
    o << ", \"pairs\": " << std::min(b.original_samples_ms.size(), b.rewritten_samples_ms.size()) << "}";
  }
  if (run.runtime) o << runtime_report_fields(*run.runtime, run.bench.has_value());
  o << "\n}\n";
  return o.str();
}

std::string upsampler_noun(const rewrite::RewriteResult& result) {
  for (const auto& n : result.nodes) {
    if (n.summary.form != rewrite::Form::kConvTranspose) return "upsamplers";
  }
  return "ConvTranspose nodes";
}

std::string report_list_json(const std::vector<std::string>& entries) {
  std::string out = "[";
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string entry = entries[i];
    while (!entry.empty() && entry.back() == '\n') entry.pop_back();
    out += (i ? ",\n" : "\n") + entry;
  }
  return out + "\n]\n";
}

std::string plan_text(const rewrite::RewriteResult& result) {
  std::ostringstream plan;
  if (result.target != nullptr) {
    plan << "target: " << result.target->name << " (" << result.target->runtime << "; rules from BENCHMARKS.md "
      << result.target->measured << "; " << result.cpu.describe() << ")\n";
  }
  for (const auto& n : result.nodes) {
    const auto& s = n.summary;
    std::ostringstream row;  // one line, whatever names and reasons hold (core::printable)
    row << (n.rewritten ? "rewrite " : "keep    ") << json_string(s.name);
    if (s.graph_path != "main") row << " in " << s.graph_path;
    if (s.form != rewrite::Form::kConvTranspose) row << " (" << rewrite::form_name(s.form) << ")";
    // Only what matching got to: a row kept before its geometry was read shows none of it.
    if (s.channels > 0) row << "  C=" << s.channels;
    if (s.kernel[0] > 0) row << " k=" << s.kernel[0] << "x" << s.kernel[1];
    if (s.stride != 0) {
      row << " s=" << s.stride;
    } else if (s.strides[0] != 0) {
      row << " s=" << s.strides[0] << "x" << s.strides[1];
    }
    if (s.pads) row << " pads=" << json_ints(*s.pads);
    if (s.output_padding) row << " output_padding=" << json_ints(*s.output_padding);
    if (n.rewritten) {
      row << " -> " << n.emitted_nodes.size() << " nodes";
      if (n.layout != rewrite::PhaseLayout::kDcr) row << " (" << rewrite::phase_layout_name(n.layout) << ")";
      if (!n.note.empty()) row << ": " << n.note;
    } else {
      row << ": " << n.reason;
    }
    plan << core::printable_line(row.str()) << "\n";
  }
  plan << "plan: rewrite " << result.rewritten << " of " << result.nodes.size() << " " << upsampler_noun(result) << ", keep " << result.kept << "\n";
  return plan.str();
}

}  // namespace dwdeconv::cli
