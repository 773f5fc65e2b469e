// Helpers shared by the runtime_check sources; not part of the library's API.
#pragma once

#include "core/text.h"

#include <cstdio>
#include <string>

#include "ops/internal.h"
#include "ops/kernels.h"
#include "ops/ops.h"
#include "runtime_check/tensor.h"

namespace dwdeconv::runtime_check::detail {

// The executor's steps are built on the op library: its geometry rules, kernels and helpers (node_error names a
// node the same way whichever side refused it) are used here by their own names.
using namespace ::dwdeconv::ops;          // NOLINT(google-build-using-namespace)
using namespace ::dwdeconv::ops::detail;  // NOLINT(google-build-using-namespace)

// A value name from the model as a summary line shows it (core/text.h): a name holding a newline cannot start a log
// line of its own.
inline std::string printable_name(const std::string& name) { return core::printable(name); }

}  // namespace dwdeconv::runtime_check::detail
