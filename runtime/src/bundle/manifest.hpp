// The bundle manifest: what each packed cubin is, as read from the cubin itself at pack time.
// Format: docs/formats.md ("cubinrt-manifest", version 2; version 1 is still read); schema:
// manifest/manifest.schema.json. Entries of one cubin (many kernels in one file) share its bytes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cubinrt/error.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt {

inline constexpr uint32_t kManifestVersion = 2;

struct ManifestEntry {
  std::string id;
  Arch arch;                 // from the cubin
  KernelKey key;             // family and axes, from the catalog
  std::string symbol;        // from the cubin (and equal to the catalog's)
  std::string abi_name;
  uint32_t abi_version = 0;
  std::string sha256;        // hex digest of the uncompressed cubin (shared by the entries of one cubin)
  uint64_t offset = 0;       // of the compressed cubin, from the start of the payload (likewise)
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint32_t toolkit_version = 0;  // x10, from the cubin's notes
  int min_driver_version = 0;    // CUDA driver API version needed (13000 = 13.0)
  uint32_t registers = 0;        // informative, from the cubin
  uint32_t static_shared = 0;
  uint32_t dynamic_shared = 0;   // from the cubin: what every launch must pass (checked at verify)
  uint32_t max_threads = 0;
};

// One entry as the manifest writes it (a JSON object), for tools that print entries.
std::string to_json(const ManifestEntry& entry);

struct Manifest {
  uint32_t version = kManifestVersion;  // as read (1 or 2); written as kManifestVersion
  std::string generator;  // "cubinrt 0.1.0"
  std::string toolkit;    // "Cuda compilation tools, release 13.0, V13.0.88"
  int min_driver_version = 0;  // the highest of the entries'
  std::vector<ManifestEntry> entries;

  std::string to_json() const;
  static Result<Manifest> parse(std::string_view json_text);
  const ManifestEntry* find(std::string_view id) const;
};

}  // namespace cubinrt
