// Loading and saving ModelProto files.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::onnx_io {

// A model read from disk, with the keys of the tensors whose data lived in external files (now inline; see
// ExternalDataRead in external_data.h) and the data files it read.
struct LoadedModel {
  onnx::ModelProto model;
  std::set<std::string> external_tensors;
  std::set<std::string> data_files;
};

// Parses a model file, streaming from the file (no second copy of its bytes in memory), and reads its external
// data (see external_data.h). Errors name the file: unreadable, empty, not a ModelProto (a Git LFS pointer
// is called one, with how to fetch the model), no graph, bad external data.
core::Result<LoadedModel> load_model_with_external_data(const std::string& path);

// load_model_with_external_data for callers that do not write the model back.
core::Result<onnx::ModelProto> load_model(const std::string& path);

// The external data files the model at `path` names (see external_data_files), without reading them.
core::Result<std::set<std::string>> model_data_files(const std::string& path);

// True when writing `a` would write over the file `b`: both name the same directory entry once `..` and the
// symlinks of their directories are resolved, or both exist and are the same file (a symlink or hard link).
bool same_file(const std::string& a, const std::string& b);

// True when `bytes` (a file's first bytes, or all of a small one) are a Git LFS pointer: what a checkout without LFS
// leaves in place of a large file. Every file a run reads for a model checks it: the model, its external data, the
// --input tensors.
bool is_lfs_pointer(std::string_view bytes);

// The error for `origin`, which is a Git LFS pointer, not `what` ("an ONNX model", "tensor data"): with how to fetch it.
core::Error lfs_pointer_error(const std::string& origin, const std::string& what = "an ONNX model");

// Parses a model from bytes; `origin` names the source in errors, which are those of a model file.
core::Result<onnx::ModelProto> parse_model(const std::string& bytes, const std::string& origin);

// Serializes deterministically (same model, same bytes).
core::Result<std::string> serialize_model(const onnx::ModelProto& model);

// The file that writing `path` creates or replaces: `path`, or when it is a symlink the file its chain of links
// ends at (which may not exist yet), so that a write replaces that file and the link stays a link. A usage
// error, naming `path` and what it is, when that file exists and is not a regular file (a directory, a device,
// a FIFO or a socket), or the links loop: an atomic write would replace it with a regular file.
core::Result<std::string> resolve_write_target(const std::string& path);

// Writes `path` atomically: `fill` writes to a temporary file in the target directory (by its descriptor), then
// fsync and rename. On any failure the temporary file is removed and `path` is untouched, so `path` may be the
// input file. A new file gets 0666 less the umask; a replaced file keeps its mode. `fill` returns an Error on
// failure. A symlink is written through (see resolve_write_target); anything else that is not a regular file
// is refused, and never replaced.
core::Status write_file_atomic(const std::string& path, const std::function<core::Status(int fd)>& fill);

// One file of write_files_atomic: its final path and what writes it.
struct PendingFile {
  std::string path;
  std::function<core::Status(int fd)> fill;
};

// Writes several files that belong together: every target is checked first (as in write_file_atomic), every
// file goes to a temporary file in its target directory, and only when all are written and synced are they
// renamed, in the order given. If a rename fails, the files renamed before it are put back as they were (a
// file that existed is restored from a hard link made before it was replaced; a new one is removed), so on
// failure every target is as it was and no temporary file is left behind.
core::Status write_files_atomic(const std::vector<PendingFile>& files);

// A file written atomically in two steps: create() checks the path (as write_file_atomic does) and makes its
// temporary file in the target directory at once, so an unwritable path fails before anything else is
// written; commit() fills it and renames it over the target (with write_file_atomic's modes), unless the
// target has since become something other than a regular file. Until commit(), destroying it removes the
// temporary file.
class StagedFile {
 public:
  static core::Result<StagedFile> create(const std::string& path);
  core::Status commit(const std::string& bytes);
  const std::string& path() const { return path_; }

  StagedFile(StagedFile&& other) noexcept;
  StagedFile& operator=(StagedFile&& other) noexcept;
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;
  ~StagedFile();

 private:
  StagedFile(std::string path, std::string target, std::string temp, int fd)
      : path_(std::move(path)), target_(std::move(target)), temp_(std::move(temp)), fd_(fd) {}
  void discard();
  std::string path_;
  std::string target_;  // path_ with its symlinks followed: the file the rename replaces
  std::string temp_;
  int fd_ = -1;
};

// Serializes `model` deterministically to an open file descriptor.
core::Status serialize_to_fd(const onnx::ModelProto& model, int fd);

// write_file_atomic for bytes already in memory.
core::Status write_file_atomic(const std::string& path, const std::string& bytes);

// Serializes deterministically straight into `path`, atomically (no in-memory copy of the bytes).
core::Status save_model(const onnx::ModelProto& model, const std::string& path);

// The default-domain ("" or "ai.onnx") opset the model imports; 0 when it imports none.
int64_t default_opset(const onnx::ModelProto& model);

}  // namespace dwdeconv::onnx_io
