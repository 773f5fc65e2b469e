// Each error kind ends a run with the code docs/exit-codes.md gives it, through the one map (cli/exit_codes.h).
#include <catch2/catch.hpp>

#include "cli/exit_codes.h"

using namespace dwdeconv;
using core::ErrorKind;

TEST_CASE("each error kind maps to the exit code docs/exit-codes.md documents for it", "[cli][exit_codes]") {
  // The table of docs/exit-codes.md, written out here: 1 a check that said no, 2 the command line, 3 the model, its
  // validation, a file or memory, 4 a check that could not be done.
  CHECK(cli::exit_code_for(ErrorKind::kCheckVerdictFailed) == 1);
  CHECK(cli::exit_code_for(ErrorKind::kUsage) == 2);
  CHECK(cli::exit_code_for(ErrorKind::kInvalidModel) == 3);
  CHECK(cli::exit_code_for(ErrorKind::kFailedValidation) == 3);  // the ONNX checker refused the input or the output
  CHECK(cli::exit_code_for(ErrorKind::kIo) == 3);
  CHECK(cli::exit_code_for(ErrorKind::kOutOfMemory) == 3);
  CHECK(cli::exit_code_for(ErrorKind::kCannotVerify) == 4);
  CHECK(cli::exit_code_for(ErrorKind::kDeclined) == 3);  // never ends a run; were one to, the model is what failed
  // An error carries its kind's code, whatever its message says.
  CHECK(cli::exit_code_for(core::Error{ErrorKind::kFailedValidation, "verification failed"}) == 3);
  CHECK(cli::exit_code_for(core::cannot_verify("invalid model")) == 4);
}
