// TensorProto <-> typed buffers, for every numeric element type and both raw_data and the typed fields.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::onnx_io {

// Bytes per element for a TensorProto data_type; 0 for STRING, complex types and unknown values.
size_t element_size(int32_t data_type);

// "FLOAT16", "INT8", ... ; "type 42" for an unknown value.
std::string data_type_name(int32_t data_type);

// Product of dims. Errors on negative dims and on overflow of int64.
core::Result<int64_t> element_count(const std::vector<int64_t>& dims, const std::string& what);
core::Result<int64_t> element_count(const onnx::TensorProto& tensor);

std::vector<int64_t> dims_of(const onnx::TensorProto& tensor);

bool is_external(const onnx::TensorProto& tensor);

// Checks that the tensor's data (raw or typed) holds exactly element_count elements of its type.
core::Status validate_tensor_data(const onnx::TensorProto& tensor, const std::string& what);

// A new tensor with src's type, the given dims, and elements src[indices[i]]. The storage form is kept:
// raw_data stays raw_data, a typed field stays that field. Bit-exact: values are copied, never converted.
core::Result<onnx::TensorProto> gather_elements(const onnx::TensorProto& src, const std::vector<int64_t>& indices,
                                                const std::vector<int64_t>& dims);

// A zero tensor with src's type and storage form.
onnx::TensorProto zeros_like_storage(const onnx::TensorProto& src, const std::vector<int64_t>& dims);

// Element values as doubles (float, float16, bfloat16, double, and the integer types and bool).
core::Result<std::vector<double>> to_doubles(const onnx::TensorProto& tensor);

// Builds a tensor of a float type (FLOAT, FLOAT16, BFLOAT16, DOUBLE) or INT64 from doubles.
onnx::TensorProto make_tensor(const std::string& name, int32_t data_type, const std::vector<int64_t>& dims,
                              const std::vector<double>& values, bool raw);

// An INT64 tensor stored as raw_data (the form Pad's `pads` input takes).
onnx::TensorProto make_int64_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& values);

// IEEE half and bfloat16 conversions (round to nearest even).
float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bfloat16_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float value);

}  // namespace dwdeconv::onnx_io
