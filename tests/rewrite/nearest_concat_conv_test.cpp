// Upsamplers behind a Concat: a Concat of one input is an identity the nearest_conv form looks through, and the
// nearest_concat_conv form splits a Conv reading Concat(nearest(x), skips...) by its input channels: the upsampled
// part as phases on x, the skips' part a Conv at full resolution, added. Structure (which nodes and initializers
// exist after) and numbers against the naive double-precision executor; near misses kept with a reason.
#include <catch2/catch.hpp>

#include <array>
#include <map>

#include "nearest_conv_fixtures.h"
#include "onnx_io/tensor.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

// Y = Conv(Pad(Concat(S0.., u, S1..)), W[, B]) with u = Resize(X) nearest by s, the Conv named "up1". The skips Si
// are graph inputs at the upsampled size; `up_at` is u's place among the Concat's inputs.
struct ConcatSpec {
  int64_t s = 2;
  int64_t k = 3;
  int64_t c_up = 3, c_out = 4;
  std::vector<int64_t> skips{2};  // the channels of each skip input
  size_t up_at = 0;
  int64_t h = 3, w = 4;
  int64_t opset = 13;
  bool bias = true;
  std::string pad_mode;  // "" none, else constant, reflect or edge; its pads are (k-1)/2 and the Conv's then 0
  int64_t axis = 1;
  int64_t group = 1;
  bool concat_read_twice = false;  // the Concat's output is a graph output too
  bool upsample_a_skip = false;    // the skip input is a second nearest Resize of a graph input
  bool symbolic_skip_channels = false;
  uint32_t seed = 7;
};

int64_t total_channels(const ConcatSpec& m) {
  int64_t c = m.c_up;
  for (int64_t r : m.skips) c += r;
  return c;
}

onnx::ModelProto concat_model(const ConcatSpec& m) {
  const std::string hh = std::to_string(m.h), ww = std::to_string(m.w);
  const std::string uh = std::to_string(m.s * m.h), uw = std::to_string(m.s * m.w);
  const int64_t c = (m.k - 1) / 2;
  const std::string pad = m.pad_mode.empty() ? std::to_string(c) : "0";
  std::string inputs = "float[1," + std::to_string(m.c_up) + "," + hh + "," + ww + "] X";
  std::string nodes = "  u = Resize <mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"> (X, " +
                      std::string(m.opset < 13 ? "roi" : "") + ", scales)\n";
  std::vector<std::string> parts;
  for (size_t i = 0; i < m.skips.size(); ++i) {
    const std::string name = "S" + std::to_string(i), ch = m.symbolic_skip_channels ? "C" : std::to_string(m.skips[i]);
    if (m.upsample_a_skip && i == 0) {
      inputs += ", float[1," + ch + "," + hh + "," + ww + "] " + name + "_low";
      nodes += "  " + name + " = Resize <mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", nearest_mode = \"floor\"> (" +
               name + "_low, " + (m.opset < 13 ? "roi" : "") + ", scales)\n";
    } else {
      inputs += ", float[1," + ch + "," + uh + "," + uw + "] " + name;
    }
    parts.push_back(name);
  }
  parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(m.up_at), "u");
  std::string list;
  for (const auto& p : parts) list += (list.empty() ? "" : ", ") + p;
  nodes += "  c = Concat <axis = " + std::to_string(m.axis) + "> (" + list + ")\n";
  std::string read = "c";
  if (!m.pad_mode.empty()) {
    nodes += "  v = Pad <mode = \"" + m.pad_mode + "\"> (c, padsP)\n";
    read = "v";
  }
  nodes += "  Y = Conv <group = " + std::to_string(m.group) + ", kernel_shape = [" + std::to_string(m.k) + ", " + std::to_string(m.k) +
           "], pads = [" + pad + ", " + pad + ", " + pad + ", " + pad + "]> (" + read + ", W" + (m.bias ? ", B" : "") + ")\n";
  std::string outputs = "float[1," + std::to_string(m.c_out) + "," + uh + "," + uw + "] Y";
  if (m.concat_read_twice) outputs += ", float[1," + std::to_string(total_channels(m)) + "," + uh + "," + uw + "] c";
  onnx::ModelProto model = parse_model("<ir_version: 8, opset_import: [\"\" : " + std::to_string(m.opset) + "]>\ng (" + inputs + ") => (" +
                                       outputs + ") {\n" + nodes + "}\n");
  auto& g = *model.mutable_graph();
  const double s = static_cast<double>(m.s);
  *g.add_initializer() = onnx_io::make_tensor("scales", onnx::TensorProto::FLOAT, {4}, {1, 1, s, s}, true);
  if (m.opset < 13) *g.add_initializer() = onnx_io::make_tensor("roi", onnx::TensorProto::FLOAT, {0}, {}, true);
  if (!m.pad_mode.empty()) *g.add_initializer() = onnx_io::make_int64_tensor("padsP", {8}, {0, 0, c, c, 0, 0, c, c});
  const int64_t c_in = total_channels(m) / m.group;
  *g.add_initializer() = onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {m.c_out, c_in, m.k, m.k},
                                              dyadic_values(static_cast<size_t>(m.c_out * c_in * m.k * m.k), m.seed), true);
  if (m.bias) {
    *g.add_initializer() =
        onnx_io::make_tensor("B", onnx::TensorProto::FLOAT, {m.c_out}, dyadic_values(static_cast<size_t>(m.c_out), m.seed + 1), true);
  }
  name_node(model, "Y", "up1");
  return model;
}

rewrite::RewriteOptions with_split() {
  rewrite::RewriteOptions options = all_forms();
  options.forms.insert(*rewrite::form_by_name("nearest_concat_conv"));
  return options;
}

std::map<std::string, NaiveTensor> inputs_for(const ConcatSpec& m) {
  std::map<std::string, NaiveTensor> in{{"X", random_tensor4(1, m.c_up, m.h, m.w, m.seed + 100)}};
  for (size_t i = 0; i < m.skips.size(); ++i) {
    in.emplace("S" + std::to_string(i), random_tensor4(1, m.skips[i], m.s * m.h, m.s * m.w, m.seed + 200 + static_cast<uint32_t>(i)));
  }
  return in;
}

// The phase Convs of the rewritten up part: found from the Add that writes Y.
void require_split(const ConcatSpec& m, const Rewritten& out) {
  const auto& g = out.model.graph();
  CHECK(checker_error(out.model).empty());
  const onnx::NodeProto* add = find_producer(g, "Y");
  REQUIRE(add != nullptr);
  REQUIRE(add->op_type() == "Add");
  CHECK(add->name() == "up1");
  REQUIRE(add->input_size() == 2);
  // The rest: a Conv of the skips (their Concat when more than one, the Pad when reflect or edge) with the bias.
  const onnx::NodeProto* rest = find_producer(g, add->input(1));
  REQUIRE(rest != nullptr);
  REQUIRE(rest->op_type() == "Conv");
  const int64_t c_rest = total_channels(m) - m.c_up;
  CHECK(conv_weight_dims(g, *rest) == std::vector<int64_t>{m.c_out, c_rest, m.k, m.k});
  CHECK(rest->input_size() == (m.bias ? 3 : 2));
  if (m.bias) CHECK(rest->input(2) == "B");
  std::string read = rest->input(0);
  if (m.pad_mode == "reflect" || m.pad_mode == "edge") {
    const onnx::NodeProto* pad = find_producer(g, read);
    REQUIRE(pad != nullptr);
    REQUIRE(pad->op_type() == "Pad");
    CHECK(find_attr(*pad, "mode")->s() == m.pad_mode);
    CHECK(attr_ints(*rest, "pads") == std::vector<int64_t>{0, 0, 0, 0});
    read = pad->input(0);
  } else {
    const int64_t c = (m.k - 1) / 2;
    CHECK(attr_ints(*rest, "pads") == std::vector<int64_t>{c, c, c, c});
  }
  if (m.skips.size() == 1) {
    CHECK(read == "S0");
  } else {
    const onnx::NodeProto* concat = find_producer(g, read);
    REQUIRE(concat != nullptr);
    REQUIRE(concat->op_type() == "Concat");
    std::vector<std::string> skips(concat->input().begin(), concat->input().end());
    CHECK(skips == std::vector<std::string>{"S0", "S1"});
  }
  // The up part: phases on X, without the bias (the rest adds it once).
  const bool one_by_one = m.k == 1;
  const auto convs = one_by_one ? require_conv_then_nearest(g, add->input(0), m.s, 1, m.opset, "up1_upsampled")
                                : require_polyphase(g, add->input(0), m.s, 1, m.opset, "up1_upsampled");
  CHECK(convs.size() == static_cast<size_t>(one_by_one ? 1 : m.s * m.s));
  for (const auto* conv : convs) {
    // X itself, or (a reflect or edge Pad: x's edge samples) an edge Pad of X.
    if (conv->input(0) != "X") {
      const onnx::NodeProto* edge = find_producer(g, conv->input(0));
      REQUIRE(edge != nullptr);
      CHECK(edge->op_type() == "Pad");
      CHECK(edge->input(0) == "X");
      CHECK((m.pad_mode == "reflect" || m.pad_mode == "edge"));
      CHECK(find_attr(*edge, "mode")->s() == "edge");
    }
    CHECK(conv->input_size() == 2);
    CHECK(conv_weight_dims(g, *conv)[1] == m.c_up);
  }
  CHECK(count_ops(g, "Resize") == (one_by_one ? 1 : 0) + (m.upsample_a_skip ? 1 : 0));
  CHECK(count_ops(g, "Conv") == static_cast<int64_t>(convs.size()) + 1);
  CHECK(find_initializer(g, "W") == nullptr);
  CHECK(find_producer(g, "c") == nullptr);
}

Rewritten require_rewritten(const ConcatSpec& m) {
  const auto original = concat_model(m);
  REQUIRE(checker_error(original).empty());
  auto out = rewrite_copy(original, with_split());
  REQUIRE(out.result.nodes.size() == 1);
  const auto& row = out.result.nodes[0];
  CAPTURE(row.reason);
  REQUIRE(row.rewritten);
  CHECK(row.summary.form == "nearest_concat_conv");
  CHECK(row.summary.name == "up1");
  CHECK(row.summary.stride == m.s);
  CHECK(row.summary.channels == m.c_up);
  CHECK(row.summary.kernel == std::array<int64_t, 2>{m.k + m.s - 1, m.k + m.s - 1});
  require_split(m, out);
  CHECK(output_diff(original, out.model, inputs_for(m), "Y", {1, m.c_out, m.s * m.h, m.s * m.w}) < kTolerance);
  // Idempotent and deterministic.
  CHECK(serialized(rewrite_copy(out.model, with_split()).model) == serialized(out.model));
  CHECK(serialized(rewrite_copy(original, with_split()).model) == serialized(out.model));
  return out;
}

void require_kept(const ConcatSpec& m, const std::string& reason) {
  const auto original = concat_model(m);
  const auto out = rewrite_copy(original, with_split());
  const auto row = std::find_if(out.result.nodes.begin(), out.result.nodes.end(),
                                [](const rewrite::NodeReport& n) { return n.summary.form == "nearest_concat_conv"; });
  REQUIRE(row != out.result.nodes.end());
  CAPTURE(row->reason);
  CHECK_FALSE(row->rewritten);
  CHECK_THAT(row->reason, Catch::Contains(reason));
  CHECK(out.result.rewritten == 0);
  CHECK(serialized(out.model) == serialized(original));
}

}  // namespace

TEST_CASE("A one-input Concat between a nearest Resize and its Conv is an identity: rewritten as without it",
          "[rewrite][recogniser][nearest_conv][concat]") {
  NearestConvSpec spec;
  spec.c_in = 3, spec.c_out = 4, spec.group = 1, spec.bias = true;
  spec.pad_mode = GENERATE(as<std::string>(), "", "reflect", "constant");
  if (!spec.pad_mode.empty()) spec.pads = {0, 0, 0, 0};
  CAPTURE(spec.pad_mode);
  const auto plain = nearest_conv_model(spec);
  // The same model with u = Concat(u0) between the Resize and the Pad (or the Conv), as torch.cat([u0], 1) writes it.
  onnx::ModelProto with_concat = plain;
  auto& g = *with_concat.mutable_graph();
  g.mutable_node(0)->set_output(0, "u0");
  onnx::NodeProto concat;
  concat.set_op_type("Concat");
  concat.set_name("cat");
  concat.add_input("u0");
  concat.add_output("u");
  auto* axis = concat.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(1);
  *g.mutable_node()->Add() = concat;
  g.mutable_node()->SwapElements(1, g.node_size() - 1);  // after the Resize, before what reads u
  if (g.node_size() == 4) g.mutable_node()->SwapElements(2, 3);
  REQUIRE(checker_error(with_concat).empty());
  REQUIRE(count_ops(with_concat.graph(), "Concat") == 1);

  const auto out = rewrite_copy(with_concat, all_forms());
  REQUIRE(out.result.nodes.size() == 1);
  CAPTURE(out.result.nodes[0].reason);
  REQUIRE(out.result.nodes[0].rewritten);
  CHECK(out.result.nodes[0].summary.form == "nearest_conv");
  // The same nodes and initializers as the rewrite of the model without the Concat: the Concat is gone with the Resize.
  CHECK(serialized(out.model) == serialized(rewrite_copy(plain, all_forms()).model));
  CHECK(count_ops(out.model.graph(), "Concat") == 1);  // the phases' join, not the one-input Concat
  CHECK(find_producer(out.model.graph(), "u") == nullptr);
  const auto x = random_tensor4(1, spec.c_in, spec.h, spec.w, 11);
  CHECK(output_diff(with_concat, out.model, {{"X", x}}, "Y", {1, spec.c_out, spec.s * spec.h, spec.s * spec.w}) < kTolerance);
}

TEST_CASE("A Conv reading Concat(nearest(x), skip) is split: phases on x plus a Conv of the skip", "[rewrite][recogniser][concat]") {
  ConcatSpec m;
  m.pad_mode = GENERATE(as<std::string>(), "", "constant", "reflect", "edge");
  m.up_at = GENERATE(0, 1);
  m.s = GENERATE(2, 3);
  m.opset = GENERATE(11, 13);
  CAPTURE(m.pad_mode, m.up_at, m.s, m.opset);
  require_rewritten(m);
}

TEST_CASE("The split takes u anywhere among several skips, a 1x1 Conv, no bias and Monodepth2's reflect stage",
          "[rewrite][recogniser][concat]") {
  ConcatSpec m;
  SECTION("u between two skips") {
    m.skips = {2, 3};
    m.up_at = 1;
    m.pad_mode = "reflect";
    require_rewritten(m);
  }
  SECTION("u last of three") {
    m.skips = {1, 2};
    m.up_at = 2;
    require_rewritten(m);
  }
  SECTION("a 1x1 Conv: the up part is its Conv on x, then the Resize") {
    m.k = 1;
    m.bias = GENERATE(false, true);
    const auto out = require_rewritten(m);
    CHECK(out.result.nodes[0].layout == rewrite::PhaseLayout::kNearest);
  }
  SECTION("no bias") {
    m.bias = false;
    require_rewritten(m);
  }
  SECTION("Monodepth2's stage: nearest x2 of 8 channels, a 4-channel skip, reflect 1, 3x3 Conv to 4") {
    m.c_up = 8, m.skips = {4}, m.c_out = 4, m.pad_mode = "reflect";
    require_rewritten(m);
  }
}

TEST_CASE("Several nearest Resizes in one Concat (DBNet's fuse): a part each, summed", "[rewrite][recogniser][concat]") {
  ConcatSpec m;
  m.upsample_a_skip = true;  // S0 = Resize(S0_low)
  m.pad_mode = GENERATE(as<std::string>(), "", "reflect");
  m.skips = GENERATE(std::vector<int64_t>{2}, std::vector<int64_t>{2, 3});  // {2}: every input upsampled, no rest
  CAPTURE(m.pad_mode, m.skips.size());
  const auto original = concat_model(m);
  REQUIRE(checker_error(original).empty());
  auto out = rewrite_copy(original, with_split());
  // One row: the second Resize is the split's too, not a row of its own.
  REQUIRE(out.result.nodes.size() == 1);
  const auto& row = out.result.nodes[0];
  CAPTURE(row.reason);
  REQUIRE(row.rewritten);
  CHECK(row.summary.form == "nearest_concat_conv");
  CHECK(row.summary.channels == m.c_up);
  const auto& g = out.model.graph();
  CHECK(checker_error(out.model).empty());
  CHECK(count_ops(g, "Resize") == 0);
  CHECK(count_ops(g, "DepthToSpace") == 2);
  const bool has_rest = m.skips.size() > 1;
  // Two parts, and the rest's Conv when a skip is left: an Add per term after the first, the last named after the Conv.
  CHECK(count_ops(g, "Add") == (has_rest ? 2 : 1));
  CHECK(find_producer(g, "Y")->op_type() == "Add");
  CHECK(find_producer(g, "Y")->name() == "up1");
  CHECK(count_ops(g, "Conv") == 2 * m.s * m.s + (has_rest ? 1 : 0));
  // The bias once: on the rest's Conv, or without a rest on the first part's phases alone.
  int64_t bias_reads = 0;
  for (const auto* conv : nodes_of(g, "Conv")) bias_reads += conv->input_size() > 2 && conv->input(2) == "B" ? 1 : 0;
  CHECK(bias_reads == (has_rest ? 1 : m.s * m.s));
  CHECK(find_initializer(g, "W") == nullptr);
  auto inputs = inputs_for(m);
  inputs.erase("S0");
  inputs.emplace("S0_low", random_tensor4(1, m.skips[0], m.h, m.w, 321));
  CHECK(output_diff(original, out.model, inputs, "Y", {1, m.c_out, m.s * m.h, m.s * m.w}) < kTolerance);
  CHECK(serialized(rewrite_copy(out.model, with_split()).model) == serialized(out.model));
  CHECK(serialized(rewrite_copy(original, with_split()).model) == serialized(out.model));
}

TEST_CASE("The split is kept, saying why, where it does not compute the Conv", "[rewrite][recogniser][concat]") {
  ConcatSpec m;
  SECTION("a grouped Conv") {
    m.group = 5, m.c_out = 5, m.c_up = 3, m.skips = {2};
    require_kept(m, "Conv group 5: the split takes a dense Conv (group 1)");
  }
  SECTION("the Concat read elsewhere") {
    m.concat_read_twice = true;
    require_kept(m, "Concat output has another reader");
  }
  SECTION("a reflect Pad past the first cell of the upsampling") {
    m.k = 5;
    m.pad_mode = "reflect";  // pads 2 > s - 1
    require_kept(m, "reach past the first cell of the x2 upsampling");
  }
  SECTION("skip channels not known") {
    m.symbolic_skip_channels = true;
    require_kept(m, "the channels of Concat input 'S0' are not known");
  }
  SECTION("not selected: the form is off unless --forms or the target names it") {
    const auto out = rewrite_copy(concat_model(m), all_forms());
    REQUIRE(out.result.nodes.size() == 1);
    CHECK_FALSE(out.result.nodes[0].rewritten);
    CHECK(out.result.nodes[0].reason == "form nearest_concat_conv not selected by --forms");
  }
}

TEST_CASE("A split with a kernel other than 3x3 is kept on LiteRT and ONNX Runtime as not measured, whatever its channels",
          "[rewrite][concat][targets]") {
  ConcatSpec spec;  // a 1x1 Conv at 128 upsampled channels: inside both targets' 3x3 channel ranges
  spec.k = 1;
  spec.c_up = 128;
  spec.c_out = 8;
  const auto original = concat_model(spec);
  for (const char* name : {"litert", "ort"}) {
    INFO(name);
    rewrite::RewriteOptions options;
    options.target = rewrite::find_target(name);
    const auto out = rewrite_copy(original, options);
    REQUIRE(out.result.nodes.size() == 1);
    CHECK_FALSE(out.result.nodes[0].rewritten);
    CHECK_THAT(out.result.nodes[0].reason, Catch::Contains("a kernel other than 3x3 was not measured"));
    CHECK_THAT(out.result.nodes[0].reason, !Catch::Contains("upsampled channels (<"));
  }
}

TEST_CASE("Which targets rewrite the split: the executor and OpenVINO at every C_up timed, ONNX Runtime from 32, LiteRT from 64",
          "[rewrite][concat][targets]") {
  // Written down from BENCHMARKS.md, "Upsamplers behind a Concat": faster on the executor and OpenVINO at every C_up
  // timed (16-256), on ONNX Runtime from 32 upsampled channels, on LiteRT from 64; MNN's own 3x3 Conv disagrees with the
  // parts beyond --verify's tolerance; ExecuTorch could not convert the original; no join converts for ncnn.
  const std::map<std::string, std::array<bool, 3>> rewrites{// target -> (C_up 64, C_up 32, C_up 16)
                                                            {"default", {false, false, false}},    {"xnnpack", {true, true, true}},
                                                            {"litert", {true, false, false}},      {"ort", {true, true, false}},
                                                            {"executorch", {false, false, false}}, {"openvino", {true, true, true}},
                                                            {"mnn", {false, false, false}},        {"ncnn", {false, false, false}}};
  REQUIRE(rewrites.size() == rewrite::targets().size());
  const std::array<int64_t, 3> c_ups{64, 32, 16};
  for (size_t i = 0; i < c_ups.size(); ++i) {
    ConcatSpec spec;
    spec.c_up = c_ups[i];
    spec.c_out = 8;
    spec.pad_mode = "reflect";
    const auto original = concat_model(spec);
    for (const auto& [name, expected] : rewrites) {
      INFO(name << " at C_up " << c_ups[i]);
      rewrite::RewriteOptions options;
      options.target = rewrite::find_target(name);
      REQUIRE(options.target != nullptr);
      const auto out = rewrite_copy(original, options);
      REQUIRE(out.result.nodes.size() == 1);
      CHECK(out.result.nodes[0].summary.form == "nearest_concat_conv");
      CHECK(out.result.nodes[0].rewritten == expected[i]);
    }
  }
}
