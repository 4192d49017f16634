// The fatbinary reader: containers as nvcc writes them (plain, LZ4- or zstd-compressed entries),
// alone in a .fatbin file or inside a host object (`.nv_fatbin`, or `__nv_relfatbin` for -rdc).
// Entries are read one at a time (memory: the largest entry, not their sum), and an entry that
// cannot be read is reported as that entry's error while the others are still read.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
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
  uint16_t raw_kind = 2;        // as recorded (an unknown kind is listed, not read)
  uint64_t offset = 0;          // of the entry's header in its container's entries
  Arch arch;                    // SM and variant from the entry's flags
  uint64_t flags = 0;
  std::string compression;      // "none", "lz4", "zstd"
  uint64_t stored_size = 0;     // bytes in the container
  uint64_t size = 0;            // bytes it records uncompressed
  std::vector<std::byte> data;  // PTX and ELF entries, decompressed to exactly `size`; empty otherwise
  bool relocatable = false;     // an ELF of type ET_REL (nvcc -rdc): device code before nvlink
  std::optional<CubinInfo> cubin;  // a loadable cubin, read and validated
  std::string error;            // why this entry could not be read; empty when it was

  std::string_view kind_name() const;  // "cubin", "relocatable", "ptx", "lto-ir", "unknown"
  // Why an entry that is not a loadable cubin is listed but not validated (empty for cubins).
  std::string explanation() const;
};

// What an entry's recorded sizes may claim, checked before anything is allocated: a cubin's limits
// (cubin.hpp), and the decompression work for a whole file, which stops at 1 GiB.
struct FatbinLimits {
  uint64_t max_entry_bytes = kMaxCubinBytes;
  uint64_t max_ratio = kMaxCompressionRatio;
  uint64_t max_total_bytes = uint64_t{1} << 30;
};

// `bytes` is a fatbin file, or an ELF host object holding one. `visit` sees each entry in order,
// its data alive until it returns. Fails only where the container itself is broken (a header or
// entry table that cannot be walked), or when it holds no entry; entry-level faults go to
// FatbinEntry::error.
Result<size_t> for_each_fatbin_entry(std::span<const std::byte> bytes, const std::function<void(FatbinEntry&)>& visit,
                                     const FatbinLimits& limits = {});
// Every entry at once (tests, small files).
Result<std::vector<FatbinEntry>> read_fatbin(std::span<const std::byte> bytes, const FatbinLimits& limits = {});

bool looks_like_fatbin(std::span<const std::byte> bytes);

}  // namespace cubinrt
