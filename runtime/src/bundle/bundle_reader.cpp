#include <zstd.h>

#include "bundle/bundle.hpp"
#include "bundle/bundle_header.hpp"
#include "common/byte_view.hpp"
#include "common/file_io.hpp"
#include "cubin/cubin.hpp"

namespace cubinrt {

using namespace detail;

namespace {

std::string hex(std::span<const uint8_t> bytes) {
  std::string s;
  for (uint8_t b : bytes) s += fmt::format("{:02x}", b);
  return s;
}

Result<BundleHeader> read_header(const ByteView& v) {
  if (v.size() < kBundleHeaderSize)
    return fail(Errc::corrupt_bundle, fmt::format("{} bytes is smaller than the {}-byte bundle header", v.size(), kBundleHeaderSize));
  if (std::memcmp(v.bytes().data(), kBundleMagic, sizeof kBundleMagic) != 0)
    return fail(Errc::corrupt_bundle, "not a cubinrt bundle (the magic \"CUBINRTB\" is missing)");
  BundleHeader h{};
  h.version = CUBINRT_TRY(v.read<uint32_t>(8, "format version"));
  if (h.version != kBundleFormatVersion)
    return fail(Errc::corrupt_bundle, fmt::format("bundle format version {} (this build reads version {})", h.version, kBundleFormatVersion));
  const auto header_size = CUBINRT_TRY(v.read<uint32_t>(12, "header size"));
  if (header_size != kBundleHeaderSize) return fail(Errc::corrupt_bundle, fmt::format("header size {} (expected {})", header_size, kBundleHeaderSize));
  h.manifest_offset = CUBINRT_TRY(v.read<uint64_t>(16, "manifest offset"));
  h.manifest_size = CUBINRT_TRY(v.read<uint64_t>(24, "manifest size"));
  h.payload_offset = CUBINRT_TRY(v.read<uint64_t>(32, "payload offset"));
  h.payload_size = CUBINRT_TRY(v.read<uint64_t>(40, "payload size"));
  h.manifest_sha256 = CUBINRT_TRY((v.read<std::array<uint8_t, 32>>(48, "manifest sha256")));
  // Zero in version 1; a later version may give them a meaning (a signature section), which a
  // reader of this version must not silently ignore.
  const auto reserved = CUBINRT_TRY((v.read<std::array<uint8_t, 16>>(80, "reserved bytes")));
  for (size_t i = 0; i < reserved.size(); ++i)
    if (reserved[i] != 0)
      return fail(Errc::corrupt_bundle, fmt::format("header byte {} is {:#04x}: bytes 80-95 are reserved and must be zero in format version {}",
                                                    80 + i, reserved[i], kBundleFormatVersion));
  return h;
}

}  // namespace

Result<Bundle> Bundle::from_bytes(std::shared_ptr<const std::vector<std::byte>> bytes, std::string name) {
  if (!bytes) return fail(Errc::invalid_argument, fmt::format("bundle {}: no bytes", name));
  auto b = CUBINRT_TRY(from_view(std::span<const std::byte>(*bytes), std::move(name)));
  b.owner_ = std::move(bytes);
  return b;
}

Result<Bundle> Bundle::from_view(std::span<const std::byte> bytes, std::string name) {
  Bundle b;
  b.name_ = std::move(name);
  b.bytes_ = bytes;
  auto parse = [&b]() -> Status {
    const ByteView v(b.bytes_, Errc::corrupt_bundle);
    const BundleHeader h = CUBINRT_TRY(read_header(v));
    const ByteView manifest = CUBINRT_TRY(v.sub(h.manifest_offset, h.manifest_size, "manifest"));
    const ByteView payload = CUBINRT_TRY(v.sub(h.payload_offset, h.payload_size, "payload"));
    const std::string digest = CUBINRT_TRY(sha256_hex(manifest.bytes()));
    if (digest != hex(h.manifest_sha256))
      return fail(Errc::corrupt_bundle, fmt::format("manifest sha256 is {}, the header records {}", digest, hex(h.manifest_sha256)));
    b.manifest_ = CUBINRT_TRY(Manifest::parse(std::string_view(reinterpret_cast<const char*>(manifest.bytes().data()), manifest.size())));
    b.payload_ = payload.bytes();
    for (const ManifestEntry& e : b.manifest_.entries)
      if (!payload.contains(e.offset, e.compressed_size))
        return fail(Errc::corrupt_bundle, fmt::format("entry {}: {} compressed bytes at offset {} lie outside the {}-byte payload", e.id,
                                                      e.compressed_size, e.offset, payload.size()));
    return {};
  };
  if (auto ok = parse(); !ok) return std::unexpected(std::move(ok).error().context(fmt::format("bundle {}", b.name_)));
  return b;
}

Result<Bundle> Bundle::open(const std::filesystem::path& path) {
  auto bytes = CUBINRT_TRY(read_file(path));
  return from_bytes(std::make_shared<const std::vector<std::byte>>(std::move(bytes)), path.string());
}

Result<std::vector<std::byte>> Bundle::cubin(const ManifestEntry& e) const {
  auto where = [&](std::string msg) { return fail(Errc::corrupt_bundle, fmt::format("bundle {}: entry {}: {}", name_, e.id, msg)); };
  if (e.offset > payload_.size() || e.compressed_size > payload_.size() - e.offset)
    return where("compressed bytes lie outside the payload");
  // The size is the file's word (and a frame's header may repeat the lie): it is checked before
  // anything is allocated for it.
  if (e.size > kMaxCubinBytes || e.size / kMaxCompressionRatio > e.compressed_size)
    return where(fmt::format("the manifest records {} bytes from {} compressed; a cubin is at most {} bytes and compresses at most {}-fold here",
                             e.size, e.compressed_size, kMaxCubinBytes, kMaxCompressionRatio));
  const std::span<const std::byte> frame = payload_.subspan(e.offset, e.compressed_size);
  const unsigned long long content = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (content == ZSTD_CONTENTSIZE_ERROR) return where("not a zstd frame");
  if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != e.size)
    return where(fmt::format("the zstd frame holds {} bytes, the manifest records {}", content, e.size));
  // Decompress into exactly the recorded size: zstd refuses to write past it.
  std::vector<std::byte> out(e.size);
  const size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) return where(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
  if (n != e.size) return where(fmt::format("decompressed to {} bytes, the manifest records {}", n, e.size));
  auto digest = sha256_hex(out);
  if (!digest) return where(digest.error().message);
  if (*digest != e.sha256) return where(fmt::format("sha256 of the cubin is {}, the manifest records {}", *digest, e.sha256));
  return out;
}

}  // namespace cubinrt
