// One run of the tool on parsed options: a single model, a batch, or --compare, with the report; what the
// command line's exit code is.
#pragma once

#include "cli/options.h"

namespace dwdeconv::cli {

// Runs what `opt` asks for, logging as it goes, and returns the exit code (cli/exit_codes.h). Checks the
// options' meaning first (usage_problem). Never throws.
int run(const Options& opt);

}  // namespace dwdeconv::cli
