// Tensors stored outside the model file (data_location = EXTERNAL), on load and on save.
//
// On load, external data is read into raw_data and the tensor is made inline, so every other part of the tool
// sees ordinary tensors; the names of those tensors are returned so the save can put them back outside.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::onnx_io {

// What load_external_data read: the keys of the tensors that were external, and the files it read them from
// (as `model_dir/location`, so a caller can tell whether a path it is about to write is one of them).
// A tensor's key is the initializer's name, or for a Constant's `value` the Constant's output (the name the
// rewrite knows it by, whatever the tensor itself is called); other attribute tensors go by their own name.
struct ExternalDataRead {
  std::set<std::string> tensors;
  std::set<std::string> files;
};

// Reads every EXTERNAL tensor of `model` (initializers and tensor attributes, in every graph) from files
// relative to `model_dir`. Refuses, naming the tensor: an absolute `location`, one that leaves `model_dir`
// (through `..` or a symlink), a missing file, and an `offset`/`length` past the end of the file or disagreeing
// with the tensor's dims and type.
core::Result<ExternalDataRead> load_external_data(onnx::ModelProto& model, const std::string& model_dir, const std::string& model_path);

// The files `model`'s external tensors name, as `model_dir/location`, without reading them or checking them:
// for finding out, before anything is written, which files a model will read.
std::set<std::string> external_data_files(const onnx::ModelProto& model, const std::string& model_dir);

// Errors (naming `origin` and the tensor) if any tensor of `model` stores its data externally: for a model read
// from stdin, which has no directory to find the data in.
core::Status refuse_external_data(const onnx::ModelProto& model, const std::string& origin);

struct ExternalSaveOptions {
  std::string data_name;               // file name, next to the model; empty: no external data at all
  std::set<std::string> tensor_names;  // keys (see ExternalDataRead) of the tensors to store in it
  size_t threshold_bytes = SIZE_MAX;   // also store every tensor at least this large in it
};

// Saves `model` atomically; with external data, the data file and the model are both written to temporary
// files first and renamed only when both are complete. When no tensor is chosen, no data file is written.
// `model` is unchanged on return.
core::Status save_model_with_external_data(onnx::ModelProto& model, const std::string& path, const ExternalSaveOptions& options);

// A tensor's data as little-endian bytes, whatever its storage form (raw_data or a typed field).
core::Result<std::string> raw_bytes_of(const onnx::TensorProto& tensor);

}  // namespace dwdeconv::onnx_io
