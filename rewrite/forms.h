// The upsampler forms: one enum and one table (a row per form), read by the rewriter's dispatch, --forms, --help, the
// report and the targets. A new form is its recogniser, an enum value and a row here (forms.cpp declares the
// recognisers the rows point at). A plan row's form compared with a name (`summary.form == "nearest_conv"`) compares
// the form's name, as the report and --forms spell it.
#pragma once

#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace dwdeconv::onnx_io {
class ScopedTypes;
}

namespace dwdeconv::rewrite {

struct GraphScope;
class ConstEvaluator;
struct UpsamplerOutcome;

enum class Form {
  kConvTranspose,         // a ConvTranspose node
  kNearestMask,           // nearest Resize x mask, Pad, depthwise Conv (MI-GAN's form b)
  kZeroInsertion,         // one-tap ConvTranspose, Pad, depthwise Conv (MI-GAN's older code)
  kReshapeZeroInsertion,  // Reshape/Pad/Reshape, Pad, no-op Slices, depthwise Conv (StyleGAN2's upfirdn2d)
  kNearestConv,           // nearest Resize, optional Pad, Conv (U-Nets, VAE decoders, FPNs)
  kUpsample1d,            // [Pad], 1-D depthwise ConvTranspose, [gain], crop (BigVGAN's UpSample1d, Mimi's causal crop)
  kNearestResize,         // not a form: the plan row of a nearest Resize that starts none (kept, saying why)
};

// "conv_transpose", "nearest_mask", ...; "resize" for kNearestResize.
const char* form_name(Form form);

inline bool operator==(Form form, const std::string& name) { return name == form_name(form); }
inline bool operator==(const std::string& name, Form form) { return form == name; }
inline bool operator!=(Form form, const std::string& name) { return !(form == name); }
inline bool operator!=(const std::string& name, Form form) { return !(form == name); }
inline bool operator==(Form form, const char* name) { return form == std::string(name); }
inline bool operator!=(Form form, const char* name) { return !(form == std::string(name)); }
inline std::ostream& operator<<(std::ostream& out, Form form) { return out << form_name(form); }

// How a recogniser looks at a Conv: the form's outcome, or nothing when the Conv does not start it (recognisers.h).
using Recogniser = std::optional<UpsamplerOutcome> (*)(const onnx::NodeProto& conv, const GraphScope& scope, int64_t ir_version,
                                                       const onnx_io::ScopedTypes& types, ConstEvaluator& eval,
                                                       const std::map<std::string, int>& uses);

struct FormInfo {
  Form form;
  const char* name;       // what --forms takes and the report says
  const char* described;  // for --help
  // The recogniser that starts from a Conv; nullptr for conv_transpose (match_deconv reads the node itself).
  Recogniser recognise = nullptr;
  // It folds a ConvTranspose in (zero_insertion): matched before the ConvTranspose, which then has no row of its own.
  bool absorbs_conv_transpose = false;
  bool on_by_default = true;  // rewritten without --forms
  // It starts from a nearest Resize of its own: the nearest layout moves that Resize, adding none.
  bool has_resize = false;
  // Its written kernel is the equivalent ConvTranspose's k minus s - 1 per axis (a nearest + Conv's box of s taps).
  bool kernel_grows_by_stride = false;
};

// Every form, in the order --help and docs/forms.md list them (kNearestResize, not a form, is not listed).
const std::vector<FormInfo>& forms();

// The row of `form`.
const FormInfo& form_info(Form form);

// The form named `name`, or nullopt.
std::optional<Form> form_by_name(const std::string& name);

// The names of every form, or only of those on by default: "conv_transpose, nearest_mask, ...".
std::string form_names(bool defaults_only = false);

// Every form; the forms rewritten without --forms.
std::set<Form> all_forms();
std::set<Form> default_forms();

}  // namespace dwdeconv::rewrite
