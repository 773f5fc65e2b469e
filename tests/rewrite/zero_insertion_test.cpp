// Form zero_insertion (MI-GAN's older code): a one-tap depthwise ConvTranspose, a constant-zero Pad and a
// depthwise Conv fold into one polyphase group. Structure (the ConvTranspose, Pad and their constants gone, the
// phases reading x), numbers through the naive executor, near-misses kept (the ConvTranspose then rewritten on
// its own where it can be), and idempotence and determinism.
#include <catch2/catch.hpp>

#include "upsampler_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

// Y = Conv(Pad(ConvTranspose(X, V), pads), W[, B]), the Conv named "up1", the ConvTranspose "ins".
struct ZeroInsertionSpec {
  int64_t s = 2;
  int64_t k = 2;                       // the ConvTranspose's kernel (<= s)
  int64_t ty = 0, tx = 0;              // its one non-zero tap
  int64_t conv_k = 4;                  // the Conv's kernel K
  int64_t pad_begin = 2, pad_end = 1;  // the Pad's spatial pads (both axes)
  int64_t channels = 3, h = 5, w = 4;
  int64_t opset = 13;
  bool pads_chain = true;      // the pads come from PyTorch's 8-op chain, else an initializer
  bool channel_gains = false;  // gains 1, 2, 0.5, ... per channel instead of 1 everywhere
  bool bias = false;           // the Conv's bias
  // Near-miss switches.
  bool second_tap = false;       // a second non-zero tap in channel 0
  bool moving_tap = false;       // channel 1's tap elsewhere
  bool ct_bias = false;          // the ConvTranspose has a non-zero bias
  bool ct_extra_reader = false;  // the ConvTranspose's output is also a graph output
  int64_t ct_pad = 0;            // the ConvTranspose's pads
  bool ct_output_shape = false;  // the ConvTranspose states output_shape [s*h, s*w]
  std::string pad_mode = "constant";
  int64_t conv_stride = 1;
};

onnx::ModelProto zero_insertion_model(const ZeroInsertionSpec& m) {
  const std::string c = std::to_string(m.channels), s = std::to_string(m.s), k = std::to_string(m.k);
  const int64_t zh = m.ct_output_shape ? m.s * m.h : m.s * (m.h - 1) + m.k - 2 * m.ct_pad;
  const int64_t zw = m.ct_output_shape ? m.s * m.w : m.s * (m.w - 1) + m.k - 2 * m.ct_pad;
  const int64_t oh = (zh + m.pad_begin + m.pad_end - m.conv_k) / m.conv_stride + 1;
  const int64_t ow = (zw + m.pad_begin + m.pad_end - m.conv_k) / m.conv_stride + 1;
  std::string outputs = "float[1," + c + "," + std::to_string(oh) + "," + std::to_string(ow) + "] Y";
  if (m.ct_extra_reader) outputs += ", float[1," + c + "," + std::to_string(zh) + "," + std::to_string(zw) + "] Z";
  const std::string z = m.ct_extra_reader ? "Z" : "z";
  const std::string ct_pads = std::to_string(m.ct_pad);
  std::string body = "  " + z + " = ConvTranspose <group = " + c + ", strides = [" + s + ", " + s + "], kernel_shape = [" + k + ", " + k +
                     "], pads = [" + ct_pads + ", " + ct_pads + ", " + ct_pads + ", " + ct_pads + "]" +
                     (m.ct_output_shape ? ", output_shape = [" + std::to_string(m.s * m.h) + ", " + std::to_string(m.s * m.w) + "]" : "") +
                     "> (X, V" + (m.ct_bias ? ", VB" : "") + ")\n";
  if (m.pads_chain) body += pads_chain("pads", "p_", m.pad_begin, m.pad_end, m.pad_begin, m.pad_end);
  body += "  p = Pad <mode = \"" + m.pad_mode + "\"> (" + z + ", pads)\n";
  const std::string kk = std::to_string(m.conv_k), cs = std::to_string(m.conv_stride);
  body += "  Y = Conv <group = " + c + ", kernel_shape = [" + kk + ", " + kk + "], strides = [" + cs + ", " + cs + "]> (p, W" +
          (m.bias ? ", B" : "") + ")\n";
  onnx::ModelProto model = parse_model("<ir_version: 8, opset_import: [\"\" : " + std::to_string(m.opset) + "]>\ng (float[1," + c + "," +
                                       std::to_string(m.h) + "," + std::to_string(m.w) + "] X) => (" + outputs + ") {\n" + body + "}\n");
  auto& g = *model.mutable_graph();
  // Gains are powers of two, so a * f is exact in float and the comparison can stay at 1e-9.
  const double gains[] = {1.0, 2.0, 0.5, 4.0};
  std::vector<double> v(static_cast<size_t>(m.channels * m.k * m.k), 0.0);
  for (int64_t ch = 0; ch < m.channels; ++ch) {
    const double gain = m.channel_gains ? gains[ch % 4] : 1.0;
    const int64_t ty = m.moving_tap && ch == 1 ? (m.ty + 1) % m.k : m.ty;
    v[static_cast<size_t>((ch * m.k + ty) * m.k + m.tx)] = gain;
    if (m.second_tap && ch == 0) v[static_cast<size_t>((ch * m.k + (m.ty + 1) % m.k) * m.k + m.tx)] = 1.0;
  }
  *g.add_initializer() = onnx_io::make_tensor("V", onnx::TensorProto::FLOAT, {m.channels, 1, m.k, m.k}, v, true);
  if (m.ct_bias)
    *g.add_initializer() =
        onnx_io::make_tensor("VB", onnx::TensorProto::FLOAT, {m.channels}, std::vector<double>(static_cast<size_t>(m.channels), 0.5), true);
  if (!m.pads_chain) {
    *g.add_initializer() = onnx_io::make_int64_tensor("pads", {8}, {0, 0, m.pad_begin, m.pad_begin, 0, 0, m.pad_end, m.pad_end});
  }
  set_random_initializer(g, "W", onnx::TensorProto::FLOAT, {m.channels, 1, m.conv_k, m.conv_k}, 31);
  if (m.bias) set_random_initializer(g, "B", onnx::TensorProto::FLOAT, {m.channels}, 32);
  name_node(model, "Y", "up1");
  name_node(model, z, "ins");
  return model;
}

// Requires one zero_insertion row, rewritten, and nothing else: the ConvTranspose is folded in, not rewritten
// on its own. The phases read X, the hand-written nodes and their constants are gone, the numbers hold.
Rewritten require_folded(const onnx::ModelProto& original, const ZeroInsertionSpec& spec, std::array<int64_t, 4> pads) {
  ExpectedUpsampler e;
  e.form = "zero_insertion";
  e.s = spec.s;
  e.channels = spec.channels;
  e.opset = spec.opset;
  e.h = spec.h;
  e.w = spec.w;
  e.kernel = {spec.conv_k, spec.conv_k};
  e.pads = pads;
  e.gone_ops = {"ConvTranspose", "Pad", "Constant", "ConstantOfShape", "Reshape", "Slice", "Transpose", "Cast"};
  e.gone_initializers = {"V", "W", "pads"};
  auto out = require_upsampler_rewritten(original, e, 41);
  CHECK((find_initializer(out.model.graph(), "B") != nullptr) == spec.bias);
  return out;
}

// Requires the fold kept with a reason holding `reason`: the Pad and the Conv stay as written, and the
// ConvTranspose is rewritten on its own (form conv_transpose) exactly when `deconv_rewritten`.
void require_near_miss(const onnx::ModelProto& original, const std::string& reason, bool deconv_rewritten,
                       const rewrite::RewriteOptions& options = {}, bool check_numbers = true) {
  const auto out = rewrite_copy(original, options);
  REQUIRE(out.result.nodes.size() == 2);
  const rewrite::NodeReport* fold = nullptr;
  const rewrite::NodeReport* deconv = nullptr;
  for (const auto& row : out.result.nodes) (row.summary.form == "zero_insertion" ? fold : deconv) = &row;
  REQUIRE(fold != nullptr);
  REQUIRE(deconv != nullptr);
  CAPTURE(fold->reason, deconv->reason);
  CHECK_FALSE(fold->rewritten);
  CHECK(fold->summary.name == "up1");
  CHECK_THAT(fold->reason, Catch::Contains(reason));
  CHECK(deconv->summary.form == "conv_transpose");
  CHECK(deconv->summary.name == "ins");
  CHECK(deconv->rewritten == deconv_rewritten);
  const auto& g = out.model.graph();
  CHECK(count_ops(g, "ConvTranspose") == (deconv_rewritten ? 0 : 1));
  CHECK(count_ops(g, "DepthToSpace") == (deconv_rewritten ? 1 : 0));
  REQUIRE(find_producer(g, "Y") != nullptr);
  CHECK(find_producer(g, "Y")->op_type() == "Conv");
  CHECK(find_producer(g, "p") != nullptr);
  if (!deconv_rewritten) CHECK(serialized(out.model) == serialized(original));
  if (out.result.rewritten > 0 && check_numbers) {
    ZeroInsertionSpec dims;
    const auto x = random_tensor4(1, dims.channels, dims.h, dims.w, 42);
    CHECK(output_diff(original, out.model, {{"X", x}}, "Y") < kTolerance);
  }
}

}  // namespace

TEST_CASE("zero insertion x2 (k2 one-tap ConvTranspose, Pad, 4x4 Conv) becomes one k4 s2 pads 1 polyphase group",
          "[rewrite][recogniser][zero_insertion]") {
  ZeroInsertionSpec spec;
  spec.opset = GENERATE(11, 13, 17);
  spec.pads_chain = GENERATE(true, false);
  spec.bias = GENERATE(false, true);
  CAPTURE(spec.opset, spec.pads_chain, spec.bias);
  const auto original = zero_insertion_model(spec);
  REQUIRE(checker_error(original).empty());
  require_folded(original, spec, {1, 1, 1, 1});
}

TEST_CASE("zero insertion x3: a tap off the corner, a kernel shorter than the stride, gains per channel",
          "[rewrite][recogniser][zero_insertion]") {
  ZeroInsertionSpec spec;
  spec.s = 3;
  spec.k = GENERATE(2, 3);
  spec.ty = spec.tx = GENERATE(0, 1);
  spec.conv_k = 5;
  spec.pad_begin = 2;
  spec.pad_end = spec.conv_k - 1 - spec.pad_begin + (spec.s - spec.k);  // P + E - (s - k) == K - 1: a clean x3
  spec.channel_gains = GENERATE(false, true);
  spec.opset = GENERATE(11, 17);
  CAPTURE(spec.k, spec.ty, spec.channel_gains, spec.opset);
  // Pb = K-1-j-P, Pe = K+j-s-E with E the end pads less the s - k the ConvTranspose stops short.
  const int64_t e = spec.pad_end - (spec.s - spec.k);
  const int64_t pb = spec.conv_k - 1 - spec.ty - spec.pad_begin, pe = spec.conv_k + spec.ty - spec.s - e;
  require_folded(zero_insertion_model(spec), spec, {pb, pb, pe, pe});
}

TEST_CASE("near-miss zero insertions are kept with a reason, and the ConvTranspose is rewritten on its own",
          "[rewrite][recogniser][zero_insertion][refusal]") {
  SECTION("two non-zero taps") {
    ZeroInsertionSpec spec;
    spec.second_tap = true;
    require_near_miss(zero_insertion_model(spec), "ConvTranspose weight has 2 non-zero taps in channel 0", true);
  }
  SECTION("the tap moves between channels") {
    ZeroInsertionSpec spec;
    spec.moving_tap = true;
    require_near_miss(zero_insertion_model(spec), "non-zero tap moves between channels", true);
  }
  SECTION("Pad mode reflect") {
    ZeroInsertionSpec spec;
    spec.pad_mode = "reflect";
    require_near_miss(zero_insertion_model(spec), "Pad mode reflect", true, {}, false);  // the naive executor has no reflect
  }
  SECTION("Conv stride 2") {
    ZeroInsertionSpec spec;
    spec.conv_stride = 2;
    require_near_miss(zero_insertion_model(spec), "Conv stride 2", true);
  }
  SECTION("ConvTranspose output read by another node") {
    ZeroInsertionSpec spec;
    spec.ct_extra_reader = true;
    require_near_miss(zero_insertion_model(spec), "ConvTranspose output has another reader", true);
  }
  SECTION("ConvTranspose with a non-zero bias") {
    ZeroInsertionSpec spec;
    spec.ct_bias = true;
    require_near_miss(zero_insertion_model(spec), "ConvTranspose has a non-zero bias", true);
  }
  SECTION("ConvTranspose kernel larger than its stride") {
    ZeroInsertionSpec spec;
    spec.k = 3;  // 2*H+1 long: not a clean upscale on its own either
    require_near_miss(zero_insertion_model(spec), "ConvTranspose kernel 3x3 is larger than its stride 2", false);
  }
  SECTION("ConvTranspose with pads") {
    ZeroInsertionSpec spec;
    spec.k = 4;
    spec.ct_pad = 1;  // k4 s2 pads 1: a clean upscale on its own
    require_near_miss(zero_insertion_model(spec), "ConvTranspose pads [1,1,1,1] are not 0", true);
  }
  SECTION("ConvTranspose with an output_shape") {
    ZeroInsertionSpec spec;
    spec.k = 1;
    spec.pad_end = 2;  // a clean x2 of the s*H-1 that k 1 gives; output_shape asks for s*H, one more
    spec.ct_output_shape = true;
    require_near_miss(zero_insertion_model(spec), "ConvTranspose has an output_shape", false);  // nor on its own: pads -1
  }
  SECTION("pads that do not make a clean upscale") {
    ZeroInsertionSpec spec;
    spec.pad_end = 2;
    require_near_miss(zero_insertion_model(spec), "not a clean upscale", true);
  }
  SECTION("the fold not selected by --forms, skipped, or over --max-phases") {
    rewrite::RewriteOptions options;
    options.forms = {rewrite::Form::kConvTranspose};
    require_near_miss(zero_insertion_model({}), "form zero_insertion not selected by --forms", true, options);
    options = {};
    options.skip = {"up1"};
    require_near_miss(zero_insertion_model({}), "skipped by --skip", true, options);
    // Kept by --max-phases, the fold leaves the ConvTranspose its own row (kept the same way).
    options = {};
    options.emit.max_phases = 3;
    require_near_miss(zero_insertion_model({}), "would emit 4 phases, over --max-phases 3", false, options);
  }
}

TEST_CASE("a folded ConvTranspose keeps its name for --only and --skip: skipping it keeps the fold, naming it is no typo",
          "[rewrite][recogniser][zero_insertion][options]") {
  SECTION("--skip the ConvTranspose: the fold is kept and the ConvTranspose stays as written") {
    rewrite::RewriteOptions options;
    options.skip = {"ins"};
    const auto original = zero_insertion_model({});
    const auto out = rewrite_copy(original, options);
    CHECK(out.result.unmatched_names.empty());
    REQUIRE(out.result.nodes.size() == 2);
    for (const auto& row : out.result.nodes) {
      CAPTURE(row.summary.name, row.reason);
      CHECK_FALSE(row.rewritten);
      CHECK_THAT(row.reason, Catch::Contains("skipped by --skip"));
    }
    CHECK(count_ops(out.model.graph(), "ConvTranspose") == 1);
    CHECK(serialized(out.model) == serialized(original));
  }
  SECTION("--only the Conv and the ConvTranspose: the fold is rewritten and both names are known") {
    rewrite::RewriteOptions options;
    options.only = {"up1", "ins"};
    const auto out = rewrite_copy(zero_insertion_model({}), options);
    CHECK(out.result.unmatched_names.empty());
    REQUIRE(out.result.nodes.size() == 1);
    CHECK(out.result.nodes[0].summary.form == "zero_insertion");
    CHECK(out.result.nodes[0].rewritten);
    CHECK(count_ops(out.model.graph(), "ConvTranspose") == 0);
  }
}

TEST_CASE("zero insertion: a ConvTranspose the matcher finds invalid refuses the model, folded or not",
          "[rewrite][recogniser][zero_insertion][refusal]") {
  auto model = zero_insertion_model({});
  // X has 2 channels, the ConvTranspose's weight and group say 3.
  model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(2);
  auto result = rewrite::rewrite_model(model, {});
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().kind == core::ErrorKind::kInvalidModel);
  CHECK_THAT(result.error().message, Catch::Contains("has 2 channels but weight 'V' expects 3"));
}

TEST_CASE("zero insertion: a kernel_shape that disagrees with the weight refuses the model",
          "[rewrite][recogniser][zero_insertion][refusal]") {
  auto model = zero_insertion_model({});
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    if (node.op_type() != "ConvTranspose") continue;
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.name() == "kernel_shape") attr.mutable_ints()->Set(0, 3);
    }
  }
  auto result = rewrite::rewrite_model(model, {});
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().kind == core::ErrorKind::kInvalidModel);
  CHECK_THAT(result.error().message, Catch::Contains("kernel_shape [3,2] disagrees"));
}
