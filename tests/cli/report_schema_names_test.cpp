// The names docs/report.schema.json lists against the data files that hold them: the runtimes against
// python/dwdeconv_rewrite/runtimes/registry.json and the built-in executor, the targets against rewrite/targets.json
// (as the binary embeds it), the precisions against the registry's. A runtime, target or precision added to its data
// file and not to the schema (or the other way round) fails here, before a report the schema refuses is ever written.
#include <fstream>
#include <set>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli/runtime_python.h"
#include "rewrite/targets.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv;

namespace {

nlohmann::json read_json(const std::string& relative) {
  std::ifstream in(test::source_dir() + "/" + relative);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

std::set<nlohmann::json> enum_of(const nlohmann::json& definition) {
  std::set<nlohmann::json> values;
  for (const auto& v : definition.at("enum")) values.insert(v);
  CHECK(values.size() == definition.at("enum").size());  // no value twice
  return values;
}

}  // namespace

TEST_CASE("docs/report.schema.json's runtime names are the registry's runtimes and the built-in executor", "[cli][docs][schema]") {
  const auto schema = read_json("docs/report.schema.json");
  const auto registry = read_json("python/dwdeconv_rewrite/runtimes/registry.json");
  std::set<nlohmann::json> expected{cli::kBuiltinRuntime};
  for (const auto& runtime : registry.at("runtimes")) expected.insert(runtime.at("name"));
  CHECK(expected.size() == registry.at("runtimes").size() + 1);
  CHECK(enum_of(schema.at("definitions").at("runtime_name")) == expected);
}

TEST_CASE("docs/report.schema.json's target names are rewrite/targets.json's, and null", "[cli][docs][schema]") {
  const auto schema = read_json("docs/report.schema.json");
  const auto data = read_json("rewrite/targets.json");
  std::set<nlohmann::json> expected{nullptr};
  for (const auto& target : data.at("targets")) expected.insert(target.at("name"));
  // The binary's table is that file: the same names.
  std::set<nlohmann::json> embedded{nullptr};
  for (const auto& target : rewrite::targets()) embedded.insert(target.name);
  CHECK(embedded == expected);
  CHECK(enum_of(schema.at("definitions").at("report").at("properties").at("target")) == expected);
}

TEST_CASE("docs/report.schema.json's precisions are the ones the registry's runtimes run at", "[cli][docs][schema]") {
  const auto schema = read_json("docs/report.schema.json");
  const auto registry = read_json("python/dwdeconv_rewrite/runtimes/registry.json");
  std::set<nlohmann::json> expected;
  for (const auto& runtime : registry.at("runtimes")) {
    for (const auto& p : runtime.at("precisions")) expected.insert(p);
  }
  CHECK(expected.count("fp32") == 1);
  CHECK(enum_of(schema.at("definitions").at("runtime").at("properties").at("precision")) == expected);
}
