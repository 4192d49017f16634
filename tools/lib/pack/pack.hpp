// Making bundles: the catalog and the built cubins in, bundle bytes out (cubin-manifest pack).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <vector>

#include "bundle/manifest.hpp"
#include "catalog/catalog.hpp"
#include "cubinrt/error.hpp"

namespace cubinrt {

struct PackOptions {
  // Holds each variant's cubin: <unit>.cubin ("paged_decode.sm_90.cubin", the build's one cubin a
  // family and arch) or, where present, <variant id>.cubin (a one-variant experiment build).
  std::filesystem::path cubin_dir;
  int zstd_level = 12;
};

// Builds a bundle from the catalog and the real cubins: every manifest fact about arch, symbol
// and resources is read from the cubin and checked against the catalog, the family and its ABI.
Result<std::vector<std::byte>> pack_bundle(const Catalog& catalog, const PackOptions& options);

// Writes a bundle of these cubins under this manifest (entry i's cubin is cubins[i]): compresses
// each distinct cubin once and fills in its entries' sha256, sizes and offset. The manifest's
// other facts are the caller's; pack_bundle reads them from the cubins (tests use this to make
// bundles that lie).
Result<std::vector<std::byte>> assemble_bundle(Manifest manifest, const std::vector<std::span<const std::byte>>& cubins,
                                               int zstd_level = 12);
Result<std::vector<std::byte>> assemble_bundle(Manifest manifest, const std::vector<std::vector<std::byte>>& cubins,
                                               int zstd_level = 12);

}  // namespace cubinrt
