// The fatbinary reader: containers as nvcc writes them (plain, LZ4- or zstd-compressed entries),
// alone in a .fatbin file or inside a host object's .nv_fatbin section.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

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
Result<std::vector<FatbinEntry>> read_fatbin(std::span<const std::byte> bytes);

bool looks_like_fatbin(std::span<const std::byte> bytes);

}  // namespace cubinrt
