// A bundle: a header, the manifest (JSON) and the zstd-compressed cubins.
// Layout in docs/formats.md. Bundles are read from memory (the embedded default) or a file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cubinrt/catalog.hpp"
#include "cubinrt/error.hpp"
#include "cubinrt/manifest.hpp"

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

  // The entry's cubin, decompressed to exactly its recorded size, with its sha256 checked.
  Result<std::vector<std::byte>> cubin(const ManifestEntry& entry) const;

 private:
  std::shared_ptr<const std::vector<std::byte>> owner_;  // null for the embedded bundle
  std::span<const std::byte> bytes_;
  std::span<const std::byte> payload_;
  std::string name_;
  Manifest manifest_;
};

struct PackOptions {
  std::filesystem::path cubin_dir;  // holds <variant id>.cubin for every catalog variant
  int zstd_level = 12;
};

// Builds a bundle from the catalog and the real cubins: every manifest fact about arch, symbol
// and resources is read from the cubin and checked against the catalog and the ABI.
Result<std::vector<std::byte>> pack_bundle(const Catalog& catalog, const PackOptions& options);

// Writes a bundle of these cubins under this manifest: compresses each cubin and fills in its
// entry's sha256, sizes and offset. The manifest's other facts are the caller's; pack_bundle reads
// them from the cubins (tests use this to make bundles that lie).
Result<std::vector<std::byte>> assemble_bundle(Manifest manifest, const std::vector<std::vector<std::byte>>& cubins, int zstd_level = 12);

// Helpers shared by the bundle code and its tests.
std::string sha256_hex(std::span<const std::byte> bytes);
Result<std::vector<std::byte>> read_file(const std::filesystem::path& path);
Status write_file(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace cubinrt
