// A bundle: a header, the manifest (JSON) and the zstd-compressed cubins.
// Layout in docs/formats.md. Bundles are read from memory (the embedded default) or a file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bundle/manifest.hpp"
#include "cubinrt/error.hpp"

namespace cubinrt {

inline constexpr uint32_t kBundleFormatVersion = 1;

class Bundle {
 public:
  // Parses the header and manifest and checks the manifest's digest; cubins are checked on use.
  static Result<Bundle> from_bytes(std::shared_ptr<const std::vector<std::byte>> bytes, std::string name);
  // The same over bytes the caller keeps alive for the bundle's lifetime (the embedded bundle).
  static Result<Bundle> from_view(std::span<const std::byte> bytes, std::string name);
  static Result<Bundle> open(const std::filesystem::path& path);
  // The default bundle embedded in the library at build time.
  static Result<Bundle> embedded();

  const Manifest& manifest() const { return manifest_; }
  const std::string& name() const { return name_; }
  uint64_t size() const { return bytes_.size(); }
  std::span<const std::byte> bytes() const { return bytes_; }

  // The entry's cubin, decompressed to exactly its recorded size, with its sha256 checked. Entries
  // of one cubin share its bytes (same offset): callers that load many keep one copy per offset.
  Result<std::vector<std::byte>> cubin(const ManifestEntry& entry) const;

 private:
  std::shared_ptr<const std::vector<std::byte>> owner_;  // null for the embedded bundle
  std::span<const std::byte> bytes_;
  std::span<const std::byte> payload_;
  std::string name_;
  Manifest manifest_;
};

}  // namespace cubinrt
