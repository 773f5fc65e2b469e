#include "rewrite/targets.h"

#include <algorithm>

#include "rewrite/recognisers.h"

namespace dwdeconv::rewrite {
namespace {

bool depthwise(const DeconvMatch& m) { return m.groups() == m.channels && m.outputs() == m.channels; }

// ExecuTorch through onnx2torch takes DepthToSpace in CRD only. Both CRD spellings convert and lower into the
// XNNPACK delegate; the batch one leaves nothing outside it and measured 1.06x-1.15x the Gather one for s = 3 but
// 0.81x for s = 2 at C = 64 (BENCHMARKS.md, "ExecuTorch: how the phases are joined"), and it needs batch 1.
PhaseLayout crd_layout(const DeconvMatch& m) {
  return m.y.stride >= 3 && known_batch_of_one(m) ? PhaseLayout::kBatchCrd : PhaseLayout::kGatherCrd;
}

PhaseLayout dcr_layout(const DeconvMatch&) { return PhaseLayout::kDcr; }

// The default's join: Gather + CRD for every s and batch size. It converts through onnx2torch, LiteRT takes it,
// and the executor runs the pair as two channel copies (the batch form's Transposes and axis-0 Concat run on its
// reference kernels): BENCHMARKS.md, "Targets: the default's join on each runtime".
PhaseLayout gather_layout(const DeconvMatch&) { return PhaseLayout::kGatherCrd; }

std::string rewrite_all(const NodeSummary&, const DeconvMatch&, const CpuFeatures&) { return ""; }

// A depthwise nearest + Conv is one fast depthwise Conv after a Resize on LiteRT, and the rewrite adds PAD,
// CONCATENATION and DEPTH_TO_SPACE copies: 0.63x-0.97x at 3 of 4 sizes there.
const char* kDepthwiseNearestConvOnLiteRT =
    "a depthwise nearest + Conv measured 0.63x-0.97x on LiteRT after rewriting (BENCHMARKS.md, \"LiteRT: hand-written "
    "upsamplers\")";

std::string keep_for_litert(const NodeSummary& s, const DeconvMatch& m, const CpuFeatures&) {
  if (s.form == "nearest_conv" && depthwise(m)) return std::string(kDepthwiseNearestConvOnLiteRT) + "; kept for --target litert";
  return "";
}

// Why a dense or grouped nearest + Conv with fewer than `min_channels` input channels is kept, or "" when it is
// not one: the rewrite cuts a dense Conv's MACs by 2.25x, which pays on a runtime only from some width on.
std::string narrow_nearest_conv(const NodeSummary& s, const DeconvMatch& m, int64_t min_channels, const std::string& measured) {
  if (s.form != "nearest_conv" || depthwise(m) || m.channels >= min_channels) return "";
  return "a dense or grouped nearest + Conv with " + std::to_string(m.channels) + " input channels (< " +
         std::to_string(min_channels) + ") measured " + measured;
}

// The default must be slower on none of the runtimes measured (the executor, LiteRT, ExecuTorch): both rules are
// LiteRT's. Its Gather runs outside LiteRT's delegate (TFLite's GATHER), so a dense nearest + 3x3 Conv, which gains
// only ~2x, measured 0.53x-0.73x there at 16 channels and 1.07x-1.78x from 64 (BENCHMARKS.md, "Targets: the
// default's join on each runtime").
std::string keep_for_default(const NodeSummary& s, const DeconvMatch& m, const CpuFeatures&) {
  if (s.form == "nearest_conv" && depthwise(m)) {
    return std::string(kDepthwiseNearestConvOnLiteRT) + "; kept by default, which is slower on no runtime "
           "(--target xnnpack rewrites it: 1.9x-4.1x on the executor)";
  }
  if (auto why = narrow_nearest_conv(s, m, 64, "0.53x-0.73x on LiteRT with the default's Gather + CRD join (BENCHMARKS.md, "
                                               "\"Targets: the default's join on each runtime\")");
      !why.empty()) {
    return why + "; kept by default (--target litert or xnnpack rewrites it)";
  }
  return "";
}

// ONNX Runtime's CPU provider runs a depthwise ConvTranspose as a cheap per-channel GEMM + col2im and
// DepthToSpace as a general 6-D transpose that alone costs about the original layer; a dense 3x3 Conv after a
// nearest Resize is a GEMM whose MACs the rewrite cuts by 2.25x, which pays from 48-64 input channels.
std::string keep_for_ort(const NodeSummary& s, const DeconvMatch& m, const CpuFeatures& cpu) {
  const std::string where = "on ONNX Runtime's CPU provider (AMD EPYC without AVX-512, BENCHMARKS.md, \"ONNX Runtime (CPU provider)\")";
  if (s.form == "nearest_conv" && !depthwise(m)) {
    const auto why = narrow_nearest_conv(s, m, 64, "0.68x-0.94x " + where);
    return why.empty() ? "" : why + "; kept for --target ort";
  }
  std::string measured;
  if (s.form == "nearest_conv") measured = "a depthwise nearest + Conv measured 0.27x-0.41x " + where;
  else if (s.form == "conv_transpose") measured = "every depthwise ConvTranspose layer measured 0.12x-0.94x " + where;
  else measured = "the hand-written nearest x mask and zero-insertion forms measured 1.00x at model level (MI-GAN form b) " + where;
  if (!cpu.avx512f || s.form != "conv_transpose") return measured + "; kept for --target ort (" + cpu.describe() + ")";
  return measured + "; on this CPU (" + cpu.describe() + ") the answer can differ (a Xeon with AVX-512 was reported at "
                    "1.17x-1.29x for two layers) and is not measured here, so it is kept: time the node on ONNX Runtime "
                    "with --target xnnpack --runtime ort --tune, which rewrites it only if it measures faster";
}

std::vector<Target> make_targets() {
  const std::set<std::string> all(known_forms().begin(), known_forms().end());
  std::vector<Target> t;
  t.push_back({kDefaultTarget, "any of the runtimes below",
               "slower on none of the measured runtimes (executor, LiteRT, ExecuTorch) and converts on each: every form "
               "but a depthwise nearest + Conv and a dense one under 64 input channels, joined for onnx2torch (Gather + "
               "CRD DepthToSpace)",
               all, keep_for_default, gather_layout,
               "\"LiteRT: hand-written upsamplers\", \"Targets: the default's join on each runtime\"",
               "the Gather of each join: on ExecuTorch aten.index.Tensor on the portable kernels, on LiteRT GATHER on "
               "TFLite's own kernel"});
  t.push_back({"xnnpack", "the XNNPACK operator API as a custom runtime uses it (this tool's executor)",
               "every form, DCR DepthToSpace: 9x-28x per ConvTranspose layer, 1.9x-4.1x per nearest + 3x3 Conv",
               all, rewrite_all, dcr_layout, "\"Layer level\", \"Hand-written upsamplers\"", ""});
  t.push_back({"litert", "LiteRT (TFLite) with its XNNPACK delegate, converted by onnx2tf",
               "every form but a depthwise nearest + Conv (slower there), DCR DepthToSpace (native)", all, keep_for_litert,
               dcr_layout, "\"LiteRT with the XNNPACK delegate\", \"LiteRT: hand-written upsamplers\"", ""});
  t.push_back({"ort", "ONNX Runtime's CPU execution provider",
               "only a dense nearest + 3x3 Conv with >= 64 input channels (1.1x-1.9x there); every other form measured slower "
               "or no faster",
               all, keep_for_ort, dcr_layout, "\"ONNX Runtime (CPU provider)\"", ""});
  t.push_back({"executorch", "ExecuTorch with the XNNPACK delegate, from ONNX through onnx2torch",
               "every form, joined so that onnx2torch converts it (Gather or batch + CRD DepthToSpace)", all, rewrite_all,
               crd_layout, "\"ExecuTorch (XNNPACK backend)\", \"ExecuTorch: how the phases are joined\"",
               "the Gather of each s = 2 (or batch > 1) join, aten.index.Tensor, on ExecuTorch's portable kernels; the "
               "batch join has none"});
  return t;
}

}  // namespace

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

std::string target_names() {
  std::string names;
  for (const auto& t : targets()) names += (names.empty() ? "" : ", ") + t.name;
  return names;
}

}  // namespace dwdeconv::rewrite
