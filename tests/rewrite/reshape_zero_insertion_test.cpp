// Form reshape_zero_insertion (StyleGAN2-ADA's reference upfirdn2d), written as PyTorch exports it: Reshape to
// [N,C,H,1,W,1], Pad zeros after the singletons, Reshape to [N,C,sH,sW], Pad, two no-op Slices whose ends are
// read from Shape, then a depthwise Conv whose weight is Tile(Expand(Unsqueeze(Unsqueeze(Slice(f, step -1))))).
// Structure, numbers through the naive executor, near-misses kept, idempotence and determinism.
#include <catch2/catch.hpp>

#include "upsampler_fixtures.h"

using namespace dwdeconv;
using namespace dwdeconv::test;

namespace {

// Y = Conv(Slice(Slice(Pad(Reshape(Pad(Reshape(X))))), Wt), the Conv named "up1".
struct UpfirdnSpec {
  int64_t s = 2;
  int64_t before = 0;                  // zeros inserted before each sample (j); s-1-before go after it
  int64_t k = 4;                       // the filter f is [k, k]
  int64_t pad_begin = 2, pad_end = 1;  // the second Pad's spatial pads (both axes)
  int64_t channels = 3, h = 5, w = 4;
  int64_t opset = 13;
  // 0: X's shape is known and the Reshape targets are constants. 1: H and W are symbolic and the targets read
  // from Shape(X). 2: the channel dim too, and the targets state it as a literal (a Python int in PyTorch).
  int symbolic = 0;
  bool unfolded = false;  // as exported without constant folding: f * gain in the weight, x.shape[i] - 0 in the ends
  // Near-miss switches.
  int64_t sx = 0;                // another factor on W (0: s)
  bool pad_h_axis = false;       // the zero-inserting Pad pads H itself too
  bool wrong_split = false;      // the first Reshape gives [N,C,1,H,W,1]
  bool guessed_split = false;    // symbolic: the first Reshape is [N,C,-1,1,w,1], W a literal and H left to -1
  bool bool_cast_split = false;  // symbolic: the first Reshape is [N,C,Cast(Cast(H, bool)),-1,W,1], so [N,C,1,H,W,1]
  std::string pad_mode = "constant";
  int64_t slice_start = 0;  // the first Slice's start
  int64_t slice_end = 0;    // the first Slice's end as a literal (0: read from Shape(p))
  int64_t conv_stride = 1;
  bool merge_extra_reader = false;  // the second Reshape's output is also a graph output
  // One Slice over all four axes instead of two, its ends Reshape(Concat(axis=ends_axis, Gather(Shape(p), [[0],[1]]),
  // Gather(Shape(p), [[2],[3]])), [-1]): axis 0 gives [N,C,Hp,Wp] (a no-op), axis 1 gives [N,Hp,C,Wp] (crops H to C).
  int ends_axis = -1;  // -1: the two Slices
};

// Unsqueeze(in) on axis 0, in the attribute form before opset 13 and the input form from 13 on.
std::string unsqueeze0(const std::string& out, const std::string& in, int64_t opset) {
  if (opset < 13) return "  " + out + " = Unsqueeze <axes = [0]> (" + in + ")\n";
  return "  " + out + " = Unsqueeze (" + in + ", axes0)\n";
}

onnx::ModelProto upfirdn_model(const UpfirdnSpec& m) {
  const int64_t sx = m.sx == 0 ? m.s : m.sx;
  const std::string c = std::to_string(m.channels), s = std::to_string(m.s);
  const std::string h = m.symbolic ? "H" : std::to_string(m.h), w = m.symbolic ? "W" : std::to_string(m.w);
  const std::string x_c = m.symbolic == 2 ? "C" : c;
  // `one` is the Slices' step and the singletons of the symbolic Reshape targets.
  std::string body = m.symbolic || m.ends_axis < 0 ? "  one = Constant <value = int64[1] {1}> ()\n" : "";
  if (m.opset >= 13) body += "  axes0 = Constant <value = int64[1] {0}> ()\n";
  // The Reshape targets: constants, or PyTorch's Concat of Unsqueeze(Gather(Shape(X), i)) (times s).
  if (m.symbolic) {
    body += "  xs = Shape (X)\n";
    for (int i = 0; i < 4; ++i) {
      if (i == 1 && m.symbolic == 2) continue;  // the channel count is a literal
      const std::string d = "xd" + std::to_string(i);
      body +=
          "  " + d + "_i = Constant <value = int64 {" + std::to_string(i) + "}> ()\n  " + d + " = Gather <axis = 0> (xs, " + d + "_i)\n";
      body += unsqueeze0(d + "_u", d, m.opset);
    }
    body += "  sf = Constant <value = int64 {" + s + "}> ()\n  sxf = Constant <value = int64 {" + std::to_string(sx) + "}> ()\n";
    body += "  xd2s = Mul (xd2, sf)\n  xd3s = Mul (xd3, sxf)\n";
    body += unsqueeze0("xd2s_u", "xd2s", m.opset) + unsqueeze0("xd3s_u", "xd3s", m.opset);
    const std::string ch = m.symbolic == 2 ? "lit_c" : "xd1_u";
    if (m.symbolic == 2) body += "  lit_c = Constant <value = int64[1] {" + c + "}> ()\n";
    if (m.bool_cast_split) {
      body += "  minus1 = Constant <value = int64[1] {-1}> ()\n  hb = Cast <to = 9> (xd2_u)\n  hi = Cast <to = 7> (hb)\n";
      body += "  split_shape = Concat <axis = 0> (xd0_u, " + ch + ", hi, minus1, xd3_u, one)\n";
    } else if (m.guessed_split) {
      body += "  minus1 = Constant <value = int64[1] {-1}> ()\n  lit_w = Constant <value = int64[1] {" + std::to_string(m.w) + "}> ()\n";
      body += "  split_shape = Concat <axis = 0> (xd0_u, " + ch + ", minus1, one, lit_w, one)\n";
    } else {
      body += m.wrong_split ? "  split_shape = Concat <axis = 0> (xd0_u, " + ch + ", one, xd2_u, xd3_u, one)\n"
                            : "  split_shape = Concat <axis = 0> (xd0_u, " + ch + ", xd2_u, one, xd3_u, one)\n";
    }
    body += "  merge_shape = Concat <axis = 0> (xd0_u, " + ch + ", xd2s_u, xd3s_u)\n";
  } else {
    body += m.wrong_split ? "  split_shape = Constant <value = int64[6] {1, " + c + ", 1, " + h + ", " + w + ", 1}> ()\n"
                          : "  split_shape = Constant <value = int64[6] {1, " + c + ", " + h + ", 1, " + w + ", 1}> ()\n";
    body += "  merge_shape = Constant <value = int64[4] {1, " + c + ", " + std::to_string(m.s * m.h) + ", " + std::to_string(sx * m.w) +
            "}> ()\n";
  }
  body += "  r = Reshape (X, split_shape)\n";
  // F.pad(r, [before_x, after_x, 0, 0, before_y, after_y]) pads axes 5, 4 and 3.
  body += pads_chain("ipads", "i_", {m.before, sx - 1 - m.before, m.pad_h_axis ? 1 : 0, 0, m.before, m.s - 1 - m.before}, 6);
  body += "  z = Pad <mode = \"constant\"> (r, ipads)\n";
  const std::string u = m.merge_extra_reader ? "U" : "u";
  body += "  " + u + " = Reshape (z, merge_shape)\n";
  body += pads_chain("pads", "p_", m.pad_begin, m.pad_end, m.pad_begin, m.pad_end);
  body += "  p = Pad <mode = \"" + m.pad_mode + "\"> (" + u + ", pads)\n";
  // x[:, :, start:x.shape[2], 0:x.shape[3]]: two Slices whose ends PyTorch reads from Shape(p).
  for (int axis = 2; axis < 4 && m.ends_axis < 0; ++axis) {
    const std::string a = std::to_string(axis);
    const bool literal = axis == 2 && m.slice_end != 0;  // then nothing reads Shape(p) on this axis, as PyTorch writes it
    if (!literal) {
      body += "  ps" + a + " = Shape (p)\n  pi" + a + " = Constant <value = int64 {" + a + "}> ()\n";
      body += "  pd" + a + " = Gather <axis = 0> (ps" + a + ", pi" + a + ")\n";
      if (m.unfolded) body += "  z" + a + " = Constant <value = int64 {0}> ()\n  pm" + a + " = Sub (pd" + a + ", z" + a + ")\n";
    }
    if (literal) {
      body += "  pe2 = Constant <value = int64[1] {" + std::to_string(m.slice_end) + "}> ()\n";
    } else {
      body += unsqueeze0("pe" + a, (m.unfolded ? "pm" : "pd") + a, m.opset);
    }
    body += "  st" + a + " = Constant <value = int64[1] {" + std::to_string(axis == 2 ? m.slice_start : 0) + "}> ()\n";
    body += "  ax" + a + " = Constant <value = int64[1] {" + a + "}> ()\n";
  }
  if (m.ends_axis < 0) {
    body += "  q2 = Slice (p, st2, pe2, ax2, one)\n  q3 = Slice (q2, st3, pe3, ax3, one)\n";
  } else {
    body += "  psa = Shape (p)\n  i01 = Constant <value = int64[2,1] {0, 1}> ()\n  i23 = Constant <value = int64[2,1] {2, 3}> ()\n";
    body += "  g01 = Gather <axis = 0> (psa, i01)\n  g23 = Gather <axis = 0> (psa, i23)\n";
    body += "  e2d = Concat <axis = " + std::to_string(m.ends_axis) + "> (g01, g23)\n";
    body += "  flat = Constant <value = int64[1] {-1}> ()\n  ends = Reshape (e2d, flat)\n";
    body += "  st4 = Constant <value = int64[4] {0, 0, 0, 0}> ()\n  ax4 = Constant <value = int64[4] {0, 1, 2, 3}> ()\n";
    body += "  q3 = Slice (p, st4, ends, ax4)\n";
  }
  // The weight: f flipped by Slice(step -1) on both axes, unsqueezed twice, expanded and tiled over channels.
  body += "  f_st = Constant <value = int64[2] {-1, -1}> ()\n";
  body += "  f_en = Constant <value = int64[2] {-9223372036854775807, -9223372036854775807}> ()\n";
  body += "  f_ax = Constant <value = int64[2] {0, 1}> ()\n  f_sp = Constant <value = int64[2] {-1, -1}> ()\n";
  if (m.unfolded) body += "  gain = Constant <value = float {4}> ()\n  Fg = Mul (F, gain)\n";
  body += "  fl = Slice (" + std::string(m.unfolded ? "Fg" : "F") + ", f_st, f_en, f_ax, f_sp)\n" + unsqueeze0("f1", "fl", m.opset) +
          unsqueeze0("f2", "f1", m.opset);
  body += "  e_len = Constant <value = int64[1] {4}> ()\n  e_shape = ConstantOfShape <value = int64[1] {1}> (e_len)\n";
  body += "  f3 = Expand (f2, e_shape)\n  reps = Constant <value = int64[4] {" + c + ", 1, 1, 1}> ()\n  Wt = Tile (f3, reps)\n";
  const std::string kk = std::to_string(m.k), cs = std::to_string(m.conv_stride);
  body += "  Y = Conv <group = " + c + ", kernel_shape = [" + kk + ", " + kk + "], strides = [" + cs + ", " + cs + "]> (q3, Wt)\n";
  std::string outputs = "float[1," + c + ",OH,OW] Y";
  if (m.merge_extra_reader) outputs += ", float[1," + c + ",UH,UW] U";
  onnx::ModelProto model = parse_model("<ir_version: 8, opset_import: [\"\" : " + std::to_string(m.opset) + "]>\ng (float[1," + x_c + "," +
                                       h + "," + w + "] X) => (" + outputs + ") {\n" + body + "}\n");
  set_random_initializer(*model.mutable_graph(), "F", onnx::TensorProto::FLOAT, {m.k, m.k}, 51);
  name_node(model, "Y", "up1");
  return model;
}

// Requires the upsampler rewritten with every hand-written node gone: the Reshapes, both Pads, the Slices and
// their Shape reads, the pads chains and the weight chain; of the graph only the polyphase form is left.
void require_rewritten(const onnx::ModelProto& original, const UpfirdnSpec& spec, std::array<int64_t, 4> pads) {
  ExpectedUpsampler e;
  e.form = "reshape_zero_insertion";
  e.s = spec.s;
  e.channels = spec.channels;
  e.opset = spec.opset;
  e.h = spec.h;
  e.w = spec.w;
  e.kernel = {spec.k, spec.k};
  e.pads = pads;
  e.gone_ops = {"Reshape", "Pad", "Slice", "Shape",    "Gather",          "Unsqueeze", "Expand",
                "Tile",    "Mul", "Sub",   "Constant", "ConstantOfShape", "Transpose", "Cast"};
  e.gone_initializers = {"F"};
  const auto out = require_upsampler_rewritten(original, e, 61);
  CHECK(op_types(out.model.graph()).size() == static_cast<size_t>(spec.s * spec.s + 2));  // phase Convs, Concat, DepthToSpace
}

void require_kept(const onnx::ModelProto& original, const std::string& reason) {
  require_upsampler_kept(original, "reshape_zero_insertion", reason);
}

}  // namespace

TEST_CASE("upfirdn2d zero insertion x2 by Reshape/Pad/Reshape becomes ConvTranspose k4 s2 pads 1 in polyphase form",
          "[rewrite][recogniser][reshape_zero_insertion]") {
  UpfirdnSpec spec;
  spec.opset = GENERATE(11, 13, 17);
  spec.symbolic = GENERATE(0, 1, 2);
  CAPTURE(spec.opset, spec.symbolic);
  const auto original = upfirdn_model(spec);
  REQUIRE(checker_error(original).empty());
  require_rewritten(original, spec, {1, 1, 1, 1});
}

TEST_CASE("upfirdn2d exported without constant folding: the gain multiplied in, the crop's 0 subtracted",
          "[rewrite][recogniser][reshape_zero_insertion]") {
  UpfirdnSpec spec;
  spec.unfolded = true;
  spec.opset = GENERATE(11, 17);
  spec.symbolic = GENERATE(0, 1);
  CAPTURE(spec.opset, spec.symbolic);
  require_rewritten(upfirdn_model(spec), spec, {1, 1, 1, 1});
}

TEST_CASE("upfirdn2d zero insertion x3, and zeros inserted before the sample", "[rewrite][recogniser][reshape_zero_insertion]") {
  UpfirdnSpec spec;
  spec.s = GENERATE(2, 3);
  spec.before = GENERATE(0, 1);
  spec.k = spec.s == 2 ? 4 : 5;
  // P + E == K - 1 for a clean xs; Pb = K-1-j-P and Pe = K+j-s-E must not be negative.
  spec.pad_begin = spec.before == 0 ? spec.k - 2 : spec.k - 3;
  spec.pad_end = spec.k - 1 - spec.pad_begin;
  spec.opset = GENERATE(11, 17);
  spec.symbolic = GENERATE(0, 1);
  CAPTURE(spec.s, spec.before, spec.opset, spec.symbolic);
  const int64_t pb = spec.k - 1 - spec.before - spec.pad_begin, pe = spec.k + spec.before - spec.s - spec.pad_end;
  require_rewritten(upfirdn_model(spec), spec, {pb, pb, pe, pe});
}

TEST_CASE("upfirdn2d whose one Slice reads all four ends through Concat(axis=0) of 2-D index reads is a no-op and rewritten",
          "[rewrite][recogniser][reshape_zero_insertion]") {
  // Concat(axis=0) of [2,1] and [2,1] is [[N], [C], [Hp], [Wp]]: flattened, the Slice's ends are exactly p's dims.
  UpfirdnSpec spec;
  spec.symbolic = GENERATE(0, 1, 2);
  spec.ends_axis = 0;
  spec.opset = GENERATE(11, 13);
  CAPTURE(spec.symbolic, spec.opset);
  require_rewritten(upfirdn_model(spec), spec, {1, 1, 1, 1});
}

TEST_CASE("near-miss upfirdn2d upsamplers are kept with a reason", "[rewrite][recogniser][reshape_zero_insertion][refusal]") {
  SECTION("factors differ per axis") {
    UpfirdnSpec spec;
    spec.sx = 3;
    require_kept(upfirdn_model(spec), "zero insertion factors differ per axis (2 vs 3)");
  }
  SECTION("the zero-inserting Pad pads H itself") {
    UpfirdnSpec spec;
    spec.pad_h_axis = true;
    require_kept(upfirdn_model(spec), "pad an axis other than the singletons");
  }
  SECTION("the first Reshape puts the singleton before H") {
    UpfirdnSpec spec;
    spec.wrong_split = true;
    spec.symbolic = GENERATE(0, 1, 2);
    require_kept(upfirdn_model(spec), "first Reshape does not give [N,C,H,1,W,1]");
  }
  SECTION("the first Reshape guesses W as a literal and leaves H to -1, when neither is known") {
    UpfirdnSpec spec;
    spec.symbolic = 1;
    spec.guessed_split = true;  // an X of [1,C,2,8] would reshape to [1,C,4,1,4,1]: rows cut in two, not interleaved
    require_kept(upfirdn_model(spec), "first Reshape does not give [N,C,H,1,W,1]");
  }
  SECTION("the first Reshape reads H through a Cast to bool, which makes it 1") {
    UpfirdnSpec spec;
    spec.symbolic = 1;
    spec.bool_cast_split = true;
    require_kept(upfirdn_model(spec), "Reshape shape not constant");
  }
  SECTION("Pad mode reflect") {
    UpfirdnSpec spec;
    spec.pad_mode = "reflect";
    require_kept(upfirdn_model(spec), "Pad mode reflect");
  }
  SECTION("a Slice that crops") {
    UpfirdnSpec spec;
    spec.slice_start = 1;
    require_kept(upfirdn_model(spec), "Slice on axis 2 is not a no-op (start 1, step 1)");
  }
  SECTION("a Slice with a literal end says whether it crops, and of what") {
    // libonnx cannot read PyTorch's pads chain, so Pad's output dims were unknown even for a static X; the tool now
    // folds the chain itself (rewrite/shape_propagation.h): a static X's Pad output is 13 high, and an end of 12 crops.
    UpfirdnSpec spec;
    spec.slice_end = 12;
    require_kept(upfirdn_model(spec), "Slice on axis 2 crops (it ends at 12 of 13)");
    spec.symbolic = 1;
    spec.slice_end = 500;
    require_kept(upfirdn_model(spec), "Slice on axis 2 may crop (it ends at 500, and the dim is not known)");
  }
  SECTION("a Slice whose ends Concat joins on axis 1 crops H to the channel count") {
    // Concat(axis=1) of two [2,1] index reads is [[N, Hp], [C, Wp]], which the Reshape flattens to [N, Hp, C, Wp]:
    // axis 2 ends at C. The reader used to join Concat inputs as one flat list ([N, C, Hp, Wp]), called the Slice a
    // no-op and rewrote (ONNX Runtime: 1x3x... cropped original, full-height rewrite).
    UpfirdnSpec spec;
    spec.symbolic = GENERATE(1, 2);
    spec.ends_axis = 1;
    // Axis 1 ends at Hp, which the reader cannot prove is the channel count or more, and axis 2 at C: kept.
    require_kept(upfirdn_model(spec), "Slice on axis 1 may crop (it ends at dim 2 of 'p', not at its own dim)");
  }
  SECTION("Conv stride 2") {
    UpfirdnSpec spec;
    spec.conv_stride = 2;
    require_kept(upfirdn_model(spec), "Conv stride 2");
  }
  SECTION("the upsampled tensor has another reader") {
    UpfirdnSpec spec;
    spec.merge_extra_reader = true;
    require_kept(upfirdn_model(spec), "second Reshape output has another reader");
  }
}

TEST_CASE("a value_info the file declares does not make a Slice with a literal end a no-op",
          "[rewrite][recogniser][reshape_zero_insertion][value_info]") {
  // The first Slice ends at a literal. With X [1,3,H,W], a value_info declaring Pad's output 13 high (true for H = 5
  // only) made the crop a no-op for every input size: ONNX Runtime gave 10x12 for the original at 6x6 and 12x12 for
  // the rewrite. With a static X the same lie works at the one size, since shape inference cannot
  // read PyTorch's pads chain: Pad's output is 13 high, the file says 12, and a crop to 12 was called a no-op. Shapes
  // now come from inference of the graph inputs; the declaration stays in the model.
  UpfirdnSpec spec;
  spec.symbolic = GENERATE(0, 1);
  spec.slice_end = spec.symbolic ? 13 : 12;
  CAPTURE(spec.symbolic);
  auto original = upfirdn_model(spec);
  auto* declared = original.mutable_graph()->add_value_info();
  declared->set_name("p");
  auto* type = declared->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {int64_t{1}, spec.channels, spec.slice_end, int64_t{11}}) type->mutable_shape()->add_dim()->set_dim_value(d);
  const std::string reason =
      spec.symbolic ? "Slice on axis 2 may crop (it ends at 13, and the dim is not known)" : "Slice on axis 2 crops (it ends at 12 of 13)";
  require_kept(original, reason);
  // The declaration disagrees with what the graph inputs give: said, and not used.
  const auto out = rewrite_copy(original, {});
  if (!spec.symbolic) {
    REQUIRE(out.result.warnings.size() == 1);
    CHECK(out.result.warnings[0] ==
          "'p' is declared FLOAT[1,3,12,11] but computes as FLOAT[1,3,13,11] from the graph inputs: the "
          "declared shape is not used");
  }
}

TEST_CASE("a Slice whose literal end is the dim the graph inputs give is a no-op: upfirdn2d as PyTorch writes it, rewritten",
          "[rewrite][recogniser][reshape_zero_insertion][propagation]") {
  // A static X and crop ends written as ints (PyTorch knows the dims, libonnx does not: it cannot read the pads chain).
  // Kept before the tool computed shapes itself ("may crop ... the dim is not known").
  UpfirdnSpec spec;
  spec.slice_end = 13;
  require_rewritten(upfirdn_model(spec), spec, {1, 1, 1, 1});
}
