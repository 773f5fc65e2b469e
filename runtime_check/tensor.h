// The executor's value type is the op library's (ops/tensor.h): the reference kernels, the constant folder and the
// executor hold values the same way. runtime_check's API and its users name it here.
#pragma once

#include "ops/tensor.h"

namespace dwdeconv::runtime_check {

using ops::checked_element_count;
using ops::describe_tensor;
using ops::FloatStorage;
using ops::format_dims;
using ops::is_float_type;
using ops::is_integer_type;
using ops::NamedTensor;
using ops::round_to_type;
using ops::storage_bytes;
using ops::Tensor;
using ops::tensor_from_proto;
using ops::tensor_to_proto;
using ops::TensorSizeError;
using ops::wrap_to_type;

}  // namespace dwdeconv::runtime_check
