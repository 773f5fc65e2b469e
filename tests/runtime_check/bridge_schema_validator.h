// A validator of the JSON Schema keywords python/dwdeconv_rewrite/runtimes/bridge.schema.json uses (type, const,
// enum, properties, required, additionalProperties: false, items, minItems, minimum, exclusiveMinimum, oneOf and a
// local $ref), for the tests of the protocol. A keyword it does not know fails the validation, so the schema cannot
// grow one this check would silently skip; tests/python/bridge_test.py holds the same rules in Python.
#pragma once

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dwdeconv::test {

// Validates instances against the definitions of a schema (bridge.schema.json's $defs).
class BridgeSchemaValidator {
 public:
  // `schema` is the whole schema file: its $defs are what problems() checks against and $ref resolves in.
  explicit BridgeSchemaValidator(nlohmann::json schema) : root_(std::move(schema)) {}

  // The problems of `instance` against the definition $defs/`definition`, each with its JSON path; empty when valid.
  std::vector<std::string> problems(const nlohmann::json& instance, const std::string& definition) const {
    std::vector<std::string> out;
    check(instance, root_.at("$defs").at(definition), "$", out);
    return out;
  }

 private:
  static bool is_type(const nlohmann::json& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "number") return v.is_number();
    if (type == "integer")
      return v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(v.get<long long>()));
    if (type == "boolean") return v.is_boolean();
    return type == "null" && v.is_null();
  }

  const nlohmann::json& resolve(const nlohmann::json& schema) const {
    const std::string ref = schema.at("$ref").get<std::string>();
    const std::string prefix = "#/$defs/";
    if (ref.rfind(prefix, 0) != 0) throw std::runtime_error("unsupported $ref " + ref);
    return root_.at("$defs").at(ref.substr(prefix.size()));
  }

  void check(const nlohmann::json& v, const nlohmann::json& schema, const std::string& at, std::vector<std::string>& out) const {
    static const std::set<std::string> kKnown = {
        "type",        "const",    "enum",    "properties",       "required", "additionalProperties",
        "items",       "minItems", "minimum", "exclusiveMinimum", "oneOf",    "$ref",
        "description", "title"};
    for (const auto& [key, _] : schema.items()) {
      if (kKnown.count(key) == 0) out.push_back(at + ": the schema uses '" + key + "', which this validator does not check");
    }
    if (schema.contains("$ref")) return check(v, resolve(schema), at, out);
    if (schema.contains("type") && !is_type(v, schema.at("type").get<std::string>())) {
      out.push_back(at + ": not of type " + schema.at("type").get<std::string>());
      return;
    }
    if (schema.contains("const") && v != schema.at("const")) out.push_back(at + ": not " + schema.at("const").dump());
    if (schema.contains("enum")) {
      bool found = false;
      for (const auto& e : schema.at("enum")) found = found || e == v;
      if (!found) out.push_back(at + ": not one of " + schema.at("enum").dump());
    }
    if (v.is_number() && schema.contains("minimum") && v.get<double>() < schema.at("minimum").get<double>()) {
      out.push_back(at + ": below the minimum");
    }
    if (v.is_number() && schema.contains("exclusiveMinimum") && v.get<double>() <= schema.at("exclusiveMinimum").get<double>()) {
      out.push_back(at + ": not above the exclusive minimum");
    }
    if (v.is_array() && schema.contains("minItems") && v.size() < schema.at("minItems").get<size_t>())
      out.push_back(at + ": too few items");
    if (v.is_array() && schema.contains("items")) {
      for (size_t k = 0; k < v.size(); ++k) check(v[k], schema.at("items"), at + "[" + std::to_string(k) + "]", out);
    }
    if (v.is_object()) check_object(v, schema, at, out);
    if (schema.contains("oneOf")) {
      size_t matched = 0;
      for (const auto& option : schema.at("oneOf")) {
        std::vector<std::string> inner;
        check(v, option, at, inner);
        matched += inner.empty() ? 1 : 0;
      }
      if (matched != 1) out.push_back(at + ": matches " + std::to_string(matched) + " of oneOf's schemas, not exactly one");
    }
  }

  void check_object(const nlohmann::json& v, const nlohmann::json& schema, const std::string& at, std::vector<std::string>& out) const {
    const nlohmann::json none = nlohmann::json::object();
    const nlohmann::json& properties = schema.contains("properties") ? schema.at("properties") : none;
    if (schema.contains("required")) {
      for (const auto& key : schema.at("required")) {
        if (!v.contains(key.get<std::string>())) out.push_back(at + ": lacks '" + key.get<std::string>() + "'");
      }
    }
    for (const auto& [key, value] : v.items()) {
      if (properties.contains(key)) {
        check(value, properties.at(key), at + "." + key, out);
      } else if (schema.contains("additionalProperties") && schema.at("additionalProperties") == false) {
        out.push_back(at + ": '" + key + "' is not a property of the schema");
      }
    }
  }

  nlohmann::json root_;
};

}  // namespace dwdeconv::test
