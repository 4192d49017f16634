// What every C entry point shares: the thread's last error, the mapping from Errc to status codes,
// the boundary that no exception crosses, and reading a caller's size-prefixed struct.
#pragma once

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>

#include <fmt/format.h>

#include "cubinrt/cubinrt.h"
#include "cubinrt/error.hpp"

namespace cubinrt::c_api {

// Records `e` as this thread's last error and returns its status code.
cubinrt_status set_error(const Error& e);
cubinrt_status set_error(cubinrt_status status, std::string message);

// Runs `body` (returning Status) at the C boundary: its error, or an escaped exception, becomes
// the thread's last error and a status code; success leaves the last error as it was.
template <class F>
cubinrt_status boundary(const char* function, F&& body) noexcept {
  try {
    Status s = body();
    return s ? CUBINRT_SUCCESS : set_error(s.error());
  } catch (const std::bad_alloc&) {
    return set_error(CUBINRT_ERROR_INTERNAL, std::string(function) + ": out of host memory");
  } catch (const std::exception& e) {
    return set_error(CUBINRT_ERROR_INTERNAL, std::string(function) + ": internal error: " + e.what());
  } catch (...) {
    return set_error(CUBINRT_ERROR_INTERNAL, std::string(function) + ": internal error");
  }
}

// A pointer the caller must pass: `what` names it in the error.
inline Status not_null(const void* p, const char* what) {
  if (p == nullptr) return fail(Errc::invalid_argument, fmt::format("{} is NULL", what));
  return {};
}

// A caller's size-prefixed struct as this library knows it: the bytes the caller set (older callers
// set fewer; the rest stay as zero-initialised here), refusing a size below the first version's or
// a newer caller's fields this library does not know unless they are zero.
template <class T>
Result<T> read_struct(const T* in, const char* what, size_t first_version_size) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (auto s = not_null(in, what); !s) return std::unexpected(std::move(s).error());
  const size_t size = in->struct_size;
  if (size < first_version_size)
    return fail(Errc::invalid_argument, fmt::format("{}.struct_size is {}, below the {} bytes of its first version: "
                                                    "initialise it with its _init function", what, size, first_version_size));
  T out;
  std::memset(&out, 0, sizeof out);
  std::memcpy(&out, in, std::min(size, sizeof(T)));
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t i = sizeof(T); i < size; ++i)
    if (bytes[i] != 0)
      return fail(Errc::invalid_argument, fmt::format("{} sets byte {} of {}, past the {} bytes this library (cubinrt {}) knows: "
                                                      "a newer header's field that this library cannot honour", what, i, size, sizeof(T), CUBINRT_VERSION));
  out.struct_size = sizeof(T);
  return out;
}

// Writes `value` into a caller's size-prefixed output struct, as much of it as the caller has.
template <class T>
Status write_struct(T* out, const T& value, const char* what, size_t first_version_size) {
  if (auto s = not_null(out, what); !s) return s;
  const size_t size = out->struct_size;
  if (size < first_version_size)
    return fail(Errc::invalid_argument, fmt::format("{}.struct_size is {}, below the {} bytes of its first version: "
                                                    "initialise it with its _init function", what, size, first_version_size));
  std::memcpy(static_cast<void*>(out), &value, std::min(size, sizeof(T)));
  out->struct_size = size;
  return {};
}

// Copies `text` into a fixed char array, NUL-terminated, truncated with "..." when it does not fit.
void copy_text(char* dst, size_t capacity, std::string_view text);

}  // namespace cubinrt::c_api
