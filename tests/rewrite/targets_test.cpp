// Targets (rewrite/targets.h): each profile's structure (how it joins the phases, what it keeps and why) and the
// numbers of each emitted form against the naive executor. ONNX Runtime's word on the same forms is
// tests/e2e/check_targets_ort.py.
#include <catch2/catch.hpp>

#include "nearest_conv_fixtures.h"
#include "onnx_io/tensor.h"
#include "rewrite/targets.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

rewrite::RewriteOptions for_target(const std::string& name, bool avx512 = false) {
  rewrite::RewriteOptions options;
  options.forms = rewrite::all_forms();
  options.target = rewrite::find_target(name);
  REQUIRE(options.target != nullptr);
  options.cpu.avx512f = avx512;
  return options;
}

// The channel order a Gather must apply to DCR-ordered phases so that a CRD DepthToSpace gives the DCR result:
// CRD channel c*s*s + k reads DCR channel k*C + c.
std::vector<int64_t> dcr_to_crd(int64_t channels, int64_t s) {
  std::vector<int64_t> order;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t k = 0; k < s * s; ++k) order.push_back(k * channels + c);
  }
  return order;
}

std::vector<int64_t> int64_values(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& init : g.initializer()) {
    if (init.name() == name) {
      auto v = onnx_io::to_doubles(init);
      REQUIRE(v.ok());
      return std::vector<int64_t>(v->begin(), v->end());
    }
  }
  for (const auto& node : g.node()) {
    if (node.op_type() == "Constant" && node.output(0) == name) {
      auto v = onnx_io::to_doubles(node.attribute(0).t());
      REQUIRE(v.ok());
      return std::vector<int64_t>(v->begin(), v->end());
    }
  }
  FAIL("no constant '" << name << "'");
  return {};
}

// Requires Y = DepthToSpace(CRD, s)(Gather(axis 1, DCR->CRD order)(Concat(axis 1, s*s phases))).
void require_gather_crd(const onnx::GraphProto& g, int64_t channels, int64_t s) {
  const auto* d2s = find_producer(g, "Y");
  REQUIRE(d2s != nullptr);
  REQUIRE(d2s->op_type() == "DepthToSpace");
  CHECK(find_attr(*d2s, "mode")->s() == "CRD");
  CHECK(find_attr(*d2s, "blocksize")->i() == s);
  const auto* gather = find_producer(g, d2s->input(0));
  REQUIRE(gather != nullptr);
  REQUIRE(gather->op_type() == "Gather");
  CHECK(find_attr(*gather, "axis")->i() == 1);
  CHECK(int64_values(g, gather->input(1)) == dcr_to_crd(channels, s));
  const auto* concat = find_producer(g, gather->input(0));
  REQUIRE(concat != nullptr);
  CHECK(concat->op_type() == "Concat");
  CHECK(find_attr(*concat, "axis")->i() == 1);
  CHECK(concat->input_size() == s * s);
}

// Requires Y = Transpose(DepthToSpace(CRD, s)(Transpose(Concat(axis 0, s*s phases)))), the batch join (N = 1).
void require_batch_crd(const onnx::GraphProto& g, int64_t s) {
  const auto* back = find_producer(g, "Y");
  REQUIRE(back != nullptr);
  REQUIRE(back->op_type() == "Transpose");
  CHECK(attr_ints(*back, "perm") == std::vector<int64_t>{1, 0, 2, 3});
  const auto* d2s = find_producer(g, back->input(0));
  REQUIRE(d2s != nullptr);
  REQUIRE(d2s->op_type() == "DepthToSpace");
  CHECK(find_attr(*d2s, "mode")->s() == "CRD");
  const auto* there = find_producer(g, d2s->input(0));
  REQUIRE(there != nullptr);
  REQUIRE(there->op_type() == "Transpose");
  CHECK(attr_ints(*there, "perm") == std::vector<int64_t>{1, 0, 2, 3});
  const auto* concat = find_producer(g, there->input(0));
  REQUIRE(concat != nullptr);
  CHECK(concat->op_type() == "Concat");
  CHECK(find_attr(*concat, "axis")->i() == 0);
  CHECK(concat->input_size() == s * s);
}

}  // namespace

TEST_CASE("every target is in the table once, the default first, and an unknown name finds none", "[rewrite][targets]") {
  const auto& all = rewrite::targets();
  REQUIRE(all.size() == 8);
  CHECK(all.front().name == rewrite::kDefaultTarget);
  CHECK(rewrite::target_names() ==
        "default, xnnpack, litert (also tflite), ort (also onnxruntime), executorch, openvino (also ov), mnn, ncnn");
  for (const auto& t : all) {
    CAPTURE(t.name);
    CHECK(rewrite::find_target(t.name) == &t);
    CHECK_FALSE(t.measured.empty());
    CHECK(t.layout != nullptr);
  }
  CHECK(rewrite::find_target("tflite") == nullptr);
  CHECK(rewrite::find_target("") == nullptr);
}

TEST_CASE("each target joins a ConvTranspose's phases its way, and every join computes the same output", "[rewrite][targets][layout]") {
  DeconvSpec spec;
  spec.channels = 3;
  spec.bias = true;
  const std::string attrs_s2 = "strides=[2,2], pads=[1,1,1,1]", attrs_s3 = "strides=[3,3], pads=[2,2,2,2], output_padding=[1,1]";
  const int64_t s = GENERATE(2, 3);
  spec.attrs = s == 2 ? attrs_s2 : attrs_s3;
  spec.kh = spec.kw = s == 2 ? 4 : 6;
  CAPTURE(s);
  const auto original = deconv_model(spec);
  const std::map<std::string, NaiveTensor> inputs{{"X", input_for(spec)}};

  const auto xnn = rewrite_copy(original, for_target("xnnpack"));
  REQUIRE(xnn.result.rewritten == 1);
  CHECK(xnn.result.nodes[0].layout == rewrite::PhaseLayout::kDcr);
  require_polyphase(xnn.model.graph(), "Y", s, 3, 13, xnn.result.nodes[0].emitted_nodes.back());
  CHECK(output_diff(original, xnn.model, inputs) < kTolerance);

  const auto lite = rewrite_copy(original, for_target("litert"));
  REQUIRE(lite.result.rewritten == 1);
  CHECK(lite.result.nodes[0].layout == rewrite::PhaseLayout::kDcr);
  CHECK(serialized(lite.model) == serialized(xnn.model));  // LiteRT takes DCR natively: the same model

  // The default, ncnn and MNN keep it: no join converts and pays on all six runtimes (a DCR DepthToSpace converts through
  // neither onnx2torch nor pnnx, the Gather is GatherV2 on MNN and a one-channel Crop after pnnx), and MNN's depthwise
  // deconvolution already skips the zero taps.
  for (const std::string name : {"default", "ncnn", "mnn"}) {
    CAPTURE(name);
    const auto kept = rewrite_copy(original, for_target(name));
    CHECK(kept.result.rewritten == 0);
    CHECK(serialized(kept.model) == serialized(original));
  }
  // OpenVINO, even with the layer's output the graph's: at 3 channels that measured faster alone (1.89x-2.51x), so it
  // joins DCR as XNNPACK takes it (at 16-255 channels alone it keeps it: tests/rewrite/target_rules_test.cpp).
  const auto ov_alone = rewrite_copy(original, for_target("openvino"));
  REQUIRE(ov_alone.result.rewritten == 1);
  CHECK(serialized(ov_alone.model) == serialized(xnn.model));

  // ExecuTorch: the batch join for s >= 3 at a known batch of 1 (all inside the delegate), else Gather + CRD.
  const auto et = rewrite_copy(original, for_target("executorch"));
  REQUIRE(et.result.rewritten == 1);
  if (s == 2) {
    CHECK(et.result.nodes[0].layout == rewrite::PhaseLayout::kGatherCrd);
    require_gather_crd(et.model.graph(), 3, s);
  } else {
    CHECK(et.result.nodes[0].layout == rewrite::PhaseLayout::kBatchCrd);
    require_batch_crd(et.model.graph(), s);
  }
  CHECK(output_diff(original, et.model, inputs) < kTolerance);
}

TEST_CASE("the executorch target joins a symbolic batch with Gather + CRD, since the batch join needs N = 1",
          "[rewrite][targets][layout]") {
  auto model = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N,2,4,5] X) => (float[N,2,12,15] Y) {
      Y = ConvTranspose <group = 2, strides = [3, 3], pads = [2, 2, 2, 2], output_padding = [1, 1]> (X, W)
    })");
  set_random_initializer(*model.mutable_graph(), "W", onnx::TensorProto::FLOAT, {2, 1, 6, 6}, 3, true);
  const auto et = rewrite_copy(model, for_target("executorch"));
  REQUIRE(et.result.rewritten == 1);
  CHECK(et.result.nodes[0].layout == rewrite::PhaseLayout::kGatherCrd);
  require_gather_crd(et.model.graph(), 2, 3);
  const std::map<std::string, NaiveTensor> inputs{{"X", random_tensor4(2, 2, 4, 5, 8)}};
  CHECK(output_diff(model, et.model, inputs, "Y", {2, 2, 12, 15}) < kTolerance);
}

TEST_CASE(
    "litert keeps a depthwise nearest + Conv and rewrites a dense one, the default keeps both, xnnpack and executorch "
    "rewrite both",
    "[rewrite][targets][keep]") {
  NearestConvSpec dw;  // depthwise, C 4
  NearestConvSpec dense;
  dense.group = 1;
  dense.c_in = dense.c_out = 64;
  dense.h = dense.w = 2;
  const auto depthwise_model = nearest_conv_model(dw), dense_model = nearest_conv_model(dense);
  const auto kept = rewrite_copy(depthwise_model, for_target("litert"));
  REQUIRE(kept.result.nodes.size() == 1);
  CHECK_FALSE(kept.result.nodes[0].rewritten);
  CHECK_THAT(kept.result.nodes[0].reason, Catch::Contains("measured 0.63x-0.97x on LiteRT") &&
                                              Catch::Contains("BENCHMARKS.md, \"LiteRT: hand-written upsamplers\"") &&
                                              Catch::Contains("kept for --target litert"));
  CHECK(serialized(kept.model) == serialized(depthwise_model));
  const auto rewritten = rewrite_copy(dense_model, for_target("litert"));
  CHECK(rewritten.result.rewritten == 1);
  CHECK(count_ops(rewritten.model.graph(), "Resize") == 0);
  // The default joins nothing: a 3x3 Conv's phases need a join, and none converts and pays on all six runtimes.
  for (const auto* model : {&depthwise_model, &dense_model}) {
    const auto def = rewrite_copy(*model, for_target("default"));
    REQUIRE(def.result.nodes.size() == 1);
    CHECK_FALSE(def.result.nodes[0].rewritten);
    CHECK_THAT(def.result.nodes[0].reason, Catch::StartsWith("every other family is joined") && Catch::EndsWith("; kept by default"));
    CHECK(serialized(def.model) == serialized(*model));
  }
  for (const std::string name : {"xnnpack", "executorch"}) {
    CAPTURE(name);
    CHECK(rewrite_copy(depthwise_model, for_target(name)).result.rewritten == 1);
    CHECK(rewrite_copy(dense_model, for_target(name)).result.rewritten == 1);
  }
}

TEST_CASE("ort rewrites only a dense nearest + Conv with at least 64 input channels, and every kept node names its measurement",
          "[rewrite][targets][keep][ort]") {
  NearestConvSpec wide;
  wide.group = 1;
  wide.c_in = wide.c_out = 64;
  wide.h = wide.w = 2;
  NearestConvSpec narrow = wide;
  narrow.c_in = narrow.c_out = 32;
  const auto wide_model = nearest_conv_model(wide);
  const auto rewritten = rewrite_copy(wide_model, for_target("ort"));
  REQUIRE(rewritten.result.rewritten == 1);
  CHECK(rewritten.result.nodes[0].layout == rewrite::PhaseLayout::kDcr);  // ORT runs DCR natively
  CHECK(count_ops(rewritten.model.graph(), "Conv") == 4);
  CHECK(count_ops(rewritten.model.graph(), "Resize") == 0);

  const auto narrow_kept = rewrite_copy(nearest_conv_model(narrow), for_target("ort"));
  REQUIRE(narrow_kept.result.nodes.size() == 1);
  CHECK_FALSE(narrow_kept.result.nodes[0].rewritten);
  CHECK_THAT(narrow_kept.result.nodes[0].reason, Catch::Contains("32 input channels (< 64) measured 0.68x-0.94x on ONNX Runtime") &&
                                                     Catch::Contains("\"ONNX Runtime (CPU provider)\""));

  const auto dw_kept = rewrite_copy(nearest_conv_model(NearestConvSpec{}), for_target("ort"));
  CHECK_FALSE(dw_kept.result.nodes[0].rewritten);
  CHECK_THAT(dw_kept.result.nodes[0].reason, Catch::Contains("depthwise nearest + Conv measured 0.27x-0.41x"));

  // A ConvTranspose: kept on either CPU, and the reason says which CPU it read.
  const auto deconv = deconv_model(DeconvSpec{});
  for (const bool avx512 : {false, true}) {
    CAPTURE(avx512);
    const auto kept = rewrite_copy(deconv, for_target("ort", avx512));
    REQUIRE(kept.result.nodes.size() == 1);
    CHECK_FALSE(kept.result.nodes[0].rewritten);
    CHECK_THAT(kept.result.nodes[0].reason, Catch::Contains("every depthwise ConvTranspose layer measured 0.12x-0.94x"));
    CHECK_THAT(kept.result.nodes[0].reason, Catch::Contains(avx512 ? "AVX-512F: yes) the answer can differ" : "(AVX-512F: no)"));
    CHECK(serialized(kept.model) == serialized(deconv));
  }
}

TEST_CASE("the default writes no join at any opset: a nearest + 1x1 Conv is the Conv and its Resize, a ConvTranspose is kept",
          "[rewrite][targets][layout][opset]") {
  // Before, the default joined with Gather + CRD from opset 11 and DCR below it (which onnx2torch cannot convert, said
  // by a note). Now no join: nothing to fall back on, and no note.
  const int64_t opset = GENERATE(9, 10, 11, 13);
  CAPTURE(opset);
  DeconvSpec spec;
  spec.opset = opset;
  const auto deconv = deconv_model(spec);
  const auto kept = rewrite_copy(deconv, for_target("default"));
  CHECK(kept.result.rewritten == 0);
  CHECK(serialized(kept.model) == serialized(deconv));
  if (opset < 10) return;  // Resize comes with opset 10
  NearestConvSpec one;
  one.group = 1;
  one.ky = one.kx = 1;
  one.pads = {0, 0, 0, 0};
  one.c_in = one.c_out = 16;
  one.opset = opset;
  const auto model = nearest_conv_model(one);
  const auto out = rewrite_copy(model, for_target("default"));
  REQUIRE(out.result.rewritten == 1);
  CHECK(out.result.nodes[0].layout == rewrite::PhaseLayout::kNearest);
  CHECK(out.result.nodes[0].note.empty());
  for (const char* op : {"DepthToSpace", "Gather", "Concat"}) CHECK(count_ops(out.model.graph(), op) == 0);
  CHECK(count_ops(out.model.graph(), "Conv") == 1);
  CHECK(count_ops(out.model.graph(), "Resize") == 1);
  // executorch still keeps an opset 9 ConvTranspose: its CRD join needs DepthToSpace's mode.
  spec.opset = 9;
  const auto et = rewrite_copy(deconv_model(spec), for_target("executorch"));
  CHECK(et.result.rewritten == 0);
  CHECK_THAT(et.result.nodes[0].reason, Catch::Contains("needs DepthToSpace mode CRD"));
}

TEST_CASE("targets for ExecuTorch keep a ConvTranspose whose nearest layout would add a Resize onnx2torch cannot convert",
          "[rewrite][targets][nearest_layout]") {
  // k = s = 2, one value per channel: every phase the same, so one Conv and a nearest Resize. The original converts
  // through onnx2torch and torch.export; a Resize does not (GuardOnDataDependentSymNode): executorch and the default keep
  // it (review finding 4). A nearest + 1x1 Conv had its Resize already, and is rewritten there too.
  DeconvSpec spec;
  spec.kh = spec.kw = 2;
  spec.attrs = "strides=[2,2]";
  auto uniform = deconv_model(spec);
  std::vector<double> v;
  for (int c = 0; c < 3; ++c) v.insert(v.end(), 4, 0.5 * (c + 1));
  *uniform.mutable_graph()->mutable_initializer(0) = onnx_io::make_tensor("W", onnx::TensorProto::FLOAT, {3, 1, 2, 2}, v, true);
  for (const std::string name : {"executorch", "default"}) {
    CAPTURE(name);
    const auto kept = rewrite_copy(uniform, for_target(name));
    REQUIRE(kept.result.nodes.size() == 1);
    CHECK_FALSE(kept.result.nodes[0].rewritten);
    // The default keeps every ConvTranspose by its rules before the Resize is asked about.
    CHECK_THAT(kept.result.nodes[0].reason,
               Catch::Contains(name == "default" ? "no join both converts" : "a Resize does not pass torch.export through onnx2torch"));
    CHECK(serialized(kept.model) == serialized(uniform));
  }
  for (const std::string name : {"xnnpack", "litert"}) {
    CAPTURE(name);
    const auto out = rewrite_copy(uniform, for_target(name));
    REQUIRE(out.result.rewritten == 1);
    CHECK(out.result.nodes[0].layout == rewrite::PhaseLayout::kNearest);
  }
  NearestConvSpec one;
  one.ky = one.kx = 1;
  one.pads = {0, 0, 0, 0};
  one.c_in = one.c_out = one.group = 16;  // the 1x1 table's 16-256 input channels: its rule rewrites only there
  const auto et = rewrite_copy(nearest_conv_model(one), for_target("executorch"));
  REQUIRE(et.result.rewritten == 1);
  CHECK(et.result.nodes[0].layout == rewrite::PhaseLayout::kNearest);
}
