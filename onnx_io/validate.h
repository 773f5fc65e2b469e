// Validation of a model about to be written: the ONNX checker and strict shape inference, as far as this
// ONNX library (Debian's 1.12, opsets up to 17) can judge the model.
#pragma once

#include <set>
#include <string>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::onnx_io {

struct Validation {
  bool full = true;    // false: the model is newer than the library, and only part of it was checked
  std::string detail;  // what was checked, for logs and the report
};

// The newest default-domain opset and IR version this ONNX library knows.
int64_t library_max_opset();
int64_t library_ir_version();

// Full check (checker + strict shape inference) when the library knows the model's opset and IR version.
// For a newer model: the checker if it accepts the model, else graph structure (every input defined before
// use, outputs defined once), node arity, that shape inference with the library's schemas does not crash
// (what it infers or refuses is not taken as a verdict), plus the schema check of the nodes named in `emitted`
// at the newest opset the library knows. For every model, before shape inference, what libonnx 1.12's inference
// assumes and does not check (it crashes on models that break it): each Conv, ConvTranspose, ConvInteger and
// QLinearConv whose ranks the graph declares has an input and a weight of rank >= 3 and of the same rank, and
// Conv, ConvInteger, QLinearConv and the pools have strides >= 1; for a full check, the ranks again as inference
// found them. Errors have kind kFailedValidation.
core::Result<Validation> validate_model(const onnx::ModelProto& model, const std::set<std::string>& emitted);

// Every node input is defined before use (graph inputs, initializers, earlier outputs, outer scopes), and no
// tensor is defined twice. Part of the partial check; exposed for tests.
core::Status check_structure(const onnx::GraphProto& graph);

}  // namespace dwdeconv::onnx_io
