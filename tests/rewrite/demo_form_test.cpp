// A form is one file and one row: this file defines a form the tool does not have, `negated_conv_transpose`, as a
// recogniser and one FormRow, registers it here only (register_form), and shows the normal pass selecting, deciding
// and rewriting it (the plan row, the emitted phases, the record of its region) and per-node verification accepting
// its region because its row lists its ops. Nothing else in the tool is told about it.
#include <string>

#include <catch2/catch.hpp>

#include "onnx_io/attributes.h"
#include "onnx_io/tensor.h"
#include "rewrite/forms.h"
#include "rewrite/rewriter.h"
#include "runtime_check/verify.h"
#include "tests/rewrite/rewrite_fixtures.h"

using namespace dwdeconv;

namespace {

// ---- The demo form: everything a new form is, in one place. ----

// Form `negated_conv_transpose`:
//   Before:  u = ConvTranspose(x, w)   as the matcher takes it, without a bias
//            y = Neg(u)
//   After:   y = ConvTranspose(x, -w)  in phases, as any other form.
std::optional<rewrite::FormSelection> select_negated(const rewrite::MatchContext& context, const onnx::NodeProto& neg,
                                                     const rewrite::GraphScope& scope) {
  const onnx::NodeProto* ct = nullptr;
  for (const auto& node : scope.graph->node()) {
    if (node.op_type() == "ConvTranspose" && node.output_size() == 1 && node.output(0) == neg.input(0)) ct = &node;
  }
  if (ct == nullptr) return std::nullopt;
  auto deconv = rewrite::match_deconv(*ct, scope, context.ir_version, context.types, false, &context.eval);
  if (!deconv.match) return std::nullopt;  // the ConvTranspose's own row says why
  rewrite::FormSelection out;
  out.summary = deconv.summary;
  out.summary.name = neg.name().empty() ? neg.output(0) : neg.name();
  const auto uses = context.uses.find(ct->output(0));
  if (uses == context.uses.end() || uses->second != 1) return out.fail(core::declined("ConvTranspose output has another reader"));
  rewrite::DeconvMatch d = std::move(*deconv.match);
  if (!d.bias.empty()) return out.fail(core::declined("a bias would be negated too"));
  auto values = onnx_io::to_doubles(*d.weight.tensor);
  if (!values) return out.fail(values.error());
  for (double& v : *values) v = -v;
  auto negated = std::make_shared<onnx::TensorProto>(
      onnx_io::make_tensor(d.weight.name, d.weight.tensor->data_type(), onnx_io::dims_of(*d.weight.tensor), *values, true));
  d.weight.tensor = negated.get();
  d.derived_weight = std::move(negated);
  d.node = &neg;
  d.name = neg.name();
  d.output = neg.output(0);
  rewrite::UpsamplerMatch m;
  m.deconv = std::move(d);
  m.replaced = {{&scope, ct->output(0)}, {&scope, ct->input(1)}};
  m.absorbs = ct;
  out.match = std::move(m);
  return out;
}

rewrite::FormRow negated_row() {
  rewrite::FormRow row;
  row.name = "negated_conv_transpose";
  row.described = "a depthwise ConvTranspose, then Neg";
  row.root_op = "Neg";
  row.root_min_inputs = 1;
  row.ops = {"ConvTranspose", "Neg"};
  row.recognise = select_negated;
  row.absorbs_conv_transpose = true;
  return row;
}

// ---- The test around it. ----

// The demo form registered for one scope: the table is the tool's own, and other tests must not see the form.
struct Registered {
  explicit Registered(rewrite::FormRow row) : form(rewrite::register_form(std::move(row))) {}
  ~Registered() { rewrite::unregister_form(form); }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;
  const rewrite::Form form;
};

// X [1,3,5,4] -> ConvTranspose 'up1' (depthwise, k 4, s 2, pads 1) -> U -> Neg 'neg' -> Y.
onnx::ModelProto negated_model() {
  auto model = test::parse_model(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,5,4] X) => (float[1,3,10,8] Y) {
  U = ConvTranspose <group=3, strides=[2,2], pads=[1,1,1,1]> (X, W)
  Y = Neg (U)
}
)");
  test::set_random_initializer(*model.mutable_graph(), "W", onnx::TensorProto::FLOAT, {3, 1, 4, 4}, 7, true);
  test::name_node(model, "U", "up1");
  test::name_node(model, "Y", "neg");
  return model;
}

// `model` with a Hardmax reading Y as a second graph output: the executor has no Hardmax, so verification checks each
// rewritten region on its own (per-node mode), which is where the forms' ops are read.
onnx::ModelProto with_hardmax(onnx::ModelProto model) {
  auto* node = model.mutable_graph()->add_node();
  node->set_op_type("Hardmax");
  node->set_name("hardmax");
  node->add_input("Y");
  node->add_output("hard");
  *node->add_attribute() = onnx_io::make_int_attribute("axis", 1);
  model.mutable_graph()->add_output()->set_name("hard");
  return model;
}

int count_ops(const onnx::ModelProto& model, const std::string& op) {
  int n = 0;
  for (const auto& node : model.graph().node()) n += node.op_type() == op ? 1 : 0;
  return n;
}

// The options that rewrite every form on a copy of the xnnpack target that also rewrites `form`.
struct DemoOptions {
  explicit DemoOptions(rewrite::Form form) : target(*rewrite::find_target("xnnpack")) {
    target.forms.insert(form);
    options.target = &target;
    options.forms = rewrite::all_forms();
  }
  rewrite::Target target;
  rewrite::RewriteOptions options;
};

}  // namespace

TEST_CASE("A form registered from one file and one row is selected, rewritten and verified", "[rewrite][forms][demo_form]") {
  const onnx::ModelProto original = negated_model();
  REQUIRE_FALSE(rewrite::form_by_name("negated_conv_transpose").has_value());

  SECTION("without the form, the ConvTranspose is rewritten alone and the Neg stays") {
    const auto out = test::rewrite_copy(original);
    REQUIRE(out.result.nodes.size() == 1);
    CHECK(out.result.nodes[0].summary.form == "conv_transpose");
    CHECK(out.result.nodes[0].summary.name == "up1");
    CHECK(count_ops(out.model, "Neg") == 1);
  }

  SECTION("registered, it is a form like the built-in ones") {
    const Registered demo(negated_row());
    CHECK(rewrite::form_by_name("negated_conv_transpose") == demo.form);
    CHECK(rewrite::form_name(demo.form) == std::string("negated_conv_transpose"));
    CHECK(rewrite::all_forms().count(demo.form) == 1);
    CHECK(rewrite::form_names().find("negated_conv_transpose") != std::string::npos);
    CHECK(rewrite::form_ops().count("Neg") == 1);
    CHECK(rewrite::form_root_ops().count("Neg") == 1);
    CHECK_THROWS_AS(rewrite::register_form(negated_row()), std::logic_error);  // one row per name
  }

  SECTION("registered, the pass folds the Neg into the phases: one plan row, the ConvTranspose absorbed") {
    const Registered demo(negated_row());
    const DemoOptions demo_options(demo.form);
    const auto out = test::rewrite_copy(original, demo_options.options);
    REQUIRE(out.result.nodes.size() == 1);
    const auto& row = out.result.nodes[0];
    CHECK(row.summary.form == demo.form);
    CHECK(row.summary.name == "neg");
    CHECK(row.rewritten);
    CHECK(out.result.rewritten == 1);
    CHECK(count_ops(out.model, "ConvTranspose") == 0);
    CHECK(count_ops(out.model, "Neg") == 0);
    test::require_polyphase(out.model.graph(), "Y", 2, 3, 13, "neg");
    // The record of what it replaced, in the original's names: x, y and the tensors only it read.
    CHECK(row.region.input == "X");
    CHECK(row.region.output == "Y");
    CHECK(row.region.nodes == std::vector<std::string>{"Y", "U"});

    // Per-node verification finds the region (its row's root op), accepts its ops (its row's ops) and checks its
    // numbers against the original region run on the reference kernels.
    auto verified = runtime_check::verify_models(with_hardmax(original), with_hardmax(out.model), {});
    INFO((verified.ok() ? verified->summary() : verified.error().message));
    REQUIRE(verified.ok());
    CHECK(verified->mode == runtime_check::VerifyMode::kPerNode);
    CHECK(verified->passed);
    REQUIRE(verified->nodes.size() == 1);
    CHECK(verified->nodes[0].passed);
  }

  SECTION("the verifier reads the row: a row that does not list Neg has its region refused") {
    rewrite::FormRow unlisted = negated_row();
    unlisted.ops = {"ConvTranspose"};
    const Registered demo(unlisted);
    const DemoOptions demo_options(demo.form);
    const auto out = test::rewrite_copy(original, demo_options.options);
    REQUIRE(out.result.rewritten == 1);
    auto verified = runtime_check::verify_models(with_hardmax(original), with_hardmax(out.model), {});
    INFO((verified.ok() ? verified->summary() : verified.error().message));
    REQUIRE(verified.ok());
    CHECK_FALSE(verified->passed);
    CHECK_THAT(verified->summary() + verified->difference,
               Catch::Contains("Neg 'neg'") && Catch::Contains("not an op of the upsampler forms"));
  }

  SECTION("a target that does not name the form keeps it, saying so, and the ConvTranspose is rewritten alone") {
    const Registered demo(negated_row());
    rewrite::RewriteOptions options;
    options.forms = rewrite::all_forms();
    const auto out = test::rewrite_copy(original, options);
    REQUIRE(out.result.nodes.size() == 2);
    CHECK(out.result.nodes[0].summary.name == "up1");
    CHECK(out.result.nodes[0].rewritten);
    CHECK(out.result.nodes[1].summary.form == demo.form);
    CHECK(out.result.nodes[1].reason == "form negated_conv_transpose is not rewritten for --target xnnpack");
    CHECK(count_ops(out.model, "Neg") == 1);
  }
  CHECK_FALSE(rewrite::form_by_name("negated_conv_transpose").has_value());
}
