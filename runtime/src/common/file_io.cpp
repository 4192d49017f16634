#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "common/file_io.hpp"

namespace cubinrt {

Result<std::vector<std::byte>> read_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec) return fail(Errc::io, fmt::format("{}: cannot open: {}", path.string(), ec.message()));
  if (!std::filesystem::is_regular_file(status))
    return fail(Errc::io, fmt::format("{}: not a regular file (a directory, pipe or device is not read)", path.string()));
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return fail(Errc::io, fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  const std::streamsize size = in.tellg();
  if (size < 0) return fail(Errc::io, fmt::format("{}: cannot tell its size", path.string()));
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) return fail(Errc::io, fmt::format("{}: read failed", path.string()));
  return bytes;
}

Status write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  // Write beside, then rename: a failed write never leaves a half bundle under the real name.
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return fail(Errc::io, fmt::format("{}: cannot create: {}", tmp.string(), std::strerror(errno)));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) return fail(Errc::io, fmt::format("{}: write failed", tmp.string()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return fail(Errc::io, fmt::format("{}: cannot rename into place: {}", path.string(), ec.message()));
  return {};
}

Result<std::string> sha256_hex(std::span<const std::byte> bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) != 1 || len != 32)
    return fail(Errc::io, "sha256: OpenSSL's EVP_Digest failed");
  std::string hex;
  hex.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

}  // namespace cubinrt
