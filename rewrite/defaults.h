// The defaults a command line states before it knows anything else of the rewrite: kept apart from the emitter and the
// targets table so that the option structs (cli/options.h) need neither to name them.
#pragma once

#include <cstdint>

namespace dwdeconv::rewrite {

// The default of EmitOptions::max_phases: strides up to 8.
inline constexpr int64_t kDefaultMaxPhases = 64;

// The name of the profile used without --target.
inline constexpr const char* kDefaultTarget = "default";

}  // namespace dwdeconv::rewrite
