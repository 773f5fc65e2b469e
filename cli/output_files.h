// The files a run reads and writes: the checks that it never writes over what it reads (or over what another
// model of a batch writes), the staged report, and the batch's output directory.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/options.h"
#include "core/result.h"
#include "onnx_io/model_io.h"

namespace dwdeconv::cli {

// A file the run reads or writes, for refusing to write over an input.
enum class FileRole { kInputModel, kInputData, kInputTensor, kInputShapes, kProtectedModel, kOutputModel, kOutputData, kReport };
struct RunFile {
  std::string path;
  FileRole role;
  std::string model;  // the input model it belongs to; empty for the report and --input files
};

// A usage error when a file the run writes is a file it reads, or another file it writes, compared by resolved
// path and by identity. The one overlap allowed is -o naming its own input model: an atomic in-place rewrite.
core::Status refuse_overwrites(const std::vector<RunFile>& reads, const std::vector<RunFile>& writes, bool batch);

// A usage error when a file the run writes exists and is not a regular file once symlinks are followed (a
// directory, a device, a FIFO or a socket): an atomic write would replace it with a regular file. A symlink to
// a regular file is fine: the write goes to the file it points to, and the link stays.
core::Status check_write_targets(const std::vector<RunFile>& writes);

// Where the report goes: nowhere (no --report), stdout (--report -), or a file staged before anything else is
// written (see stage_report).
struct ReportFile {
  bool to_stdout = false;
  std::optional<onnx_io::StagedFile> file;
};

// Checks the report's path and creates its temporary file up front, so a report that cannot be written fails
// before any model is written: a usage error for a path that is not a regular file, or for `--report -` when
// stdout already carries the model or the plan; an I/O error for an unwritable one. commit_report puts it in
// place at the end.
core::Result<ReportFile> stage_report(const Options& opt);

// Writes `json` where the report goes; an I/O error when it cannot.
core::Status commit_report(ReportFile& report, const std::string& json);

// The --input files, which the run reads too.
void add_input_tensor_files(const Options& opt, std::vector<RunFile>& reads);

// The model file and the data files of one loaded input, as reads.
void add_model_reads(const std::string& input, const std::set<std::string>& data_files, std::vector<RunFile>& reads);

// Each --protect model and the data files it names (as far as it parses), as reads: never written over, and unlike the
// input, not even by -o naming it.
void add_protected_reads(const Options& opt, std::vector<RunFile>& reads);

// The files a --compare model reads: the model and its data files, as far as they can be known when it failed
// to load (its data files are then listed from the model alone, when it parses).
void add_compare_reads(const std::string& path, const core::Result<onnx_io::LoadedModel>& loaded, std::vector<RunFile>& reads);

// The name of the output's data file (next to it): --external-data NAME, else OUT.data when the input had
// external data or --external-data-threshold asks for it; empty when the output keeps every tensor inline.
std::string data_file_name(const Options& opt, const std::string& output, bool input_had_external);

// The files one model's run writes: the output model and its data file (when it writes a model) and the report.
std::vector<RunFile> model_writes(const Options& opt, const std::string& input, const std::string& output, bool input_had_external);

// Where a batch writes `input`: OUT_DIR/<its file name>.
std::string batch_output(const Options& opt, const std::string& input);

// Before a batch writes anything: no file one model writes (its output, its data file, the report) may be a
// file another model writes or reads. Every output may get a data file (OUT.data), whether or not its model
// turns out to need one.
core::Status check_batch_files(const Options& opt);

// The directories create_out_dir made, innermost first. However the run ends, those still empty then are
// removed again (see remove_made_dirs), so a batch whose models all failed leaves no empty --out-dir behind.
class MadeDirs {
 public:
  explicit MadeDirs(std::vector<std::filesystem::path> dirs) : dirs_(std::move(dirs)) {}
  MadeDirs(MadeDirs&& other) noexcept : dirs_(std::exchange(other.dirs_, {})) {}
  MadeDirs& operator=(MadeDirs&&) = delete;
  ~MadeDirs();
  friend void remove_made_dirs(MadeDirs& made);

 private:
  std::vector<std::filesystem::path> dirs_;
};

// Creates --out-dir and its missing parents (nothing when `dir` is empty), and remembers which it made.
core::Result<MadeDirs> create_out_dir(const std::string& dir);

// Takes away the directories create_out_dir made, if they are still empty: a run that stops before writing
// anything, or whose models all failed, leaves nothing behind.
void remove_made_dirs(MadeDirs& made);

}  // namespace dwdeconv::cli
