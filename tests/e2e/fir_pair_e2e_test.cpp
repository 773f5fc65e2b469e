// End-to-end: two StyleGAN3 up paths in a row (upfirdn2d's reference code with a separable filter: zero insertion,
// Pad, crop, a 1xK and a Kx1 depthwise Conv), x2 with pads 9+8 and x4 with the crop -6-9, are rewritten for the
// xnnpack target as two one-axis stages each, verified whole-model on the executor, reported as form fir_pair, and
// kept by the default target.
#include <catch2/catch.hpp>

#include "onnx_io/tensor.h"
#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"

using namespace dwdeconv::test;

namespace {

// The ONNX text of one up path of `c` channels from x [1,c,h,w] to y: zero insertion by s, the Pad by the positive
// pads, a Slice by the negative ones, then Conv 1xK (weight p_F1) and Conv Kx1 (p_F2, bias p_B). Names start with p.
std::string up_path(const std::string& p, const std::string& x, const std::string& y, int64_t c, int64_t h, int64_t w, int64_t s, int64_t k,
                    int64_t pad0, int64_t pad1) {
  const auto n = [](int64_t v) { return std::to_string(v); };
  const int64_t pb = std::max<int64_t>(pad0, 0), pe = std::max<int64_t>(pad1, 0);
  const int64_t cb = std::max<int64_t>(-pad0, 0), ce = std::max<int64_t>(-pad1, 0);
  std::string t;
  t += "  " + p + "s6 = Constant <value = int64[6] {1, " + n(c) + ", " + n(h) + ", 1, " + n(w) + ", 1}> ()\n";
  t += "  " + p + "s4 = Constant <value = int64[4] {1, " + n(c) + ", " + n(s * h) + ", " + n(s * w) + "}> ()\n";
  t += "  " + p + "ip = Constant <value = int64[12] {0, 0, 0, 0, 0, 0, 0, 0, 0, " + n(s - 1) + ", 0, " + n(s - 1) + "}> ()\n";
  t += "  " + p + "pp = Constant <value = int64[8] {0, 0, " + n(pb) + ", " + n(pb) + ", 0, 0, " + n(pe) + ", " + n(pe) + "}> ()\n";
  t += "  " + p + "st = Constant <value = int64[2] {" + n(cb) + ", " + n(cb) + "}> ()\n";
  t += "  " + p + "en = Constant <value = int64[2] {" + n(-ce == 0 ? int64_t{1} << 40 : -ce) + ", " + n(-ce == 0 ? int64_t{1} << 40 : -ce) +
       "}> ()\n";
  t += "  " + p + "ax = Constant <value = int64[2] {2, 3}> ()\n";
  t += "  " + p + "r = Reshape (" + x + ", " + p + "s6)\n  " + p + "z = Pad (" + p + "r, " + p + "ip)\n";
  t += "  " + p + "u = Reshape (" + p + "z, " + p + "s4)\n  " + p + "q = Pad (" + p + "u, " + p + "pp)\n";
  t += "  " + p + "c = Slice (" + p + "q, " + p + "st, " + p + "en, " + p + "ax)\n";
  t += "  " + p + "v = Conv <group = " + n(c) + ", kernel_shape = [1, " + n(k) + "]> (" + p + "c, " + p + "F1)\n";
  t += "  " + y + " = Conv <group = " + n(c) + ", kernel_shape = [" + n(k) + ", 1]> (" + p + "v, " + p + "F2, " + p + "B)\n";
  return t;
}

}  // namespace

TEST_CASE("StyleGAN3's x2 and x4 up paths are rewritten as two one-axis stages each and verify whole-model", "[e2e][fir_pair]") {
  // x2: 6x5 -> 2n+6 = 18x16; x4 (a crop): 18x16 -> 4n-38 = 34x26.
  const int64_t c = 64;
  std::string body = up_path("a_", "X", "A", c, 6, 5, 2, 12, 9, 8);
  body += "  L = LeakyRelu <alpha = 0.2> (A)\n";
  body += up_path("b_", "L", "Y", c, 18, 16, 4, 24, -6, -9);
  auto model =
      parse_model("<ir_version: 8, opset_import: [\"\" : 13]>\nsg3 (float[1,64,6,5] X) => (float[1,64,34,26] Y) {\n" + body + "}\n");
  auto& g = *model.mutable_graph();
  uint32_t seed = 91;
  for (const auto& [p, k] : {std::pair<std::string, int64_t>{"a_", 12}, {"b_", 24}}) {
    set_random_initializer(g, p + "F1", onnx::TensorProto::FLOAT, {c, 1, 1, k}, seed++);
    set_random_initializer(g, p + "F2", onnx::TensorProto::FLOAT, {c, 1, k, 1}, seed++);
    set_random_initializer(g, p + "B", onnx::TensorProto::FLOAT, {c}, seed++);
  }
  TempDir dir;
  const fs::path input = dir.path / "sg3.onnx", out = dir.path / "out.onnx", report = dir.path / "r.json";
  save(model, input);
  const auto r = run_cli(input.string() + " -o " + out.string() + " --target xnnpack --verify --report " + report.string(), dir);
  CAPTURE(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("verify (whole-model)"));
  CHECK_THAT(r.err, Catch::Contains("rewrote 2 of 2 upsamplers (kept 0)"));
  const auto rewritten = load(out);
  // Per path: s phase Convs on W, s on H; the x4 path's two stages each end in a Slice of their join's last 2 samples.
  CHECK(count_ops(rewritten, "Conv") == 2 * 2 + 2 * 4);
  CHECK(count_ops(rewritten, "Slice") == 2);
  CHECK(count_ops(rewritten, "Reshape") == 4);  // the joins: the zero insertions' Reshapes are gone
  CHECK(count_ops(rewritten, "LeakyRelu") == 1);
  for (const auto& init : rewritten.graph().initializer()) {
    for (const char* gone : {"a_F1", "a_F2", "b_F1", "b_F2"}) CHECK(init.name() != gone);
  }
  const Report json = read_report(report);
  CHECK(any_row_with(json.at("nodes"), R"({"form": "fir_pair", "name": "a_v", "decision": "rewritten", "kernel": [12, 12]})"));
  CHECK(any_row_with(json.at("nodes"), R"({"form": "fir_pair", "name": "b_v", "decision": "rewritten", "kernel": [24, 24]})"));
  CHECK(json.at("verify").at("passed") == true);

  // Idempotent and deterministic; the default target keeps both.
  const fs::path again = dir.path / "again.onnx", twice = dir.path / "twice.onnx";
  REQUIRE(run_cli(out.string() + " -o " + again.string() + " --target xnnpack", dir).exit_code == 0);
  CHECK(read_file(again) == read_file(out));
  REQUIRE(run_cli(input.string() + " -o " + twice.string() + " --target xnnpack", dir).exit_code == 0);
  CHECK(read_file(twice) == read_file(out));
  const auto kept = run_cli(input.string() + " --dry-run --target default", dir);
  REQUIRE(kept.exit_code == 0);
  CHECK_THAT(kept.err + kept.out, Catch::Contains("rewrite 0 of 2"));
}
