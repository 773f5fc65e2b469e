// Documented exit codes (docs/exit-codes.md).
#pragma once

namespace dwdeconv::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;   // --check found a node to rewrite, verification failed, or a gate failed
inline constexpr int kExitUsage = 2;         // bad command line
inline constexpr int kExitInvalidModel = 3;  // invalid model, failed output validation, or an I/O error
inline constexpr int kExitCannotVerify = 4;  // --verify, --bench or --compare could not be done (core::ErrorKind::kCannotVerify)

}  // namespace dwdeconv::cli
