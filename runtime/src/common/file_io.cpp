#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "common/file_io.hpp"

namespace cubinrt {

Result<std::vector<std::byte>> read_file(const std::filesystem::path& path) {
  // Opened without blocking and checked on the open descriptor (not by name first, which a file
  // swapped in between would defeat): a FIFO, device or directory is refused before any read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail(Errc::io, fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(Errc::io, fmt::format("{}: cannot stat: {}", path.string(), std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return fail(Errc::io, fmt::format("{}: not a regular file (a directory, pipe or device is not read)", path.string()));
  std::vector<std::byte> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(Errc::io, fmt::format("{}: read failed after {} of {} bytes: {}", path.string(), done, bytes.size(), std::strerror(errno)));
    if (n == 0) return fail(Errc::io, fmt::format("{}: ended after {} of its {} bytes (it shrank while read)", path.string(), done, bytes.size()));
    done += static_cast<size_t>(n);
  }
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
