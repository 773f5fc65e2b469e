// Result<T>: a value or an error that a user can read.
//
// Input-dependent failures travel as values; only cli/main.cpp turns them into messages and exit codes.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace dwdeconv::core {

// What went wrong, so the CLI can choose an exit code without parsing messages. Each kind means one thing; the CLI
// maps each to its documented exit code in one place (cli/exit_codes.h, docs/exit-codes.md).
enum class ErrorKind {
  kDeclined,            // a valid node that this tool does not rewrite (a "kept" reason); never ends a run
  kInvalidModel,        // the model breaks the ONNX spec or cannot be parsed
  kFailedValidation,    // the ONNX checker or shape inference refused a model (the input, or the rewrite's output)
  kIo,                  // a file could not be read or written
  kOutOfMemory,         // the run needed more memory than this machine has (a raised --max-phases, a huge model)
  kUsage,               // the command line asked for something impossible
  kCannotVerify,        // a check (verification or timing) could not be done: a shape not known, an op the executor lacks,
                        // a runtime that cannot convert or run a model. Not a verdict on the rewrite.
  kCheckVerdictFailed,  // a check ran and said no: --check found a node to rewrite, verification found the outputs
                        // differ, or --min-speedup was not met
};

struct Error {
  ErrorKind kind = ErrorKind::kInvalidModel;
  std::string message;
};

inline Error declined(std::string message) { return {ErrorKind::kDeclined, std::move(message)}; }
inline Error invalid_model(std::string message) { return {ErrorKind::kInvalidModel, std::move(message)}; }
inline Error io_error(std::string message) { return {ErrorKind::kIo, std::move(message)}; }
inline Error cannot_verify(std::string message) { return {ErrorKind::kCannotVerify, std::move(message)}; }

// Either a T or an Error. Accessors assert on misuse; callers test ok() first.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : state_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<T>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<Error>(state_);
  }

 private:
  std::variant<T, Error> state_;
};

// Result<void>: success or an Error.
struct Ok {};
using Status = Result<Ok>;

}  // namespace dwdeconv::core

// Unwraps a Result into `lhs`, or returns its Error from the enclosing function (which returns a Result or Status):
// the one spelling of "propagate the error" for every library that passes Results up.
#define RC_CONCAT_INNER(a, b) a##b
#define RC_CONCAT(a, b) RC_CONCAT_INNER(a, b)
#define RC_ASSIGN(lhs, expr)                                                                 \
  auto RC_CONCAT(rc_result_, __LINE__) = (expr);                                             \
  if (!RC_CONCAT(rc_result_, __LINE__).ok()) return RC_CONCAT(rc_result_, __LINE__).error(); \
  lhs = std::move(RC_CONCAT(rc_result_, __LINE__).value())
#define RC_CHECK(expr)                             \
  do {                                             \
    auto rc_status = (expr);                       \
    if (!rc_status.ok()) return rc_status.error(); \
  } while (false)
