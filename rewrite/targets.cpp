#include "rewrite/targets.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "rewrite/embedded_targets_json.h"

namespace dwdeconv::rewrite {
namespace {
std::string replace_all(std::string text, const std::string& what, const std::string& with) {
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size())) text.replace(at, what.size(), with);
  return text;
}

template <typename T, typename Name>
std::string joined(const std::set<T>& values, Name name, const char* glue) {
  std::string text;
  for (const auto& v : values) text += (text.empty() ? "" : glue) + std::string(name(v));
  return text;
}

// "its output a graph output": what a rule asks of the graph, or "".
std::string condition_text(const KeepRule& r) {
  if (!r.graph_output) return "";
  return *r.graph_output ? "its output a graph output" : "its output not a graph output";
}

// Whether the rule names every family (a target's last, catch-all row).
bool names_everything(const KeepRule& r) {
  return r.forms.empty() && r.groupings.empty() && r.kernels.empty() && r.min_channels == 0 && r.max_channels == 0 && !r.widens &&
         r.strides.empty() && !r.graph_output;
}

// "dense nearest_conv 3x3, C >= 64": what a rule names, in words.
std::string family_text(const KeepRule& r) {
  std::string text = joined(r.groupings, grouping_name, "/");
  // "every form" unless the rule names forms, or names only strides (then "strides s_h != s_w" says it).
  const bool only_strides = r.forms.empty() && r.groupings.empty() && r.kernels.empty() && !r.strides.empty();
  const std::string forms = r.forms.empty() ? (only_strides ? "" : "every form") : joined(r.forms, form_name, "/");
  text += (text.empty() || forms.empty() ? "" : " ") + forms;
  if (!r.kernels.empty()) text += " " + joined(r.kernels, kernel_class_name, "/");
  if (!r.strides.empty()) text += std::string(text.empty() ? "" : " with ") + "strides " + joined(r.strides, stride_class_name, "/");
  if (r.min_channels > 0) text += ", C >= " + std::to_string(r.min_channels);
  if (r.max_channels > 0) text += ", C < " + std::to_string(r.max_channels);
  if (r.widens) text += *r.widens ? ", C_out > C" : ", C_out <= C";
  if (const auto when = condition_text(r); !when.empty()) text += ", " + when;
  return text;
}

// "21-64", "3", ">= 2", "<= 8", or "" for no bound.
std::string bounds(int64_t lo, int64_t hi) {
  if (lo > 0 && hi > 0) return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
  if (lo > 0) return ">= " + std::to_string(lo);
  if (hi > 0) return "<= " + std::to_string(hi);
  return "";
}

bool within(int64_t v, int64_t lo, int64_t hi) { return (lo == 0 || v >= lo) && (hi == 0 || v <= hi); }

std::string kept_for(const std::string& target) { return target == kDefaultTarget ? "kept by default" : "kept for --target " + target; }

}  // namespace

const char* grouping_name(Grouping g) {
  switch (g) {
    case Grouping::kDepthwise: return "depthwise";
    case Grouping::kGrouped: return "grouped";
    case Grouping::kDense: return "dense";
    case Grouping::kDiagonal: return "diagonal";
  }
  return "";
}

const char* stride_class_name(StrideClass s) {
  switch (s) {
    case StrideClass::kSquare: return "s x s";
    case StrideClass::kOne: return "1 x 1";
    case StrideClass::kAnisotropic: return "s_h != s_w";
    case StrideClass::kOneD: return "1-D";
  }
  return "";
}

const char* kernel_class_name(KernelClass k) {
  switch (k) {
    case KernelClass::k1x1: return "1x1";
    case KernelClass::k3x3: return "3x3";
    case KernelClass::kOther: return "other";
  }
  return "";
}

// Whether `value` is an output of the model's graph `graph`, or becomes one through Identity nodes only (which runtimes
// drop, so the upsampler's last node writes the model's output there). One pass indexes the Identities, then each is
// followed once: linear in the graph, however long the chain.
static bool reaches_graph_output(const onnx::GraphProto& graph, const std::string& value) {
  std::set<std::string> outputs;
  for (const auto& out : graph.output()) outputs.insert(out.name());
  std::multimap<std::string, const onnx::NodeProto*> identities;  // input -> the Identity nodes that read it
  for (const auto& node : graph.node()) {
    if (node.op_type() == "Identity" && node.domain().empty() && node.input_size() == 1) identities.emplace(node.input(0), &node);
  }
  std::set<std::string> seen{value};
  std::vector<std::string> todo{value};
  while (!todo.empty()) {
    const std::string v = todo.back();
    todo.pop_back();
    if (outputs.count(v) != 0) return true;
    const auto range = identities.equal_range(v);
    for (auto it = range.first; it != range.second; ++it) {
      for (const auto& o : it->second->output()) {
        if (seen.insert(o).second) todo.push_back(o);
      }
    }
  }
  return false;
}

Family family_of(const NodeSummary& summary, const DeconvMatch& m) {
  Family f;
  f.form = summary.form;
  f.channels = m.channels;
  f.out_channels = m.outputs();
  f.stride = m.y.stride;
  f.strides = m.one_d && m.x.stride > 1  ? StrideClass::kOneD
              : m.y.stride != m.x.stride ? StrideClass::kAnisotropic
              : m.y.stride == 1          ? StrideClass::kOne
                                         : StrideClass::kSquare;
  f.grouping = summary.depthwise_in_value                              ? Grouping::kDiagonal
               : m.groups() == m.channels && m.outputs() == m.channels ? Grouping::kDepthwise
               : m.groups() == 1                                       ? Grouping::kDense
                                                                       : Grouping::kGrouped;
  // A nearest + Conv's equivalent ConvTranspose has k = K + s - 1 on each axis (its own s); every other form keeps the
  // written k.
  const bool grows = form_info(summary.form).kernel_grows_by_stride;
  const int64_t ky = m.y.kernel - (grows ? m.y.stride - 1 : 0), kx = m.x.kernel - (grows ? m.x.stride - 1 : 0);
  f.kernel = ky == 1 && kx == 1 ? KernelClass::k1x1 : ky == 3 && kx == 3 ? KernelClass::k3x3 : KernelClass::kOther;
  // A 1-D node is matched as 2-D with a unit H axis (k 1, s 1): only its one real axis counts.
  f.rank = m.one_d ? 1 : 2;
  f.min_kernel = m.one_d ? kx : std::min(ky, kx);
  f.max_kernel = m.one_d ? kx : std::max(ky, kx);
  f.max_stride = m.one_d ? m.x.stride : std::max(m.y.stride, m.x.stride);
  // Only the model's own outputs count: a subgraph's output flows on into its If or Loop node (a node in a subgraph
  // reads as not at the model's output, the rewriting side: OpenVINO's reorder was measured on main graphs).
  if (m.scope != nullptr && m.scope->graph != nullptr && m.scope->parent == nullptr)
    f.graph_output = reaches_graph_output(*m.scope->graph, m.output);
  return f;
}

bool MeasuredRange::covers(const Family& f) const { return outside(f).empty(); }

std::string MeasuredRange::describe() const {
  std::string text;
  const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (const auto c = bounds(min_channels, max_channels); !c.empty()) add("C " + c);
  if (const auto k = bounds(min_kernel, max_kernel); !k.empty()) add("k " + k);
  if (const auto st = bounds(min_stride, max_stride); !st.empty()) add("s " + st);
  if (!ranks.empty()) {
    std::string r;
    for (const int rank : ranks) r += (r.empty() ? "" : "/") + std::to_string(rank);
    add(r + "-D");
  }
  return text;
}

std::string MeasuredRange::outside(const Family& f) const {
  std::string text;
  const auto add = [&text](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (!within(f.channels, min_channels, max_channels))
    add("C " + std::to_string(f.channels) + " (measured " + bounds(min_channels, max_channels) + ")");
  if (!within(f.min_kernel, min_kernel, max_kernel) || !within(f.max_kernel, min_kernel, max_kernel)) {
    const std::string k =
        f.min_kernel == f.max_kernel ? std::to_string(f.min_kernel) : std::to_string(f.min_kernel) + "-" + std::to_string(f.max_kernel);
    add("k " + k + " (measured " + bounds(min_kernel, max_kernel) + ")");
  }
  if (!within(f.max_stride, min_stride, max_stride))
    add("s " + std::to_string(f.max_stride) + " (measured " + bounds(min_stride, max_stride) + ")");
  if (!ranks.empty() && ranks.count(f.rank) == 0) {
    std::string r;
    for (const int rank : ranks) r += (r.empty() ? "" : "/") + std::to_string(rank);
    add(std::to_string(f.rank) + "-D (measured " + r + "-D)");
  }
  return text;
}

bool KeepRule::names(const Family& f) const {
  return (!graph_output || *graph_output == f.graph_output) && (forms.empty() || forms.count(f.form) != 0) &&
         (groupings.empty() || groupings.count(f.grouping) != 0) && (kernels.empty() || kernels.count(f.kernel) != 0) &&
         f.channels >= min_channels && (max_channels == 0 || f.channels < max_channels) &&
         (!widens || (f.out_channels > f.channels) == *widens) && (strides.empty() || strides.count(f.strides) != 0);
}

std::string Target::keep(const NodeSummary& summary, const DeconvMatch& match, const CpuFeatures& cpu) const {
  const Family f = family_of(summary, match);
  const auto rule = std::find_if(rules.begin(), rules.end(), [&f](const KeepRule& r) { return r.names(f); });
  if (rule == rules.end()) return "";
  const std::string measured = replace_all(rule->measured, "%C", std::to_string(f.channels));
  const std::string kept = kept_for(name);
  if (rule->rewrite) {
    // A rewriting rule speaks for what it measured: outside that, the node is kept, whichever way it might go there.
    if (!rule->range || rule->range->covers(f)) return "";
    return "not measured for this node: " + rule->range->outside(f) + "; " + measured + ", over " + rule->range->describe() + " only (" +
           rule->range->source + "); " + kept;
  }
  if (!rule->cpu_dependent) return measured + "; " + kept;
  if (!cpu.avx512f) return measured + "; " + kept + " (" + cpu.describe() + ")";
  return measured + "; on this CPU (" + cpu.describe() +
         ") the answer can differ (a Xeon with AVX-512 was reported at "
         "1.17x-1.29x for two layers) and is not measured here, so it is " +
         kept +
         ": time the node on ONNX Runtime with "
         "--target xnnpack --runtime ort --tune, which rewrites it only if it measures faster";
}

std::string Target::summary() const {
  std::string joined_by = join;
  joined_by.erase(std::remove(joined_by.begin(), joined_by.end(), '`'), joined_by.end());  // Markdown in the docs, not in --help
  if (rules.empty()) return "every form, joined with " + joined_by;
  std::string keeps, rewrites;
  for (const auto& r : rules) {
    const std::string text = family_text(r) + (r.range ? " within " + r.range->describe() : "");
    (r.rewrite ? rewrites : keeps) += std::string((r.rewrite ? rewrites : keeps).empty() ? "" : "; ") + text;
  }
  const bool keeps_the_rest = !rules.back().rewrite && names_everything(rules.back());
  if (keeps_the_rest)
    return "only " + rewrites +
           " (each only within the range measured; every other family measured slower or was not measured), joined with " + joined_by;
  return "every form but: " + keeps + (rewrites.empty() ? "" : "; rewrites " + rewrites + " (kept outside that measured range)") +
         "; joined with " + joined_by;
}

std::string Target::join_refusal(PhaseLayout layout, Form form) const {
  if (layout != PhaseLayout::kNearest || converts_added_resize || form_info(form).has_resize) return "";
  const std::string kept = kept_for(name);
  return "every phase computes the same, so the rewrite is one Conv and a nearest Resize, and a Resize does not pass "
         "torch.export through onnx2torch (ExecuTorch; docs/targets.md), where the original converts; " +
         kept;
}

std::string Target::dense_reason(const std::string& what) const { return what + ": " + dense_conv_transpose + "; " + kept_for(name); }

std::string CpuFeatures::describe() const { return std::string("AVX-512F: ") + (avx512f ? "yes" : "no"); }

CpuFeatures host_cpu() {
  CpuFeatures cpu;
#if defined(__x86_64__) || defined(__i386__)
  cpu.avx512f = __builtin_cpu_supports("avx512f");
#endif
  return cpu;
}

const std::vector<Target>& targets() {
  static const std::vector<Target> table = [] {
    std::vector<Target> parsed;
    // The file is embedded at build time: a mistake in it is the build's, and the first test that reads the table
    // says which (tests/rewrite/targets_json_test.cpp). No run may go on with a table missing rules.
    if (const std::string error = parse_targets(kTargetsJson, parsed); !error.empty()) {
      std::fprintf(stderr, "dwdeconv-rewrite: internal error: %s\n", error.c_str());
      std::abort();
    }
    return parsed;
  }();
  return table;
}

const Target* find_target(const std::string& name) {
  const auto& t = targets();
  const auto it = std::find_if(t.begin(), t.end(), [&](const Target& target) { return target.name == name; });
  return it == t.end() ? nullptr : &*it;
}

std::string canonical_target_name(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& t : targets()) {
    if (t.name == lower || std::find(t.aliases.begin(), t.aliases.end(), lower) != t.aliases.end()) return t.name;
  }
  return "";
}

std::string target_names() {
  std::string names;
  for (const auto& t : targets()) {
    names += (names.empty() ? "" : ", ") + t.name;
    for (size_t k = 0; k < t.aliases.size(); ++k)
      names += (k == 0 ? " (also " : ", ") + t.aliases[k] + (k + 1 == t.aliases.size() ? ")" : "");
  }
  return names;
}

std::string rules_markdown() {
  const auto cell = [](const std::string& text) { return text.empty() ? std::string("any") : text; };
  std::string md =
      "| target | form | grouping | kernel | strides | input channels | output channels | when | decision | rewrites only within | "
      "measured |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& t : targets()) {
    for (const auto& r : t.rules) {
      std::string channels;
      if (r.min_channels > 0) channels = ">= " + std::to_string(r.min_channels);
      if (r.max_channels > 0) channels += (channels.empty() ? "< " : ", < ") + std::to_string(r.max_channels);
      md += "| `" + t.name + "` | " + cell(joined(r.forms, form_name, ", ")) + " | " + cell(joined(r.groupings, grouping_name, ", ")) +
            " | " + cell(joined(r.kernels, kernel_class_name, ", ")) + " | " + cell(joined(r.strides, stride_class_name, ", ")) + " | " +
            cell(channels) + " | " + (r.widens ? (*r.widens ? "> input" : "<= input") : "any") + " | " + cell(condition_text(r)) + " | " +
            (r.rewrite ? "rewrite" : "keep") + " | " + (r.range ? r.range->describe() + " (" + r.range->source + ")" : "-") + " | " +
            replace_all(r.measured, "%C", "C") + " |\n";
    }
    if (t.rules.empty() || t.rules.back().rewrite || !names_everything(t.rules.back())) {
      md += "| `" + t.name + "` | any other | any | any | any | any | any | any | rewrite | not bounded | " + t.measured + " |\n";
    }
  }
  return md;
}

}  // namespace dwdeconv::rewrite
