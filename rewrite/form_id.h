// The identity of an upsampler form: the `Form` value a plan row, a target and --forms name it by. Its name and
// everything else about it are the form's row (rewrite/forms.h); this header is small so that the matcher's
// NodeSummary can hold a Form without the rows.
#pragma once

#include <ostream>
#include <string>

namespace dwdeconv::rewrite {

// The forms that code names by value (targets, the report). A row that sets no Form, and a form registered at run time
// (register_form, used by tests), gets a value from kFirstRegisteredForm on; anything else about a form is its row's.
enum class Form : int {
  kConvTranspose,         // a ConvTranspose node
  kNearestMask,           // nearest Resize x mask, Pad, depthwise Conv (MI-GAN's form b)
  kZeroInsertion,         // one-tap ConvTranspose, Pad, depthwise Conv (MI-GAN's older code)
  kReshapeZeroInsertion,  // Reshape/Pad/Reshape, Pad, no-op Slices, depthwise Conv (StyleGAN2's upfirdn2d)
  kNearestConv,           // nearest Resize, optional Pad, Conv (U-Nets, VAE decoders, FPNs)
  kUpsample1d,            // [Pad], 1-D depthwise ConvTranspose, [gain], crop (BigVGAN's UpSample1d, Mimi's causal crop)
  kNearestResize,         // not a form: the plan row of a nearest Resize that starts none (kept, saying why)
};

// The first value register_form hands out: far from the built-in ones, so a registered form never aliases one.
inline constexpr int kFirstRegisteredForm = 1000;

// "conv_transpose", "nearest_mask", ... (the row's name); "resize" for kNearestResize.
const char* form_name(Form form);

// A plan row's form compared with a name (`summary.form == "nearest_conv"`) compares the form's name, as the report
// and --forms spell it.
inline bool operator==(Form form, const std::string& name) { return name == form_name(form); }
inline bool operator==(const std::string& name, Form form) { return form == name; }
inline bool operator!=(Form form, const std::string& name) { return !(form == name); }
inline bool operator!=(const std::string& name, Form form) { return !(form == name); }
inline bool operator==(Form form, const char* name) { return form == std::string(name); }
inline bool operator!=(Form form, const char* name) { return !(form == std::string(name)); }
inline std::ostream& operator<<(std::ostream& out, Form form) { return out << form_name(form); }

}  // namespace dwdeconv::rewrite
