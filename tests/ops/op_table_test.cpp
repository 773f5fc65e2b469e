// The op table against libonnx's schemas (opsets 1 to 17, all that ONNX 1.12 knows): every version of every op is
// listed, and every attribute of every implemented version is either implemented or refused by name, with the
// schema's default among the implemented values. tests/ops/check_op_table.py does the same for every opset through
// kKnownThroughOpset with a current onnx, where one is installed.
#include <algorithm>
#include <set>
#include <string>

#include <onnx/defs/parser.h>
#include <onnx/defs/schema.h>
#include <catch2/catch.hpp>

#include "ops/ops.h"

using namespace dwdeconv;

namespace {

int library_max_opset() { return onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second; }

onnx::ModelProto parse(const std::string& node_text, int opset) {
  onnx::ModelProto model;
  const std::string text =
      "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + "]> g (float[1,1,2,2] x) => (float y) {\n  " + node_text + "\n}";
  const auto status = onnx::OnnxParser::Parse(model, text.c_str());
  INFO(status.ErrorMessage());
  REQUIRE(status.IsOK());
  return model;
}

bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

const ops::AttributeSpec* implemented(const ops::OpSpec& spec, const std::string& name) {
  for (const auto& a : spec.attributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("The op table lists every version libonnx knows of each op, and no other", "[ops][table]") {
  const int max_opset = library_max_opset();
  REQUIRE(max_opset >= 17);
  REQUIRE(ops::kKnownThroughOpset >= max_opset);
  for (const auto& spec : ops::op_table()) {
    CAPTURE(spec.op_type);
    std::set<int64_t> schema_versions;
    for (int opset = 1; opset <= max_opset; ++opset) {
      const auto* schema = onnx::OpSchemaRegistry::Schema(spec.op_type, opset, onnx::ONNX_DOMAIN);
      if (schema != nullptr) schema_versions.insert(schema->since_version());
    }
    REQUIRE_FALSE(schema_versions.empty());
    std::set<int64_t> listed;
    for (int64_t v : spec.versions) {
      if (v <= max_opset) listed.insert(v);
    }
    CHECK(listed == schema_versions);
    CHECK(std::is_sorted(spec.versions.begin(), spec.versions.end()));
    CHECK(std::adjacent_find(spec.versions.begin(), spec.versions.end()) == spec.versions.end());
    CHECK(std::find(spec.versions.begin(), spec.versions.end(), spec.first_implemented) != spec.versions.end());
    if (spec.last_implemented != 0) {
      CHECK(spec.last_implemented >= spec.first_implemented);
      CHECK(std::find(spec.versions.begin(), spec.versions.end(), spec.last_implemented) != spec.versions.end());
    }
    CHECK(spec.kernel != nullptr);
  }
}

TEST_CASE("Every attribute of an implemented op version is implemented or refused, with its default implemented", "[ops][table]") {
  const int max_opset = library_max_opset();
  for (const auto& spec : ops::op_table()) {
    std::set<std::string> seen;  // attribute names of the implemented versions libonnx knows
    for (int64_t version : spec.versions) {
      if (version < spec.first_implemented || version > max_opset) continue;
      if (spec.last_implemented != 0 && version > spec.last_implemented) continue;
      const auto* schema = onnx::OpSchemaRegistry::Schema(spec.op_type, static_cast<int>(version), onnx::ONNX_DOMAIN);
      REQUIRE(schema != nullptr);
      for (const auto& [name, attr] : schema->attributes()) {
        CAPTURE(spec.op_type, version, name);
        seen.insert(name);
        const auto* a = implemented(spec, name);
        // A decision for every attribute: the kernel reads it, or a node setting it is refused by name.
        CHECK((a != nullptr) != contains(spec.refused, name));
        if (a == nullptr || !attr.default_value.has_type()) continue;
        // An absent attribute takes its default, which the kernel must then implement.
        const auto& d = attr.default_value;
        if (!a->strings.empty() && d.type() == onnx::AttributeProto::STRING) CHECK(contains(a->strings, d.s()));
        if (!a->ints.empty() && d.type() == onnx::AttributeProto::INT) {
          CHECK(std::find(a->ints.begin(), a->ints.end(), d.i()) != a->ints.end());
        }
      }
    }
    // No implemented or refused name is a typo: it is an attribute of an implemented version, or of a version
    // newer than libonnx knows (checked by check_op_table.py).
    const bool has_newer = spec.versions.back() > max_opset;
    for (const auto& a : spec.attributes) {
      CAPTURE(spec.op_type, a.name);
      CHECK((seen.count(a.name) == 1 || has_newer));
    }
    for (const auto& name : spec.refused) {
      CAPTURE(spec.op_type, name);
      CHECK((seen.count(name) == 1 || has_newer));
    }
  }
}

TEST_CASE("A node outside its kernel's spec is refused with the reason, whatever reads it", "[ops][table]") {
  using Case = std::tuple<std::string, int, std::string>;  // node text, opset, expected reason
  const auto [text, opset, reason] = GENERATE(
      Case{"y = Resize <mode = \"linear\", antialias = 1> (x, r, s)", 18, "attribute antialias = 1 is not implemented (only 0)"},
      Case{"y = Resize <coordinate_transformation_mode = \"half_pixel_symmetri\"> (x, r, s)", 19,
           "attribute coordinate_transformation_mode = 'half_pixel_symmetri' is not implemented"},
      Case{"y = Resize <axes = [2, 3]> (x, r, s)", 18, "attribute axes is not implemented"},
      Case{"y = Resize <keep_aspect_ratio_policy = \"not_larger\"> (x, r, s)", 18, "'not_larger' is not implemented (only 'stretch')"},
      Case{"y = DepthToSpace <blocksize = 2, mode = \"dcr\"> (x)", 13, "mode = 'dcr' is not implemented (only 'DCR', 'CRD')"},
      Case{"y = Pad <mode = \"wrap\"> (x, p)", 19, "mode = 'wrap' is not implemented"},
      Case{"y = Add <broadcast = 1> (x, z)", 6, "Add-6 (opset 6) is not implemented (versions from 7 on are)"},
      Case{"y = Relu <alpha = 1.0> (x)", 13, "attribute alpha is not implemented"},
      Case{"y = Relu (x)", 29, "newer than the executor's op table"}, Case{"y = Erf (x)", 8, "Erf does not exist at opset 8"},
      Case{"y = Unique (x)", 13, "op Unique is not supported by the executor"}, Case{"y = Where (c, x)", 13, "has 2 inputs, needs 3"},
      Case{"y = RandomNormalLike (x)", 13, "op RandomNormalLike draws random values, so no run of the model can be compared"},
      Case{"y = Pad (x, p, v, a, e)", 18, "input 4 ('e') is not implemented"},
      Case{"y, i = MaxPool <kernel_shape = [2, 2]> (x)", 13, "output 1 ('i') is not implemented"},
      Case{"y = BatchNormalization <training_mode = 1> (x, s, b, m, v)", 15, "attribute training_mode = 1 is not implemented"},
      Case{"y = Upsample (x, s)", 10, "Upsample-10 (opset 10) is not implemented (versions 7 to 9 are)"},
      Case{"y = Upsample <height_scale = 2.0, width_scale = 2.0> (x)", 6, "Upsample-1 (opset 6) is not implemented"},
      Case{"y = Upsample <mode = \"cubic\"> (x, s)", 9, "mode = 'cubic' is not implemented (only 'nearest', 'linear')"},
      Case{"y = HardSigmoid <consumed_inputs = [0]> (x)", 5, "HardSigmoid-1 (opset 5) is not implemented"},
      Case{"y = PRelu (x, s)", 6, "PRelu-6 (opset 6) is not implemented (versions from 7 on are)"},
      Case{"y = ArgMax <keepdims = 2> (x)", 13, "attribute keepdims = 2 is not implemented (only 0, 1)"});
  CAPTURE(text, opset);
  const auto model = parse(text, opset);
  const auto& node = model.graph().node(0);
  CHECK_THAT(ops::unsupported_reason(node, opset), Catch::Contains(reason));
  // The kernel is never reached: the dispatch refuses first, naming the node.
  ops::Tensor x;
  x.reshape(onnx::TensorProto::FLOAT, {1, 1, 2, 2});
  ops::Tensor y;
  const auto ran = ops::run_reference_node(node, ops::OpContext{opset}, {&x, &x, &x, &x, &x}, {&y});
  REQUIRE_FALSE(ran.ok());
  CHECK_THAT(ran.error().message, Catch::Contains(reason));
}

TEST_CASE("A node inside its kernel's spec is run, defaults included", "[ops][table]") {
  // Each node runs on x = [1, 1, 2, 2] {-1, 2, -3, 4} with scales s = {1, 1, 2, 2} and slope p = {0.5}; the expected
  // outputs are ONNX Runtime 1.x's for the same node (Relu-28, beyond ORT's opsets, is Relu's definition).
  const std::vector<float> replicated = {-1, -1, 2, 2, -1, -1, 2, 2, -3, -3, 4, 4, -3, -3, 4, 4};
  struct Case {
    std::string text;
    int opset;
    std::vector<int64_t> dims;
    std::vector<double> values;
  };
  const auto c = GENERATE_COPY(
      Case{"y = Resize <mode = \"nearest\", antialias = 0> (x, r, s)", 18, {1, 1, 4, 4}, {replicated.begin(), replicated.end()}},
      Case{"y = Resize <coordinate_transformation_mode = \"half_pixel_symmetric\"> (x, r, s)",
           19,
           {1, 1, 4, 4},
           {replicated.begin(), replicated.end()}},
      Case{"y = DepthToSpace <blocksize = 1, mode = \"CRD\"> (x)", 13, {1, 1, 2, 2}, {-1, 2, -3, 4}},
      Case{"y = Relu (x)", 28, {1, 1, 2, 2}, {0, 2, 0, 4}}, Case{"y = Relu (x)", 6, {1, 1, 2, 2}, {0, 2, 0, 4}},
      Case{"y = Upsample <mode = \"linear\", scales = [1.0, 1.0, 2.0, 2.0]> (x)",
           7,
           {1, 1, 4, 4},
           {-1, 0.5, 2, 2, -2, 0.5, 3, 3, -3, 0.5, 4, 4, -3, 0.5, 4, 4}},
      Case{"y = Upsample (x, s)", 9, {1, 1, 4, 4}, {replicated.begin(), replicated.end()}},
      Case{"y = LogSoftmax <axis = 1> (x)", 11, {1, 1, 2, 2}, {-5.13364315, -2.13364339, -7.13364315, -0.13364336}},
      Case{"y = ArgMax <axis = -1, keepdims = 0, select_last_index = 1> (x)", 13, {1, 1, 2}, {1, 1}},
      Case{"y = HardSigmoid <alpha = 0.1, beta = 0.6> (x)", 22, {1, 1, 2, 2}, {0.5, 0.8, 0.3, 1.0}},
      Case{"y = HardSwish (x)", 14, {1, 1, 2, 2}, {-0.33333331, 1.66666675, 0, 4}},
      // alpha * (e^x - 1) below 0: e^-1 - 1 = -0.6321206, 0.5 * (e^-3 - 1) = -0.4751065.
      Case{"y = Elu (x)", 6, {1, 1, 2, 2}, {-0.63212056, 2, -0.95021293, 4}},
      Case{"y = Elu <alpha = 0.5> (x)", 22, {1, 1, 2, 2}, {-0.31606028, 2, -0.47510647, 4}},
      Case{"y = PRelu (x, p)", 16, {1, 1, 2, 2}, {-0.5, 2, -1.5, 4}});
  CAPTURE(c.text, c.opset);
  const auto model = parse(c.text, c.opset);
  const auto& node = model.graph().node(0);
  CHECK(ops::unsupported_reason(node, c.opset).empty());
  ops::Tensor x, s, p, y;
  x.reshape(onnx::TensorProto::FLOAT, {1, 1, 2, 2});
  x.f = std::vector<float>{-1, 2, -3, 4};
  s.reshape(onnx::TensorProto::FLOAT, {4});
  s.f = std::vector<float>{1, 1, 2, 2};
  p.reshape(onnx::TensorProto::FLOAT, {1});
  p.f = std::vector<float>{0.5f};
  ops::Inputs inputs;
  for (const auto& name : node.input()) inputs.push_back(name == "x" ? &x : name == "s" ? &s : name == "p" ? &p : nullptr);
  const auto ran = ops::run_reference_node(node, ops::OpContext{c.opset}, inputs, {&y});
  INFO((ran.ok() ? std::string() : ran.error().message));
  REQUIRE(ran.ok());
  CHECK(y.dims == c.dims);
  REQUIRE(y.numel() == static_cast<int64_t>(c.values.size()));
  for (size_t k = 0; k < c.values.size(); ++k) {
    CAPTURE(k);
    CHECK(y.get(static_cast<int64_t>(k)) == Approx(c.values[k]).margin(1e-6));
  }
}
