// Errors are values: every fallible call returns Result<T>, an Error carrying one sentence
// that names what failed and where (file, entry, kernel, device, driver call).
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace cubinrt {

enum class Errc {
  invalid_argument,   // the caller asked for something malformed
  io,                 // a file could not be read or written
  corrupt_cubin,      // a cubin broke a validation rule
  corrupt_fatbin,
  corrupt_bundle,     // container, checksum or decompression failure
  corrupt_manifest,   // manifest JSON or catalog that does not follow the format
  mismatch,           // manifest and cubin, or cubin and ABI, disagree
  not_in_bundle,      // no entry serves what was asked
  unsupported,        // asked for something this device or build cannot do
  no_driver,          // libcuda.so.1 missing or an entry point absent
  driver,             // a driver call failed
  driver_too_old,
  no_device,
};

std::string_view errc_name(Errc code);

struct Error {
  Errc code;
  std::string message;
  int driver_status = 0;  // the CUresult, for Errc::driver

  // Prefixes context ("bundle x.bundle: entry 3: ") to the message.
  Error&& context(std::string_view what) &&;
};

template <class T>
using Result = std::expected<T, Error>;
using Status = std::expected<void, Error>;

inline std::unexpected<Error> fail(Errc code, std::string message, int driver_status = 0) {
  return std::unexpected(Error{code, std::move(message), driver_status});
}

}  // namespace cubinrt
