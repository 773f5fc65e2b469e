// End-to-end tests of external data: loading, refusing unsafe or broken references, keeping each tensor's
// storage on write, and models over protobuf's 2 GB limit.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <fstream>

#include "onnx_io/external_data.h"
#include "onnx_io/tensor.h"
#include "tests/e2e/cli_runner.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv::test;

namespace {

onnx::TensorProto& initializer(onnx::ModelProto& m, const std::string& name) {
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name() == name) return t;
  }
  FAIL("no initializer " << name);
  throw;
}

// Moves tensor `name` into `data_file` at `offset` and points the tensor at it with the given entries.
void externalize(onnx::ModelProto& m, const std::string& name, const fs::path& data_file, int64_t offset, const std::string& location,
                 const std::string& length = "") {
  auto& t = initializer(m, name);
  std::string bytes(static_cast<size_t>(offset), 'z');
  bytes += t.raw_data();
  std::ofstream(data_file, std::ios::binary) << bytes;
  const std::string real_length = std::to_string(t.raw_data().size());
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", location},
                             {"offset", std::to_string(offset)},
                             {"length", length.empty() ? real_length : length}}) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
}

std::string location_of(const onnx::TensorProto& t) {
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") return e.value();
  }
  return "";
}

}  // namespace

TEST_CASE("external weights stay external, phase weights follow their source, inline stays inline", "[e2e][external]") {
  TempDir dir;
  auto m = small_deconv_model();
  externalize(m, "W", dir.path / "weights.bin", 128, "weights.bin");
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string() + " --verify", dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(fs::exists(dir.path / "out.onnx.data"));

  // Read the output's proto as written, without resolving its external data.
  onnx::ModelProto written;
  std::ifstream stream(out, std::ios::binary);
  REQUIRE(written.ParseFromIstream(&stream));
  int external_phase = 0;
  for (const auto& t : written.graph().initializer()) {
    CHECK(t.name() != "W");  // the orphaned original is gone
    if (t.name().rfind("W_s2", 0) == 0) {
      CHECK(t.data_location() == onnx::TensorProto::EXTERNAL);
      CHECK(location_of(t) == "out.onnx.data");
      CHECK_FALSE(t.has_raw_data());
      ++external_phase;
    }
    if (t.name() == "B") CHECK(t.data_location() != onnx::TensorProto::EXTERNAL);
  }
  CHECK(external_phase == 4);
  // The output loads back with its data and computes the same function (compare runs both).
  CHECK(run_cli(in.string() + " --compare " + out.string(), dir).exit_code == 0);
}

TEST_CASE("inline models can move large tensors out with --external-data", "[e2e][external]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto out = dir.path / "out.onnx";
  REQUIRE(run_cli(in.string() + " -o " + out.string() + " --external-data weights.bin --external-data-threshold 4096", dir).exit_code == 0);
  onnx::ModelProto written;
  std::ifstream stream(out, std::ios::binary);
  REQUIRE(written.ParseFromIstream(&stream));
  int external = 0, inline_small = 0;
  for (const auto& t : written.graph().initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      ++external;
      CHECK(location_of(t) == "weights.bin");
    } else {
      CHECK(t.raw_data().size() < 4096);
      ++inline_small;
    }
  }
  CHECK(external > 0);
  CHECK(inline_small > 0);
  CHECK(fs::file_size(out) < fs::file_size(in) / 2);  // the large weights went to weights.bin
  CHECK(run_cli(in.string() + " --compare " + out.string(), dir).exit_code == 0);
}

TEST_CASE("unsafe or broken external data references are refused with exit 3", "[e2e][external]") {
  TempDir dir;
  fs::create_directories(dir.path / "model");
  const auto in = dir.path / "model" / "model.onnx", out = dir.path / "model" / "out.onnx";
  struct Case {
    std::string name, location, length, message;
    int64_t offset;
  };
  std::ofstream(dir.path / "outside.bin", std::ios::binary) << std::string(4096, 'x');
  fs::create_symlink(dir.path / "outside.bin", dir.path / "model" / "link.bin");
  const std::vector<Case> cases = {
      {"absolute", (dir.path / "model" / "w.bin").string(), "", "is absolute", 0},
      {"dot-dot", "../w.bin", "", "leaves the model's directory", 0},
      {"symlink", "link.bin", "", "resolves outside the model's directory", 0},
      {"missing", "nope.bin", "", "is missing", 0},
      {"length past end", "w.bin", "100000", "past the end", 0},
      {"length disagrees", "w.bin", "8", "disagrees with its dims", 0},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    auto m = small_deconv_model();
    externalize(m, "W", dir.path / "model" / "w.bin", c.offset, c.location, c.length);
    save(m, in);
    const auto r = run_cli(in.string() + " -o " + out.string(), dir);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains(c.message));
    CHECK_THAT(r.err, Catch::Contains("tensor 'W'"));
    CHECK_THAT(r.err, Catch::Contains("model.onnx"));
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(dir.path / "model" / "out.onnx.data"));
  }
  // An offset past the end of the file.
  auto m = small_deconv_model();
  externalize(m, "W", dir.path / "model" / "w.bin", 0, "w.bin");
  for (auto& e : *initializer(m, "W").mutable_external_data()) {
    if (e.key() == "offset") e.set_value("999999");
  }
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string(), dir);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("offset 999999 is past the end"));
  // Nothing is left behind: no output, no data file, no temporary files.
  for (const auto& entry : fs::directory_iterator(dir.path / "model")) {
    CHECK(entry.path().filename().string().rfind(".dwdeconv-", 0) != 0);
  }
}

TEST_CASE("a model over 2 GB loads and saves through external data", "[e2e][external][large]") {
  TempDir dir;
  auto m = small_deconv_model();
  // An extra initializer of 2^29 + 2^20 floats (just over 2 GB), stored in a sparse file of zeros.
  const int64_t count = (int64_t{1} << 29) + (int64_t{1} << 20);
  auto* big = m.mutable_graph()->add_initializer();
  big->set_name("big");
  big->set_data_type(onnx::TensorProto::FLOAT);
  big->add_dims(count);
  big->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] :
       {std::pair<std::string, std::string>{"location", "model.onnx.data"}, {"offset", "0"}, {"length", std::to_string(count * 4)}}) {
    auto* e = big->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  { std::ofstream data(dir.path / "model.onnx.data", std::ios::binary); }
  REQUIRE(::truncate((dir.path / "model.onnx.data").c_str(), count * 4) == 0);
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string(), dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::file_size(out) < 100000);
  CHECK(fs::file_size(dir.path / "out.onnx.data") >= static_cast<uintmax_t>(count * 4));
  onnx::ModelProto written;
  std::ifstream stream(out, std::ios::binary);
  REQUIRE(written.ParseFromIstream(&stream));
  CHECK(count_ops(written, "ConvTranspose") == 0);
  CHECK(count_ops(written, "DepthToSpace") == 1);
}

TEST_CASE("a Constant's external weight stays external in its phase weights", "[e2e][external]") {
  for (const std::string value_name : {"", "w_value"}) {  // the Constant's value tensor, unnamed or named apart
    INFO("value tensor name '" << value_name << "'");
    TempDir dir;
    auto m = small_deconv_model();
    // Move W into a Constant node in front of the ConvTranspose, its value stored in weights.bin.
    onnx::TensorProto value = initializer(m, "W");
    m.mutable_graph()->mutable_initializer()->erase(m.mutable_graph()->mutable_initializer()->begin());
    REQUIRE(m.graph().initializer(0).name() == "B");
    value.set_name(value_name);
    std::ofstream(dir.path / "weights.bin", std::ios::binary) << value.raw_data();
    const std::string length = std::to_string(value.raw_data().size());
    value.clear_raw_data();
    value.set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", "weights.bin"}, {"length", length}}) {
      auto* e = value.add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    onnx::NodeProto constant;
    constant.set_op_type("Constant");
    constant.add_output("W");
    auto* attr = constant.add_attribute();
    attr->set_name("value");
    attr->set_type(onnx::AttributeProto::TENSOR);
    *attr->mutable_t() = value;
    auto* nodes = m.mutable_graph()->mutable_node();
    *nodes->Add() = nodes->Get(0);
    *nodes->Mutable(0) = constant;
    const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
    save(m, in);
    const auto r = run_cli(in.string() + " -o " + out.string(), dir);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);

    onnx::ModelProto written;
    std::ifstream stream(out, std::ios::binary);
    REQUIRE(written.ParseFromIstream(&stream));
    int external_phase = 0;
    for (const auto& n : written.graph().node()) {
      if (n.op_type() != "Constant") continue;
      CHECK(n.output(0).rfind("W_s2", 0) == 0);  // the original Constant is gone, only phase weights remain
      const auto& t = n.attribute(0).t();
      CHECK(t.data_location() == onnx::TensorProto::EXTERNAL);
      CHECK(location_of(t) == "out.onnx.data");
      ++external_phase;
    }
    CHECK(external_phase == 4);
    CHECK(fs::file_size(dir.path / "out.onnx.data") >= 4 * 3 * 4 * sizeof(float));
    CHECK(run_cli(in.string() + " --compare " + out.string(), dir).exit_code == 0);
  }
}

TEST_CASE("no data file is written when no tensor ends up outside", "[e2e][external]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto out = dir.path / "out.onnx";
  const auto r = run_cli(in.string() + " -o " + out.string() + " --external-data-threshold 1000000000", dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(fs::exists(dir.path / "out.onnx.data"));
  REQUIRE(run_cli(in.string() + " -o " + out.string() + " --external-data big.bin --external-data-threshold 1000000000", dir).exit_code ==
          0);
  CHECK_FALSE(fs::exists(dir.path / "big.bin"));
  CHECK(dir.file_count() == 2);  // the input and the output, nothing else
  const auto written = load(out);
  for (const auto& t : written.graph().initializer()) CHECK(t.data_location() != onnx::TensorProto::EXTERNAL);
}

TEST_CASE("a hand-written upsampler's derived weights follow its external weight, and its masks and scales go", "[e2e][external]") {
  // nearest x mask (MI-GAN's form b) and nearest + Conv, each with its Conv weight (and the mask) in a data file.
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    forms (float[1,4,5,5] X) => (float[1,4,20,20] Y) {
      u1 = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (X, , s2)
      m1 = Mul (u1, mask)
      p1 = Pad (m1, pads)
      c1 = Conv <group = 4, kernel_shape = [4, 4]> (p1, Wm)
      u2 = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (c1, , s2)
      Y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (u2, Wc, Bc)
    })");
  auto& g = *m.mutable_graph();
  *g.add_initializer() = dwdeconv::onnx_io::make_tensor("s2", onnx::TensorProto::FLOAT, {4}, {1, 1, 2, 2}, true);
  *g.add_initializer() = dwdeconv::onnx_io::make_tensor("pads", onnx::TensorProto::INT64, {8}, {0, 0, 2, 2, 0, 0, 1, 1}, true);
  std::vector<double> mask(100, 0.0);
  for (int y = 0; y < 10; y += 2) {
    for (int x = 0; x < 10; x += 2) mask[static_cast<size_t>(y * 10 + x)] = 4.0;
  }
  *g.add_initializer() = dwdeconv::onnx_io::make_tensor("mask", onnx::TensorProto::FLOAT, {1, 1, 10, 10}, mask, true);
  set_random_initializer(g, "Wm", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 61);
  set_random_initializer(g, "Wc", onnx::TensorProto::FLOAT, {4, 4, 3, 3}, 62);
  set_random_initializer(g, "Bc", onnx::TensorProto::FLOAT, {4}, 63);
  TempDir dir;
  externalize(m, "Wm", dir.path / "wm.bin", 0, "wm.bin");
  externalize(m, "Wc", dir.path / "wc.bin", 0, "wc.bin");
  externalize(m, "mask", dir.path / "mask.bin", 0, "mask.bin");
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx", again = dir.path / "again.onnx";
  save(m, in);
  const auto r = run_cli(in.string() + " -o " + out.string() + " --target xnnpack --verify",
                         dir);  // a 4-channel dense nearest + Conv: the default keeps it
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("rewrote 2 of 2 upsamplers"));
  REQUIRE(fs::exists(dir.path / "out.onnx.data"));

  onnx::ModelProto written;
  {
    std::ifstream stream(out, std::ios::binary);
    REQUIRE(written.ParseFromIstream(&stream));
  }
  CHECK(count_ops(written.graph(), "Resize") == 0);
  CHECK(count_ops(written.graph(), "Mul") == 0);
  CHECK(count_ops(written.graph(), "DepthToSpace") == 2);
  int external_phases = 0;
  for (const auto& t : written.graph().initializer()) {
    for (const char* gone : {"s2", "pads", "mask", "Wm", "Wc"}) CHECK(t.name() != gone);
    if (t.dims_size() == 4) {
      // Every phase weight is derived from Wm or Wc, which were external: it stays external, in the output's file.
      CHECK(t.data_location() == onnx::TensorProto::EXTERNAL);
      CHECK(location_of(t) == "out.onnx.data");
      ++external_phases;
    }
    if (t.name() == "Bc") CHECK(t.data_location() != onnx::TensorProto::EXTERNAL);
  }
  CHECK(external_phases == 8);
  CHECK(run_cli(in.string() + " --compare " + out.string(), dir).exit_code == 0);
  // Idempotent: the output has nothing left to rewrite, and rewriting it again changes no byte.
  const auto r2 = run_cli(out.string() + " -o " + again.string(), dir);
  INFO(r2.err);
  REQUIRE(r2.exit_code == 0);
  CHECK(read_file(dir.path / "again.onnx.data") == read_file(dir.path / "out.onnx.data"));
}

TEST_CASE("an external data file or an --input file that is a Git LFS pointer is refused, naming it", "[e2e][external][lfs]") {
  // What a checkout without LFS leaves in place of the data: 128 bytes, exactly the 2x1x4x4 float weight's length, so
  // the pointer's text was read as weights, verified and written out as OUT.data.
  const std::string pointer =
      "version https://git-lfs.github.com/spec/v1\n"
      "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 128\n";
  REQUIRE(pointer.size() == 128);
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    small (float[1,2,5,4] X) => (float[1,2,10,8] Y) {
      Y = ConvTranspose <group=2, strides=[2,2], pads=[1,1,1,1]> (X, W)
    })");
  set_random_initializer(*m.mutable_graph(), "W", onnx::TensorProto::FLOAT, {2, 1, 4, 4}, 7);
  TempDir dir;
  externalize(m, "W", dir.path / "weights.bin", 0, "weights.bin");
  std::ofstream(dir.path / "weights.bin", std::ios::binary) << pointer;
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  save(m, in);
  auto r = run_cli(in.string() + " -o " + out.string() + " --verify", dir);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("tensor 'W': external data file '") &&
                        Catch::Contains("weights.bin' is a Git LFS pointer, "
                                        "not tensor data") &&
                        Catch::Contains("git lfs pull"));
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(dir.path / "out.onnx.data"));

  // The same pointer as an --input tensor file.
  const auto plain = dir.path / "plain.onnx", x = dir.path / "x.npy";
  save(small_deconv_model(), plain);
  std::ofstream(x, std::ios::binary) << pointer;
  r = run_cli(plain.string() + " -o " + out.string() + " --verify --input X=" + x.string(), dir);
  INFO(r.err);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("x.npy is a Git LFS pointer, not a tensor file"));
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE(
    "copying with --copy writes the model as it was read with its data file renamed beside OUT and --protect keeps a model and its data",
    "[e2e][external][copy]") {
  TempDir dir;
  const auto in = dir.copy_example("migan_tiny_deconv.onnx");
  const auto first = dir.path / "first.onnx", copy = dir.path / "copy.onnx";
  REQUIRE(run_cli(in.string() + " -o " + first.string() + " --target xnnpack --external-data-threshold 4096 -q", dir).exit_code == 0);
  REQUIRE(fs::exists(dir.path / "first.onnx.data"));

  const auto copied = run_default_cli(first.string() + " -o " + copy.string() + " --copy", dir);
  INFO(copied.err);
  REQUIRE(copied.exit_code == 0);
  CHECK(copied.err.find("copied as it was read, rewriting nothing") != std::string::npos);
  // The same tensors in the same data layout, each pointing at copy.onnx.data: the model is first.onnx with its
  // locations renamed, byte for byte, and no tool metadata restamped.
  CHECK(read_file(dir.path / "copy.onnx.data") == read_file(dir.path / "first.onnx.data"));
  onnx::ModelProto expected;
  {
    std::ifstream stream(first, std::ios::binary);
    REQUIRE(expected.ParseFromIstream(&stream));
  }
  int renamed = 0;
  for (auto& t : *expected.mutable_graph()->mutable_initializer()) {
    for (auto& e : *t.mutable_external_data()) {
      if (e.key() == "location") {
        CHECK(e.value() == "first.onnx.data");
        e.set_value("copy.onnx.data");
        ++renamed;
      }
    }
  }
  CHECK(renamed > 0);
  CHECK(read_file(copy) == expected.SerializeAsString());
  // A model with every tensor inline is copied byte for byte, with no data file.
  const auto plain = dir.path / "plain.onnx";
  REQUIRE(run_default_cli(in.string() + " -o " + plain.string() + " --copy -q", dir).exit_code == 0);
  CHECK(read_file(plain) == read_file(in));
  CHECK_FALSE(fs::exists(dir.path / "plain.onnx.data"));

  // --protect: neither the model nor a data file it names is written over, by --copy or by a rewrite.
  const std::string first_bytes = read_file(first), data_bytes = read_file(dir.path / "first.onnx.data");
  auto refused = run_default_cli(plain.string() + " -o " + first.string() + " --copy --protect " + first.string(), dir);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("it is " + first.string() + " (a model --protect names), nothing written") != std::string::npos);
  refused = run_default_cli(plain.string() + " -o " + (dir.path / "first.onnx.data").string() + " --copy --protect " + first.string(), dir);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err.find("(external data that " + first.string() + " reads)") != std::string::npos);
  refused = run_cli(in.string() + " -o " + first.string() + " --target xnnpack --protect " + first.string(), dir);
  CHECK(refused.exit_code == 2);
  CHECK(read_file(first) == first_bytes);
  CHECK(read_file(dir.path / "first.onnx.data") == data_bytes);

  // --copy rewrites nothing: the options that ask for a rewrite, a check or a run are refused (exit 2, nothing written).
  for (const std::string extra : {" --verify", " --bench", " --target ort", " --forms nearest_mask", " --skip x", " --explicit-pad"}) {
    const auto r = run_default_cli(in.string() + " -o " + (dir.path / "never.onnx").string() + " --copy" + extra, dir);
    INFO(extra << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("--copy rewrites nothing") != std::string::npos);
  }
  CHECK(run_default_cli(in.string() + " " + plain.string() + " --out-dir " + (dir.path / "batch").string() + " --copy", dir).exit_code ==
        2);
  CHECK_FALSE(fs::exists(dir.path / "never.onnx"));
  CHECK_FALSE(fs::exists(dir.path / "batch"));
}
