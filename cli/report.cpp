#include "cli/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/json.h"
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

// A value the report states when it is known, else null.
template <typename T>
Json or_null(bool known, const T& value) {
  return known ? Json(value) : Json(nullptr);
}

// A number; non-finite values (a NaN error) become null.
Json number(double v) { return or_null(std::isfinite(v), v); }

Json verify_object(const runtime_check::VerifyResult& v) {
  Json outputs = Json::array();
  for (const auto& out : v.outputs) {
    outputs.push_back({{"name", out.name},
                       {"max_abs_error", number(out.max_abs_error)},
                       {"max_rel_error", number(out.max_rel_error)},
                       {"passed", out.passed},
                       {"compared", out.compared}});
    if (out.quant_steps >= 0) {
      outputs.back()["quant_step"] = number(out.quant_step);
      outputs.back()["quant_steps"] = number(out.quant_steps);
    }
  }
  return {{"mode", runtime_check::verify_mode_name(v.mode)},
          {"reason", v.mode_reason},
          {"passed", v.passed},
          {"difference", or_null(!v.difference.empty(), v.difference)},
          {"outputs", outputs},
          {"xnnpack_ops", v.xnnpack_ops},
          {"reference_ops", v.reference_ops}};
}

Json bench_object(const runtime_check::BenchResult& b) {
  Json o = {{"threads", b.threads},
            {"runs", b.runs},
            {"original_ms", number(b.original_ms)},
            {"rewritten_ms", number(b.rewritten_ms)},
            {"speedup", number(b.speedup)}};
  // The spread of each side and the number of interleaved pairs, so a reader can judge the medians.
  for (const auto& [side, samples] :
       {std::pair<std::string, const std::vector<double>&>{"original", b.original_samples_ms}, {"rewritten", b.rewritten_samples_ms}}) {
    const auto [lo, hi] = std::minmax_element(samples.begin(), samples.end());
    o[side + "_min_ms"] = samples.empty() ? Json(nullptr) : number(*lo);
    o[side + "_max_ms"] = samples.empty() ? Json(nullptr) : number(*hi);
  }
  o["pairs"] = std::min(b.original_samples_ms.size(), b.rewritten_samples_ms.size());
  return o;
}

// Where verify and bench ran: the runtime, --min-speedup, and with --bench the per-upsampler table.
void add_runtime_fields(Json& report, const RuntimeRunInfo& info, bool bench) {
  Json versions = Json::object();
  for (const auto& [package, version] : info.runtime.versions) versions[package] = version;
  report["runtime"] = {{"name", info.runtime.name},
                       {"label", info.runtime.label},
                       {"python", or_null(!info.runtime.python.empty(), info.runtime.python)},
                       {"precision", info.runtime.precision},
                       {"versions", versions}};
  if (info.min_speedup) report["min_speedup"] = *info.min_speedup;
  if (bench) {
    Json rows = Json::array();
    for (const auto& r : info.upsamplers) {
      // A row without times has null for both and says why; names are the model's, exactly.
      rows.push_back({{"name", r.name},
                      {"form", r.form},
                      {"input_shape", r.input_shape},
                      {"original_ms", r.not_attributable.empty() ? number(r.original_ms) : Json(nullptr)},
                      {"rewritten_ms", r.not_attributable.empty() ? number(r.rewritten_ms) : Json(nullptr)},
                      {"timed_with", r.timed_with},
                      {"not_attributable", or_null(!r.not_attributable.empty(), r.not_attributable)}});
    }
    report["upsamplers"] = rows;
  }
}

// The features the target's rules read, each by name: {"avx512f": false}.
Json cpu_object(const rewrite::CpuFeatures& cpu) { return {{"avx512f", cpu.avx512f}}; }

// The ops the target emits that a runtime runs outside its XNNPACK delegate, one object each; [] when none.
Json outside_delegate_array(const rewrite::Target& target) {
  Json rows = Json::array();
  for (const auto& o : target.outside_delegate) {
    rows.push_back(
        {{"op", o.op}, {"layout", rewrite::phase_layout_name(o.layout)}, {"runtime", o.runtime}, {"runs_as", o.runs_as}, {"on", o.on}});
  }
  return rows;
}

Json tune_array(const std::vector<TuneFigure>& figures) {
  Json rows = Json::array();
  for (const auto& f : figures) {
    Json row = {{"name", f.name}, {"input_shape", f.input_shape}};
    if (f.not_timed.empty()) {
      row["original_ms"] = number(f.original_ms);
      row["rewritten_ms"] = number(f.rewritten_ms);
      row["speedup"] = number(f.speedup);
    } else {
      row["not_timed"] = f.not_timed;
    }
    row["decision"] = f.rewritten ? "rewritten" : "kept";
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

std::string json_string(const std::string& name) {
  const std::string s = core::well_formed_utf8(name);
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    ++i;
    if (c >= 0x80) {  // part of a well-formed sequence
      out += static_cast<char>(c);
      continue;
    }
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
Json known(int64_t value) { return or_null(value > 0, value); }

template <typename Array>
Json ints(const Array& values) {
  Json out = Json::array();
  for (const auto v : values) out.push_back(v);
  return out;
}

}  // namespace

std::string report_json(const RunInfo& run, const rewrite::RewriteResult& result) {
  const bool target = result.target != nullptr;
  Json o = {{"schema_version", kReportSchemaVersion},
            {"tool_version", kVersion},
            {"exit_code", run.exit_code},
            {"error", or_null(!run.error.empty(), run.error)},
            {"input", or_null(!run.input.empty(), run.input)},
            {"output", or_null(!run.output.empty(), run.output)},
            {"opset", known(run.opset)},
            {"target", target ? Json(result.target->name) : Json(nullptr)},
            {"cpu", target ? cpu_object(result.cpu) : Json(nullptr)},
            {"outside_delegate", target ? outside_delegate_array(*result.target) : Json(nullptr)}};
  Json nodes = Json::array();
  for (const auto& n : result.nodes) {
    const auto& s = n.summary;
    nodes.push_back({{"name", s.name},
                     {"graph", s.graph_path},
                     {"decision", n.rewritten ? "rewritten" : "kept"},
                     {"reason", n.reason},
                     {"channels", known(s.channels)},
                     {"kernel", s.kernel[0] > 0 ? ints(s.kernel) : Json(nullptr)},
                     {"stride", known(s.stride)},
                     {"strides", s.strides[0] > 0 ? ints(s.strides) : Json(nullptr)},
                     {"pads", s.pads ? ints(*s.pads) : Json(nullptr)},
                     {"output_padding", s.output_padding ? ints(*s.output_padding) : Json(nullptr)},
                     {"dilations", s.dilations ? ints(*s.dilations) : Json(nullptr)},
                     {"depthwise_in_value", s.depthwise_in_value},
                     {"form", rewrite::form_name(s.form)},
                     {"layout", n.rewritten ? Json(rewrite::phase_layout_name(n.layout)) : Json(nullptr)},
                     {"note", or_null(!n.note.empty(), n.note)}});
  }
  o["nodes"] = nodes;
  o["rewritten"] = result.rewritten;
  o["kept"] = result.kept;
  if (run.stats) o["changes"] = stats_change_json(run.stats->first, run.stats->second);
  o["validation"] = or_null(!run.validation.empty(), run.validation);
  if (!run.compared.empty()) o["compared"] = run.compared;
  if (!run.input_shapes_file.empty()) o["input_shapes_file"] = run.input_shapes_file;
  if (run.verify) o["verify"] = verify_object(*run.verify);
  if (run.bench) o["bench"] = bench_object(*run.bench);
  if (run.runtime) add_runtime_fields(o, *run.runtime, run.bench.has_value());
  if (run.tune) o["tune"] = tune_array(*run.tune);
  return json_text(o) + "\n";
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
    std::string entry = entries[i];  // each a whole object from report_json
    while (!entry.empty() && entry.back() == '\n') entry.pop_back();
    out += (i ? ",\n" : "\n") + entry;
  }
  return out + "\n]\n";
}

std::string plan_text(const rewrite::RewriteResult& result) {
  std::ostringstream plan;
  if (result.target != nullptr) {
    plan << "target: " << result.target->name << " (" << result.target->runtime << "; rules from BENCHMARKS.md " << result.target->measured
         << "; " << result.cpu.describe() << ")\n";
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
    if (s.dilations) row << " dilations=" << json_ints(*s.dilations);
    if (s.depthwise_in_value) row << " (group 1, depthwise in value)";
    if (n.rewritten) {
      row << " -> " << n.emitted_nodes.size() << " nodes";
      if (n.layout != rewrite::PhaseLayout::kDcr) row << " (" << rewrite::phase_layout_name(n.layout) << ")";
      if (!n.note.empty()) row << ": " << n.note;
    } else {
      row << ": " << n.reason;
    }
    plan << core::printable_line(row.str()) << "\n";
  }
  plan << "plan: rewrite " << result.rewritten << " of " << result.nodes.size() << " " << upsampler_noun(result) << ", keep " << result.kept
       << "\n";
  return plan.str();
}

}  // namespace dwdeconv::cli
