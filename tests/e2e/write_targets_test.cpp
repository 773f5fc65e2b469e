// End-to-end tests of where the tool writes: never over a device, FIFO, socket or directory (nor a link to one),
// through a symlink to the file it names, `--report -` to stdout, nothing of a multi-file output when any part
// is refused, a report on every run that asks for one, and no empty --out-dir left behind.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "tests/e2e/cli_runner.h"
#include "tests/e2e/report_json.h"
#include "tests/support/model_builder.h"

using namespace dwdeconv::test;

namespace {

// A model that cannot be verified: its dims are symbolic and Sin is outside the executor's set, so it cannot
// run whole, and the deconv's input shape is unknown, so it cannot be checked on its own either.
onnx::ModelProto unverifiable_model() {
  auto m = parse_model(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    nv (float[1,4,H,W] X) => (float[1,4,H2,W2] Z) {
      Y = ConvTranspose <group=4, strides=[2,2], pads=[1,1,1,1]> (X, Wt)
      Z = Sin(Y)
    })");
  set_random_initializer(*m.mutable_graph(), "Wt", onnx::TensorProto::FLOAT, {4, 1, 4, 4}, 9);
  return m;
}

// Runs `script` with sh inside `dir`, with `$B` the binary and --target xnnpack, which rewrites the fixture's
// ConvTranspose (the default keeps it); stdout and stderr captured as run_cli does.
RunResult run_sh(const std::string& script, const TempDir& dir) {
  return run_shell("cd '" + dir.path.string() + "' && B='" + DWDECONV_CLI + " --target xnnpack' && { " + script + "; }", dir);
}

// Every entry under `root` (symlinks not followed): its kind, and a regular file's bytes or a link's target.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> entries;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const auto& p = e.path();
    if (p.filename() == ".stdout" || p.filename() == ".stderr") continue;
    if (fs::is_symlink(e.symlink_status())) {
      entries[p.string()] = "link -> " + fs::read_symlink(p).string();
    } else if (e.is_regular_file()) {
      entries[p.string()] = "file " + read_file(p);
    } else {
      entries[p.string()] = "kind " + std::to_string(static_cast<int>(e.status().type()));
    }
  }
  return entries;
}

// A listening-free Unix socket file at `p`; false when sockets cannot be bound here.
bool make_socket_file(const fs::path& p) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (p.string().size() >= sizeof addr.sun_path) {
    ::close(fd);
    return false;
  }
  std::strcpy(addr.sun_path, p.c_str());
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return bound;
}

}  // namespace

TEST_CASE("an output or report path that is a device, FIFO, socket or directory is refused, also through a symlink",
          "[e2e][safety][targets]") {
  TempDir dir;
  save(small_deconv_model(7), dir.path / "m.onnx");
  REQUIRE(::mkfifo((dir.path / "fifo").c_str(), 0644) == 0);
  fs::create_directory(dir.path / "adir");
  fs::create_symlink("fifo", dir.path / "to_fifo");
  fs::create_symlink("to_fifo", dir.path / "to_to_fifo");
  std::vector<std::pair<std::string, std::string>> targets = {
      {"fifo", "FIFO"}, {"adir", "directory"}, {"to_fifo", "FIFO"}, {"to_to_fifo", "FIFO"}};
  // A device node: only where this process may make one (root, or CAP_MKNOD), and only in the test's directory.
  if (::mknod((dir.path / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    fs::create_symlink("null", dir.path / "to_null");
    targets.push_back({"null", "character device"});
    targets.push_back({"to_null", "character device"});
  } else {
    WARN("mknod is not permitted here: the device-node cases are skipped");
  }
  if (make_socket_file(dir.path / "sock")) {
    targets.push_back({"sock", "socket"});
  } else {
    WARN("cannot bind a Unix socket here: the socket case is skipped");
  }
  const auto before = snapshot(dir.path);
  for (const auto& [target, kind] : targets) {
    for (const std::string& args : {"m.onnx -o " + target, "m.onnx -o out.onnx --report " + target, "m.onnx --dry-run --report " + target,
                                    "m.onnx --check --report " + target}) {
      INFO(args);
      const auto r = run_sh("$B " + args, dir);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.err, Catch::Contains(target) && Catch::Contains(kind));
      CHECK_THAT(r.err, Catch::Contains("-o -") && Catch::Contains("--report -"));
      CHECK(r.out.empty());
      CHECK(snapshot(dir.path) == before);  // the special file is still what it was, and nothing else was written
    }
  }
  // A batch: the model whose output would replace a directory fails with exit 2, the others are written.
  fs::create_directories(dir.path / "od" / "a.onnx");
  fs::copy_file(dir.path / "m.onnx", dir.path / "a.onnx");
  const auto batch = run_sh("$B a.onnx m.onnx --out-dir od", dir);
  CHECK(batch.exit_code == 2);
  CHECK_THAT(batch.err, Catch::Contains("od/a.onnx") && Catch::Contains("directory"));
  CHECK(fs::is_directory(dir.path / "od" / "a.onnx"));
  CHECK(fs::is_empty(dir.path / "od" / "a.onnx"));
  CHECK(fs::is_regular_file(dir.path / "od" / "m.onnx"));
}

TEST_CASE("an output or report path naming stdout or stderr through /proc/self/fd is refused on a pipe", "[e2e][safety][targets]") {
  TempDir dir;
  save(small_deconv_model(7), dir.path / "m.onnx");
  fs::create_symlink("/proc/self/fd/1", dir.path / "stdout");
  fs::create_symlink("/proc/self/fd/2", dir.path / "stderr");
  const auto before = snapshot(dir.path);
  // stdout (and for the report, stderr) is a pipe here, as in `--report /dev/stdout | jq`.
  const auto o = run_sh("{ $B m.onnx -o stdout; echo $? > rc; } | cat > captured.bin; cat rc; rm rc", dir);
  CHECK(o.out == "2\n");
  CHECK_THAT(o.err, Catch::Contains("stdout") && Catch::Contains("FIFO") && Catch::Contains("-o -"));
  CHECK(fs::is_symlink(dir.path / "stdout"));
  CHECK(read_file(dir.path / "captured.bin").empty());
  fs::remove(dir.path / "captured.bin");
  const auto rep = run_sh("{ $B m.onnx --dry-run --report stderr 2>&1 >/dev/null; echo $? > rc; } | cat >&2; cat rc; rm rc", dir);
  CHECK(rep.out == "2\n");
  CHECK_THAT(rep.err, Catch::Contains("stderr") && Catch::Contains("FIFO") && Catch::Contains("--report -"));
  CHECK(snapshot(dir.path) == before);
}

TEST_CASE("an output or report path through a symlink writes the file it points to and keeps the link", "[e2e][safety][targets]") {
  TempDir dir;
  save(small_deconv_model(7), dir.path / "m.onnx");
  fs::create_directory(dir.path / "real");
  std::ofstream(dir.path / "real" / "out.onnx") << "old model";
  std::ofstream(dir.path / "real" / "r.json") << "old report";
  ::chmod((dir.path / "real" / "out.onnx").c_str(), 0600);
  fs::create_symlink("real/out.onnx", dir.path / "out_link");
  fs::create_symlink("out_link", dir.path / "out_link2");  // a link to a link
  fs::create_symlink(dir.path / "real" / "r.json", dir.path / "r_link");
  fs::create_symlink("real/new.onnx", dir.path / "dangling");  // its target does not exist yet

  const auto r = run_sh("$B m.onnx -o out_link2 --report r_link", dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::is_symlink(dir.path / "out_link"));
  CHECK(fs::is_symlink(dir.path / "out_link2"));
  CHECK(fs::is_symlink(dir.path / "r_link"));
  const auto written = load(dir.path / "real" / "out.onnx");
  CHECK(count_ops(written, "ConvTranspose") == 0);
  CHECK(count_ops(written, "DepthToSpace") == 1);
  CHECK((fs::status(dir.path / "real" / "out.onnx").permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(read_report(dir.path / "real" / "r.json").at("exit_code") == 0);

  const auto d = run_sh("$B m.onnx -o dangling", dir);
  INFO(d.err);
  REQUIRE(d.exit_code == 0);
  CHECK(fs::is_symlink(dir.path / "dangling"));
  CHECK(count_ops(load(dir.path / "real" / "new.onnx"), "DepthToSpace") == 1);
  // No temporary file is left next to a link or its target.
  for (const auto& e : fs::recursive_directory_iterator(dir.path)) CHECK(e.path().filename().string().rfind(".dwdeconv-", 0) != 0);
}

TEST_CASE("a report named - goes to stdout, unless stdout carries the model or the plan", "[e2e][safety][targets]") {
  TempDir dir;
  save(small_deconv_model(7), dir.path / "m.onnx");
  const auto r = run_sh("$B m.onnx -o out.onnx --report -", dir);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("{"));
  const Report json = parse_report(r.out);
  CHECK(json.at("exit_code") == 0);
  CHECK(json.at("output") == "out.onnx");
  CHECK_FALSE(fs::exists(dir.path / "-"));
  CHECK(fs::exists(dir.path / "out.onnx"));

  const auto check = run_sh("$B out.onnx --check --report -", dir);
  CHECK(check.exit_code == 0);
  CHECK(parse_report(check.out).at("rewritten") == 0);

  fs::remove(dir.path / "out.onnx");
  const auto before = snapshot(dir.path);
  for (const std::string args : {"m.onnx -o - --report -", "m.onnx --dry-run --report -"}) {
    INFO(args);
    const auto refused = run_sh("$B " + args, dir);
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err, Catch::Contains("--report -"));
    CHECK(refused.out.empty());
    CHECK(snapshot(dir.path) == before);
  }
}

TEST_CASE("an output path that is a directory gets no data file either", "[e2e][safety][targets]") {
  TempDir dir;
  save(small_deconv_model(7), dir.path / "inl.onnx");
  fs::create_directory(dir.path / "E");
  std::ofstream(dir.path / "E.data") << "precious";
  const auto before = snapshot(dir.path);
  for (const std::string args : {"inl.onnx -o E --external-data-threshold 0", "inl.onnx -o E --external-data E.data"}) {
    INFO(args);
    const auto r = run_sh("$B " + args + " --report r.json", dir);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains("E") && Catch::Contains("directory"));
    CHECK(read_file(dir.path / "E.data") == "precious");
    CHECK(fs::is_empty(dir.path / "E"));
    // The report says what failed, and that nothing was written.
    const Report json = read_report(dir.path / "r.json");
    CHECK(json.at("exit_code") == 2);
    CHECK(json.at("output").is_null());
    CHECK(json.at("validation").is_null());
    fs::remove(dir.path / "r.json");
    CHECK(snapshot(dir.path) == before);
  }
  // A data file name that is a directory: the model is not written either.
  fs::create_directory(dir.path / "D.bin");
  const auto d = run_sh("$B inl.onnx -o out.onnx --external-data D.bin --external-data-threshold 0", dir);
  CHECK(d.exit_code == 2);
  CHECK_THAT(d.err, Catch::Contains("D.bin") && Catch::Contains("directory"));
  CHECK_FALSE(fs::exists(dir.path / "out.onnx"));
}

TEST_CASE("a failed run's report has null output and validation", "[e2e][safety][targets]") {
  TempDir dir;
  save(unverifiable_model(), dir.path / "nv.onnx");
  const auto r = run_sh("$B nv.onnx -o out.onnx --verify --report r.json", dir);
  CHECK(r.exit_code == 4);
  CHECK_FALSE(fs::exists(dir.path / "out.onnx"));
  const Report json = read_report(dir.path / "r.json");
  CHECK(json.at("exit_code") == 4);
  CHECK(json.at("output").is_null());
  CHECK(json.at("validation").is_null());
}

TEST_CASE("a compare run writes its report when it cannot verify or cannot load a model", "[e2e][safety][targets]") {
  TempDir dir;
  save(unverifiable_model(), dir.path / "nv.onnx");
  REQUIRE(run_sh("$B nv.onnx -o nv.out.onnx", dir).exit_code == 0);
  std::ofstream(dir.path / "junk.onnx") << "not a model";
  struct Case {
    std::string args;
    int code;
    std::string named;
  };
  const std::vector<Case> cases = {
      {"nv.onnx --compare nv.out.onnx", 4, "cannot verify"},
      {"nv.onnx --compare missing.onnx", 3, "missing.onnx"},
      {"nv.onnx --compare junk.onnx", 3, "junk.onnx"},
      {"junk.onnx --compare nv.out.onnx", 3, "junk.onnx"},
  };
  for (const auto& c : cases) {
    INFO(c.args);
    const auto r = run_sh("$B " + c.args + " --report r.json", dir);
    CHECK(r.exit_code == c.code);
    REQUIRE(fs::exists(dir.path / "r.json"));
    const Report json = read_report(dir.path / "r.json");
    CHECK(json.at("exit_code") == c.code);
    CHECK_THAT(report_error(json), Catch::Contains(c.named));
    CHECK(json.at("output").is_null());
    fs::remove(dir.path / "r.json");
  }
}

TEST_CASE("a batch whose models all fail leaves no --out-dir it created", "[e2e][safety][targets]") {
  TempDir dir;
  std::ofstream(dir.path / "a.onnx") << "not a model";
  std::ofstream(dir.path / "b.onnx") << "not one either";
  const auto r = run_sh("$B a.onnx b.onnx --out-dir nd/sub", dir);
  CHECK(r.exit_code == 3);
  CHECK_FALSE(fs::exists(dir.path / "nd"));
  // A directory that existed before is kept, and so is one the report went into.
  fs::create_directory(dir.path / "kept");
  CHECK(run_sh("$B a.onnx b.onnx --out-dir kept", dir).exit_code == 3);
  CHECK(fs::is_directory(dir.path / "kept"));
  CHECK(run_sh("$B a.onnx b.onnx --out-dir nd2 --report nd2/r.json", dir).exit_code == 3);
  const auto batch = entries_of(read_report(dir.path / "nd2" / "r.json"));
  CHECK(std::any_of(batch.begin(), batch.end(), [](const Report& entry) { return entry.at("exit_code") == 3; }));
}

TEST_CASE("a run that fails on its --input files still writes its report", "[e2e][safety][targets]") {
  TempDir dir;
  save(small_deconv_model(7), dir.path / "m.onnx");
  save(small_deconv_model(7), dir.path / "b.onnx");
  struct Case {
    std::string args;
    size_t entries;  // a batch report has one per model
  };
  for (const auto& c :
       std::vector<Case>{{"m.onnx -o out.onnx --verify", 1}, {"m.onnx --compare b.onnx", 1}, {"m.onnx b.onnx --out-dir od --verify", 2}}) {
    INFO(c.args);
    const auto r = run_sh("$B " + c.args + " --input X=missing.npy --report r.json", dir);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("missing.npy"));
    CHECK_FALSE(fs::exists(dir.path / "out.onnx"));
    CHECK_FALSE(fs::exists(dir.path / "od"));
    REQUIRE(fs::exists(dir.path / "r.json"));
    const auto entries = entries_of(read_report(dir.path / "r.json"));
    CHECK(entries.size() == c.entries);
    for (const auto& entry : entries) {
      CHECK(entry.at("exit_code") == 3);
      CHECK_THAT(report_error(entry), Catch::Contains("missing.npy"));
      CHECK(entry.at("output").is_null());
    }
    fs::remove(dir.path / "r.json");
  }
  // Never over a file the run reads, though the checks of a model's files come later in a run.
  const std::string before = read_file(dir.path / "b.onnx");
  for (const std::string args : {"m.onnx --compare b.onnx --report b.onnx", "b.onnx -o out.onnx --verify --report b.onnx"}) {
    INFO(args);
    const auto r = run_sh("$B " + args + " --input X=missing.npy", dir);
    CHECK(r.exit_code == 3);
    CHECK_THAT(r.err, Catch::Contains("refusing to write b.onnx"));
    CHECK(read_file(dir.path / "b.onnx") == before);
  }
}
