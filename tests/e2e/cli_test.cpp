// End-to-end tests: the dwdeconv-rewrite binary on the shipped example, as a user or a CI job runs it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <sstream>

#include <onnx/checker.h>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"

using namespace dwdeconv::test;

TEST_CASE("rewriting the example replaces the three clean deconvs and keeps the grouped one", "[e2e]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const std::string before = read_file(in);
  const auto r = run_cli(in.string() + " -o " + (dir.path / "out.onnx").string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(in) == before);  // the input is never touched
  const auto out = load(dir.path / "out.onnx");
  CHECK(count_ops(out, "ConvTranspose") == 1);
  CHECK(out.graph().node_size() > 0);
  for (const auto& n : out.graph().node()) {
    if (n.op_type() == "ConvTranspose") CHECK(n.name() == "mix_up");
  }
  CHECK(count_ops(out, "DepthToSpace") == 3);
  CHECK(count_ops(out, "Concat") == 3);
  CHECK(count_ops(out, "Conv") == 2 + 3 * 4);
  for (const auto& init : out.graph().initializer()) {
    CHECK(init.name() != "up1.w");  // orphaned weights are removed
    CHECK(init.name() != "up2.w");
  }
  CHECK_NOTHROW(onnx::checker::check_model(out));
  CHECK_THAT(r.err, Catch::Contains("rewrote 3 of 4"));
  CHECK_THAT(r.err, Catch::Contains("grouped but not depthwise"));
}

TEST_CASE("dry run prints the plan and writes nothing", "[e2e]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const size_t files = dir.file_count();
  const auto r = run_cli(in.string() + " --dry-run", dir);
  REQUIRE(r.exit_code == 0);
  CHECK(dir.file_count() == files);
  CHECK_THAT(r.out, Catch::Contains("rewrite \"up1\"  C=8 k=4x4 s=2 pads=[1, 1, 1, 1]"));
  CHECK_THAT(r.out, Catch::Contains("keep    \"mix_up\""));
  CHECK_THAT(r.out, Catch::Contains("plan: rewrite 3 of 4"));
}

TEST_CASE("check mode fails on a model with rewritable nodes and passes on the rewritten one", "[e2e]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto first = run_cli(in.string() + " --check", dir);
  CHECK(first.exit_code == 1);
  CHECK_THAT(first.err, Catch::Contains("'up1' would be rewritten"));
  REQUIRE(run_cli(in.string() + " -o " + (dir.path / "out.onnx").string(), dir).exit_code == 0);
  const size_t files = dir.file_count();
  CHECK(run_cli((dir.path / "out.onnx").string() + " --check", dir).exit_code == 0);
  CHECK(dir.file_count() == files);
}

TEST_CASE("output is deterministic and the rewrite is idempotent", "[e2e]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto a = dir.path / "a.onnx", b = dir.path / "b.onnx", c = dir.path / "c.onnx";
  REQUIRE(run_cli(in.string() + " -o " + a.string(), dir).exit_code == 0);
  REQUIRE(run_cli(in.string() + " -o " + b.string(), dir).exit_code == 0);
  CHECK(read_file(a) == read_file(b));
  CHECK(read_file(a) != read_file(in));
  REQUIRE(run_cli(a.string() + " -o " + c.string(), dir).exit_code == 0);
  CHECK(read_file(c) == read_file(a));
}

TEST_CASE("the output may be the input file", "[e2e]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto expected = dir.path / "expected.onnx";
  REQUIRE(run_cli(in.string() + " -o " + expected.string(), dir).exit_code == 0);
  REQUIRE(run_cli(in.string() + " -o " + in.string(), dir).exit_code == 0);
  CHECK(read_file(in) == read_file(expected));
  CHECK(dir.file_count() == 2);  // no temporary files left behind
}

TEST_CASE("the report is the documented JSON", "[e2e]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto report = dir.path / "r.json";
  REQUIRE(run_cli(in.string() + " -o " + (dir.path / "out.onnx").string() + " --report " + report.string(), dir).exit_code == 0);
  const Report json = read_report(report);
  CHECK(json.at("tool_version") == "0.1.0");
  CHECK(json.at("opset") == 13);
  const Report up2 = Report::parse(R"({"name": "up2", "graph": "main", "decision": "rewritten", "reason": "", "channels": 8,
    "kernel": [3, 3], "stride": 2, "strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1], "dilations": null,
    "depthwise_in_value": false, "form": "conv_transpose", "layout": "dcr", "note": null})");
  CHECK(row_named(json.at("nodes"), "up2") == up2);  // every member, in this order
  CHECK(json.at("target") == "xnnpack");             // run_cli's, since the command names none
  CHECK(json.at("outside_delegate") == Report::array());
  CHECK(json.at("cpu").at("avx512f").is_boolean());
  CHECK(json.begin().key() == "schema_version");
  CHECK(json.at("schema_version") == 1);
  const Report& mix_up = row_named(json.at("nodes"), "mix_up");
  CHECK(mix_up.at("decision") == "kept");
  CHECK_THAT(mix_up.at("reason").get<std::string>(), Catch::StartsWith("grouped but not depthwise"));
  CHECK(json.at("rewritten") == 3);
  CHECK(json.at("kept") == 1);
}

TEST_CASE("only and skip choose nodes and an unknown name is a usage error", "[e2e]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto out = dir.path / "out.onnx";
  REQUIRE(run_cli(in.string() + " -o " + out.string() + " --only up1 --only up3", dir).exit_code == 0);
  CHECK(count_ops(load(out), "ConvTranspose") == 2);  // up2 and mix_up remain
  REQUIRE(run_cli(in.string() + " -o " + out.string() + " --skip up1", dir).exit_code == 0);
  CHECK(count_ops(load(out), "ConvTranspose") == 2);  // up1 and mix_up remain
  fs::remove(out);
  const auto bad = run_cli(in.string() + " -o " + out.string() + " --only upp1", dir);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("'upp1' matches no ConvTranspose"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("bad input gets exit 3, a message naming the file, and no output", "[e2e]") {
  TempDir dir;
  const auto junk = dir.path / "junk.onnx";
  std::ofstream(junk, std::ios::binary) << "\x08\x07this is not a model at all \xff\xfe";
  const auto out = dir.path / "out.onnx";
  const auto r = run_cli(junk.string() + " -o " + out.string(), dir);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains(junk.string()));
  CHECK_FALSE(fs::exists(out));

  const auto missing = run_cli((dir.path / "nope.onnx").string() + " -o " + out.string(), dir);
  CHECK(missing.exit_code == 3);
  CHECK_THAT(missing.err, Catch::Contains("nope.onnx"));

  const auto in = dir.copy_example();
  const auto unwritable = run_cli(in.string() + " -o " + (dir.path / "no-such-dir" / "out.onnx").string(), dir);
  CHECK(unwritable.exit_code == 3);
  CHECK_THAT(unwritable.err, Catch::Contains("no-such-dir"));
}

TEST_CASE("usage errors exit 2", "[e2e]") {
  TempDir dir;
  const auto in = dir.copy_example();
  CHECK(run_cli(in.string(), dir).exit_code == 2);  // no -o, --dry-run or --check
  CHECK(run_cli(in.string() + " --dry-run -o x.onnx", dir).exit_code == 2);
  CHECK(run_cli(in.string() + " --no-such-flag -o x.onnx", dir).exit_code == 2);
  CHECK(run_cli("", dir).exit_code == 2);
  const auto help = run_cli("--help", dir);
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("Examples:"));
  CHECK_THAT(run_cli("--version", dir).out, Catch::Contains("dwdeconv-rewrite 0.1.0"));
}

namespace {

// `text` as one shell word in single quotes.
std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// COMPREPLY after the generated bash completion completes the last of `words` (as bash hands them over: COMP_WORDS,
// with the word being typed last) inside `dir`/work, sorted.
std::vector<std::string> bash_completes(const TempDir& dir, const std::vector<std::string>& words) {
  std::string command = "cd " + quoted((dir.path / "work").string()) +
                        " && bash --norc -c 'source \"$0\"; COMP_WORDS=(\"$@\"); COMP_CWORD=$(($# - 1)); _dwdeconv_rewrite; "
                        "printf \"%s\\n\" \"${COMPREPLY[@]}\"' " +
                        quoted((dir.path / "completion.bash").string()) + " dwdeconv-rewrite";
  for (const auto& w : words) command += " " + quoted(w);
  const auto r = run_shell(command, dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  std::vector<std::string> names;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) names.push_back(line);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("bash completion offers file names whole, blanks and glob characters included, and expands nothing", "[e2e][completion]") {
  TempDir dir;
  const auto r = run_shell(std::string(DWDECONV_CLI) + " --completion bash > " + quoted((dir.path / "completion.bash").string()), dir);
  REQUIRE(r.exit_code == 0);
  const fs::path work = dir.path / "work";
  fs::create_directories(work / "sub dir");
  for (const char* name : {"a b.onnx", "*.onnx", "x[1].onnx", "other file.txt", "$HOME.onnx"}) std::ofstream(work / name) << "x";
  using V = std::vector<std::string>;
  // A model: the .onnx files and the directories, each name whole.
  CHECK(bash_completes(dir, {""}) == V{"$HOME.onnx", "*.onnx", "a b.onnx", "sub dir", "x[1].onnx"});
  CHECK(bash_completes(dir, {"a"}) == V{"a b.onnx"});
  // The word as typed: quotes and backslashes stand for the name's characters; a glob or a $ stays literal.
  CHECK(bash_completes(dir, {"a\\ b"}) == V{"a b.onnx"});
  CHECK(bash_completes(dir, {"'a b"}) == V{"a b.onnx"});
  CHECK(bash_completes(dir, {"\"a b."}) == V{"a b.onnx"});
  CHECK(bash_completes(dir, {"*"}) == V{"*.onnx"});
  CHECK(bash_completes(dir, {"\\*"}) == V{"*.onnx"});
  CHECK(bash_completes(dir, {"x["}) == V{"x[1].onnx"});
  CHECK(bash_completes(dir, {"$"}) == V{"$HOME.onnx"});
  CHECK(bash_completes(dir, {"s"}) == V{"sub dir"});
  // --compare takes a model, --report any file, --out-dir a directory.
  CHECK(bash_completes(dir, {"m.onnx", "--compare", "*"}) == V{"*.onnx"});
  CHECK(bash_completes(dir, {"m.onnx", "--dry-run", "--report", "o"}) == V{"other file.txt"});
  CHECK(bash_completes(dir, {"m.onnx", "--out-dir", ""}) == V{"sub dir"});
  // Words: a target, also after '=' (bash splits --target=l at the '=').
  CHECK(bash_completes(dir, {"m.onnx", "--target", "l"}) == V{"litert"});
  CHECK(bash_completes(dir, {"m.onnx", "--target", "=", "l"}) == V{"litert"});
  CHECK(bash_completes(dir, {"m.onnx", "--ver"}) == V{"--verbose", "--verify", "--version"});
  // A value nothing can guess (a number): nothing, not file names.
  CHECK(bash_completes(dir, {"m.onnx", "--threads", ""}).empty());
}

TEST_CASE("check mode on a written model checks against the target it records, and --target still wins", "[e2e][check]") {
  // BigVGAN's UpSample1d: ncnn keeps it (0.95x-1.01x there), the default rewrites it (0.96x or more wherever it
  // converts). Before, --check of the ncnn output failed unless --target ncnn was repeated.
  TempDir dir;
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    upsample1d (float[1,24,40] X) => (float[1,24,80] Y) {
      pads = Constant <value = int64[6] {0, 0, 5, 0, 0, 5}> ()
      XP = Pad <mode = "edge"> (X, pads)
      U = ConvTranspose <group = 24, kernel_shape = [12], strides = [2]> (XP, W)
      gain = Constant <value = float {2.0}> ()
      G = Mul (U, gain)
      starts = Constant <value = int64[1] {15}> ()
      ends = Constant <value = int64[1] {-15}> ()
      axes = Constant <value = int64[1] {2}> ()
      Y = Slice (G, starts, ends, axes)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {24, 1, 12}, 17);
  const auto in = dir.path / "in.onnx", kept = dir.path / "ncnn.onnx";
  save(m, in);
  CHECK(run_default_cli(in.string() + " --check", dir).exit_code == 1);  // the default would rewrite it
  REQUIRE(run_default_cli(in.string() + " -o " + kept.string() + " --target ncnn", dir).exit_code == 0);
  auto written = load(kept);
  CHECK(written.graph().SerializeAsString() == m.graph().SerializeAsString());  // ncnn kept it
  std::map<std::string, std::string> props;
  for (const auto& p : written.metadata_props()) props[p.key()] = p.value();
  CHECK(props.at("dwdeconv-rewrite.target") == "ncnn");
  CHECK(props.count("dwdeconv-rewrite.version") == 1);
  const auto recorded = run_default_cli(kept.string() + " --check", dir);
  INFO(recorded.err);
  CHECK(recorded.exit_code == 0);
  CHECK_THAT(recorded.err, Catch::Contains("--check against --target ncnn, which the model records it was written for"));
  const auto overridden = run_default_cli(kept.string() + " --check --target default", dir);
  CHECK(overridden.exit_code == 1);
  CHECK_THAT(overridden.err, Catch::Contains("check failed: 1 of 1"));
  // A recorded name this version does not know (or a hostile one) is shown escaped, and the default target checks.
  for (auto& p : *written.mutable_metadata_props()) {
    if (p.key() == "dwdeconv-rewrite.target") p.set_value("nosuch\n::error::x\x1b[31m");
  }
  const auto odd = dir.path / "odd.onnx";
  save(written, odd);
  const auto unknown = run_default_cli(odd.string() + " --check", dir);
  CHECK(unknown.exit_code == 1);  // checked by the default, which would rewrite it
  CHECK_THAT(unknown.err, Catch::Contains("records --target 'nosuch\\x0a::error::x\\x1b[31m', which this version does not know"));
  CHECK_THAT(unknown.err, !Catch::Contains("nosuch\n"));
  // Written twice, the same bytes; rewritten again under another target, the record follows the new one.
  const auto again = dir.path / "again.onnx", other = dir.path / "other.onnx";
  REQUIRE(run_default_cli(kept.string() + " -o " + again.string() + " --target ncnn", dir).exit_code == 0);
  CHECK(read_file(again) == read_file(kept));
  REQUIRE(run_default_cli(kept.string() + " -o " + other.string() + " --target xnnpack", dir).exit_code == 0);
  written = load(other);
  int targets = 0;
  for (const auto& p : written.metadata_props()) {
    if (p.key() == "dwdeconv-rewrite.target") {
      ++targets;
      CHECK(p.value() == "xnnpack");
    }
  }
  CHECK(targets == 1);
}
