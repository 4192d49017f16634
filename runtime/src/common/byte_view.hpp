// A bounds-checked view over bytes: every read says where it would have gone out of range.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>

#include "common/try.hpp"
#include "cubinrt/error.hpp"

namespace cubinrt::detail {

class ByteView {
 public:
  ByteView() = default;
  ByteView(std::span<const std::byte> bytes, Errc code) : bytes_(bytes), code_(code) {}

  uint64_t size() const { return bytes_.size(); }
  std::span<const std::byte> bytes() const { return bytes_; }

  bool contains(uint64_t offset, uint64_t length) const {
    return offset <= bytes_.size() && length <= bytes_.size() - offset;
  }

  template <class T>
    requires std::is_trivially_copyable_v<T>
  Result<T> read(uint64_t offset, std::string_view what) const {
    if (!contains(offset, sizeof(T)))
      return out_of_range(offset, sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }

  Result<ByteView> sub(uint64_t offset, uint64_t length, std::string_view what) const {
    if (!contains(offset, length)) return out_of_range(offset, length, what);
    return ByteView(bytes_.subspan(offset, length), code_);
  }

  // A NUL-terminated string starting at offset, which must end inside the view.
  Result<std::string_view> cstr(uint64_t offset, std::string_view what) const {
    if (offset >= bytes_.size()) return out_of_range(offset, 1, what);
    const auto* begin = reinterpret_cast<const char*>(bytes_.data()) + offset;
    const void* nul = std::memchr(begin, 0, bytes_.size() - offset);
    if (nul == nullptr)
      return fail(code_, fmt::format("rule names-terminated: {} at offset {} has no terminating NUL", what, offset));
    return std::string_view(begin, static_cast<const char*>(nul) - begin);
  }

 private:
  std::unexpected<Error> out_of_range(uint64_t offset, uint64_t length, std::string_view what) const {
    return fail(code_, fmt::format("rule inside-file: {} ({} bytes at offset {}) lies outside the {} bytes available",
                                   what, length, offset, bytes_.size()));
  }

  std::span<const std::byte> bytes_;
  Errc code_ = Errc::corrupt_cubin;
};

}  // namespace cubinrt::detail
