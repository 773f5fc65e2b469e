#include "rewrite/forms.h"

#include <algorithm>
#include <stdexcept>

#include "rewrite/recognisers.h"

namespace dwdeconv::rewrite {

const std::vector<FormInfo>& forms() {
  static const std::vector<FormInfo> table = {
      {Form::kConvTranspose, "conv_transpose", "a depthwise ConvTranspose", nullptr, false, true, false, false},
      {Form::kNearestMask, "nearest_mask", "nearest Resize times a mask, Pad, depthwise Conv (MI-GAN's form b)", match_nearest_mask, false,
       true, true, false},
      {Form::kZeroInsertion, "zero_insertion",
       "a one-tap ConvTranspose, optional Pad, Conv of any group (MI-GAN's older code, FastDepth's UpConv)", match_zero_insertion, true,
       true, false, false},
      {Form::kReshapeZeroInsertion, "reshape_zero_insertion", "Reshape/Pad/Reshape zero insertion, Pad, Conv of any group (upfirdn2d)",
       match_reshape_zero_insertion, false, true, false, false},
      {Form::kNearestConv, "nearest_conv", "nearest Resize, then a Conv of any group (U-Nets, VAE decoders, FPNs)", match_nearest_conv,
       false, true, true, true},
      {Form::kUpsample1d, "upsample1d",
       "an edge or zero Pad, a 1-D depthwise ConvTranspose, a gain and a crop, folded into phases that compute only the samples "
       "kept (BigVGAN's UpSample1d, Mimi's causal crop)",
       match_upsample1d, true, true, false, false},
  };
  return table;
}

const char* form_name(Form form) { return form == Form::kNearestResize ? "resize" : form_info(form).name; }

const FormInfo& form_info(Form form) {
  const auto& t = forms();
  const auto it = std::find_if(t.begin(), t.end(), [form](const FormInfo& f) { return f.form == form; });
  if (it == t.end()) throw std::logic_error(std::string("no row for form ") + form_name(form));
  return *it;
}

std::optional<Form> form_by_name(const std::string& name) {
  for (const auto& f : forms()) {
    if (name == f.name) return f.form;
  }
  return std::nullopt;
}

std::string form_names(bool defaults_only) {
  std::string names;
  for (const auto& f : forms()) {
    if (!defaults_only || f.on_by_default) names += (names.empty() ? "" : ", ") + std::string(f.name);
  }
  return names;
}

std::set<Form> all_forms() {
  std::set<Form> out;
  for (const auto& f : forms()) out.insert(f.form);
  return out;
}

std::set<Form> default_forms() {
  std::set<Form> out;
  for (const auto& f : forms()) {
    if (f.on_by_default) out.insert(f.form);
  }
  return out;
}

}  // namespace dwdeconv::rewrite
