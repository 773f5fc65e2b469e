#include "cli/output_files.h"

#include "core/cleanup.h"

#include <algorithm>
#include <iostream>
#include <utility>

namespace dwdeconv::cli {
namespace {

std::string describe(const RunFile& f) {
  switch (f.role) {
    case FileRole::kInputModel: return "the input model";
    case FileRole::kInputData: return "external data that " + f.model + " reads";
    case FileRole::kInputTensor: return "an --input file";
    case FileRole::kInputShapes: return "the input-shapes file of " + f.model;
    case FileRole::kProtectedModel: return "a model --protect names";
    case FileRole::kOutputModel: return "the output model of " + f.model;
    case FileRole::kOutputData: return "the data file of " + f.model + "'s output";
    case FileRole::kReport: return "the report";
  }
  return "";
}

}  // namespace

core::Status refuse_overwrites(const std::vector<RunFile>& reads, const std::vector<RunFile>& writes, bool batch) {
  auto refusal = [batch](const RunFile& w, const RunFile& other, const char* relation) {
    std::string hint = "; choose another path";
    if (batch && w.role == FileRole::kOutputModel && other.role == FileRole::kInputModel) {
      hint = "; give --suffix or another --out-dir (only -o OUT naming the one input rewrites it in place)";
    } else if (w.role == FileRole::kOutputData) {
      hint = batch ? "; write the batch to another --out-dir" : "; give the output's data file another name with --external-data NEW";
    }
    return core::Error{core::ErrorKind::kUsage, "refusing to write " + w.path + " (" + describe(w) + "): it " + relation + " " +
                                                    other.path + " (" + describe(other) + "), nothing written" + hint};
  };
  for (size_t i = 0; i < writes.size(); ++i) {
    const RunFile& w = writes[i];
    for (const RunFile& r : reads) {
      // -o naming the input is an atomic in-place rewrite the user asked for; an --out-dir that maps an input onto
      // itself (the input's own directory, no --suffix) is not asked for, and would rewrite every input silently.
      const bool in_place = !batch && w.role == FileRole::kOutputModel && r.role == FileRole::kInputModel && w.model == r.model;
      if (!in_place && onnx_io::same_file(w.path, r.path)) return refusal(w, r, "is");
    }
    for (size_t j = 0; j < i; ++j) {
      if (onnx_io::same_file(w.path, writes[j].path)) return refusal(w, writes[j], "is also");
    }
  }
  return core::Ok{};
}

core::Status check_write_targets(const std::vector<RunFile>& writes) {
  for (const RunFile& w : writes) {
    if (auto target = onnx_io::resolve_write_target(w.path); !target) {
      return core::Error{target.error().kind, "refusing to write " + describe(w) + ": " + target.error().message +
                                                  "; nothing written (`-o -` writes the model to stdout, `--report -` the report)"};
    }
  }
  return core::Ok{};
}

core::Result<ReportFile> stage_report(const Options& opt) {
  ReportFile report;
  if (opt.report.empty()) return report;
  if (opt.report == "-") {
    if (opt.output == "-" || opt.dry_run) {
      return core::Error{core::ErrorKind::kUsage, std::string("--report -: stdout already carries the ") +
                                                      (opt.output == "-" ? "model (-o -)" : "plan (--dry-run)") +
                                                      "; give the report a file"};
    }
    report.to_stdout = true;
    return report;
  }
  if (auto safe = check_write_targets({{opt.report, FileRole::kReport, ""}}); !safe) return safe.error();
  auto staged = onnx_io::StagedFile::create(opt.report);
  if (!staged) return staged.error();
  report.file = std::move(*staged);
  return report;
}

core::Status commit_report(ReportFile& report, const std::string& json) {
  if (report.to_stdout) {
    std::cout << json << std::flush;
    if (!std::cout) return core::io_error("--report -: cannot write the report to stdout");
    return core::Ok{};
  }
  if (!report.file) return core::Ok{};
  if (auto written = report.file->commit(json); !written) return written.error();
  return core::Ok{};
}

void add_input_tensor_files(const Options& opt, std::vector<RunFile>& reads) {
  for (const auto& text : opt.input_files) reads.push_back({input_file_path(text), FileRole::kInputTensor, ""});
}

void add_model_reads(const std::string& input, const std::set<std::string>& data_files, std::vector<RunFile>& reads) {
  if (input != "-") reads.push_back({input, FileRole::kInputModel, input});
  for (const auto& f : data_files) reads.push_back({f, FileRole::kInputData, input});
}

void add_protected_reads(const Options& opt, std::vector<RunFile>& reads) {
  for (const auto& path : opt.protect) {
    reads.push_back({path, FileRole::kProtectedModel, path});
    // A model that is gone or does not parse names no data files: its own path is still kept.
    if (auto listed = onnx_io::model_data_files(path)) {
      for (const auto& f : *listed) reads.push_back({f, FileRole::kInputData, path});
    }
  }
}

void add_compare_reads(const std::string& path, const core::Result<onnx_io::LoadedModel>& loaded, std::vector<RunFile>& reads) {
  std::set<std::string> data_files;
  if (loaded) {
    data_files = loaded->data_files;
  } else if (auto listed = onnx_io::model_data_files(path)) {
    data_files = std::move(*listed);
  }
  add_model_reads(path, data_files, reads);
}

std::string data_file_name(const Options& opt, const std::string& output, bool input_had_external) {
  if (!opt.external_data.empty()) return opt.external_data;
  if (!input_had_external && !opt.external_threshold) return "";
  return std::filesystem::path(output).filename().string() + ".data";
}

std::vector<RunFile> model_writes(const Options& opt, const std::string& input, const std::string& output, bool input_had_external) {
  std::vector<RunFile> writes;
  if (!opt.dry_run && !opt.check && output != "-") {
    writes.push_back({output, FileRole::kOutputModel, input});
    if (const std::string name = data_file_name(opt, output, input_had_external); !name.empty()) {
      writes.push_back({(std::filesystem::path(output).parent_path() / name).string(), FileRole::kOutputData, input});
    }
  }
  if (!opt.report.empty() && opt.report != "-") writes.push_back({opt.report, FileRole::kReport, ""});
  return writes;
}

std::string batch_output(const Options& opt, const std::string& input) {
  if (opt.out_dir.empty()) return std::string();
  const std::filesystem::path file = std::filesystem::path(input).filename();
  // --suffix .xnn: a.onnx -> a.xnn.onnx; a name without the .onnx extension gets the suffix at its end.
  const std::string name = opt.suffix.empty()            ? file.string()
                           : file.extension() == ".onnx" ? file.stem().string() + opt.suffix + ".onnx"
                                                         : file.string() + opt.suffix;
  return (std::filesystem::path(opt.out_dir) / name).string();
}

core::Status check_batch_files(const Options& opt) {
  namespace fs = std::filesystem;
  std::vector<RunFile> reads, writes;
  for (const auto& input : opt.models) {
    const std::string output = batch_output(opt, input);
    if (!output.empty() && !opt.dry_run && !opt.check) {
      writes.push_back({output, FileRole::kOutputModel, input});
      writes.push_back({output + ".data", FileRole::kOutputData, input});
    }
  }
  if (!opt.report.empty() && opt.report != "-") writes.push_back({opt.report, FileRole::kReport, ""});
  add_input_tensor_files(opt, reads);
  // A model's data files lie in its directory (load refuses others). Parsing a model to list them is only
  // needed when a written file could be one: it exists already, or the outputs go below that directory.
  const bool any_exists = std::any_of(writes.begin(), writes.end(), [](const RunFile& f) {
    std::error_code ec;
    return fs::exists(f.path, ec);
  });
  std::error_code ec;
  const fs::path out_dir = fs::weakly_canonical(fs::absolute(opt.out_dir, ec), ec);
  for (const auto& input : opt.models) {
    std::set<std::string> data_files;
    const fs::path dir = fs::weakly_canonical(fs::absolute(input, ec).parent_path(), ec);
    const bool outputs_below =
        !opt.out_dir.empty() && std::mismatch(dir.begin(), dir.end(), out_dir.begin(), out_dir.end()).first == dir.end();
    if (any_exists || outputs_below) {
      // A model that cannot be read fails on its own later, and is never written.
      if (auto listed = onnx_io::model_data_files(input)) data_files = std::move(*listed);
    }
    add_model_reads(input, data_files, reads);
  }
  return refuse_overwrites(reads, writes, /*batch=*/true);
}

core::Result<MadeDirs> create_out_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> made;
  if (dir.empty()) return MadeDirs(std::move(made));
  std::error_code ec;
  for (fs::path p = fs::absolute(dir, ec).lexically_normal(); !p.empty() && !fs::exists(p, ec) && !ec; p = p.parent_path()) {
    made.push_back(p);
    if (p == p.parent_path()) break;
  }
  // Registered as they are made: an interrupted run takes away those still empty too (core/cleanup.h).
  core::cleanup::atomically([&](core::cleanup::Registration& r) {
    fs::create_directories(dir, ec);
    for (const auto& d : made) r.empty_dir(d.string());
  });
  if (ec) return core::io_error(dir + ": cannot create the output directory: " + ec.message());
  return MadeDirs(std::move(made));
}

void remove_made_dirs(MadeDirs& made) {
  core::cleanup::atomically([&](core::cleanup::Registration& r) {
    std::error_code ec;
    for (const auto& d : made.dirs_) {
      std::filesystem::remove(d, ec);  // rmdir: only when empty
      r.forget(d.string());
    }
  });
  made.dirs_.clear();
}

MadeDirs::~MadeDirs() { remove_made_dirs(*this); }

}  // namespace dwdeconv::cli
