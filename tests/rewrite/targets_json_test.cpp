// rewrite/targets.json is read key by key: the file as committed is the table the binary uses, and each kind of
// mistake in it (an unknown key, a wrong type, a missing field, a name nothing knows) is an error naming the place.
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "rewrite/targets.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv;
using nlohmann::json;

namespace {

json committed_file() {
  std::ifstream in(test::source_dir() + "/rewrite/targets.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE_FALSE(text.empty());
  return json::parse(text);
}

// The error parse_targets gives for `j` ("" when it parses).
std::string error_of(const json& j) {
  std::vector<rewrite::Target> table;
  return rewrite::parse_targets(j.dump(), table);
}

// The index of the target named `name` in the file's list.
size_t index_of(const json& j, const std::string& name) {
  for (size_t k = 0; k < j["targets"].size(); ++k) {
    if (j["targets"][k]["name"] == name) return k;
  }
  FAIL("no target " << name);
  return 0;
}

}  // namespace

TEST_CASE("the committed targets.json is the table the binary reads", "[rewrite][targets][targets_json]") {
  std::vector<rewrite::Target> table;
  REQUIRE(rewrite::parse_targets(committed_file().dump(), table).empty());
  const auto& built_in = rewrite::targets();
  REQUIRE(table.size() == built_in.size());
  for (size_t k = 0; k < table.size(); ++k) {
    CAPTURE(table[k].name);
    CHECK(table[k].name == built_in[k].name);
    CHECK(table[k].summary() == built_in[k].summary());
    CHECK(table[k].rules.size() == built_in[k].rules.size());
    CHECK(table[k].aliases == built_in[k].aliases);
    CHECK(table[k].runs_on == built_in[k].runs_on);
    CHECK(table[k].headline == built_in[k].headline);
  }
  // Written out here: the eight targets in order, the aliases users say, and what runs on which --runtime.
  std::vector<std::string> names;
  for (const auto& t : table) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"default", "xnnpack", "litert", "ort", "executorch", "openvino", "mnn", "ncnn"});
  CHECK(table[2].aliases == std::vector<std::string>{"tflite"});
  CHECK(table[3].aliases == std::vector<std::string>{"onnxruntime"});
  CHECK(table[5].aliases == std::vector<std::string>{"ov"});
  CHECK(table[0].runs_on.empty());
  CHECK(table[1].runs_on == "xnnpack");
  CHECK(table[4].runs_on == "executorch");
  // The texts a rule cites by "{name}" are spelled out in the table.
  for (const auto& t : table) {
    for (const auto& r : t.rules) {
      CAPTURE(t.name, r.measured);
      CHECK(r.measured.find('{') == std::string::npos);
      CHECK(r.measured.find('}') == std::string::npos);
    }
  }
}

TEST_CASE("a mistake in targets.json is an error naming the place, never a rule silently dropped", "[rewrite][targets][targets_json]") {
  const json file = committed_file();
  const size_t ort = index_of(file, "ort");
  const std::string at_ort = "targets.json: targets[" + std::to_string(ort) + "] (ort)";
  json j = file;
  SECTION("an unknown key in a rule") {
    j["targets"][ort]["rules"][0]["widen"] = true;
    CHECK(error_of(j) == at_ort + ": rules[0]: unknown key 'widen'");
  }
  SECTION("an unknown key in a target") {
    j["targets"][ort]["run_on"] = "ort";
    CHECK(error_of(j) == at_ort + ": unknown key 'run_on'");
  }
  SECTION("an unknown key at the top") {
    j["target"] = json::array();
    CHECK(error_of(j) == "targets.json: unknown key 'target'");
  }
  SECTION("a wrong type") {
    j["targets"][ort]["rules"][0]["min_channels"] = "64";
    CHECK(error_of(j) == at_ort + ": rules[0]: 'min_channels' must be a whole number >= 0");
    j = file;
    j["targets"][ort]["edge_as_slices"] = 0;
    CHECK(error_of(j) == at_ort + ": 'edge_as_slices' must be true or false");
    j = file;
    j["targets"][ort]["crop_as_slice"] = "yes";
    CHECK(error_of(j) == at_ort + ": 'crop_as_slice' must be true or false");
  }
  SECTION("a missing field") {
    j["targets"][ort]["rules"][0].erase("measured");
    CHECK(error_of(j) == at_ort + ": rules[0]: missing key 'measured'");
    j = file;
    j["targets"][ort].erase("headline");
    CHECK(error_of(j) == at_ort + ": missing key 'headline'");
  }
  SECTION("a name nothing knows") {
    j["targets"][ort]["rules"][0]["forms"] = {"nearest_convv"};
    CHECK_THAT(error_of(j), Catch::StartsWith(at_ort + ": rules[0]: 'forms': unknown value 'nearest_convv' (known: "));
    j = file;
    j["targets"][ort]["rules"][0]["measured"] = "as {nowhere} says";
    CHECK(error_of(j) == at_ort + ": rules[0]: 'measured': no text named '{nowhere}' in \"texts\"");
    j = file;
    j["targets"][ort]["layout"] = "crd_gather";
    CHECK(error_of(j) == at_ort + ": 'layout' must be \"dcr\" or \"crd\", not 'crd_gather'");
  }
  SECTION("a rewriting rule without the range it was measured over") {
    json rule = {{"decision", "rewrite"}, {"measured", "nothing"}};
    j["targets"][ort]["rules"].push_back(rule);
    const std::string last = std::to_string(j["targets"][ort]["rules"].size() - 1);
    CHECK(error_of(j) == at_ort + ": rules[" + last + "]: a rule that rewrites needs the 'range' it was measured over");
  }
  SECTION("an alias that is not lower case, or names another target") {
    j["targets"][ort]["aliases"] = {"ONNXRuntime"};
    CHECK(error_of(j) == at_ort + ": 'aliases': 'ONNXRuntime' must be a non-empty lower-case name");
    j = file;
    j["targets"][ort]["aliases"] = {"tflite"};
    CHECK(error_of(j) == "targets.json: 'tflite' names two targets");
  }
  SECTION("not JSON at all") {
    std::vector<rewrite::Target> table;
    CHECK_THAT(rewrite::parse_targets("{\"targets\": [", table), Catch::StartsWith("targets.json: not JSON: "));
  }
}
