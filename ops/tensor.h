// The executor's value type: a dense tensor in ONNX (logical) dimension order, plus TensorProto conversion.
//
// Floating types (FLOAT, FLOAT16, BFLOAT16, DOUBLE) are held as float: every float model computes in f32, and
// FLOAT16/BFLOAT16 values are rounded to their type at Cast and at the graph boundary. Integer types and BOOL
// are held as int64 so that exporter shape subgraphs evaluate exactly. Inside an executor, float storage may view
// the executor's arena (FloatStorage); every copy owns its elements.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/result.h"

namespace dwdeconv::ops {

// True for FLOAT, FLOAT16, BFLOAT16 and DOUBLE: the types held in Tensor::f.
bool is_float_type(int32_t data_type);

// True for the integer types and BOOL: the types held in Tensor::i.
bool is_integer_type(int32_t data_type);

// Bytes one element of `data_type` takes in a Tensor: 4 for the float types (held as float), 8 for the others.
size_t storage_bytes(int32_t data_type);

// The element count of a tensor of `dims` with `element_bytes`-byte elements: the one size check that every
// shape the executor holds goes through (input files, --input-shape, graph inputs, every value it sizes). Errors
// name `what` (the tensor and its dims) on a negative dim, an element or byte count that overflows, or more
// bytes than this machine's physical memory.
core::Result<size_t> checked_element_count(const std::vector<int64_t>& dims, size_t element_bytes, const std::string& what);

// Thrown by Tensor::reshape when checked_element_count refuses the dims or the allocation fails. Executor::create
// turns it into an error naming the node; code that sizes a tensor from its input checks the dims first instead.
class TensorSizeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Float elements: owned, as in a std::vector<float>, or a view of memory owned elsewhere (an executor's arena). Copies
// always own. A view stays a view while sizes stay within its span; growing past the span moves the elements to owned
// storage, so resizing code never writes outside the span.
class FloatStorage {
 public:
  FloatStorage() = default;
  FloatStorage(std::initializer_list<float> values) : owned_(values) {}
  FloatStorage(const std::vector<float>& values) : owned_(values) {}                 // NOLINT: implicit, as a vector assigns
  FloatStorage(std::vector<float>&& values) noexcept : owned_(std::move(values)) {}  // NOLINT
  FloatStorage(const FloatStorage& other) : owned_(other.begin(), other.end()) {}
  FloatStorage(FloatStorage&& other) noexcept;
  FloatStorage& operator=(const FloatStorage& other);
  FloatStorage& operator=(FloatStorage&& other) noexcept;
  ~FloatStorage() = default;

  float* data() { return view_ != nullptr ? view_ : owned_.data(); }
  const float* data() const { return view_ != nullptr ? view_ : owned_.data(); }
  size_t size() const { return view_ != nullptr ? size_ : owned_.size(); }
  bool empty() const { return size() == 0; }
  float& operator[](size_t k) { return data()[k]; }
  const float& operator[](size_t k) const { return data()[k]; }
  float* begin() { return data(); }
  float* end() { return data() + size(); }
  const float* begin() const { return data(); }
  const float* end() const { return data() + size(); }
  operator std::vector<float>() const { return std::vector<float>(begin(), end()); }  // NOLINT: as a vector copies

  // New elements are zero, as in std::vector.
  void resize(size_t n);
  void assign(size_t n, float value);
  void push_back(float value);
  void clear() { resize(0); }
  // From now on the elements are the `size` floats at `memory` (not owned; the caller keeps it alive).
  void view(float* memory, size_t size);
  bool is_view() const { return view_ != nullptr; }
  // Frees owned storage and drops any view: empty, with no memory held.
  void release();
  // Moves the owned buffer out (its size and capacity as they were) and drops any view: empty afterwards.
  std::vector<float> take_owned();

  friend bool operator==(const FloatStorage& a, const FloatStorage& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const FloatStorage& a, const FloatStorage& b) { return !(a == b); }

 private:
  std::vector<float> owned_;  // the elements, unless view_ is set
  float* view_ = nullptr;
  size_t size_ = 0;      // view: elements in use
  size_t capacity_ = 0;  // view: floats in the span
};

struct Tensor {
  int32_t dtype = onnx::TensorProto::FLOAT;  // the ONNX element type this tensor stands for
  std::vector<int64_t> dims;
  FloatStorage f;          // storage when is_float_type(dtype)
  std::vector<int64_t> i;  // storage otherwise

  bool is_float() const { return is_float_type(dtype); }
  int64_t numel() const;
  // Sets type and dims and sizes the matching storage. Storage is reused (same pointer) when the size is unchanged.
  // Throws TensorSizeError (naming type and dims) when the dims cannot be held.
  void reshape(int32_t data_type, std::vector<int64_t> new_dims);
  // Element k as a double, whatever the storage.
  double get(int64_t k) const { return is_float() ? f[static_cast<size_t>(k)] : static_cast<double>(i[static_cast<size_t>(k)]); }
};

struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Reads a TensorProto (raw or typed storage). Integers are read exactly (INT64_MAX survives). STRING, complex
// types and external data are errors naming `what`.
core::Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const std::string& what);

// Writes a Tensor in its own dtype (typed fields, not raw_data). Integers wrap to their width as a cast would.
onnx::TensorProto tensor_to_proto(const Tensor& tensor, const std::string& name);

// Rounds a float to what `data_type` can hold (FLOAT16 and BFLOAT16 round to nearest even; others unchanged).
float round_to_type(float value, int32_t data_type);

// Wraps an int64 to the range of an integer `data_type` (two's complement), as a C cast would; BOOL gives 0/1.
int64_t wrap_to_type(int64_t value, int32_t data_type);

// "FLOAT[1x3x8x8]": how messages name a tensor's type and shape.
std::string describe_tensor(const Tensor& tensor);

// "1x3x8x8" ("scalar" for rank 0).
std::string format_dims(const std::vector<int64_t>& dims);

}  // namespace dwdeconv::ops
