// The models a command line names: a directory stands for the *.onnx files in it, so that
// `dwdeconv-rewrite models/ --out-dir out/` is a batch over that folder.
#pragma once

#include "cli/options.h"
#include "core/result.h"

namespace dwdeconv::cli {

// `opt` with every directory among its models replaced by that directory's regular *.onnx files (not
// recursive), sorted by name so that the order and the report are the same on every machine. A usage error for
// a directory without such files, and for a directory with -o (its models take --out-dir).
core::Result<Options> expand_model_directories(const Options& opt);

}  // namespace dwdeconv::cli
