#include "onnx_io/model_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "core/cleanup.h"
#include "onnx_io/external_data.h"

namespace dwdeconv::onnx_io {
namespace {

namespace fs = std::filesystem;

std::string errno_text() { return std::strerror(errno); }

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The first line of a Git LFS pointer file, which a checkout without LFS leaves in place of the model. Its 'v'
// (0x76: field 14, wire type 6, which does not exist) never starts a protobuf, so only a failed parse checks it.
constexpr std::string_view kLfsPointerStart = "version https://git-lfs.github.com/spec/";

}  // namespace

bool is_lfs_pointer(std::string_view head) { return head.substr(0, kLfsPointerStart.size()) == kLfsPointerStart; }

core::Error lfs_pointer_error(const std::string& origin, const std::string& what) {
  return core::invalid_model(origin + " is a Git LFS pointer, not " + what +
                             "; check out with lfs: true "
                             "(actions/checkout), or run git lfs pull");
}

core::Result<onnx::ModelProto> parse_model(const std::string& bytes, const std::string& origin) {
  if (bytes.empty()) return core::invalid_model(origin + ": the file is empty, not an ONNX model");
  google::protobuf::io::ArrayInputStream array(bytes.data(), static_cast<int>(bytes.size()));
  google::protobuf::io::CodedInputStream coded(&array);
  coded.SetTotalBytesLimit(INT32_MAX);
  onnx::ModelProto model;
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    if (is_lfs_pointer(bytes)) return lfs_pointer_error(origin);
    return core::invalid_model(origin + ": not a valid ONNX ModelProto (protobuf parse failed; truncated or not a model)");
  }
  if (!model.has_graph()) return core::invalid_model(origin + ": the model has no graph");
  return model;
}

namespace {

// Streams and parses the model file itself, without its external data.
core::Result<onnx::ModelProto> parse_model_file(const std::string& path) {
  // Opened without blocking (a FIFO would wait for a writer forever) and read only once it is known to be a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return core::io_error(path + ": cannot open for reading: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return core::io_error(path + ": not a regular file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  if (st.st_size == 0) {
    ::close(fd);
    return core::invalid_model(path + ": the file is empty, not an ONNX model");
  }
  onnx::ModelProto model;
  bool parsed = false;
  int read_errno = 0;
  {
    google::protobuf::io::FileInputStream file(fd);
    google::protobuf::io::CodedInputStream coded(&file);
    coded.SetTotalBytesLimit(INT32_MAX);
    parsed = model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
    read_errno = file.GetErrno();
  }
  std::string head(kLfsPointerStart.size(), '\0');
  const ssize_t head_size = parsed || read_errno != 0 ? 0 : ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  if (read_errno != 0) return core::io_error(path + ": read failed: " + std::strerror(read_errno));
  if (!parsed) {
    if (head_size > 0 && is_lfs_pointer(std::string_view(head.data(), static_cast<size_t>(head_size)))) {
      return lfs_pointer_error(path);
    }
    return core::invalid_model(path + ": not a valid ONNX ModelProto (protobuf parse failed; truncated or not a model)");
  }
  if (!model.has_graph()) return core::invalid_model(path + ": the model has no graph");
  return model;
}

}  // namespace

core::Result<LoadedModel> load_model_with_external_data(const std::string& path) {
  auto model = parse_model_file(path);
  if (!model) return model.error();
  LoadedModel loaded{std::move(*model), {}, {}};
  auto external = load_external_data(loaded.model, directory_of(path), path);
  if (!external) return external.error();
  loaded.external_tensors = std::move(external->tensors);
  loaded.data_files = std::move(external->files);
  return loaded;
}

core::Result<std::set<std::string>> model_data_files(const std::string& path) {
  auto model = parse_model_file(path);
  if (!model) return model.error();
  return external_data_files(*model, directory_of(path));
}

namespace {

// The directory entry `p` names: its directory resolved (`..`, symlinks), its own name as given.
fs::path entry_of(const std::string& p) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(p, ec);  // not lexically_normal: `..` after a symlink is the kernel's to resolve
  fs::path dir = fs::weakly_canonical(absolute.parent_path(), ec);
  if (ec) dir = absolute.parent_path();
  return dir / absolute.filename();
}

}  // namespace

bool same_file(const std::string& a, const std::string& b) {
  if (entry_of(a) == entry_of(b)) return true;
  std::error_code ec;
  return fs::equivalent(a, b, ec);  // false, with ec set, when either does not exist
}

core::Result<onnx::ModelProto> load_model(const std::string& path) {
  auto loaded = load_model_with_external_data(path);
  if (!loaded) return loaded.error();
  return std::move(loaded->model);
}

core::Result<std::string> serialize_model(const onnx::ModelProto& model) {
  const size_t size = model.ByteSizeLong();
  if (size > static_cast<size_t>(INT32_MAX)) {
    return core::invalid_model("the model serializes to " + std::to_string(size) + " bytes, over protobuf's 2 GB limit");
  }
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    model.SerializeToCodedStream(&coded);
    if (coded.HadError()) return core::invalid_model("protobuf serialization failed");
  }
  return bytes;
}

namespace {

// A fresh name for a temporary file in `dir`; whether it is free is for the caller's O_EXCL or link() to find.
std::string temp_name(const std::string& dir) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t salt = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                        (static_cast<uint64_t>(::getpid()) << 32) ^ (counter++ * 0x9e3779b97f4a7c15ULL);
  char name[32];
  std::snprintf(name, sizeof name, "/.dwdeconv-%012llx", static_cast<unsigned long long>(salt & 0xffffffffffffULL));
  return dir + name;
}

// Creates a new temporary file in `dir` with mode 0666, which the kernel narrows by the umask (so new files
// follow it, default ACLs included); -1 with errno set on failure.
// The file is registered for removal should a signal end the run (core/cleanup.h).
int create_temp(const std::string& dir, std::string& temp) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    temp = temp_name(dir);
    const int fd = core::cleanup::open_registered(temp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

// Removes a registered file (a temporary file, a backup link, a target put there by this run), and forgets it.
void remove_registered(const std::string& path) {
  core::cleanup::atomically([&](core::cleanup::Registration& r) {
    ::unlink(path.c_str());
    r.forget(path);
  });
}

// Renames the temporary file `temp` over `target`: from then on it is the target, no longer a temporary file. With
// `undo_target`, the new target is registered instead, to be removed should a signal end the run before the files
// written with it are in place too. false with errno set on failure.
bool rename_into_place(const std::string& temp, const std::string& target, bool undo_target = false) {
  bool renamed = false;
  core::cleanup::atomically([&](core::cleanup::Registration& r) {
    renamed = std::rename(temp.c_str(), target.c_str()) == 0;
    if (!renamed) return;
    r.forget(temp);
    if (undo_target) r.file(target);
  });
  return renamed;
}

// Makes `backup`, a new hard link to the regular file `target` in its directory, so that the file can be put
// back after a rename replaced it (registered: a signal puts it back too); false with errno set on failure.
bool link_aside(const std::string& target, std::string& backup) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    backup = temp_name(directory_of(target));
    bool linked = false;
    core::cleanup::atomically([&](core::cleanup::Registration& r) {
      linked = ::link(target.c_str(), backup.c_str()) == 0;
      if (linked) r.restore(backup, target);
    });
    if (linked) return true;
    if (errno != EEXIST) break;
  }
  backup.clear();
  return false;
}

// What a file that is not a regular file is, for messages.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

// Why the rename may not replace `target` (links not followed: resolve_write_target followed them already), or
// "" when it is missing or a regular file. Checked again just before the rename, since the file may have
// changed since the run began.
std::string replace_refusal(const std::string& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  return target + " is now " + kind_of(st.st_mode) + ", not a regular file; refusing to replace it";
}

// The text of the symlink `path`; empty with errno set on failure.
std::string read_link(const std::string& path) {
  std::string text(256, '\0');
  for (;;) {
    const ssize_t n = ::readlink(path.c_str(), text.data(), text.size());
    if (n < 0) return "";
    if (static_cast<size_t>(n) < text.size()) {
      text.resize(static_cast<size_t>(n));
      return text;
    }
    text.resize(text.size() * 2);
  }
}

// Gives the temporary file the mode of the file it will replace, if there is one; then fsync and close.
// An error message, or "" on success.
std::string finish_temp(int fd, const std::string& path) {
  std::string failure;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::fchmod(fd, st.st_mode & 0777) != 0) {
    failure = std::string("chmod failed: ") + errno_text();
  } else if (::fsync(fd) != 0) {
    failure = std::string("fsync failed: ") + errno_text();
  }
  if (::close(fd) != 0 && failure.empty()) failure = std::string("close failed: ") + errno_text();
  return failure;
}

core::Status write_all(int fd, const std::string& bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return core::io_error(std::string("write failed: ") + errno_text());
    }
    written += static_cast<size_t>(n);
  }
  return core::Ok{};
}

}  // namespace

core::Result<std::string> resolve_write_target(const std::string& path) {
  constexpr int kMaxLinks = 40;  // the kernel's limit too
  auto refuse = [&path](const std::string& what) {
    return core::Error{core::ErrorKind::kUsage, path + " is " + what + ", not a regular file"};
  };
  // Follow the chain of links by hand, to name the file it ends at (a relative link is relative to its own
  // directory).
  std::string target = path, last_text;
  struct stat st {};
  for (int links = 0; ::lstat(target.c_str(), &st) == 0 && S_ISLNK(st.st_mode); ++links) {
    if (links == kMaxLinks) return refuse("a symlink loop");
    last_text = read_link(target);
    if (last_text.empty()) return core::io_error(path + ": cannot read the symlink " + target + ": " + errno_text());
    target = last_text.front() == '/' ? last_text : directory_of(target) + "/" + last_text;
  }
  if (target == path) {
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return refuse(kind_of(st.st_mode));
    return target;  // a regular file, or none yet (or one the write will fail to reach, with its own message)
  }
  // The kernel's view decides what the link leads to: links such as /proc/self/fd/1 name a pipe or a terminal
  // by a text ("pipe:[123]") that is not a path.
  struct stat followed {};
  if (::stat(path.c_str(), &followed) != 0) {
    if (errno == ELOOP) return refuse("a symlink loop");
    return target;  // the end of a dangling link: the write creates it
  }
  struct stat end {};
  const bool named = ::lstat(target.c_str(), &end) == 0;
  const std::string shown = named ? target : last_text;
  if (!S_ISREG(followed.st_mode)) return refuse("a symlink to " + shown + ", which is " + kind_of(followed.st_mode));
  if (!named || end.st_dev != followed.st_dev || end.st_ino != followed.st_ino) {
    return refuse("a symlink to " + shown + ", a file that cannot be reached by a path to replace it");
  }
  return target;
}

core::Status write_files_atomic(const std::vector<PendingFile>& files) {
  struct Staged {
    std::string path;    // as the caller named it
    std::string target;  // the file the rename replaces (resolve_write_target)
    std::string temp;
    std::string backup;  // a hard link to the file `target` held before, while a later rename may still fail
    bool existed = false;
    bool renamed = false;
  };
  std::vector<Staged> staged;
  // Every target is checked before anything is written.
  for (const auto& file : files) {
    auto target = resolve_write_target(file.path);
    if (!target) return target.error();
    staged.push_back({file.path, std::move(*target), "", "", false, false});
  }
  // Puts every target back as it was, and removes every temporary file and backup link.
  auto undo = [&staged]() {
    for (auto& s : staged) {
      if (s.renamed && s.existed) {
        if (rename_into_place(s.backup, s.target)) s.backup.clear();
      } else if (s.renamed) {
        remove_registered(s.target);
      } else if (!s.temp.empty()) {
        remove_registered(s.temp);
      }
      if (!s.backup.empty()) remove_registered(s.backup);
    }
  };
  for (size_t i = 0; i < staged.size(); ++i) {
    Staged& s = staged[i];
    const std::string dir = directory_of(s.target);
    const int fd = create_temp(dir, s.temp);
    if (fd < 0) {
      const std::string message = s.path + ": cannot create a temporary file in '" + dir + "': " + errno_text();
      s.temp.clear();
      undo();
      return core::io_error(message);
    }
    std::string failure;
    if (auto filled = files[i].fill(fd); !filled) {
      failure = filled.error().message;
      ::close(fd);
    } else {
      failure = finish_temp(fd, s.target);
    }
    if (!failure.empty()) {
      undo();
      return core::io_error(s.path + ": " + failure);
    }
  }
  for (size_t i = 0; i < staged.size(); ++i) {
    Staged& s = staged[i];
    std::string failure = replace_refusal(s.target);
    struct stat st {};
    // Until the last rename, a later one may still fail: keep the old file reachable, to put it back.
    if (failure.empty() && i + 1 < staged.size() && ::lstat(s.target.c_str(), &st) == 0) {
      s.existed = true;
      if (!link_aside(s.target, s.backup)) {
        failure = "cannot keep a hard link to the old file, to restore it if a later rename fails: " + errno_text();
        s.existed = false;
      }
    }
    // A target that did not exist is removed again should a signal come before the last rename (a backup puts back
    // one that did).
    const bool undo_target = !s.existed && i + 1 < staged.size();
    if (failure.empty() && !rename_into_place(s.temp, s.target, undo_target)) failure = std::string("rename failed: ") + errno_text();
    if (!failure.empty()) {
      undo();
      return core::io_error(s.path + ": " + failure);
    }
    s.renamed = true;
    s.temp.clear();
  }
  // Every file is in place: nothing is to be undone any more.
  for (const auto& s : staged) core::cleanup::forget(s.target);
  for (const auto& s : staged) {
    if (!s.backup.empty()) remove_registered(s.backup);
  }
  return core::Ok{};
}

core::Status write_file_atomic(const std::string& path, const std::function<core::Status(int fd)>& fill) {
  return write_files_atomic({{path, fill}});
}

core::Status write_file_atomic(const std::string& path, const std::string& bytes) {
  return write_file_atomic(path, [&bytes](int fd) { return write_all(fd, bytes); });
}

core::Result<StagedFile> StagedFile::create(const std::string& path) {
  auto target = resolve_write_target(path);
  if (!target) return target.error();
  const std::string dir = directory_of(*target);
  std::string temp;
  const int fd = create_temp(dir, temp);
  if (fd < 0) return core::io_error(path + ": cannot create a temporary file in '" + dir + "': " + errno_text());
  return StagedFile(path, std::move(*target), temp, fd);
}

core::Status StagedFile::commit(const std::string& bytes) {
  assert(fd_ >= 0);
  std::string failure;
  if (auto written = write_all(fd_, bytes); !written) {
    failure = written.error().message;
    ::close(fd_);
  } else {
    failure = finish_temp(fd_, target_);
  }
  fd_ = -1;
  if (failure.empty()) failure = replace_refusal(target_);
  if (failure.empty() && !rename_into_place(temp_, target_)) failure = std::string("rename failed: ") + errno_text();
  if (!failure.empty()) {
    remove_registered(temp_);
    temp_.clear();
    return core::io_error(path_ + ": " + failure);
  }
  temp_.clear();
  return core::Ok{};
}

void StagedFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) remove_registered(temp_);
  fd_ = -1;
  temp_.clear();
}

StagedFile::StagedFile(StagedFile&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      temp_(std::exchange(other.temp_, std::string())),
      fd_(std::exchange(other.fd_, -1)) {}

StagedFile& StagedFile::operator=(StagedFile&& other) noexcept {
  if (this != &other) {
    discard();
    path_ = std::move(other.path_);
    target_ = std::move(other.target_);
    temp_ = std::exchange(other.temp_, std::string());
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

StagedFile::~StagedFile() { discard(); }

core::Status serialize_to_fd(const onnx::ModelProto& model, int fd) {
  google::protobuf::io::FileOutputStream file(fd);
  bool ok = false;
  {
    google::protobuf::io::CodedOutputStream coded(&file);
    coded.SetSerializationDeterministic(true);
    model.SerializeToCodedStream(&coded);
    ok = !coded.HadError();
  }
  ok = file.Flush() && ok;
  if (!ok) return core::io_error(std::string("write failed: ") + std::strerror(file.GetErrno() ? file.GetErrno() : EIO));
  return core::Ok{};
}

core::Status save_model(const onnx::ModelProto& model, const std::string& path) {
  const size_t size = model.ByteSizeLong();
  if (size > static_cast<size_t>(INT32_MAX)) {
    return core::invalid_model(path + ": the model serializes to " + std::to_string(size) +
                               " bytes, over protobuf's 2 GB limit; store its tensors outside with --external-data");
  }
  return write_file_atomic(path, [&model](int fd) { return serialize_to_fd(model, fd); });
}

int64_t default_opset(const onnx::ModelProto& model) {
  for (const auto& opset : model.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") return opset.version();
  }
  return 0;
}

}  // namespace dwdeconv::onnx_io
