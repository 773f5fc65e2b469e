#include "rewrite/targets.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace dwdeconv::rewrite {
namespace {

// ExecuTorch through onnx2torch takes DepthToSpace in CRD only. Both CRD spellings convert and lower into the
// XNNPACK delegate; the batch one leaves nothing outside it and measured 1.06x-1.15x the Gather one for s = 3 but
// 0.81x for s = 2 at C = 64 (BENCHMARKS.md, "ExecuTorch: how the phases are joined"), and it needs batch 1.
PhaseLayout crd_layout(const DeconvMatch& m, int64_t) {
  return m.y.stride >= 3 && known_batch_of_one(m) ? PhaseLayout::kBatchCrd : PhaseLayout::kGatherCrd;
}

PhaseLayout dcr_layout(const DeconvMatch&, int64_t) { return PhaseLayout::kDcr; }

const std::set<Form> kNearestConv{Form::kNearestConv};
const std::set<Form> kZeroInsertionForms{Form::kNearestMask, Form::kZeroInsertion, Form::kReshapeZeroInsertion};
const std::set<KernelClass> kWide{KernelClass::k3x3, KernelClass::kOther};  // kernels the phases cut MACs for

const std::set<KernelClass> kOneByOne{KernelClass::k1x1};
const char* kConvFirst = "(BENCHMARKS.md, \"nearest + 1x1 Conv: the Conv before the Resize\")";

// What each rewriting rule's measurement covered. A rule rewrites inside its range only; the bounds are the rows of the
// BENCHMARKS.md tables each rule cites, quoted here.

// "nearest + 1x1 Conv: the Conv before the Resize": 32 cases, "s2 H32 16→16" ... "s3 H64 dw64": s 2 and 3, C_in 16,
// 32, 64 and 256 (C_out 1 to 256, depthwise 64), H 32 and 64, 2-D, a 1x1 Conv. The same rows for every runtime's
// column (ONNX Runtime 1.29x-7.1x, ExecuTorch, LiteRT 1.25x-8.8x, the executor).
MeasuredRange one_by_one_range() {
  return MeasuredRange{}.channels(16, 256).kernel(1, 1).stride(2, 3).rank({2}).from("the 32 cases: C_in 16-256, s 2 and 3");
}

// The default's nearest + 1x1 Conv: the 32 cases above (C_in 16-256, s 2 and 3) where they meet the networked
// nearest + 1x1 layers timed on OpenVINO and MNN (BENCHMARKS.md, "OpenVINO and MNN": C 3-512 at s 2).
MeasuredRange default_one_by_one_range() {
  return MeasuredRange{}.channels(16, 256).kernel(1, 1).stride(2, 2).rank({2}).from(
      "the 32 cases (C_in 16-256, s 2 and 3) and OpenVINO's and MNN's networked nearest + 1x1 layers (C 3-512, s 2)");
}

// BENCHMARKS.md, "OpenVINO and MNN": every layer there sits between two dense 1x1 Convs (bench_runtimes.py --suite
// networked), at C 3, 16, 64, 256 and 512, H 32 and 64, 2-D; the MI-GAN-like model's upsamplers are C 3-512, k4 s2.
MeasuredRange networked_range(int64_t k_lo, int64_t k_hi, int64_t s_hi, const std::string& layers) {
  return MeasuredRange{}
      .channels(3, 512)
      .kernel(k_lo, k_hi)
      .stride(2, s_hi)
      .rank({2})
      .from("BENCHMARKS.md, \"OpenVINO and MNN\": the networked " + layers + " at C 3-512, H 32 and 64");
}

// "nearest + 3x3 Conv on ONNX Runtime": "dense | 64 | 1.13x | 1.18x | 1.10x | 1.23x" and "dense | 256 | 1.86x | 1.86x",
// both at s 2 (a nearest x2); "Stable Diffusion's VAE decoder": its three dense nearest x2 + 3x3 upsamplers (512, 512
// and 256 channels) rewritten as --target xnnpack writes them (DCR, ort's join), the whole model on ONNX Runtime 1.32
// "8.18-8.76 s (median 8.45 s)" as written, "7.49-7.53 s" rewritten.
MeasuredRange ort_dense_nearest_range() {
  return MeasuredRange{}.channels(64, 512).kernel(3, 3).stride(2, 2).rank({2}).from(
      "C 64 and 256 at s 2; BENCHMARKS.md, \"Stable Diffusion's VAE decoder\": 256 and 512 channels at s 2");
}

// "Beyond clean xs: each geometry on each runtime": "s1d5 C16 H32 / H64 ... 2.16x / 2.66x", "s1d5 C64 ... 3.18x /
// 2.43x", "s1d1 C16 ... 2.05x / 2.47x", "s1d1 C64 ... 2.63x / 2.50x": k3, stride 1, C 16 and 64, 2-D.
MeasuredRange ort_stride_one_range() {
  return MeasuredRange{}.channels(16, 64).kernel(3, 3).stride(1, 1).rank({2}).from("s1d5 and s1d1: k3 at C 16 and 64");
}

// The same table: "diag_k4s2 C21 ... 1.06x / 1.22x", "diag_k4s2 C64 ... 1.97x / 2.37x", "diag_k16s8 C21 ... 1.69x /
// 1.78x": k 4 and 16, s 2 and 8, C 21 (FCN's classes) and 64, 2-D; and FCN-8s whole, "3 of 3", 1.12x.
MeasuredRange ort_diagonal_range() {
  return MeasuredRange{}.channels(21, 64).kernel(4, 16).stride(2, 8).rank({2}).from("diag_k4s2 at C 21 and 64, diag_k16s8 at C 21");
}

// "Zero insertion before a dense Conv (FastDepth's UpConv)": "layer C32 H32 ... 4.20x", "layer C64 H32 ... 2.31x",
// "layer C64 H64 ... 2.59x" (a 5x5 Conv after a k2 s2 Unpool: the dense ConvTranspose k5 s2 it computes), and whole
// models with every UpConv rewritten: "FastDepth /4 at 128 (5 of 5) ... 2.25x" (256, 128, 64, 32 and 16 input
// channels) and "FastDepth /32 at 64, the fixture ... 1.36x" (32, 16, 8, 4 and 2).
MeasuredRange ort_zero_insertion_range() {
  return MeasuredRange{}.channels(2, 256).kernel(5, 5).stride(2, 2).rank({2}).from(
      "BENCHMARKS.md, \"Zero insertion before a dense Conv (FastDepth's UpConv)\": a 5x5 Conv at s 2, layers at C 32 and "
      "64, FastDepth's decoders of 2-256 channels whole");
}

// A nearest + 1x1 Conv is rewritten as the Conv at the low resolution, then the Resize (the nearest layout): 1/s^2 of
// the Conv's MACs. On ExecuTorch the Resize is the portable upsample_nearest2d, which copies the Conv's output: where the
// Conv widens the channels, that costs more than the Conv saves.
KeepRule widening_one_by_one_on_executorch(const std::string& then) {
  return {kNearestConv,
          {},
          kOneByOne,
          0,
          0,
          true,
          false,
          "a nearest + 1x1 Conv that widens the channels measured 0.54x-0.86x on ExecuTorch with the Conv moved before the "
          "Resize, whose portable upsample_nearest2d then copies the wider output " +
              std::string(kConvFirst) + then,
          false};
}

KeepRule one_by_one_rewritten(const std::string& measured) {
  return {
      kNearestConv, {}, kOneByOne,         0, 0, std::nullopt, true, measured + " with the 1x1 Conv moved before the Resize " + kConvFirst,
      false,        {}, one_by_one_range()};
}

const char* kOrtWhere = "on ONNX Runtime's CPU provider (AMD EPYC without AVX-512, BENCHMARKS.md, \"ONNX Runtime (CPU provider)\")";

const char* kReach = "(BENCHMARKS.md, \"Beyond clean xs: each geometry on each runtime\")";
const char* kOrtReach =
    "on ONNX Runtime's CPU provider (AMD EPYC without AVX-512, BENCHMARKS.md, \"Beyond clean xs: each geometry on each runtime\")";
const std::set<Form> kConvTransposeForm{Form::kConvTranspose};
// Strides that differ per axis, and 1-D ones: both join by Unsqueeze, Concat and Reshape (the interleave).
const std::set<StrideClass> kAnisotropicStrides{StrideClass::kAnisotropic, StrideClass::kOneD};

// Strides that differ per axis join by Unsqueeze, Concat and Reshape (the interleave), which onnx2torch converts into
// modules torch.export refuses: where the original converts, the rewrite would not.
KeepRule interleave_on_executorch(const std::string& then) {
  return {{},
          {},
          {},
          0,
          0,
          std::nullopt,
          false,
          "strides that differ per axis are joined by Unsqueeze, Concat and Reshape, which do not pass torch.export through "
          "onnx2torch (GuardOnDataDependentSymNode; ExecuTorch, where the original converts) " +
              std::string(kReach) + then,
          false,
          kAnisotropicStrides};
}

// The executor runs the interleave's Unsqueeze, 5-D Concat and Reshape on its reference kernels: at 16 channels that cost
// what the phases save for a 2-tap kernel.
KeepRule interleave_below_64_on_the_executor(const std::string& then) {
  return {{},
          {},
          {},
          0,
          64,
          std::nullopt,
          false,
          "strides that differ per axis with %C input channels (< 64) measured 0.89x-1.34x on the executor, whose interleave join "
          "runs on its reference kernels (1.10x-1.47x from 64 channels) " +
              std::string(kReach) + then,
          false,
          kAnisotropicStrides};
}

// A depthwise nearest + Conv is one fast depthwise Conv after a Resize on LiteRT, and the rewrite adds PAD,
// CONCATENATION and DEPTH_TO_SPACE copies: 0.63x-0.97x at 3 of 4 sizes there.
KeepRule depthwise_nearest_conv_on_litert(const std::string& then) {
  return {kNearestConv,
          {Grouping::kDepthwise},
          kWide,
          0,
          0,
          std::nullopt,
          false,
          "a depthwise nearest + Conv measured 0.63x-0.97x on LiteRT after rewriting (BENCHMARKS.md, \"LiteRT: hand-written "
          "upsamplers\")" +
              then,
          false};
}

// BENCHMARKS.md, "Audio: 1-D upsamplers": BigVGAN v2's UpSample1d (edge Pad 5 + 5, depthwise ConvTranspose1d k 12 s 2, x2,
// crop 15 + 15) at the six stage shapes of its 24 kHz config, one second of audio each.
MeasuredRange upsample1d_range() {
  return MeasuredRange{}.channels(24, 768).kernel(12, 12).stride(2, 2).rank({1}).from(
      "UpSample1d at BigVGAN v2's six 24 kHz stages: C 24-768, L 375-24000");
}

// The same and Mimi's upsampler (kyutai-labs/moshi: a depthwise ConvTranspose1d k 4 s 2 and its causal crop of 2), where
// a runtime measured both faster.
MeasuredRange upsample1d_and_mimi_range() {
  return MeasuredRange{}.channels(24, 768).kernel(4, 12).stride(2, 2).rank({1}).from(
      "UpSample1d at BigVGAN v2's six 24 kHz stages, C 24-768, k 12, L 375-24000; Mimi's upsampler, C 128-512, k 4, T 125-1000");
}

// The rule each target has for the upsample1d form, first in its table: its own family, whatever the 2-D rules say.
// A rule that rewrites does so within `range`.
KeepRule upsample1d_rule(bool rewrite, const std::string& measured, const MeasuredRange& range = upsample1d_range()) {
  KeepRule rule;
  rule.forms = {Form::kUpsample1d};
  rule.rewrite = rewrite;
  rule.measured = measured;
  if (rewrite) rule.range = range;
  return rule;
}

// BENCHMARKS.md, "Audio: 1-D upsamplers": a depthwise ConvTranspose1d alone (no Pad, gain or crop to fold), joined by
// Unsqueeze, Concat and Reshape (ExecuTorch: Flatten): UpSample1d's (k 12 s 2) at the six stage shapes, Kokoro's pool
// (k 3 s 2 p 1 op 1) at C 64-1090, and k 2 s 2, k 6 s 3, k 8 s 4 at C 64 and 256; from kernel `min_kernel` on.
MeasuredRange conv_transpose1d_range(int64_t min_kernel = 2) {
  return MeasuredRange{}
      .channels(24, 1090)
      .kernel(min_kernel, 12)
      .stride(2, 4)
      .rank({1})
      .from(
          "the depthwise ConvTranspose1d alone: UpSample1d's k 12 s 2 at C 24-768, L 375-24000; Kokoro's pool, k 3 s 2 p 1 op 1, at "
          "C 64-1090; k 2 s 2, k 6 s 3 and k 8 s 4 at C 64 and 256");
}

// UpSample1d's alone only (k 12): where Kokoro's pool (k 3) measured slower.
MeasuredRange conv_transpose1d_k12_range() {
  return MeasuredRange{}.channels(24, 768).kernel(12, 12).stride(2, 2).rank({1}).from(
      "the depthwise ConvTranspose1d alone: UpSample1d's k 12 s 2 at C 24-768, L 375-24000");
}

// The rule each target has for a depthwise ConvTranspose1d that is no upsample1d, second in its table: 1-D is its own
// family, measured as such, not a case of strides that differ per axis. A rule that rewrites does so within `range`.
KeepRule conv_transpose1d_rule(bool rewrite, const std::string& measured, const MeasuredRange& range = conv_transpose1d_range()) {
  KeepRule rule;
  rule.forms = {Form::kConvTranspose};
  rule.groupings = {Grouping::kDepthwise};
  rule.strides = {StrideClass::kOneD};
  rule.rewrite = rewrite;
  rule.measured = measured;
  if (rewrite) rule.range = range;
  return rule;
}

std::vector<Target> make_targets() {
  const std::set<Form> all = all_forms();
  std::vector<Target> t;
  // The default must be slower on none of the six runtimes (the executor, ONNX Runtime, LiteRT, ExecuTorch, OpenVINO,
  // MNN) and convert on ncnn through pnnx. No join does both: a DCR DepthToSpace converts through neither onnx2torch
  // (ExecuTorch) nor pnnx; the Gather that made it CRD runs 4x-25x slower than the layer on MNN (GatherV2) and pnnx
  // reads it as a one-channel Crop (BENCHMARKS.md, "Targets: the default's join on each runtime"). So in 2-D the default
  // rewrites only what needs no join, where all six measured it faster: a nearest + 1x1 Conv, the Conv moved before the
  // Resize. In 1-D the phases join by Unsqueeze, Concat and Reshape, which converts through pnnx: BigVGAN's UpSample1d,
  // folded with an edge Pad, measured 0.96x or more on every runtime that converts it (its first rule).
  t.push_back(
      {kDefaultTarget,
       "any of the runtimes below",
       all,
       {widening_one_by_one_on_executorch("; the default is slower on no runtime (--target litert, ort or xnnpack rewrites it)"),
        {kNearestConv,
         {},
         kOneByOne,
         0,
         0,
         std::nullopt,
         true,
         "a nearest + 1x1 Conv measured 1.07x-15x on all six runtimes with the 1x1 Conv moved before the Resize " +
             std::string(kConvFirst) + " and BENCHMARKS.md, \"OpenVINO and MNN\"",
         false,
         {},
         default_one_by_one_range()},
        {{},
         {},
         {},
         0,
         0,
         std::nullopt,
         false,
         "every other family is joined with a DepthToSpace, and no join both converts and measured at least 0.95x on all "
         "six runtimes: DCR does not convert through onnx2torch (ExecuTorch) or pnnx (ncnn); the Gather + CRD join "
         "measured 0.22x-0.25x per k4 s2 p1 layer on MNN (GatherV2) and pnnx miscompiles it; a depthwise ConvTranspose rewritten measured "
         "0.12x-0.94x on ONNX Runtime (AMD EPYC) and 0.65x-1.28x on MNN even joined DCR (BENCHMARKS.md, \"Targets: the "
         "default's join on each runtime\"); --target names your runtime and rewrites what pays there",
         false}},
       // No rule above rewrites a 2-D family that joins phases (the last keeps them all): the layout is never reached
       // there; a 1-D node joins natively whatever the layout says.
       dcr_layout,
       "none in 2-D: it rewrites only what needs no join (the nearest layout); in 1-D (upsample1d) Unsqueeze, Concat and Reshape",
       "\"nearest + 1x1 Conv: the Conv before the Resize\", \"Targets: the default's join on each runtime\"",
       {},
       /*converts_added_resize=*/false});
  t.push_back({"xnnpack",
               "the XNNPACK operator API as a custom runtime uses it (this tool's executor)",
               all,
               {interleave_below_64_on_the_executor("")},
               dcr_layout,
               "`DepthToSpace` DCR",
               "\"Layer level\", \"Hand-written upsamplers\"",
               {}});
  t.push_back({"litert",
               "LiteRT (TFLite) with its XNNPACK delegate, converted by onnx2tf",
               all,
               {one_by_one_rewritten("1.25x-8.8x on LiteRT"), depthwise_nearest_conv_on_litert("")},
               dcr_layout,
               "`DepthToSpace` DCR (native)",
               "\"LiteRT with the XNNPACK delegate\", \"LiteRT: hand-written upsamplers\"",
               {}});
  // ONNX Runtime's CPU provider runs a depthwise ConvTranspose as a cheap per-channel GEMM + col2im and DepthToSpace as
  // a general 6-D transpose that alone costs about the original layer; a dense 3x3 Conv after a nearest Resize is a
  // GEMM whose MACs the rewrite cuts by 2.25x, which pays from 48-64 input channels. Nothing else measured faster.
  const std::string where = kOrtWhere;
  t.push_back(
      {"ort",
       "ONNX Runtime's CPU execution provider",
       all,
       {one_by_one_rewritten("1.29x-7.1x on ONNX Runtime's CPU provider (AMD EPYC)"),
        {kNearestConv,
         {Grouping::kDense},
         {KernelClass::k3x3},
         64,
         0,
         std::nullopt,
         true,
         "a dense nearest + 3x3 Conv from 64 input channels measured 1.10x-1.86x " + where,
         false,
         {},
         ort_dense_nearest_range()},
        {kNearestConv,
         {Grouping::kDense},
         {KernelClass::k3x3},
         0,
         64,
         std::nullopt,
         false,
         "a dense nearest + 3x3 Conv with %C input channels (< 64) measured 0.68x-0.94x " + where,
         false},
        {kNearestConv,
         {Grouping::kDepthwise},
         kWide,
         0,
         0,
         std::nullopt,
         false,
         "a depthwise nearest + Conv measured 0.27x-0.41x " + where,
         false},
        {kConvTransposeForm,
         {},
         {},
         0,
         0,
         std::nullopt,
         false,
         std::string("a depthwise ConvTranspose with strides that differ per axis measured 0.66x-1.01x ") + kOrtReach,
         false,
         kAnisotropicStrides},
        {kConvTransposeForm,
         {Grouping::kDepthwise},  // measured depthwise: a diagonal one is the diagonal rule's, which measured s 2-8
         {},
         0,
         0,
         std::nullopt,
         true,
         std::string("a stride-1 depthwise ConvTranspose (dilated or not) measured 2.05x-3.18x as one Conv ") + kOrtReach,
         false,
         {StrideClass::kOne},
         ort_stride_one_range()},
        {kConvTransposeForm,
         {Grouping::kDiagonal},
         {},
         0,
         0,
         std::nullopt,
         true,
         "a group-1 ConvTranspose zero off the channel diagonal measured 1.06x-2.37x (k4 s2) and 1.69x-1.78x (k16 s8) as "
         "the depthwise one it computes " +
             std::string(kOrtReach),
         false,
         {},
         ort_diagonal_range()},
        {kConvTransposeForm, {}, {}, 0, 0, std::nullopt, false, "every depthwise ConvTranspose layer measured 0.12x-0.94x " + where, true},
        {{Form::kZeroInsertion},
         {Grouping::kDense},
         {},
         0,
         0,
         std::nullopt,
         true,
         std::string("zero insertion before a dense Conv (FastDepth's UpConv: Unpool and a 5x5 Conv) measured 2.31x-4.20x per "
                     "layer, 1.36x-2.25x per model, "
                     "as dense phase Convs ") +
             kOrtReach,
         false,
         {},
         ort_zero_insertion_range()},
        {kZeroInsertionForms,
         {},
         {},
         0,
         0,
         std::nullopt,
         false,
         "the hand-written nearest x mask and zero-insertion forms measured 1.00x at model level (MI-GAN form b) " + where,
         false},
        {{},
         {},
         {},
         0,
         0,
         std::nullopt,
         false,
         "no other family measured faster " + where +
             " (a grouped nearest + 3x3 Conv, or a kernel other than 3x3, was "
             "not found to pay there); --tune times the node on --runtime ort and rewrites it where it measures faster",
         false}},
       dcr_layout,
       "`DepthToSpace` DCR",
       "\"ONNX Runtime (CPU provider)\"",
       {},
       /*converts_added_resize=*/true});
  t.push_back({"executorch",
               "ExecuTorch with the XNNPACK delegate, from ONNX through onnx2torch",
               all,
               {interleave_on_executorch(""), widening_one_by_one_on_executorch(""), one_by_one_rewritten("1.16x-15x on ExecuTorch")},
               crd_layout,
               "s = 2, or a batch not known to be 1: `Gather` + CRD; s >= 3 at batch 1: the phases stacked on the batch axis, "
               "`Transpose`, CRD `DepthToSpace`, `Transpose`",
               "\"ExecuTorch (XNNPACK backend)\", \"ExecuTorch: how the phases are joined\"",
               // The Gather of each s = 2 (or batch > 1) join; the batch join has none.
               {{"Gather", PhaseLayout::kGatherCrd, "executorch", "aten.index.Tensor", "portable kernels"}},
               /*converts_added_resize=*/false});
  // OpenVINO's CPU plugin reads the ONNX file. Inside a network its depthwise deconvolution is slower than the phases'
  // depthwise convolutions at f32 and far slower at its bf16 hint (the default on a CPU with AVX512_BF16 or AMX); alone,
  // the layer's DepthToSpace is the graph's output, reordered from NHWC to planar, and at 16-64 channels that costs more
  // than the phases save. A dense nearest + 3x3 Conv pays from 64 channels, a depthwise one and the nearest x mask form
  // do not. Every figure below holds at f32 and at bf16 (BENCHMARKS.md, "OpenVINO and MNN"), so no rule reads the CPU.
  const std::string ov = "on OpenVINO's CPU plugin at f32 and bf16 (BENCHMARKS.md, \"OpenVINO and MNN\")";
  // Alone it measured slower at 16 and 64 channels and faster at 3 and 256: kept from 4 up to 255, where it was slower
  // or not measured.
  KeepRule ov_output{kConvTransposeForm,
                     {Grouping::kDepthwise},
                     {},
                     4,
                     256,
                     std::nullopt,
                     false,
                     "a depthwise ConvTranspose whose output is the graph's, with %C channels, measured 0.68x-0.83x at 16-64 "
                     "channels " +
                         ov +
                         " (its DepthToSpace is then reordered from NHWC to planar; 1.10x-2.71x at 3 and 256, not measured "
                         "between 3 and 16 or between 64 and 256)"};
  ov_output.graph_output = true;
  t.push_back(
      {"openvino",
       "OpenVINO's CPU plugin, reading the ONNX file",
       all,
       {ov_output,
        {kNearestConv,
         {Grouping::kDepthwise},
         kWide,
         0,
         0,
         std::nullopt,
         false,
         "a depthwise nearest + Conv measured 0.58x-1.02x rewritten " + ov,
         false},
        {kZeroInsertionForms,
         {},
         {},
         0,
         0,
         std::nullopt,
         false,
         "the nearest x mask form measured 0.82x-1.23x inside a network and 0.36x-1.27x alone, rewritten " + ov,
         false},
        {kNearestConv,
         {},
         kOneByOne,
         0,
         0,
         false,
         true,
         "a nearest + 1x1 Conv measured 1.07x-2.67x with the Conv moved before the Resize " + ov,
         false,
         {},
         networked_range(1, 1, 2, "nearest + 1x1 Conv layers (C to C)")},
        {kNearestConv,
         {Grouping::kDense},
         {KernelClass::k3x3},
         0,
         64,
         std::nullopt,
         false,
         "a dense nearest + 3x3 Conv with %C input channels (< 64) measured 0.62x-1.20x rewritten " + ov,
         false},
        {kNearestConv,
         {Grouping::kDense},
         {KernelClass::k3x3},
         0,
         0,
         std::nullopt,
         true,
         "a dense nearest + 3x3 Conv measured 1.25x-1.99x rewritten from 64 channels " + ov,
         false,
         {},
         MeasuredRange{}.channels(64, 512).kernel(3, 3).stride(2, 2).rank({2}).from(
             "BENCHMARKS.md, \"OpenVINO and MNN\": the dense nearest + 3x3 Conv layers at C 64-512, networked and alone")},
        {kConvTransposeForm,
         {Grouping::kDepthwise},
         {},
         0,
         0,
         std::nullopt,
         true,
         "a depthwise ConvTranspose inside a network measured 1.27x-1.61x at f32 and 1.46x-4.90x at bf16 rewritten "
         "(BENCHMARKS.md, \"OpenVINO and MNN\")",
         false,
         {StrideClass::kSquare},
         networked_range(4, 6, 3, "k4s2p1 and k6s3p2op1 layers")},
        {{}, {}, {}, 0, 0, std::nullopt, false, "no other family was measured on OpenVINO (BENCHMARKS.md, \"OpenVINO and MNN\")", false}},
       dcr_layout,
       "`DepthToSpace` DCR",
       "\"OpenVINO and MNN\"",
       {},
       /*converts_added_resize=*/true});
  // MNN's CPU DeconvolutionDepthwise scatters each input row with no zero taps, the phases' arithmetic already: a
  // ConvTranspose rewrite only adds the join. A nearest + Conv computes the zeros and copies a rewrite saves. MNN runs
  // a Gather as GatherV2, far slower than the layer: this target never emits one.
  const std::string mnn = "on MNN (BENCHMARKS.md, \"OpenVINO and MNN\")";
  t.push_back({"mnn",
               "MNN's CPU backend, converted by MNN's converter",
               all,
               {{kConvTransposeForm,
                 {},
                 {},
                 0,
                 0,
                 std::nullopt,
                 false,
                 "a depthwise ConvTranspose measured 0.87x-1.19x (k4 s2 p1) and 0.65x-1.28x (k6 s3 p2 op1) rewritten " + mnn +
                     ": its depthwise deconvolution already "
                     "skips the zero taps",
                 false},
                {kNearestConv,
                 {},
                 kOneByOne,
                 0,
                 0,
                 false,
                 true,
                 "a nearest + 1x1 Conv measured 1.46x-3.05x with the Conv moved before the Resize " + mnn,
                 false,
                 {},
                 networked_range(1, 1, 2, "nearest + 1x1 Conv layers (C to C)")},
                {kNearestConv,
                 {Grouping::kDepthwise},
                 {KernelClass::k3x3},
                 0,
                 0,
                 std::nullopt,
                 true,
                 "a depthwise nearest + 3x3 Conv measured 1.23x-1.48x rewritten from 3 to 64 channels " + mnn +
                     " (0.74x-1.36x from 256, where the rule does not reach)",
                 false,
                 {},
                 MeasuredRange{}.channels(3, 64).kernel(3, 3).stride(2, 2).rank({2}).from(
                     "BENCHMARKS.md, \"OpenVINO and MNN\": the networked depthwise nearest + 3x3 Conv layers at C 3, 16 and 64")},
                // From 64 channels MNN's own 3x3 Conv (Winograd) differs from the phases' by 7e-4 to 3e-3 of the output's
                // magnitude, so bench_runtimes.py did not time those: the range stops at what it timed.
                {kNearestConv,
                 {Grouping::kDense},
                 {KernelClass::k3x3},
                 0,
                 0,
                 std::nullopt,
                 true,
                 "a dense nearest + 3x3 Conv measured 1.27x-1.43x rewritten at 3 and 16 channels " + mnn,
                 false,
                 {},
                 MeasuredRange{}.channels(3, 16).kernel(3, 3).stride(2, 2).rank({2}).from(
                     "BENCHMARKS.md, \"OpenVINO and MNN\": the networked dense nearest + 3x3 Conv layers at C 3 and 16")},
                {{Form::kNearestMask},
                 {Grouping::kDepthwise},
                 {},
                 0,
                 0,
                 std::nullopt,
                 true,
                 "the nearest x mask form measured 1.04x-2.07x rewritten " + mnn,
                 false,
                 {StrideClass::kSquare},
                 networked_range(4, 4, 2, "nearest x mask layers")},
                {{}, {}, {}, 0, 0, std::nullopt, false, "no other family was measured " + mnn, false}},
               dcr_layout,
               "`DepthToSpace` DCR",
               "\"OpenVINO and MNN\"",
               {}});
  // ncnn through pnnx, its maintained converter: pnnx has no layer for a DCR DepthToSpace and reads a constant-index
  // Gather as a one-index select (a one-channel Crop, which ncnn then refuses to run): no join of the phases converts.
  // Only what needs none is rewritten, where ncnn measured it faster: a nearest + 1x1 Conv, its Conv before the Resize.
  const std::string ncnn = "on ncnn (BENCHMARKS.md, \"ncnn through pnnx\")";
  t.push_back({"ncnn",
               "ncnn, converted by pnnx",
               all,
               {{kNearestConv,
                 {},
                 kOneByOne,
                 0,
                 0,
                 false,
                 true,
                 "a nearest + 1x1 Conv measured 1.10x-2.77x with the Conv moved before the Resize " + ncnn,
                 false,
                 {},
                 networked_range(1, 1, 2, "nearest + 1x1 Conv layers (C to C)")},
                {kNearestConv,
                 {},
                 kOneByOne,
                 0,
                 0,
                 true,
                 false,
                 "a nearest + 1x1 Conv that widens the channels was not measured " + ncnn + " (its layers kept C)",
                 false},
                {{},
                 {},
                 {},
                 0,
                 0,
                 std::nullopt,
                 false,
                 "every other family is joined with a DepthToSpace, and no join converts through pnnx: it has no layer for "
                 "a DCR DepthToSpace and reads the Gather of a CRD join as a one-channel Crop, which ncnn refuses to run "
                 "(BENCHMARKS.md, \"ncnn through pnnx\")",
                 false}},
               dcr_layout,
               "none: it rewrites only what needs no join (the nearest layout)",
               "\"ncnn through pnnx\"",
               {},
               /*converts_added_resize=*/true});
  // The --runtime each checks and times on (tests/cli/target_runtime_test.cpp: each is one --runtime knows).
  const std::map<std::string, std::string> runs_on = {
      {"xnnpack", "xnnpack"},   {"litert", "litert"}, {"ort", "ort"},  {"executorch", "executorch"},
      {"openvino", "openvino"}, {"mnn", "mnn"},       {"ncnn", "ncnn"}};
  // What each measured on its own runtime, as the README's target table says it (tests/cli/target_runtime_test.cpp
  // holds the two equal): a run that checks there with the default target says what this target measured.
  const std::map<std::string, std::string> headline = {
      {"xnnpack", "ConvTranspose layers 9x-28x; MI-GAN-like model 1.38x"},
      {"litert", "k4 s2 p1 layers (C >= 64) 11.2x-32.1x; MI-GAN-like model 1.78x"},
      {"ort", "depthwise ConvTranspose 0.12x-0.94x, so kept; dense nearest + 3x3 Conv (>= 64 ch) 1.10x-1.86x"},
      {"executorch", "k4 s2 p1 layers (C >= 64) 5.4x-6.5x; MI-GAN-like model 1.82x"},
      {"openvino",
       "depthwise ConvTranspose in a network 1.27x-1.61x f32, 1.46x-4.90x bf16; dense nearest + 3x3 (C >= 64) 1.25x-1.99x; MI-GAN-like "
       "model 1.94x bf16, 0.99x f32"},
      {"mnn",
       "depthwise ConvTranspose 0.65x-1.28x, so kept; nearest x mask 1.04x-2.07x; nearest + 1x1 Conv 1.46x-3.05x; MI-GAN-like model 1.09x "
       "(form b), 1.01x (form a, kept)"},
      {"ncnn",
       "nearest + 1x1 Conv 1.10x-2.77x; every other upsampler kept: no phase join converts through pnnx (DCR has no layer; the Gather "
       "becomes a Crop ncnn refuses)"}};
  // The other names users give a runtime (onnx2tf and TFLite users say tflite).
  const std::map<std::string, std::vector<std::string>> aliases = {{"litert", {"tflite"}}, {"ort", {"onnxruntime"}}, {"openvino", {"ov"}}};
  // Why each keeps a dense (group 1) ConvTranspose, in its own runtime's terms. The one measurement is the executor's
  // (BENCHMARKS.md, "Dense ConvTranspose: why the tool keeps it": 0.88x-1.08x); no other runtime timed a dense rewrite,
  // and each target says so rather than quote another runtime's figure as its own.
  const std::string executor_dense =
      "XNNPACK already runs a dense deconvolution as polyphase subconvolutions, and a polyphase rewrite measured "
      "0.88x-1.08x on the executor (BENCHMARKS.md, \"Dense ConvTranspose: why the tool keeps it\")";
  const std::map<std::string, std::string> dense = {
      {kDefaultTarget, executor_dense + "; not measured on LiteRT, ONNX Runtime, ExecuTorch, OpenVINO or MNN"},
      {"openvino", "a dense ConvTranspose rewrite was not measured on OpenVINO"},
      {"mnn", "a dense ConvTranspose rewrite was not measured on MNN"},
      {"ncnn", "a dense ConvTranspose rewrite was not measured on ncnn, and its join would not convert through pnnx"},
      {"xnnpack", executor_dense},
      {"litert",
       "a dense ConvTranspose rewrite was not measured on LiteRT (onnx2tf makes the original one TRANSPOSE_CONV, which the "
       "XNNPACK delegate runs as XNNPACK's deconvolution: on the executor, that deconvolution against the rewrite measured "
       "0.88x-1.08x, BENCHMARKS.md, \"Dense ConvTranspose: why the tool keeps it\")"},
      {"ort",
       "a dense ConvTranspose rewrite was not measured on ONNX Runtime's CPU provider, which runs the original with its own "
       "ConvTranspose kernel and the rewrite's DepthToSpace as a general transpose that alone cost about a depthwise layer "
       "(BENCHMARKS.md, \"ONNX Runtime (CPU provider)\")"},
      {"executorch",
       "a dense ConvTranspose rewrite was not measured on ExecuTorch (its XNNPACK partitioner runs the original's "
       "conv_transpose2d as XNNPACK's deconvolution: on the executor, that deconvolution against the rewrite measured "
       "0.88x-1.08x, BENCHMARKS.md, \"Dense ConvTranspose: why the tool keeps it\")"}};
  for (auto& target : t) {
    if (const auto it = runs_on.find(target.name); it != runs_on.end()) target.runs_on = it->second;
    if (const auto it = headline.find(target.name); it != headline.end()) target.headline = it->second;
    if (const auto it = aliases.find(target.name); it != aliases.end()) target.aliases = it->second;
    target.dense_conv_transpose = dense.at(target.name);
    // onnx2tf writes an edge Pad as one MIRROR_PAD per sample, run outside LiteRT's XNNPACK delegate, and the executor
    // runs an edge Pad on its reference kernels: 1.95x-2.03x against 2.28x-2.59x with the Concat (BENCHMARKS.md,
    // "Audio: 1-D upsamplers").
    target.edge_as_slices = target.name == "litert" || target.name == "xnnpack";
    // onnx2torch makes a Reshape a module reading its shape as a tensor, which torch.export refuses
    // (GuardOnDataDependentSymNode): ExecuTorch's 1-D join is Flatten and Unsqueeze, at batch 1.
    target.flatten_1d_join = target.name == "executorch";
  }
  // A 1-D upsampler with its pads and crops folded (BigVGAN's UpSample1d): where it was measured, and the others say so.
  const std::string audio = "(BENCHMARKS.md, \"Audio: 1-D upsamplers\")";
  const std::map<std::string, KeepRule> upsample1d = {
      {kDefaultTarget,
       upsample1d_rule(true,
                       "UpSample1d with an edge Pad measured 0.96x-1.01x on ncnn, 1.08x-1.27x on OpenVINO, 1.40x-1.52x on MNN and "
                       "1.92x-2.19x on the executor, ONNX Runtime and LiteRT; on ExecuTorch it converts neither before nor after "
                       "(onnx2torch's Pad and Slice); Mimi's upsampler (k 4) measured 0.57x-0.89x on OpenVINO " +
                           audio)},
      {"xnnpack", upsample1d_rule(true,
                                  "UpSample1d measured 2.28x-2.59x on the executor (Intel Xeon) with its edge samples as a "
                                  "Concat of slices, Mimi's upsampler 1.92x-2.12x " +
                                      audio,
                                  upsample1d_and_mimi_range())},
      {"litert",
       upsample1d_rule(true,
                       "UpSample1d measured 16.9x-19.6x on LiteRT (Intel Xeon) with its edge samples as a Concat of slices, Mimi's "
                       "upsampler 7.95x-18.9x " +
                           audio,
                       upsample1d_and_mimi_range())},
      {"ort",
       upsample1d_rule(
           true, "UpSample1d measured 2.04x-2.19x on ONNX Runtime 1.32's CPU provider (Intel Xeon), Mimi's upsampler 1.43x-1.64x " + audio,
           upsample1d_and_mimi_range())},
      // ExecuTorch through onnx2torch converts Mimi's upsampler only rewritten: as exported its crop is a Slice, which
      // onnx2torch makes a module reading its starts as a tensor; rewritten, the crop is in the phases' Conv pads and
      // the join is Flatten and Unsqueeze. UpSample1d's edge padding would be a Pad or Slices again: the emitter keeps it.
      {"executorch",
       upsample1d_rule(
           true,
           "Mimi's upsampler converts to ExecuTorch through onnx2torch only rewritten (as exported its crop's Slice "
           "does not pass torch.export), and runs there; UpSample1d converts neither way (its edge Pad) " +
               audio,
           MeasuredRange{}.channels(128, 512).kernel(4, 4).stride(2, 2).rank({1}).from("Mimi's upsampler, C 128-512, k 4, T 125-1000"))},
      {"openvino",
       upsample1d_rule(
           true,
           "UpSample1d measured 1.08x-1.27x on OpenVINO's CPU plugin (Intel Xeon, f32); Mimi's upsampler (k 4) 0.57x-0.89x " + audio)},
      {"mnn",
       upsample1d_rule(true, "UpSample1d measured 1.40x-1.52x on MNN (Intel Xeon, fp32); Mimi's upsampler (k 4) 0.92x-1.02x " + audio)},
      {"ncnn", upsample1d_rule(false, "UpSample1d measured 0.95x-1.01x on ncnn (pnnx, fp32): nothing to gain there " + audio)}};
  for (auto& target : t) target.rules.insert(target.rules.begin(), upsample1d.at(target.name));
  const std::map<std::string, KeepRule> conv_transpose1d = {
      {kDefaultTarget,
       conv_transpose1d_rule(false,
                             "a depthwise ConvTranspose1d rewritten measured 0.67x-0.72x on ncnn, and its join's Reshape does not "
                             "pass torch.export through onnx2torch (GuardOnDataDependentSymNode; ExecuTorch, where the original "
                             "converts) " +
                                 audio + "; --target xnnpack, litert, ort or openvino rewrites it")},
      {"xnnpack", conv_transpose1d_rule(true, "a depthwise ConvTranspose1d measured 1.21x-2.63x on the executor (Intel Xeon) " + audio)},
      {"litert", conv_transpose1d_rule(true, "a depthwise ConvTranspose1d measured 7.75x-16.4x on LiteRT (Intel Xeon) " + audio)},
      {"ort", conv_transpose1d_rule(true,
                                    "a depthwise ConvTranspose1d measured 1.14x-1.96x on ONNX Runtime 1.32's CPU provider (Intel "
                                    "Xeon), from kernel 3 (k 2 s 2: 0.89x-0.98x) " +
                                        audio,
                                    conv_transpose1d_range(3))},
      {"executorch", conv_transpose1d_rule(true,
                                           "a depthwise ConvTranspose1d measured 1.97x-3.24x on ExecuTorch (Intel Xeon) joined by "
                                           "Flatten and Unsqueeze, which pass torch.export through onnx2torch where a Reshape does "
                                           "not (batch 1 only) " +
                                               audio)},
      {"openvino", conv_transpose1d_rule(true,
                                         "a depthwise ConvTranspose1d measured 1.12x-1.27x on OpenVINO's CPU plugin (Intel Xeon, f32) "
                                         "at k 12 s 2, 0.41x-0.58x at k 2-3 and at s 3-4 " +
                                             audio,
                                         conv_transpose1d_k12_range())},
      {"mnn", conv_transpose1d_rule(false,
                                    "a depthwise ConvTranspose1d was not timed on MNN: MNN ran the original's output 4-D, [N, C, "
                                    "L, 1] for the graph's [N, C, L] " +
                                        audio)},
      {"ncnn", conv_transpose1d_rule(false, "a depthwise ConvTranspose1d rewritten measured 0.67x-0.72x on ncnn (pnnx, fp32) " + audio)}};
  for (auto& target : t) target.rules.insert(target.rules.begin() + 1, conv_transpose1d.at(target.name));
  // A nearest x2 then a 1x1 Conv1d (Kokoro's decoder), the Conv moved before the Resize: measured where these rules
  // rewrite it; elsewhere the 2-D rules' ranges (2-D) keep it, saying it was not measured in 1-D.
  const std::map<std::string, std::string> one_d_one_by_one = {
      {"litert", "a nearest x2 + 1x1 Conv1d measured 1.06x-4.49x on LiteRT with the Conv moved before the Resize " + audio},
      {"ort",
       "a nearest x2 + 1x1 Conv1d measured 1.41x-2.01x on ONNX Runtime 1.32's CPU provider (Intel Xeon) with the Conv moved "
       "before the Resize " +
           audio}};
  for (auto& target : t) {
    const auto it = one_d_one_by_one.find(target.name);
    if (it == one_d_one_by_one.end()) continue;
    KeepRule rule;
    rule.forms = kNearestConv;
    rule.kernels = kOneByOne;
    rule.strides = {StrideClass::kOneD};
    rule.rewrite = true;
    rule.measured = it->second;
    rule.range = MeasuredRange{}.channels(64, 1090).kernel(1, 1).stride(2, 2).rank({1}).from(
        "nearest x2 + 1x1 Conv1d, C_in 64-1090 (Kokoro's 1090 -> 512 among them), L 256-4096");
    target.rules.insert(target.rules.begin() + 1, std::move(rule));
  }
  return t;
}

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
  static const std::vector<Target> table = make_targets();
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
