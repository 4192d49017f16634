// The fixed header of a bundle file (docs/formats.md): 96 bytes, little-endian.
//   0  char[8]  magic "CUBINRTB"
//   8  u32      format version (1)
//  12  u32      header size (96)
//  16  u64      manifest offset     24 u64 manifest size
//  32  u64      payload offset      40 u64 payload size
//  48  u8[32]   sha256 of the manifest bytes
//  80  u8[16]   reserved, zero (a signature section's offset and size, later)
#pragma once

#include <array>
#include <cstdint>

namespace cubinrt::detail {

inline constexpr char kBundleMagic[8] = {'C', 'U', 'B', 'I', 'N', 'R', 'T', 'B'};
inline constexpr uint32_t kBundleHeaderSize = 96;

struct BundleHeader {
  uint32_t version;
  uint64_t manifest_offset, manifest_size, payload_offset, payload_size;
  std::array<uint8_t, 32> manifest_sha256;
};

}  // namespace cubinrt::detail
