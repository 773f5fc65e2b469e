// The bound on what one node may emit: a stride s emits s*s phases, so a node over max_phases is kept with
// a reason, decided from the match before anything is emitted.
#include <catch2/catch.hpp>

#include <chrono>
#include <limits>

#include "rewrite_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

// k1 stride s with output_padding s-1: one tapped phase, the rest bias-only; the smallest model of stride s.
DeconvSpec k1_spec(int64_t s) {
  DeconvSpec spec;
  spec.channels = 1;
  spec.kh = spec.kw = 1;
  spec.h = spec.w = 2;
  spec.bias = true;
  spec.attrs = "strides=[" + std::to_string(s) + "," + std::to_string(s) + "], output_padding=[" + std::to_string(s - 1) + "," +
               std::to_string(s - 1) + "]";
  return spec;
}

rewrite::RewriteOptions with_max_phases(int64_t n) {
  rewrite::RewriteOptions options;
  options.emit.max_phases = n;
  return options;
}

}  // namespace

TEST_CASE("k1 s512 op511 is kept at once with the phase count and the option in the reason", "[rewrite][limits]") {
  const auto original = deconv_model(k1_spec(512));
  const auto start = std::chrono::steady_clock::now();
  const auto out = rewrite_copy(original);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(out.result.rewritten == 0);
  REQUIRE(out.result.kept == 1);
  CHECK(out.result.nodes[0].reason == "stride 512 would emit 262144 phases, over --max-phases 64");
  CHECK(out.result.nodes[0].emitted_nodes.empty());
  CHECK(out.result.nodes[0].summary.stride == 512);  // the plan still shows the node's geometry
  CHECK(serialized(out.model) == serialized(original));
  CHECK(seconds < 2.0);  // decided from the match; emitting it took tens of seconds
}

TEST_CASE("the default max_phases rewrites stride 8 and keeps stride 9", "[rewrite][limits]") {
  CHECK(rewrite::kDefaultMaxPhases == 64);
  const auto s8 = rewrite_copy(deconv_model(k1_spec(8)));
  CHECK(s8.result.rewritten == 1);
  const auto s9 = rewrite_copy(deconv_model(k1_spec(9)));
  CHECK(s9.result.rewritten == 0);
  REQUIRE(s9.result.kept == 1);
  CHECK(s9.result.nodes[0].reason == "stride 9 would emit 81 phases, over --max-phases 64");
}

TEST_CASE("max_phases is respected exactly at the boundary and raising it rewrites the node", "[rewrite][limits]") {
  const auto spec = k1_spec(9);
  const auto original = deconv_model(spec);

  const auto at_80 = rewrite_copy(original, with_max_phases(80));
  CHECK(at_80.result.rewritten == 0);
  REQUIRE(at_80.result.kept == 1);
  CHECK(at_80.result.nodes[0].reason == "stride 9 would emit 81 phases, over --max-phases 80");
  CHECK(count_ops(at_80.model.graph(), "ConvTranspose") == 1);
  CHECK(serialized(at_80.model) == serialized(original));

  const auto at_81 = rewrite_copy(original, with_max_phases(81));
  REQUIRE(at_81.result.rewritten == 1);
  const auto& g = at_81.model.graph();
  CHECK(count_ops(g, "ConvTranspose") == 0);
  CHECK(find_producer(g, "Y")->op_type() == "DepthToSpace");
  CHECK(find_producer(g, find_producer(g, "Y")->input(0))->input_size() == 81);
  CHECK(checker_error(at_81.model).empty());
  CHECK(output_diff(original, at_81.model, {{"X", input_for(spec)}}, "Y", {1, 1, 18, 18}) < kTolerance);
}

TEST_CASE("stride 1 is one phase and fits max_phases 1", "[rewrite][limits]") {
  DeconvSpec spec;
  spec.kh = spec.kw = 3;
  spec.attrs = "strides=[1,1], pads=[1,1,1,1]";
  const auto out = rewrite_copy(deconv_model(spec), with_max_phases(1));
  CHECK(out.result.rewritten == 1);
  const auto s2 = rewrite_copy(deconv_model(DeconvSpec{}), with_max_phases(3));
  CHECK(s2.result.rewritten == 0);
  CHECK(s2.result.nodes[0].reason == "stride 2 would emit 4 phases, over --max-phases 3");
}

TEST_CASE("a node kept for its phase count keeps its weight while another node shares it", "[rewrite][limits]") {
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,2,3,3] X) => (float[1,2,6,6] A, float[1,2,27,27] Z) {
      A = ConvTranspose <group=2, strides=[2,2], output_padding=[1,1]> (X, W)
      Z = ConvTranspose <group=2, strides=[9,9], output_padding=[8,8]> (X, W)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {2, 1, 1, 1}, 5);
  const auto out = rewrite_copy(m);
  CHECK(out.result.rewritten == 1);
  CHECK(out.result.kept == 1);
  CHECK(out.result.nodes[1].reason == "stride 9 would emit 81 phases, over --max-phases 64");
  CHECK(find_initializer(out.model.graph(), "W") != nullptr);
  CHECK(count_ops(out.model.graph(), "ConvTranspose") == 1);
  CHECK(checker_error(out.model).empty());
  CHECK(output_diff(m, out.model, {{"X", random_tensor4(1, 2, 3, 3, 9)}}, "Z") < kTolerance);
}

TEST_CASE("a stride whose square overflows int64 is kept under any max_phases", "[rewrite][limits]") {
  // s = 2^32 with output_padding s-1 is a valid clean upscale; s*s does not fit in int64.
  DeconvSpec spec = k1_spec(4294967296);
  spec.h = spec.w = 0;  // symbolic: the output size would not fit either
  const auto out = rewrite_copy(deconv_model(spec), with_max_phases(std::numeric_limits<int64_t>::max()));
  CHECK(out.result.rewritten == 0);
  REQUIRE(out.result.kept == 1);
  CHECK(out.result.nodes[0].reason == "stride 4294967296 would emit 4294967296*4294967296 phases, over --max-phases 9223372036854775807");
}
