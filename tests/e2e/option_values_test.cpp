// End-to-end tests of option values the run cannot honour: each is a usage error (exit 2) naming the value, before
// anything is written, never silently ignored; and a verifier that checked nothing does not pass.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/e2e/cli_runner.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv::test;

namespace {

// One depthwise x2 ConvTranspose, X [B,2,3,3] with the batch dim `batch` ("1" or a symbol).
onnx::ModelProto deconv_model(const std::string& batch = "1") {
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    single (float[)" + batch +
                       R"(,2,3,3] X) => (float[)" + batch + R"(,2,6,6] Y) {
      Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, 51);
  return m;
}

// `count` float32 values, all `value` except element `at`, which is `special`.
std::string floats(size_t count, float value, size_t at = 0, float special = 0) {
  std::vector<float> v(count, value);
  if (count > 0) v[at] = special;
  std::string bytes(count * 4, '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  return bytes;
}

struct Setup {
  TempDir dir;
  fs::path in = dir.path / "model.onnx", out = dir.path / "out.onnx", good = dir.path / "good.npy";
  explicit Setup(const std::string& batch = "1") {
    save(deconv_model(batch), in);
    write_npy(good, "(1, 2, 3, 3)", floats(18, 0.5f, 0, 0.5f));
  }
  RunResult verify(const std::string& args) { return run_cli(in.string() + " -o " + out.string() + " --verify " + args, dir); }
};

}  // namespace

TEST_CASE("input and input-shape options naming nothing the model has are usage errors", "[e2e][options]") {
  Setup s("N");
  const auto typo = s.verify("--input typo=" + s.good.string());
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Catch::Contains("'typo'") && Catch::Contains("X"));
  CHECK_FALSE(fs::exists(s.out));

  const auto shape_typo = s.verify("--input-shape typo=1x2x3x3");
  CHECK(shape_typo.exit_code == 2);
  CHECK_THAT(shape_typo.err, Catch::Contains("'typo'"));
  CHECK_FALSE(fs::exists(s.out));

  const auto compared = run_cli(s.in.string() + " --compare " + s.in.string() + " --input typo=" + s.good.string(), s.dir);
  CHECK(compared.exit_code == 2);
  CHECK_THAT(compared.err, Catch::Contains("'typo'"));

  // The names that are there still work.
  CHECK(s.verify("--input X=" + s.good.string()).exit_code == 0);
  CHECK(s.verify("--input-shape X=2x2x3x3").exit_code == 0);
}

TEST_CASE("an input shape may fix symbolic dims only, each above 0, in NAME=D0x...xDn", "[e2e][options]") {
  Setup s;
  const auto contradicts = s.verify("--input-shape X=1x2x4x4");
  CHECK(contradicts.exit_code == 2);
  CHECK_THAT(contradicts.err, Catch::Contains("'X'") && Catch::Contains("axis 2") && Catch::Contains("3") && Catch::Contains("4"));
  CHECK_FALSE(fs::exists(s.out));

  const auto rank = s.verify("--input-shape X=1x2x3");
  CHECK(rank.exit_code == 2);
  CHECK_THAT(rank.err, Catch::Contains("'X'") && Catch::Contains("4 dims"));

  Setup sym("N");
  for (const std::string bad : {"X=1x2x3x3x", "X=0x2x3x3", "X=x1x2x3x3"}) {
    INFO(bad);
    const auto r = sym.verify("--input-shape " + bad);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(bad));
    CHECK_FALSE(fs::exists(sym.out));
  }
}

TEST_CASE("verification with nothing to compare fails", "[e2e][options]") {
  Setup s("N");
  write_npy(s.dir.path / "empty.npy", "(0, 2, 3, 3)", "");
  const auto r = s.verify("--input X=" + (s.dir.path / "empty.npy").string());
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("nothing compared"));
  CHECK_FALSE(fs::exists(s.out));
}

TEST_CASE("tolerances, --external-data-threshold and --max-phases out of range are usage errors with readable messages", "[e2e][options]") {
  Setup s;
  for (const std::string bad : {"--atol nan", "--atol inf", "--rtol nan", "--rtol -inf", "--atol -1"}) {
    INFO(bad);
    const auto r = s.verify(bad);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(bad.substr(0, 6)));
    CHECK(r.err.size() < 200);  // no 300-digit bound
    CHECK_FALSE(fs::exists(s.out));
  }
  const auto threshold = run_cli(s.in.string() + " -o " + s.out.string() + " --external-data-threshold -1", s.dir);
  CHECK(threshold.exit_code == 2);
  CHECK_THAT(threshold.err, Catch::Contains("--external-data-threshold"));
  CHECK_FALSE(fs::exists(s.out));
  const auto phases = run_cli(s.in.string() + " --dry-run --max-phases 99999999999999999999", s.dir);
  CHECK(phases.exit_code == 2);
  CHECK_THAT(phases.err, Catch::Contains("--max-phases"));
  CHECK(phases.out.empty());
}

TEST_CASE("an --input holding NaN is refused: XNNPACK's clamps do not keep NaN, so the paths cannot be compared", "[e2e][options]") {
  Setup s;
  const auto nan_file = s.dir.path / "nan.npy";
  write_npy(nan_file, "(1, 2, 3, 3)", floats(18, 0.25f, 7, std::numeric_limits<float>::quiet_NaN()));
  const auto r = s.verify("--input X=" + nan_file.string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("nan.npy") && Catch::Contains("NaN") && Catch::Contains("element 7"));
  CHECK_FALSE(fs::exists(s.out));
  const auto compared = run_cli(s.in.string() + " --compare " + s.in.string() + " --input X=" + nan_file.string(), s.dir);
  CHECK(compared.exit_code == 2);
  CHECK_THAT(compared.err, Catch::Contains("NaN"));
}

TEST_CASE("an --input holding an infinity is refused like NaN: 0 * inf makes a NaN the executor does not keep", "[e2e][options]") {
  // with +-inf in the input, a correct rewrite failed ("element 394 is -inf, expected inf") and
  // x * 0 against -floor(exp(x*x - 10)) passed, since each NaN came out of XNNPACK as -inf or 0.
  Setup s;
  for (const float special : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    const std::string what = special > 0 ? "inf" : "-inf";
    INFO(what);
    const auto inf_file = s.dir.path / (what + ".npy");
    write_npy(inf_file, "(1, 2, 3, 3)", floats(18, 0.25f, 7, special));
    const auto r = s.verify("--input X=" + inf_file.string());
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("--input " + inf_file.string() + ": element 7 is " + what +
                                      "; --verify and --compare cannot compare non-finite inputs"));
    CHECK_THAT(r.err, !Catch::Contains("verification FAILED") && !Catch::Contains("element 7 is -inf, expected"));
    CHECK_FALSE(fs::exists(s.out));
    const auto compared = run_cli(s.in.string() + " --compare " + s.in.string() + " --input X=" + inf_file.string(), s.dir);
    CHECK(compared.exit_code == 2);
    CHECK_THAT(compared.err, Catch::Contains("element 7 is " + what) && !Catch::Contains("verification passed"));
    // --bench only times the models, so it may run them.
    CHECK(run_cli(s.in.string() + " -o " + s.out.string() + " --bench --runs 1 --input X=" + inf_file.string(), s.dir).exit_code == 0);
    fs::remove(s.out);
  }
}

TEST_CASE("running out of memory names what ran out and what to do, not std::bad_alloc", "[e2e][options]") {
  TempDir dir;
  // k1 s100000: a raised --max-phases lets it plan 10^10 phases, more than the 4 GB address space below holds.
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    big (float[1,1,1,1] X) => (float[n,c,h,w] Y) {
      Y = ConvTranspose <group=1, strides=[100000,100000], output_padding=[99999,99999]> (X, W, B)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {1, 1, 1, 1}, 52);
  set_random_initializer(*m.mutable_graph(), "B", onnx::TensorProto::FLOAT, {1}, 53);
  const auto in = dir.path / "big.onnx";
  save(m, in);
  const std::string cmd =
      "sh -c 'ulimit -v 4000000; exec " + std::string(DWDECONV_CLI) + " " + in.string() + " --dry-run --max-phases 10000000000'";
  const fs::path err = dir.path / "err";
  const int status = std::system((cmd + " 2>" + err.string() + " >/dev/null").c_str());
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
  const std::string text = read_file(err);
  CHECK_THAT(text, Catch::Contains("out of memory") && Catch::Contains("big.onnx") && Catch::Contains("--max-phases"));
  CHECK_THAT(text, !Catch::Contains("std::bad_alloc"));
}

TEST_CASE(
    "the input files: every numpy integer and bool dtype is read, a value that does not fit its input is refused, "
    "and an input given twice is refused",
    "[e2e][options][input]") {
  // x float, k int32 (cast to float and added): k from .npy files of other widths (review findings 11, 20, 21).
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1,2,2,2] X, int32[1,2,2,2] K, bool[1,2,2,2] B) => (float[1,2,2,2] Y) {
      kf = Cast <to = 1> (K)
      bf = Cast <to = 1> (B)
      s = Add (X, kf)
      Y = Add (s, bf)
    })");
  TempDir dir;
  const auto in = dir.path / "m.onnx";
  save(m, in);
  const auto npy = [&](const std::string& name, const std::string& descr, size_t size, const std::vector<int64_t>& values) {
    std::string bytes;
    for (const int64_t v : values) bytes.append(reinterpret_cast<const char*>(&v), size);  // little-endian low bytes
    write_npy(dir.path / name, "(1, 2, 2, 2)", bytes, descr);
    return (dir.path / name).string();
  };
  const std::vector<int64_t> small{1, -2, 3, 0, 5, -6, 7, 8}, flags{1, 0, 1, 1, 0, 0, 1, 0};
  const std::string bools = " --input B=" + npy("b.npy", "|b1", 1, flags);
  for (const auto& [descr, size] : std::vector<std::pair<std::string, size_t>>{{"<i8", 8}, {"<i4", 4}, {"<i2", 2}, {"|i1", 1}}) {
    CAPTURE(descr);
    const auto r = run_cli(in.string() + " --compare " + in.string() + " --input K=" + npy("k.npy", descr, size, small) + bools, dir);
    INFO(r.err);
    CHECK(r.exit_code == 0);
  }
  // 2^31 does not fit int32, 2 is no bool: refused, naming the element, never fed wrapped.
  auto r = run_cli(
      in.string() + " --compare " + in.string() + " --input K=" + npy("big.npy", "<i8", 8, {1, 2, 3, 4, 5, 6, 7, 2147483648}) + bools, dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("element 7 (2147483648) does not fit input 'K', declared INT32"));
  r = run_cli(in.string() + " --compare " + in.string() + " --input K=" + npy("k.npy", "<i8", 8, small) +
                  " --input B=" + npy("two.npy", "|u1", 1, {1, 0, 2, 1, 0, 0, 1, 0}),
              dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("element 2 (2) does not fit input 'B', declared BOOL"));
  r = run_cli(in.string() + " --compare " + in.string() + " --input K=" + npy("k.npy", "<i8", 8, small) +
                  " --input K=" + npy("k2.npy", "<i8", 8, small) + bools,
              dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--input 'K' is given twice"));
  // A big-endian file is named, not misread.
  write_npy(dir.path / "be.npy", "(1, 2, 2, 2)", std::string(32, '\0'), ">f4");
  r = run_cli(in.string() + " --compare " + in.string() + " --input X=" + (dir.path / "be.npy").string(), dir);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("dtype '>f4' is not supported (little-endian"));
}

TEST_CASE("a FIFO given as the model, as --compare's other model or as an --input file is refused, never waited on",
          "[e2e][options][fifo]") {
  TempDir dir;
  const auto in = dir.path / "m.onnx", fifo = dir.path / "f.onnx", fifo_npy = dir.path / "f.npy";
  save(deconv_model(), in);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE(::mkfifo(fifo_npy.c_str(), 0600) == 0);
  for (const std::string& args : {fifo.string() + " -o " + (dir.path / "o.onnx").string(), in.string() + " --compare " + fifo.string(),
                                  in.string() + " --compare " + in.string() + " --input X=" + fifo_npy.string()}) {
    CAPTURE(args);
    const auto r = run_shell("timeout 20 " + std::string(DWDECONV_CLI) + " " + args, dir);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("not a regular file"));
  }
}
