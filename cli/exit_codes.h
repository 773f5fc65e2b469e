// Documented exit codes (docs/exit-codes.md), and the one map from an error's kind to its exit code.
#pragma once

#include "core/result.h"

namespace dwdeconv::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;   // --check found a node to rewrite, verification failed, or a gate failed
inline constexpr int kExitUsage = 2;         // bad command line
inline constexpr int kExitInvalidModel = 3;  // invalid model, failed validation, an I/O error, or out of memory
inline constexpr int kExitCannotVerify = 4;  // --verify, --bench or --compare could not be done

// The exit code of a run that ends with an error of `kind`: the only place a kind becomes a code, so the docs' table
// and the binary cannot disagree case by case. No default: a new kind does not compile (-Wswitch) until it is placed.
constexpr int exit_code_for(core::ErrorKind kind) {
  switch (kind) {
    case core::ErrorKind::kCheckVerdictFailed: return kExitCheckFailed;
    case core::ErrorKind::kUsage: return kExitUsage;
    case core::ErrorKind::kInvalidModel:
    case core::ErrorKind::kFailedValidation:
    case core::ErrorKind::kIo:
    case core::ErrorKind::kOutOfMemory:
    // A decline is a kept node's reason and ends no run; were one to reach here, the model is what could not be handled.
    case core::ErrorKind::kDeclined: return kExitInvalidModel;
    case core::ErrorKind::kCannotVerify: return kExitCannotVerify;
  }
  return kExitInvalidModel;
}

// The exit code of `e`'s kind (exit_code_for above).
constexpr int exit_code_for(const core::Error& e) { return exit_code_for(e.kind); }

}  // namespace dwdeconv::cli
