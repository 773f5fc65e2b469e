// Every target's keep rules against the table docs/targets.md prints: the table must be rules_markdown() (so the
// docs cannot drift from the code), and then, read back from the docs as a reader would, it must predict the
// rewriter's decision on an upsampler of every family its rules name: each form, kernel 1x1 / 3x3 / other,
// depthwise / grouped / dense, input channels below and above each threshold, a 1x1 that widens or narrows the
// channels, s = 2 and 3, and the geometries beyond clean xs (stride 1, strides that differ per axis, a group-1 weight
// zero off the diagonal). A form with no MAC saving
// (a 1x1 kernel) is never emitted as phases.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "nearest_conv_fixtures.h"
#include "onnx_io/tensor.h"
#include "rewrite/targets.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

std::string docs_targets() {
  const std::string source = test::source_dir();
  std::ifstream in(source + "/docs/targets.md");
  REQUIRE(in.good());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The Markdown between the docs' rule markers.
std::string docs_rule_table() {
  const std::string docs = docs_targets();
  const std::string begin = "<!-- rules:begin (generated from rewrite/targets.cpp: rules_markdown()) -->\n", end = "<!-- rules:end -->";
  const auto a = docs.find(begin), b = docs.find(end);
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  return docs.substr(a + begin.size(), b - a - begin.size());
}

std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::string cell;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '|') {
      const auto first = cell.find_first_not_of(' '), last = cell.find_last_not_of(' ');
      out.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
      cell.clear();
    } else {
      cell += row[i];
    }
  }
  return out;
}

// A row of the docs' table, as a reader takes it.
struct DocRule {
  std::string target;
  std::string forms, groupings, kernels, strides, channels;  // "any" or a comma-separated list; channels ">= N", "< N"
  std::string out_channels;                                  // "any", "> input" or "<= input"
  bool rewrite = false;
  std::string measured;

  static bool lists(const std::string& list, const std::string& value) {
    if (list == "any" || list == "any other") return true;
    std::istringstream in(list);
    for (std::string item; std::getline(in, item, ',');) {
      if (item.find_first_not_of(' ') != std::string::npos && item.substr(item.find_first_not_of(' ')) == value) return true;
    }
    return false;
  }
  bool names(const std::string& form, const std::string& grouping, const std::string& kernel, const std::string& stride_class, int64_t c,
             int64_t c_out) const {
    if (!lists(forms, form) || !lists(groupings, grouping) || !lists(kernels, kernel) || !lists(strides, stride_class)) return false;
    if (out_channels == "> input" && !(c_out > c)) return false;
    if (out_channels == "<= input" && !(c_out <= c)) return false;
    if (channels == "any") return true;
    std::istringstream in(channels);
    for (std::string bound; std::getline(in, bound, ',');) {
      bound = bound.substr(bound.find_first_not_of(' '));
      const int64_t n = std::stoll(bound.substr(bound.find(' ') + 1));
      if (bound.rfind(">=", 0) == 0 && c < n) return false;
      if (bound.rfind("<", 0) == 0 && c >= n) return false;
    }
    return true;
  }
};

std::vector<DocRule> read_doc_rules() {
  std::vector<DocRule> rules;
  std::istringstream lines(docs_rule_table());
  std::string line;
  std::getline(lines, line);  // header
  std::getline(lines, line);  // |---|
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const auto c = cells(line);
    REQUIRE(c.size() == 9);
    DocRule r{c[0].substr(1, c[0].size() - 2), c[1], c[2], c[3], c[4], c[5], c[6], c[7] == "rewrite", c[8]};
    REQUIRE((c[7] == "rewrite" || c[7] == "keep"));
    rules.push_back(r);
  }
  return rules;
}

struct Case {
  std::string form, grouping, kernel;
  int64_t channels = 0, s = 2;
  onnx::ModelProto model;
  int64_t out_channels = 0;       // 0: channels
  std::string strides = "s x s";  // the stride class, as the table names it
};

std::string str(int64_t v) { return std::to_string(v); }

// Y = Conv(Resize(X)): nearest_conv of the given family.
onnx::ModelProto nearest_conv_case(const std::string& grouping, int64_t k, int64_t c, int64_t s, int64_t c_out = 0) {
  NearestConvSpec spec;
  spec.s = s;
  spec.ky = spec.kx = k;
  const int64_t p = (k - 1) / 2;
  spec.pads = {p, p, p, p};
  spec.c_in = c;
  spec.c_out = c_out == 0 ? c : c_out;
  spec.group = grouping == "depthwise" ? c : grouping == "dense" ? 1 : (c % 4 == 0 ? 4 : 3);
  spec.h = spec.w = 2;
  return nearest_conv_model(spec);
}

// A depthwise ConvTranspose: k and pads per (kernel class, s), a clean x s upscale.
onnx::ModelProto conv_transpose_case(const std::string& kernel, int64_t c, int64_t s) {
  DeconvSpec spec;
  spec.channels = c;
  spec.h = spec.w = 2;
  if (kernel == "3x3") {
    spec.kh = spec.kw = 3;
    spec.attrs = s == 2 ? "strides=[2,2], pads=[1,1,1,1], output_padding=[1,1]" : "strides=[3,3], pads=[0,0,0,0]";
  } else {  // other: k4 s2 p1, k6 s3 p2 op1
    spec.kh = spec.kw = s == 2 ? 4 : 6;
    spec.attrs = s == 2 ? "strides=[2,2], pads=[1,1,1,1]" : "strides=[3,3], pads=[2,2,2,2], output_padding=[1,1]";
  }
  return deconv_model(spec);
}

// The geometries beyond clean xs on both axes: "stride1" (GTCRN's dilated k3 s1), "anisotropic" (DeepFilterNet's k(1,3)
// s(1,2)), "diagonal" (FCN's group-1 k4 s2 p0, zero off the channel diagonal), "unpool_dense" (FastDepth's UpConv).
onnx::ModelProto reach_case(const std::string& kind, int64_t c) {
  DeconvSpec spec;
  spec.channels = c;
  spec.h = spec.w = 4;
  if (kind == "stride1") {
    spec.kh = spec.kw = 3;
    spec.h = 12;
    spec.attrs = "strides=[1,1], pads=[10,1,10,1], dilations=[5,1]";
    return deconv_model(spec);
  }
  if (kind == "anisotropic") {
    spec.kh = 1;
    spec.kw = 3;
    spec.attrs = "strides=[1,2], pads=[0,1,0,1], output_padding=[0,1]";
    return deconv_model(spec);
  }
  const std::string cs = str(c);
  if (kind == "unpool_dense") {  // FastDepth's UpConv: a one-tap k2 s2 ConvTranspose straight into a dense 5x5 Conv
    auto m = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1," + cs + ",2,2] X) => (float[1," + cs +
                         ",4,4] Y) {\n  z = ConvTranspose <group=" + cs +
                         ", strides=[2,2], kernel_shape=[2,2]> (X, V)\n  Y = Conv <kernel_shape=[5,5], pads=[2,2,2,2]> (z, W)\n}\n");
    std::vector<double> v(static_cast<size_t>(c * 4), 0.0);
    for (int64_t i = 0; i < c; ++i) v[static_cast<size_t>(i * 4)] = 1.0;
    *m.mutable_graph()->add_initializer() = onnx_io::make_tensor("V", onnx::TensorProto::FLOAT, {c, 1, 2, 2}, v, true);
    set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {c, c, 5, 5}, 14);
    return m;
  }
  auto m = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1," + cs + ",4,4] X) => (float[1," + cs +
                       ",10,10] Y) {\n  Y = ConvTranspose <strides=[2,2]> (X, W)\n}\n");
  std::vector<double> w(static_cast<size_t>(c * c * 16), 0.0);
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t t = 0; t < 16; ++t) w[static_cast<size_t>((i * c + i) * 16 + t)] = 0.01 * static_cast<double>((i + t) % 7 + 1);
  }
  *m.mutable_graph()->add_initializer() = onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {c, c, 4, 4}, w, true);
  return m;
}

// The three zero-insertion forms, depthwise, Conv kernel 4 (s = 2) or 6 (s = 3).
onnx::ModelProto zero_insertion_case(const std::string& form, int64_t c, int64_t s) {
  const int64_t k = 2 * s, h = 2, pb = s == 2 ? 2 : 3, pe = s == 2 ? 1 : 2;
  const std::string cs = str(c), ss = str(s), ks = str(k), up = str(s * h);
  std::string body;
  if (form == "nearest_mask") {
    body =
        "  u = Resize <mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"> (X, , scales)\n"
        "  z = Mul (u, mask)\n";
  } else if (form == "zero_insertion") {
    body = "  z = ConvTranspose <group = " + cs + ", strides = [" + ss + ", " + ss + "], kernel_shape = [" + ss + ", " + ss + "]> (X, V)\n";
  } else {
    body = "  r = Reshape (X, split)\n  q = Pad (r, pads6)\n  z = Reshape (q, merge)\n";
  }
  body += "  p = Pad (z, pads)\n  Y = Conv <group = " + cs + ", kernel_shape = [" + ks + ", " + ks + "]> (p, W)\n";
  auto m = parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\ng (float[1," + cs + ",2,2] X) => (float[1," + cs + "," + up + "," + up +
                       "] Y) {\n" + body + "}\n");
  auto& g = *m.mutable_graph();
  const double sd = static_cast<double>(s);
  *g.add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, {1, 1, sd, sd}, true);
  std::vector<double> mask(static_cast<size_t>(s * h * s * h), 0.0);
  for (int64_t y = 0; y < s * h; y += s) {
    for (int64_t x = 0; x < s * h; x += s) mask[static_cast<size_t>(y * s * h + x)] = 1.0;
  }
  *g.add_initializer() = onnx_io::make_tensor("mask", onnx::TensorProto::FLOAT, {1, 1, s * h, s * h}, mask, true);
  std::vector<double> v(static_cast<size_t>(c * s * s), 0.0);
  for (int64_t ch = 0; ch < c; ++ch) v[static_cast<size_t>(ch * s * s)] = 1.0;
  *g.add_initializer() = onnx_io::make_tensor("V", onnx::TensorProto::FLOAT, {c, 1, s, s}, v, true);
  *g.add_initializer() = onnx_io::make_int64_tensor("split", {6}, {1, c, h, 1, h, 1});
  *g.add_initializer() = onnx_io::make_int64_tensor("merge", {4}, {1, c, s * h, s * h});
  *g.add_initializer() = onnx_io::make_int64_tensor("pads6", {12}, {0, 0, 0, 0, 0, 0, 0, 0, 0, s - 1, 0, s - 1});
  *g.add_initializer() = onnx_io::make_int64_tensor("pads", {8}, {0, 0, pb, pb, 0, 0, pe, pe});
  set_random_initializer(g, "W", onnx::TensorProto::FLOAT, {c, 1, k, k}, 13);
  return m;  // the constants one form does not read are unused initializers, which no rewrite or check minds
}

std::vector<Case> every_family() {
  std::vector<Case> cases;
  for (const int64_t s : {2, 3}) {
    for (const int64_t c : {16, 63, 64, 128}) {
      for (const char* grouping : {"depthwise", "grouped", "dense"}) {
        for (const auto& [kernel, k] : std::vector<std::pair<std::string, int64_t>>{{"1x1", 1}, {"3x3", 3}, {"other", 5}}) {
          cases.push_back({"nearest_conv", grouping, kernel, c, s, nearest_conv_case(grouping, k, c, s)});
        }
        // A 1x1 that widens the channels four times, and one that narrows them (dense or grouped: depthwise keeps C).
        if (std::string(grouping) != "depthwise") {
          for (const int64_t c_out : {4 * c, c / (c % 4 == 0 ? 4 : 3)}) {
            cases.push_back({"nearest_conv", grouping, "1x1", c, s, nearest_conv_case(grouping, 1, c, s, c_out), c_out});
          }
        }
      }
      for (const char* kernel : {"3x3", "other"})
        cases.push_back({"conv_transpose", "depthwise", kernel, c, s, conv_transpose_case(kernel, c, s)});
      for (const char* form : {"nearest_mask", "zero_insertion", "reshape_zero_insertion"}) {
        cases.push_back({form, "depthwise", "other", c, s, zero_insertion_case(form, c, s)});
      }
      if (s == 2) {
        cases.push_back({"conv_transpose", "depthwise", "3x3", c, 1, reach_case("stride1", c), 0, "1 x 1"});
        cases.push_back({"conv_transpose", "depthwise", "other", c, 2, reach_case("anisotropic", c), 0, "s_h != s_w"});
        cases.push_back({"conv_transpose", "diagonal", "other", c, 2, reach_case("diagonal", c)});
        cases.push_back({"zero_insertion", "dense", "other", c, 2, reach_case("unpool_dense", c)});
      }
    }
  }
  return cases;
}

}  // namespace

TEST_CASE("docs/targets.md prints the rule table the targets are made of", "[rewrite][targets][docs]") {
  CHECK(docs_rule_table() == rewrite::rules_markdown());
}

// Hidden (run it by its tag, `rewrite_tests "[write_docs]"`): writes rules_markdown() between the markers of
// docs/targets.md, after a change to the rules. The test above then passes.
TEST_CASE("write the rule table into docs/targets.md", "[.][write_docs]") {
  std::string docs = docs_targets();
  const std::string begin = "<!-- rules:begin (generated from rewrite/targets.cpp: rules_markdown()) -->\n", end = "<!-- rules:end -->";
  const auto a = docs.find(begin), b = docs.find(end);
  REQUIRE(a != std::string::npos);
  REQUIRE(b != std::string::npos);
  docs.replace(a + begin.size(), b - a - begin.size(), rewrite::rules_markdown());
  std::ofstream out(test::source_dir() + "/docs/targets.md");
  out << docs;
  REQUIRE(out.good());
}

TEST_CASE("every target decides every family as the table in docs/targets.md says, and never emits a 1x1 as phases",
          "[rewrite][targets][rules]") {
  const auto rules = read_doc_rules();
  const auto cases = every_family();
  std::map<std::string, int> rewritten_per_target;
  for (const auto& target : rewrite::targets()) {
    rewrite::RewriteOptions options;
    options.forms = rewrite::all_forms();
    options.target = &target;
    options.cpu.avx512f = false;
    for (const auto& c : cases) {
      CAPTURE(target.name, c.form, c.grouping, c.kernel, c.channels, c.s);
      const auto out = rewrite_copy(c.model, options);
      // One row: the form's. A zero_insertion fold the target keeps also lists its ConvTranspose, which its own row of
      // the table decides (depthwise, kernel = stride).
      REQUIRE(!out.result.nodes.empty());
      REQUIRE(out.result.nodes.size() <= (c.form == "zero_insertion" ? 2u : 1u));
      for (const auto& row : out.result.nodes) {
        const bool own = row.summary.form == c.form;
        const std::string kernel = own ? c.kernel : row.summary.kernel[0] == 3 ? "3x3" : "other";
        CAPTURE(row.summary.form, kernel, row.reason);
        // The docs' first row for the target that names the family decides; its last row names what the others leave.
        const DocRule* rule = nullptr;
        for (const auto& r : rules) {
          if (r.target == target.name && r.names(rewrite::form_name(row.summary.form), c.grouping, kernel, c.strides, c.channels,
                                                 c.out_channels == 0 ? c.channels : c.out_channels)) {
            rule = &r;
            break;
          }
        }
        REQUIRE(rule != nullptr);
        CHECK(row.rewritten == rule->rewrite);
        if (!row.rewritten) {
          // The reason is the rule's measurement (with the node's channel count for C).
          std::string measured = rule->measured;
          if (const auto at = measured.find(" C input channels"); at != std::string::npos)
            measured.replace(at + 1, 1, std::to_string(c.channels));
          CHECK_THAT(row.reason, Catch::StartsWith(measured));
        } else if (kernel == "1x1") {
          CHECK(row.layout == rewrite::PhaseLayout::kNearest);  // no MAC saving as phases: never s*s of them
          CHECK(count_ops(out.model.graph(), "DepthToSpace") == 0);
          CHECK(count_ops(out.model.graph(), "Conv") == 1);
        } else {
          CHECK(row.layout != rewrite::PhaseLayout::kNearest);
        }
      }
      const auto& row = out.result.nodes[0];
      if (out.result.rewritten == 0) CHECK(serialized(out.model) == serialized(c.model));
      rewritten_per_target[target.name] += row.rewritten;
    }
  }
  // Each target's table decides something either way (a sweep that rewrote nothing, or everything, checks less).
  // xnnpack keeps only strides that differ per axis below 64 channels.
  const auto kept_by_xnnpack =
      std::count_if(cases.begin(), cases.end(), [](const Case& c) { return c.strides == "s_h != s_w" && c.channels < 64; });
  CHECK(kept_by_xnnpack == 2);
  CHECK(rewritten_per_target["xnnpack"] == static_cast<int>(cases.size() - kept_by_xnnpack));
  CHECK(rewritten_per_target["ort"] > 0);
  CHECK(rewritten_per_target["ort"] < rewritten_per_target["litert"]);
}
