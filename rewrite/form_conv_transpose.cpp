// Form `conv_transpose`: a depthwise ConvTranspose node, as it stands. The matcher (rewrite/matcher.h) reads it; this
// file is its row.
#include "rewrite/forms.h"

namespace dwdeconv::rewrite {
namespace {

// Every ConvTranspose of the default domain starts this form: the matcher's answer is its selection, so a node that
// breaks the spec rejects the model (kInvalidModel) and any other gets a plan row saying why it is kept.
std::optional<FormSelection> select_conv_transpose(const MatchContext& context, const onnx::NodeProto& node, const GraphScope& scope) {
  MatchOutcome outcome = match_deconv(node, scope, context.ir_version, context.types, context.dense_conv_transpose, &context.eval);
  FormSelection out;
  out.summary = std::move(outcome.summary);
  if (!outcome.match) return out.fail(outcome.match.error());
  out.match = UpsamplerMatch{std::move(*outcome.match), {}, nullptr, std::nullopt};
  return out;
}

}  // namespace

//   Before:  y = ConvTranspose(x, w[, B])   depthwise (group C, [C, 1, k, k]), or dense with a weight zero off the diagonal
//   After:   s*s stride-1 phase Convs of x and the target's join (rewrite/emitter.h)
const FormRow& conv_transpose_form() {
  static const FormRow row = [] {
    FormRow row;
    row.form = Form::kConvTranspose;
    row.name = "conv_transpose";
    row.described = "a depthwise ConvTranspose";
    row.root_op = "ConvTranspose";
    row.root_any_arity = true;  // the matcher refuses a ConvTranspose of another arity as an invalid model
    // Its ops: the node, and the Identity chain or Constant its weight may come through.
    row.ops = {"ConvTranspose", "Identity", "Constant"};
    row.recognise = select_conv_transpose;
    return row;
  }();
  return row;
}

}  // namespace dwdeconv::rewrite
