// The fatbinary reader: containers as nvcc writes them (plain, LZ4- or zstd-compressed entries),
// alone in a .fatbin file or inside a host object's .nv_fatbin section.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cubin/cubin.hpp"
#include "cubinrt/error.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt {

struct FatbinEntry {
  enum class Kind : uint16_t { ptx = 1, elf = 2, lto_ir = 8 };
  Kind kind = Kind::elf;
  Arch arch;                    // SM and variant from the entry's flags
  uint64_t flags = 0;
  std::string compression;      // "none", "lz4", "zstd"
  uint64_t stored_size = 0;     // bytes in the container
  std::vector<std::byte> data;  // decompressed to exactly the recorded size
};

// `bytes` is a fatbin file, or an ELF host object holding one in `.nv_fatbin`.
// What an entry's recorded sizes may claim, checked before anything is allocated: a cubin's limits
// (cubin.hpp), and a whole file's entries, which are held at once, stop at 1 GiB.
struct FatbinLimits {
  uint64_t max_entry_bytes = kMaxCubinBytes;
  uint64_t max_ratio = kMaxCompressionRatio;
  uint64_t max_total_bytes = uint64_t{1} << 30;
};

Result<std::vector<FatbinEntry>> read_fatbin(std::span<const std::byte> bytes, const FatbinLimits& limits = {});

bool looks_like_fatbin(std::span<const std::byte> bytes);

}  // namespace cubinrt
