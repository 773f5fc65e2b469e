// rewrite/targets.json into the Target table: every key named, every value checked, nothing defaulted that the file
// must say. The file is embedded at build time (rewrite/CMakeLists.txt), so a mistake in it is a build that fails its
// first test (tests/rewrite/targets_json_test.cpp), not a rule silently dropped.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "rewrite/targets.h"

namespace dwdeconv::rewrite {
namespace {

using nlohmann::json;

// ExecuTorch through onnx2torch takes DepthToSpace in CRD only. Both CRD spellings convert and lower into the
// XNNPACK delegate; the batch one leaves nothing outside it and measured 1.06x-1.15x the Gather one for s = 3 but
// 0.81x for s = 2 at C = 64 (BENCHMARKS.md, "ExecuTorch: how the phases are joined"), and it needs batch 1.
PhaseLayout crd_layout(const DeconvMatch& m, int64_t) {
  return m.y.stride >= 3 && known_batch_of_one(m) ? PhaseLayout::kBatchCrd : PhaseLayout::kGatherCrd;
}

PhaseLayout dcr_layout(const DeconvMatch&, int64_t) { return PhaseLayout::kDcr; }

// The one exception type of this file, caught in parse_targets: a message naming the place in the file.
struct BadTable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The named texts of "texts": "{name}" in any string of the table stands for one, so a phrase several rules cite
// (a BENCHMARKS.md section, a runtime and its CPU) is written once.
using Texts = std::map<std::string, std::string>;

// One JSON object read key by key: each key is taken once with its type checked, and done() refuses the keys nobody
// took (a misspelt key would otherwise be a rule that silently names every value).
class Object {
 public:
  Object(const json& j, std::string where, const Texts* texts) : j_(j), where_(std::move(where)), texts_(texts) {
    if (!j_.is_object()) fail("is not an object");
  }

  [[noreturn]] void fail(const std::string& problem) const { throw BadTable(where_ + ": " + problem); }
  const std::string& where() const { return where_; }
  bool has(const std::string& key) const { return j_.contains(key); }

  const json& at(const std::string& key) {
    if (!j_.contains(key)) fail("missing key '" + key + "'");
    taken_.insert(key);
    return j_.at(key);
  }
  std::string text(const std::string& key) {
    const json& v = at(key);
    if (!v.is_string()) fail("'" + key + "' must be a string");
    return texts_ == nullptr ? v.get<std::string>() : expand(v.get<std::string>(), key);
  }
  bool flag(const std::string& key) {
    const json& v = at(key);
    if (!v.is_boolean()) fail("'" + key + "' must be true or false");
    return v.get<bool>();
  }
  int64_t whole(const std::string& key) {
    const json& v = at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0) fail("'" + key + "' must be a whole number >= 0");
    return v.get<int64_t>();
  }
  std::vector<std::string> texts(const std::string& key) {
    const json& v = at(key);
    if (!v.is_array()) fail("'" + key + "' must be a list of strings");
    std::vector<std::string> out;
    for (const auto& item : v) {
      if (!item.is_string()) fail("'" + key + "' must be a list of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  // A list of names, each one of `name_of`'s values, as a set; a name twice or one it does not know is an error.
  template <typename T>
  std::set<T> names(const std::string& key, const std::vector<T>& values, const char* (*name_of)(T)) {
    std::set<T> out;
    for (const auto& name : texts(key)) {
      const auto it = std::find_if(values.begin(), values.end(), [&](T v) { return name == name_of(v); });
      if (it == values.end()) fail("'" + key + "': unknown value '" + name + "' (known: " + known(values, name_of) + ")");
      if (!out.insert(*it).second) fail("'" + key + "': '" + name + "' is listed twice");
    }
    return out;
  }
  // An optional "note": why, for the reader of the file; checked to be text, not read.
  void note() {
    if (has("note") && !at("note").is_string()) fail("'note' must be a string");
  }
  void done() const {
    for (const auto& item : j_.items()) {
      if (taken_.count(item.key()) == 0) fail("unknown key '" + item.key() + "'");
    }
  }

 private:
  template <typename T>
  static std::string known(const std::vector<T>& values, const char* (*name_of)(T)) {
    std::string s;
    for (const auto v : values) s += (s.empty() ? "" : ", ") + std::string(name_of(v));
    return s;
  }
  // `text` with each "{name}" replaced by texts_[name]; an unknown name is an error.
  std::string expand(const std::string& text, const std::string& key) const {
    std::string out;
    for (size_t at = 0; at < text.size();) {
      const size_t open = text.find('{', at);
      if (open == std::string::npos) {
        out += text.substr(at);
        break;
      }
      const size_t close = text.find('}', open);
      if (close == std::string::npos) fail("'" + key + "': a '{' with no '}'");
      const std::string name = text.substr(open + 1, close - open - 1);
      const auto it = texts_->find(name);
      if (it == texts_->end()) fail("'" + key + "': no text named '{" + name + "}' in \"texts\"");
      out += text.substr(at, open - at) + it->second;
      at = close + 1;
    }
    return out;
  }

  const json& j_;
  std::string where_;
  const Texts* texts_;
  std::set<std::string> taken_;
};

const std::vector<Grouping> kGroupings{Grouping::kDepthwise, Grouping::kGrouped, Grouping::kDense, Grouping::kDiagonal};
const std::vector<KernelClass> kKernels{KernelClass::k1x1, KernelClass::k3x3, KernelClass::kOther};
const std::vector<StrideClass> kStrides{StrideClass::kSquare, StrideClass::kOne, StrideClass::kAnisotropic, StrideClass::kOneD};

std::vector<Form> every_form() {
  const auto all = all_forms();
  return {all.begin(), all.end()};
}

// [lo, hi], two whole numbers.
std::pair<int64_t, int64_t> bounds_of(Object& o, const std::string& key) {
  const json& v = o.at(key);
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() || v[0].get<int64_t>() < 0 ||
      v[1].get<int64_t>() < v[0].get<int64_t>()) {
    o.fail("'" + key + "' must be [low, high], whole numbers with low <= high");
  }
  return {v[0].get<int64_t>(), v[1].get<int64_t>()};
}

MeasuredRange range_of(const json& j, const std::string& where, const Texts& texts) {
  Object o(j, where, &texts);
  o.note();
  MeasuredRange r;
  std::tie(r.min_channels, r.max_channels) = bounds_of(o, "channels");
  std::tie(r.min_kernel, r.max_kernel) = bounds_of(o, "kernel");
  std::tie(r.min_stride, r.max_stride) = bounds_of(o, "stride");
  const json& ranks = o.at("ranks");
  if (!ranks.is_array() || ranks.empty()) o.fail("'ranks' must be a non-empty list of 1 and 2");
  for (const auto& rank : ranks) {
    if (!rank.is_number_integer() || (rank.get<int>() != 1 && rank.get<int>() != 2)) o.fail("'ranks' must be a non-empty list of 1 and 2");
    r.ranks.insert(rank.get<int>());
  }
  r.source = o.text("source");
  o.done();
  return r;
}

KeepRule rule_of(const json& j, const std::string& where, const Texts& texts, const std::map<std::string, MeasuredRange>& ranges) {
  Object o(j, where, &texts);
  o.note();
  KeepRule r;
  // Every key but the decision and its measurement is optional: a rule names only what it restricts.
  if (o.has("forms")) r.forms = o.names("forms", every_form(), form_name);
  if (o.has("groupings")) r.groupings = o.names("groupings", kGroupings, grouping_name);
  if (o.has("kernels")) r.kernels = o.names("kernels", kKernels, kernel_class_name);
  if (o.has("strides")) r.strides = o.names("strides", kStrides, stride_class_name);
  if (o.has("min_channels")) r.min_channels = o.whole("min_channels");
  if (o.has("max_channels")) r.max_channels = o.whole("max_channels");
  if (o.has("widens")) r.widens = o.flag("widens");
  if (o.has("graph_output")) r.graph_output = o.flag("graph_output");
  if (o.has("cpu_dependent")) r.cpu_dependent = o.flag("cpu_dependent");
  const std::string decision = o.text("decision");
  if (decision != "rewrite" && decision != "keep") o.fail("'decision' must be \"rewrite\" or \"keep\", not '" + decision + "'");
  r.rewrite = decision == "rewrite";
  r.measured = o.text("measured");
  if (o.has("range")) {
    const json& range = o.at("range");
    if (range.is_string()) {
      const auto it = ranges.find(range.get<std::string>());
      if (it == ranges.end()) o.fail("'range': no range named '" + range.get<std::string>() + "' in \"ranges\"");
      r.range = it->second;
    } else {
      r.range = range_of(range, where + ": range", texts);
    }
  }
  // A rewriting rule speaks only for what its measurement covered; a keeping rule rewrites nothing to bound.
  if (r.rewrite != r.range.has_value())
    o.fail(r.rewrite ? "a rule that rewrites needs the 'range' it was measured over" : "a rule that keeps has no 'range'");
  o.done();
  return r;
}

OutsideOp outside_op_of(const json& j, const std::string& where) {
  Object o(j, where, nullptr);
  OutsideOp op;
  op.op = o.text("op");
  const std::string layout = o.text("layout");
  const std::vector<PhaseLayout> layouts{PhaseLayout::kDcr,     PhaseLayout::kGatherCrd,  PhaseLayout::kBatchCrd,
                                         PhaseLayout::kNearest, PhaseLayout::kInterleave, PhaseLayout::kSingle};
  const auto it = std::find_if(layouts.begin(), layouts.end(), [&](PhaseLayout l) { return layout == phase_layout_name(l); });
  if (it == layouts.end()) o.fail("'layout': unknown layout '" + layout + "'");
  op.layout = *it;
  op.runtime = o.text("runtime");
  op.runs_as = o.text("runs_as");
  op.on = o.text("on");
  o.done();
  return op;
}

Target target_of(const json& j, const std::string& where, const Texts& texts, const std::map<std::string, MeasuredRange>& ranges) {
  Object o(j, where, &texts);
  o.note();
  Target t;
  t.name = o.text("name");
  t.runtime = o.text("runtime");
  t.runs_on = o.text("runs_on");
  t.headline = o.text("headline");
  t.aliases = o.texts("aliases");
  for (const auto& alias : t.aliases) {
    // --target and --runtime lower a name before they look it up.
    if (alias.empty() || std::any_of(alias.begin(), alias.end(), [](unsigned char c) { return std::tolower(c) != c; }))
      o.fail("'aliases': '" + alias + "' must be a non-empty lower-case name");
  }
  if (o.at("forms").is_string() && o.text("forms") == "all") {
    t.forms = all_forms();
  } else {
    t.forms = o.names("forms", every_form(), form_name);
  }
  const std::map<std::string, PhaseLayout (*)(const DeconvMatch&, int64_t)> layouts{{"dcr", dcr_layout}, {"crd", crd_layout}};
  const std::string layout = o.text("layout");
  if (layouts.count(layout) == 0) o.fail("'layout' must be \"dcr\" or \"crd\", not '" + layout + "'");
  t.layout = layouts.at(layout);
  t.join = o.text("join");
  t.measured = o.text("measured");
  t.dense_conv_transpose = o.text("dense_conv_transpose");
  t.converts_added_resize = o.flag("converts_added_resize");
  t.edge_as_slices = o.flag("edge_as_slices");
  t.crop_as_slice = o.flag("crop_as_slice");
  t.flatten_1d_join = o.flag("flatten_1d_join");
  const json& outside = o.at("outside_delegate");
  if (!outside.is_array()) o.fail("'outside_delegate' must be a list");
  for (size_t k = 0; k < outside.size(); ++k)
    t.outside_delegate.push_back(outside_op_of(outside[k], where + ": outside_delegate[" + std::to_string(k) + "]"));
  const json& rules = o.at("rules");
  if (!rules.is_array()) o.fail("'rules' must be a list");
  for (size_t k = 0; k < rules.size(); ++k)
    t.rules.push_back(rule_of(rules[k], where + ": rules[" + std::to_string(k) + "]", texts, ranges));
  o.done();
  return t;
}

std::vector<Target> table_of(const json& root) {
  Object o(root, "targets.json", nullptr);
  (void)o.text("about");
  Texts texts;
  const json& named = o.at("texts");
  if (!named.is_object()) o.fail("'texts' must be an object of strings");
  for (const auto& item : named.items()) {
    if (!item.value().is_string()) o.fail("texts: '" + item.key() + "' must be a string");
    texts[item.key()] = item.value().get<std::string>();
  }
  std::map<std::string, MeasuredRange> ranges;
  const json& named_ranges = o.at("ranges");
  if (!named_ranges.is_object()) o.fail("'ranges' must be an object");
  for (const auto& item : named_ranges.items()) ranges[item.key()] = range_of(item.value(), "targets.json: ranges: " + item.key(), texts);
  const json& list = o.at("targets");
  if (!list.is_array() || list.empty()) o.fail("'targets' must be a non-empty list");
  std::vector<Target> table;
  std::set<std::string> names;
  for (size_t k = 0; k < list.size(); ++k) {
    const std::string who = list[k].is_object() && list[k].contains("name") && list[k]["name"].is_string()
                                ? " (" + list[k]["name"].get<std::string>() + ")"
                                : "";
    table.push_back(target_of(list[k], "targets.json: targets[" + std::to_string(k) + "]" + who, texts, ranges));
    for (const auto& name : table.back().aliases) {
      if (!names.insert(name).second) o.fail("'" + name + "' names two targets");
    }
    if (!names.insert(table.back().name).second) o.fail("'" + table.back().name + "' names two targets");
  }
  if (table.front().name != kDefaultTarget) o.fail(std::string("the first target must be \"") + kDefaultTarget + "\"");
  o.done();
  return table;
}

}  // namespace

std::string parse_targets(const std::string& text, std::vector<Target>& table) {
  try {
    table = table_of(json::parse(text));
  } catch (const BadTable& e) {
    return e.what();
  } catch (const json::exception& e) {
    return std::string("targets.json: not JSON: ") + e.what();
  }
  return "";
}

}  // namespace dwdeconv::rewrite
