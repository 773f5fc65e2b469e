// The forms table against what is written about it elsewhere: the report schema's form enum (docs/report.schema.json)
// must name exactly the table's forms and the "resize" row, so a form added to the table and not to the schema (or the
// other way round) fails here; and the rows' own facts that other code reads.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "rewrite/forms.h"
#include "tests/support/source_dir.h"

using namespace dwdeconv;

TEST_CASE("docs/report.schema.json's form enum is the forms table and the resize row", "[rewrite][forms][docs]") {
  std::ifstream in(test::source_dir() + "/docs/report.schema.json");
  REQUIRE(in.good());
  const auto schema = nlohmann::json::parse(in);
  std::set<std::string> in_schema;
  for (const auto& name : schema.at("definitions").at("form").at("enum")) in_schema.insert(name.get<std::string>());
  std::set<std::string> in_table{rewrite::form_name(rewrite::Form::kNearestResize)};
  for (const auto& row : rewrite::forms()) in_table.insert(row.name);
  CHECK(in_schema == in_table);
  CHECK(in_schema.size() == rewrite::forms().size() + 1);  // no name twice
}

TEST_CASE("Each form's row names what it starts from and holds", "[rewrite][forms]") {
  // Written down from docs/forms.md's Before/After diagrams, not read from the rows.
  const std::map<std::string, std::string> roots{
      {"conv_transpose", "ConvTranspose"}, {"nearest_mask", "Conv"}, {"zero_insertion", "Conv"},      {"fir_pair", "Conv"},
      {"reshape_zero_insertion", "Conv"},  {"nearest_conv", "Conv"}, {"nearest_concat_conv", "Conv"}, {"upsample1d", "Slice"}};
  REQUIRE(rewrite::forms().size() == roots.size());
  for (const auto& row : rewrite::forms()) {
    INFO(row.name);
    CHECK(roots.at(row.name) == row.root_op);
    CHECK(row.recognise != nullptr);
    // A form's region holds its root op.
    CHECK(std::count(row.ops.begin(), row.ops.end(), row.root_op) == 1);
    CHECK(rewrite::form_info(row.form).name == std::string(row.name));
    CHECK(rewrite::form_by_name(row.name) == row.form);
  }
  // The ops per-node verification takes in an original's region: each form's chain and the constant chains the
  // recognisers fold (PyTorch's F.pad chain, shape arithmetic, computed weights).
  const std::set<std::string> ops{"Resize",          "Mul",    "Pad",       "Conv", "ConvTranspose", "Identity", "Reshape", "Slice",
                                  "ConstantOfShape", "Concat", "Transpose", "Cast", "Unsqueeze",     "Squeeze",  "Expand",  "Tile",
                                  "Gather",          "Shape",  "Constant",  "Sub"};
  CHECK(rewrite::form_ops() == ops);
  CHECK(rewrite::form_root_ops() == std::set<std::string>{"Conv", "ConvTranspose", "Slice"});
}
