// End-to-end tests of what the tool may write: never a file the input reads, never one file twice in a batch,
// the report checked before any model is written, file modes that follow the umask, and a report that is
// valid UTF-8 whatever bytes the model's names hold.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv::test;

namespace {

// deconv_model, its weight `W` stored in `data_name` next to the model, at offset 0.
void write_external_model(const fs::path& model_path, const std::string& data_name) {
  auto m = small_deconv_model();
  auto& w = *m.mutable_graph()->mutable_initializer(0);
  REQUIRE(w.name() == "W");
  std::ofstream(model_path.parent_path() / data_name, std::ios::binary) << w.raw_data();
  const std::string length = std::to_string(w.raw_data().size());
  w.clear_raw_data();
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : {std::pair<std::string, std::string>{"location", data_name}, {"offset", "0"}, {"length", length}}) {
    auto* e = w.add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  save(m, model_path);
}

// Every file under `root` with its bytes, to show that a refused run changed nothing and left no temporary file.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file()) files[e.path().string()] = read_file(e.path());
  }
  return files;
}

// Runs the binary under `umask` (shell words in `args`).
int run_with_umask(const std::string& umask, const std::string& args) {
  const std::string cmd = "umask " + umask + "; " + std::string(DWDECONV_CLI) + " " + args + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Strict UTF-8: no stray continuation bytes, no truncated sequences, no overlong forms, no surrogates, nothing
// above U+10FFFF.
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3f);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

}  // namespace

TEST_CASE("a batch refuses --external-data NAME: every model would write the same file", "[e2e][safety]") {
  TempDir dir;
  fs::copy_file(fs::path(DWDECONV_EXAMPLES_DIR) / "upsampler_small.onnx", dir.path / "a.onnx");
  fs::copy_file(fs::path(DWDECONV_EXAMPLES_DIR) / "migan_tiny_deconv.onnx", dir.path / "b.onnx");
  const auto out = dir.path / "out";
  const auto r = run_cli((dir.path / "a.onnx").string() + " " + (dir.path / "b.onnx").string() + " --out-dir " + out.string() +
                             " --external-data w.bin --external-data-threshold 16",
                         dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--external-data-threshold"));
  CHECK_THAT(r.err, Catch::Contains(".data"));
  CHECK((!fs::exists(out) || fs::is_empty(out)));
  // The threshold alone gives each output its own data file, and both read back their own weights.
  const auto ok = run_cli((dir.path / "a.onnx").string() + " " + (dir.path / "b.onnx").string() + " --out-dir " + out.string() +
                              " --external-data-threshold 16",
                          dir);
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK(fs::exists(out / "a.onnx.data"));
  CHECK(fs::exists(out / "b.onnx.data"));
  CHECK(
      run_cli((dir.path / "a.onnx").string() + " --compare " + (out / "a.onnx").string() + " --input-shape image=1x8x4x4", dir).exit_code ==
      0);
  CHECK(run_cli((dir.path / "b.onnx").string() + " --compare " + (out / "b.onnx").string(), dir).exit_code == 0);
}

TEST_CASE("a batch refuses one model's data file being another model's output", "[e2e][safety]") {
  TempDir dir;
  fs::create_directories(dir.path / "a");
  fs::create_directories(dir.path / "b");
  write_external_model(dir.path / "a" / "x.onnx", "w.bin");
  fs::copy_file(fs::path(DWDECONV_EXAMPLES_DIR) / "upsampler_small.onnx", dir.path / "b" / "x.onnx.data");
  const auto out = dir.path / "out";
  const auto r =
      run_cli((dir.path / "a" / "x.onnx").string() + " " + (dir.path / "b" / "x.onnx.data").string() + " --out-dir " + out.string(), dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains((out / "x.onnx.data").string()));
  CHECK((!fs::exists(out) || fs::is_empty(out)));
}

TEST_CASE("a batch never writes over a file another model of the batch reads", "[e2e][safety]") {
  TempDir dir;
  fs::copy_file(fs::path(DWDECONV_EXAMPLES_DIR) / "upsampler_small.onnx", dir.path / "a.onnx");
  write_external_model(dir.path / "b.onnx", "a.x.onnx.data");  // b's weights are in a file named like a's output data
  const auto before = snapshot(dir.path);
  // Beside the inputs: a's output data file (a.x.onnx.data, by the threshold) is b's weight file.
  const auto r = run_cli((dir.path / "a.onnx").string() + " " + (dir.path / "b.onnx").string() + " --out-dir " + dir.path.string() +
                             " --suffix .x --external-data-threshold 16",
                         dir);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains((dir.path / "a.x.onnx.data").string()) && Catch::Contains("external data that"));
  CHECK(snapshot(dir.path) == before);
}

TEST_CASE("the data file of --external-data is never a file the input reads, however the path is spelled", "[e2e][safety]") {
  TempDir dir;
  const auto a = dir.path / "A";
  fs::create_directories(a / "sub");
  write_external_model(a / "model.onnx", "weights.bin");
  fs::create_directory_symlink(a, dir.path / "L");
  fs::create_hard_link(a / "weights.bin", a / "hard.bin");
  const auto before = snapshot(dir.path);
  const auto in = (a / "model.onnx").string();
  struct Case {
    std::string what, args, named;
  };
  const std::vector<Case> cases = {
      {"the input's data file", "-o " + (a / "out.onnx").string() + " --external-data weights.bin", "weights.bin"},
      {"the input model", "-o " + (a / "out.onnx").string() + " --external-data model.onnx", "model.onnx"},
      {"through ..", "-o " + (a / "sub" / ".." / "out.onnx").string() + " --external-data weights.bin", "weights.bin"},
      {"through a symlinked directory", "-o " + (dir.path / "L" / "out.onnx").string() + " --external-data weights.bin", "weights.bin"},
      {"a hard link of the data file", "-o " + (a / "out.onnx").string() + " --external-data hard.bin", "hard.bin"},
      {"-o naming the data file", "-o " + (a / "weights.bin").string(), "weights.bin"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const auto r = run_cli(in + " " + c.args, dir);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.named));
    CHECK_THAT(r.err, Catch::Contains(in));
    CHECK(snapshot(dir.path) == before);
    CHECK_FALSE(fs::exists(a / "out.onnx"));
  }
}

TEST_CASE("an in-place rewrite of a model with external data needs a new data file name", "[e2e][safety]") {
  TempDir dir;
  const auto in = dir.path / "model.onnx";
  write_external_model(in, "model.onnx.data");
  const std::string data_before = read_file(dir.path / "model.onnx.data"), model_before = read_file(in);
  const auto refused = run_cli(in.string() + " -o " + in.string(), dir);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Catch::Contains("--external-data"));
  CHECK(read_file(in) == model_before);
  CHECK(read_file(dir.path / "model.onnx.data") == data_before);

  const auto ok = run_cli(in.string() + " -o " + in.string() + " --external-data new.bin", dir);
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK(read_file(dir.path / "model.onnx.data") == data_before);  // the old data file is not written
  CHECK(fs::file_size(dir.path / "new.bin") > 0);
  const auto rewritten = load(in);
  CHECK(count_ops(rewritten, "ConvTranspose") == 0);
  CHECK(count_ops(rewritten, "DepthToSpace") == 1);
}

TEST_CASE("the report is never the input, its data, the output, or a --compare model", "[e2e][safety]") {
  TempDir dir;
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  write_external_model(in, "weights.bin");
  REQUIRE(run_cli(in.string() + " -o " + (dir.path / "other.onnx").string(), dir).exit_code == 0);
  const auto before = snapshot(dir.path);
  for (const std::string& report : {in.string(), (dir.path / "weights.bin").string(), out.string()}) {
    INFO(report);
    const auto r = run_cli(in.string() + " -o " + out.string() + " --report " + report, dir);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(report));
    CHECK(snapshot(dir.path) == before);
  }
  const auto dry = run_cli(in.string() + " --dry-run --report " + (dir.path / "weights.bin").string(), dir);
  CHECK(dry.exit_code == 2);
  CHECK(snapshot(dir.path) == before);
  for (const std::string& report : {in.string(), (dir.path / "other.onnx").string(), (dir.path / "other.onnx.data").string()}) {
    INFO(report);
    const auto r = run_cli(in.string() + " --compare " + (dir.path / "other.onnx").string() + " --report " + report, dir);
    CHECK(r.exit_code == 2);
    CHECK(snapshot(dir.path) == before);
  }
}

TEST_CASE("an unwritable report path fails before any model is written", "[e2e][safety]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto out = dir.path / "out.onnx";
  const auto r = run_cli(in.string() + " -o " + out.string() + " --report " + (dir.path / "missing_dir" / "r.json").string(), dir);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("missing_dir"));
  CHECK_FALSE(fs::exists(out));
  CHECK(dir.file_count() == 1);  // only the input, no temporary file

  fs::copy_file(in, dir.path / "b.onnx");
  const auto batch = run_cli(in.string() + " " + (dir.path / "b.onnx").string() + " --out-dir " + (dir.path / "o").string() + " --report " +
                                 (dir.path / "missing_dir" / "r.json").string(),
                             dir);
  CHECK(batch.exit_code == 3);
  CHECK_FALSE(fs::exists(dir.path / "o"));

  // The report may go into an --out-dir that the run creates.
  const auto inside = run_cli(in.string() + " " + (dir.path / "b.onnx").string() + " --out-dir " + (dir.path / "o" / "p").string() +
                                  " --report " + (dir.path / "o" / "p" / "r.json").string(),
                              dir);
  INFO(inside.err);
  CHECK(inside.exit_code == 0);
  CHECK(fs::exists(dir.path / "o" / "p" / "r.json"));
  CHECK(fs::exists(dir.path / "o" / "p" / "b.onnx"));
}

TEST_CASE("new files follow the umask and a file replaced in place keeps its mode", "[e2e][safety]") {
  TempDir dir;
  const auto in = dir.copy_example();
  const auto out = dir.path / "out.onnx", report = dir.path / "r.json";
  const std::string ext = " --external-data-threshold 16 --report " + report.string();
  REQUIRE(run_with_umask("077", in.string() + " -o " + out.string() + ext) == 0);
  CHECK(mode_of(out) == 0600);
  CHECK(mode_of(dir.path / "out.onnx.data") == 0600);
  CHECK(mode_of(report) == 0600);
  fs::remove(out);
  fs::remove(dir.path / "out.onnx.data");
  fs::remove(report);
  REQUIRE(run_with_umask("022", in.string() + " -o " + out.string() + ext) == 0);
  CHECK(mode_of(out) == 0644);
  CHECK(mode_of(dir.path / "out.onnx.data") == 0644);
  CHECK(mode_of(report) == 0644);
  // Replaced files keep their mode, whatever the umask.
  fs::permissions(out, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  fs::permissions(report, fs::perms::owner_read | fs::perms::owner_write);
  REQUIRE(run_with_umask("000", in.string() + " -o " + out.string() + ext) == 0);
  CHECK(mode_of(out) == 0640);
  CHECK(mode_of(report) == 0600);
  // A 0600 model rewritten in place under umask 077 stays private.
  fs::permissions(in, fs::perms::owner_read | fs::perms::owner_write);
  REQUIRE(run_with_umask("077", in.string() + " -o " + in.string()) == 0);
  CHECK(mode_of(in) == 0600);
}

TEST_CASE("the report is valid UTF-8 whatever bytes a node name holds", "[e2e][safety]") {
  TempDir dir;
  const auto in = dir.path / "model.onnx";
  struct Case {
    std::string name, expected;
  };
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  const std::vector<Case> cases = {
      {"up\xff\xfe", "up" + r + r},
      {"ok \xC3\xA9 \xF0\x9F\x98\x80", "ok \xC3\xA9 \xF0\x9F\x98\x80"},  // valid 2- and 4-byte sequences stay
      {"over\xC0\xAF", "over" + r + r},                                  // an overlong '/'
      {"sur\xED\xA0\x80", "sur" + r + r + r},                            // a UTF-16 surrogate
      {"big\xF4\x90\x80\x80", "big" + r + r + r + r},                    // above U+10FFFF
      {"cut\xE2\x82", "cut" + r + r},                                    // a truncated sequence
  };
  for (const auto& c : cases) {
    INFO(c.expected);
    auto m = small_deconv_model();
    name_node(m, "Y", c.name);
    save(m, in);
    const auto report = dir.path / "r.json";
    const auto run = run_cli(in.string() + " -o " + (dir.path / "out.onnx").string() + " --report " + report.string(), dir);
    INFO(run.err);
    REQUIRE(run.exit_code == 0);
    const std::string json = read_file(report);
    CHECK(valid_utf8(json));
    const Report parsed = parse_report(json);
    const Report& node = row_named(parsed.at("nodes"), c.expected);
    CHECK(node.at("graph") == "main");
    CHECK(node.at("decision") == "rewritten");
  }
}

TEST_CASE("log lines carry node names without terminal controls, ill-formed UTF-8 or forged lines", "[e2e][safety]") {
  TempDir dir;
  const auto in = dir.path / "model.onnx";
  auto m = small_deconv_model();
  // Colour, a window title (OSC ... BEL), DEL, a byte that is not UTF-8, and a newline that starts a fake line.
  name_node(m, "Y", "up\x1b[31mRED\x1b]0;title\x07\x7f\xff\ndwdeconv-rewrite: error: forged");
  save(m, in);
  const auto run = run_cli(in.string() + " --check", dir);  // logs the name on stderr: "would be rewritten"
  REQUIRE(run.exit_code == 1);
  INFO(run.err);
  CHECK(valid_utf8(run.err));
  for (const char control : {'\x1b', '\x07', '\x7f'}) CHECK(run.err.find(control) == std::string::npos);
  CHECK_THAT(run.err, Catch::Contains("ConvTranspose 'up\\x1b[31mRED\\x1b]0;title\\x07\\x7f\\xff\\x0adwdeconv-rewrite: error: forged'"));
  // The newline in the name stays on its line as \x0a; every line of the log is one of the tool's.
  std::istringstream lines(run.err);
  for (std::string line; std::getline(lines, line);) {
    CHECK(line.rfind("dwdeconv-rewrite: ", 0) == 0);
    CHECK(line.rfind("dwdeconv-rewrite: error: forged", 0) != 0);
  }
}

TEST_CASE("no line of the log, the plan or the tune lines can be a CI workflow command, whatever a model's names hold", "[e2e][safety]") {
  // GitHub's runner trims a line's leading spaces and takes "::" at its start for a command: a name holding
  // "\n  ::error::" was logged as an indented continuation, and became one. Names from every place they are shown:
  // a kept node's reason (a Pad name), the plan's rows, the summary's per-output lines, the tune lines.
  const std::string evil = "\n  ::error file=x::forged\r\n::stop-commands::t\xe2\x80\xa8::warning::u\xe2\x80\xae";
  TempDir dir;
  auto m = small_deconv_model();
  name_node(m, "Y", "up" + evil);
  m.mutable_graph()->mutable_output(0)->set_name("Y" + evil);
  m.mutable_graph()->mutable_node(0)->set_output(0, "Y" + evil);
  const auto in = dir.path / "model.onnx", out = dir.path / "out.onnx";
  save(m, in);
  for (const std::string& args :
       std::vector<std::string>{" --dry-run --tune --runs 2", " -o " + out.string() + " --verify -v", " --check"}) {
    const auto r = run_cli(in.string() + args, dir);
    INFO(args << "\n" << r.err << r.out);
    CHECK(r.exit_code <= 1);
    for (const std::string& text : {r.err, r.out}) {
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        const auto first = line.find_first_not_of(" \t\r");
        CHECK((first == std::string::npos || line.compare(first, 2, "::") != 0));
      }
      CHECK(text.find('\r') == std::string::npos);
      CHECK(text.find("\xe2\x80\xa8") == std::string::npos);  // LINE SEPARATOR shown as \u2028
      CHECK(text.find("\xe2\x80\xae") == std::string::npos);  // RIGHT-TO-LEFT OVERRIDE shown as \u202e
    }
  }
}

TEST_CASE("a model's file name holding a newline is shown escaped in a batch's plan and log, never as a line of its own", "[e2e][safety]") {
  // Batch --dry-run printed "a\n::error::PWN.onnx:" as the model's header on stdout: a workflow command on GitHub
  // (review finding 5), and the log split the name into continuation lines (finding 24).
  TempDir dir;
  const std::string evil = "a\n::error::PWN.onnx";
  save(small_deconv_model(), dir.path / evil);
  save(small_deconv_model(), dir.path / "b.onnx");
  const auto r = run_shell(std::string("cd ") + dir.path.string() + " && " + DWDECONV_CLI +
                               " \"$(printf 'a\\n::error::PWN.onnx')\" b.onnx " + "--dry-run --tune --runs 2 --target xnnpack",
                           dir);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  for (const std::string& text : {r.out, r.err}) {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      const auto first = line.find_first_not_of(" \t");
      CHECK((first == std::string::npos || line.compare(first, 2, "::") != 0));
    }
  }
  CHECK_THAT(r.out, Catch::Contains("a\\x0a::error::PWN.onnx:\n"));
  CHECK_THAT(r.err, Catch::Contains("a\\x0a::error::PWN.onnx: "));
  // Each model's tune lines follow its header, before its plan (finding 27).
  const auto header = r.out.find("b.onnx:\n"), tune = r.out.find("tune: ", header), plan = r.out.find("rewrite ", header);
  REQUIRE(header != std::string::npos);
  CHECK(tune != std::string::npos);
  CHECK(tune < plan);
}
