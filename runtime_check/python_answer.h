// The protocol between the binary and python -m dwdeconv_rewrite.runtimes, the way this side reads and writes it:
// python/dwdeconv_rewrite/runtimes/bridge.schema.json defines each message by its named keys. The bridge
// (python_bridge.cpp) writes the tensor lists the Python side reads and parses its JSON Lines answers into the structs
// below; the decisions on what an answer means (exit codes, messages) stay with the bridge.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "runtime_check/python_bridge.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check {

// The file of an input set's folder that lists its tensors (the schema's tensor_list).
inline constexpr const char* kTensorListFile = "inputs.json";

// Writes the input set `set` into `dir` as the Python side reads one: K.pb TensorProtos and the tensor list
// naming each one's graph input, in graph input order. An I/O error (a full disk) names the file.
core::Status write_tensor_list(const std::filesystem::path& dir, const std::vector<NamedTensor>& set);

// A package that is installed but raises on import (the schema's import_error line).
struct ImportFailure {
  std::string runtime;
  std::string message;  // "importing MODULE failed: TYPE: TEXT"
  std::string module;   // the module imported
  std::string pip;      // the pip package it comes from
};

// What `probe` answered: the interpreter, the packages it lacks (pip names, in order) and a failed import.
struct ProbeAnswer {
  std::string executable;
  std::string version;  // "" when no python line came
  std::vector<std::string> missing_pip;
  std::optional<ImportFailure> import_failure;
};

// A failed conversion or run (the schema's stage_error line): the converter's stage or "run", the side, the message.
struct StageFailure {
  std::string stage;
  std::string side;
  std::string message;
};

// One output file of a side (the schema's output line): the graph output it holds and the .npy file.
struct OutputFile {
  std::string side;
  std::string name;
  std::string file;
};

// What `check` answered. `run` holds everything but the outputs' values (label, versions, what lies outside the
// delegate, quantisation steps, notes, samples, nodes) and the last precision a side was converted to;
// `precisions` each side's precision in answer order, so a side converted to another can be named.
struct CheckAnswer {
  PythonRun run;
  std::vector<std::pair<std::string, std::string>> precisions;  // (side, precision)
  std::vector<OutputFile> outputs;
  std::optional<ImportFailure> import_failure;
  std::optional<std::string> usage_error;
  std::optional<StageFailure> failure;  // the last one answered
};

// The answers parsed line by line, each by its named keys. A line that is not one of the schema's answer lines (not
// JSON, no "kind", a kind's key missing or of another type) is an error holding that line, printable and cut at
// 200 characters; a kind this side does not know is skipped (a newer Python side may say more).
core::Result<ProbeAnswer> parse_probe_answer(const std::string& text);
core::Result<CheckAnswer> parse_check_answer(const std::string& text);

}  // namespace dwdeconv::runtime_check
