// Whole-file reads and writes, and the sha256 digest the bundle checks.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "cubinrt/error.hpp"

namespace cubinrt {

// The whole file. Only regular files are read (a directory, FIFO or device is refused by name).
Result<std::vector<std::byte>> read_file(const std::filesystem::path& path);
// Writes beside, then renames: a failed write never leaves a half file under the real name.
Status write_file(const std::filesystem::path& path, std::span<const std::byte> bytes);
// Lowercase hex sha256, or an error when the digest cannot be computed (OpenSSL failure).
Result<std::string> sha256_hex(std::span<const std::byte> bytes);

}  // namespace cubinrt
