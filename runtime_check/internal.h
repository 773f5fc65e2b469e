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
// node the same way whichever side refused it) are used here by their own names, each named below.
using ops::broadcast_dims;
using ops::ConvGeometry;
using ops::nchw_to_nhwc;
using ops::nhwc_to_nchw;
using ops::OpContext;
using ops::PoolGeometry;
using ops::ResizeGeometry;
using ops::resolve_conv;
using ops::resolve_conv_transpose;
using ops::resolve_pool;
using ops::unsupported_reason;
using ops::detail::node_error;
using ops::detail::normalize_axis;
using ops::detail::split_sizes;

// A value name from the model as a summary line shows it (core/text.h): a name holding a newline cannot start a log
// line of its own.
inline std::string printable_name(const std::string& name) { return core::printable(name); }

}  // namespace dwdeconv::runtime_check::detail
