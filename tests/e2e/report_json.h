// The report the binary writes, read as data: the end-to-end tests assert on its members, not on its text. The one
// test of its layout (key order, indentation, one line per member) is report_test.cpp's golden report.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_runner.h"

namespace dwdeconv::test {

using Report = nlohmann::ordered_json;  // members in the order the report writes them

// `text` parsed as JSON; the test fails, showing the text, when it is not JSON.
inline Report parse_report(const std::string& text) {
  Report parsed = Report::parse(text, nullptr, /*allow_exceptions=*/false);
  INFO("report text: " << text);
  REQUIRE_FALSE(parsed.is_discarded());
  return parsed;
}

// The report at `path`; the test fails when there is none or it is not JSON.
inline Report read_report(const fs::path& path) {
  INFO("report: " << path);
  REQUIRE(fs::exists(path));
  return parse_report(read_file(path));
}

// The report's objects, one per model: the array's of a batch report, else the one object.
inline std::vector<Report> entries_of(const Report& report) {
  if (!report.is_array()) return {report};
  return std::vector<Report>(report.begin(), report.end());
}

// The object of the array `rows` whose "name" is `name` (a node, a verified output, an upsampler); the test fails when
// there is none.
inline const Report& row_named(const Report& rows, const std::string& name) {
  INFO("no row named '" << name << "' in " << rows.dump());
  REQUIRE(rows.is_array());
  const Report* found = nullptr;
  for (const auto& row : rows) {
    if (found == nullptr && row.is_object() && row.value("name", std::string()) == name) found = &row;
  }
  REQUIRE(found != nullptr);
  return *found;
}

// Whether `row` has every member of `expected` (an object), each with the value given there.
inline bool has_members(const Report& row, const Report& expected) {
  if (!row.is_object()) return false;
  for (const auto& [name, value] : expected.items()) {
    if (!row.contains(name) || row.at(name) != value) return false;
  }
  return true;
}

// Whether some object of the array `rows` has every member of `expected` (JSON text of an object) with its value.
inline bool any_row_with(const Report& rows, const std::string& expected) {
  const Report want = Report::parse(expected);
  return rows.is_array() && std::any_of(rows.begin(), rows.end(), [&want](const Report& row) { return has_members(row, want); });
}

// Every value of a member named `key` anywhere in `json` (objects and arrays searched through), in document order.
inline std::vector<Report> values_of(const Report& json, const std::string& key) {
  std::vector<Report> found;
  if (json.is_object()) {
    for (const auto& [name, value] : json.items()) {
      if (name == key) found.push_back(value);
      for (auto& inner : values_of(value, key)) found.push_back(std::move(inner));
    }
  } else if (json.is_array()) {
    for (const auto& value : json) {
      for (auto& inner : values_of(value, key)) found.push_back(std::move(inner));
    }
  }
  return found;
}

// Whether any member named `key` anywhere in `json` has the value `value`.
inline bool has_value(const Report& json, const std::string& key, const Report& value) {
  const auto all = values_of(json, key);
  return std::find(all.begin(), all.end(), value) != all.end();
}

// Whether the report's verification passed and so did every output it compared (no "passed": false anywhere in it).
inline bool verify_passed_everywhere(const Report& report) {
  if (!report.contains("verify") || !report.at("verify").at("passed").get<bool>()) return false;
  for (const auto& out : report.at("verify").at("outputs")) {
    if (!out.at("passed").get<bool>()) return false;
  }
  return true;
}

// The report's error, "" when it is null.
inline std::string report_error(const Report& report) { return report.at("error").is_null() ? "" : report.at("error").get<std::string>(); }

}  // namespace dwdeconv::test
