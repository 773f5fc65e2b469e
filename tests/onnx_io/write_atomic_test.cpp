// write_file_atomic, write_files_atomic and StagedFile never replace what is not a regular file, write through
// a symlink to the file it names, and leave every target as it was when a multi-file write fails part way.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "onnx_io/model_io.h"

namespace {

namespace fs = std::filesystem;
using namespace dwdeconv;

struct Scratch {
  fs::path path;
  Scratch() {
    std::string tmpl = (fs::temp_directory_path() / "dwdeconv-io-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~Scratch() { fs::remove_all(path); }
  fs::path operator/(const std::string& name) const { return path / name; }
};

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// Every entry of `dir` (not recursive, links not followed) with its kind and, for a file, its bytes.
std::map<std::string, std::string> listing(const fs::path& dir) {
  std::map<std::string, std::string> entries;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto status = e.symlink_status();
    entries[e.path().filename().string()] = fs::is_regular_file(status) ? "file " + contents(e.path())
                                            : fs::is_symlink(status)    ? "link " + fs::read_symlink(e.path()).string()
                                                                        : "kind " + std::to_string(static_cast<int>(status.type()));
  }
  return entries;
}

core::Status write_bytes(int fd, const std::string& bytes) {
  return ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) ? core::Status(core::Ok{})
                                                                                       : core::Status(core::io_error("write"));
}

// The error message of `status`; empty when it succeeded.
std::string message_of(const core::Status& status) { return status.ok() ? std::string() : status.error().message; }

}  // namespace

TEST_CASE("write_file_atomic refuses to replace a FIFO, a directory or a link to one", "[onnx_io][write]") {
  Scratch dir;
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0644) == 0);
  fs::create_directory(dir / "sub");
  fs::create_symlink("fifo", dir / "to_fifo");
  fs::create_symlink("sub", dir / "to_sub");
  fs::create_symlink("to_fifo", dir / "loop_a");  // a chain ending at the FIFO
  fs::create_symlink("self", dir / "self");       // a loop
  const auto before = listing(dir.path);
  for (const std::string name : {"fifo", "sub", "to_fifo", "to_sub", "loop_a", "self"}) {
    INFO(name);
    const auto status = onnx_io::write_file_atomic((dir / name).string(), std::string("bytes"));
    REQUIRE_FALSE(status.ok());
    CHECK_THAT(status.error().message, Catch::Contains(name));
    auto staged = onnx_io::StagedFile::create((dir / name).string());
    CHECK_FALSE(staged.ok());
    CHECK(listing(dir.path) == before);  // still a FIFO, a directory, links; no temporary file
  }
  CHECK_THAT(message_of(onnx_io::write_file_atomic((dir / "to_fifo").string(), std::string("x"))), Catch::Contains("FIFO"));
  CHECK_THAT(message_of(onnx_io::write_file_atomic((dir / "sub").string(), std::string("x"))), Catch::Contains("directory"));
}

TEST_CASE("write_file_atomic and StagedFile write through a symlink and keep it a link", "[onnx_io][write]") {
  Scratch dir;
  fs::create_directory(dir / "real");
  put(dir / "real" / "f", "old");
  ::chmod((dir / "real" / "f").c_str(), 0640);
  fs::create_symlink("real/f", dir / "link");
  fs::create_symlink(dir / "link", dir / "link2");  // absolute, to a relative one
  REQUIRE(onnx_io::write_file_atomic((dir / "link2").string(), std::string("new")).ok());
  CHECK(fs::is_symlink(dir / "link"));
  CHECK(fs::is_symlink(dir / "link2"));
  CHECK(contents(dir / "real" / "f") == "new");
  CHECK((fs::status(dir / "real" / "f").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));

  auto staged = onnx_io::StagedFile::create((dir / "link").string());
  REQUIRE(staged.ok());
  REQUIRE(staged->commit("staged").ok());
  CHECK(fs::is_symlink(dir / "link"));
  CHECK(contents(dir / "real" / "f") == "staged");

  fs::create_symlink("real/new", dir / "dangling");
  REQUIRE(onnx_io::write_file_atomic((dir / "dangling").string(), std::string("created")).ok());
  CHECK(fs::is_symlink(dir / "dangling"));
  CHECK(contents(dir / "real" / "new") == "created");
  CHECK(listing(dir / "real").size() == 2);  // f and new, no temporary file
}

TEST_CASE("StagedFile does not rename over a path that became a FIFO after it was staged", "[onnx_io][write]") {
  Scratch dir;
  auto staged = onnx_io::StagedFile::create((dir / "r.json").string());
  REQUIRE(staged.ok());
  REQUIRE(::mkfifo((dir / "r.json").c_str(), 0644) == 0);
  const auto committed = staged->commit("{}");
  REQUIRE_FALSE(committed.ok());
  CHECK_THAT(committed.error().message, Catch::Contains("r.json") && Catch::Contains("FIFO"));
  const auto entries = listing(dir.path);
  REQUIRE(entries.size() == 1);
  CHECK(fs::is_fifo(dir / "r.json"));
}

TEST_CASE("write_files_atomic renames nothing when a later target is not a regular file", "[onnx_io][write]") {
  Scratch dir;
  put(dir / "E.data", "precious");
  fs::create_directory(dir / "E");
  const auto before = listing(dir.path);
  const auto status = onnx_io::write_files_atomic({{(dir / "E.data").string(), [](int fd) { return write_bytes(fd, "tensor bytes"); }},
                                                   {(dir / "E").string(), [](int fd) { return write_bytes(fd, "model"); }}});
  REQUIRE_FALSE(status.ok());
  CHECK_THAT(status.error().message, Catch::Contains("directory"));
  CHECK(listing(dir.path) == before);
  CHECK(contents(dir / "E.data") == "precious");
}

TEST_CASE("write_files_atomic restores the files it replaced when a later rename fails", "[onnx_io][write]") {
  Scratch dir;
  // The second file's temporary file vanishes before the renames (as a cleaner of stale files might remove
  // it), so its rename fails after the first file was renamed into place.
  auto lose_temp = [](int fd) {
    char link[64], target[4096];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = ::readlink(link, target, sizeof target - 1);
    if (n <= 0) return core::Status(core::io_error("readlink"));
    target[n] = '\0';
    ::unlink(target);
    return write_bytes(fd, "model");
  };
  SECTION("an existing first file gets its old bytes back") {
    put(dir / "m.onnx.data", "old data");
    ::chmod((dir / "m.onnx.data").c_str(), 0600);
    put(dir / "m.onnx", "old model");
    const auto before = listing(dir.path);
    const auto status = onnx_io::write_files_atomic(
        {{(dir / "m.onnx.data").string(), [](int fd) { return write_bytes(fd, "new data"); }}, {(dir / "m.onnx").string(), lose_temp}});
    REQUIRE_FALSE(status.ok());
    CHECK_THAT(status.error().message, Catch::Contains("m.onnx") && Catch::Contains("rename failed"));
    CHECK(listing(dir.path) == before);  // old bytes in both, no temporary or backup file
    CHECK((fs::status(dir / "m.onnx.data").permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  }
  SECTION("a first file that did not exist is removed again") {
    put(dir / "m.onnx", "old model");
    const auto before = listing(dir.path);
    const auto status = onnx_io::write_files_atomic(
        {{(dir / "m.onnx.data").string(), [](int fd) { return write_bytes(fd, "new data"); }}, {(dir / "m.onnx").string(), lose_temp}});
    REQUIRE_FALSE(status.ok());
    CHECK(listing(dir.path) == before);
    CHECK_FALSE(fs::exists(dir / "m.onnx.data"));
  }
}
