// ELF64 structures of a CUDA cubin, read through ByteView (never by casting the buffer).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/byte_view.hpp"

namespace cubinrt::detail {

inline constexpr uint16_t kEmCuda = 190;
inline constexpr uint32_t kShtNull = 0, kShtProgbits = 1, kShtSymtab = 2, kShtStrtab = 3, kShtNote = 7,
                          kShtNobits = 8;
inline constexpr uint32_t kShtNvInfo = 0x70000000, kShtNvCompat = 0x70000086;
inline constexpr uint8_t kStoCudaEntry = 0x10;

struct ElfHeader {
  uint8_t elf_class, data, osabi, abi_version;
  uint16_t type, machine;
  uint32_t version;
  uint64_t phoff, shoff;
  uint32_t flags;
  uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
};

struct Section {
  std::string_view name;
  uint32_t type;
  uint64_t flags, offset, size;
  uint32_t link, info;
  uint64_t entsize;
};

struct Symbol {
  std::string_view name;
  uint8_t info, other;
  uint16_t shndx;
  uint64_t value, size;
  // A kernel: a function marked as a CUDA entry, of any binding (anonymous-namespace and static
  // kernels are LOCAL, template instances may be WEAK).
  bool is_entry() const { return (info & 0xf) == 2 /* FUNC */ && (other & kStoCudaEntry); }
  uint8_t binding() const { return info >> 4; }  // STB_LOCAL 0, STB_GLOBAL 1, STB_WEAK 2
};

// The parsed tables of one ELF file; every section's bytes were checked to lie inside the file.
struct ElfFile {
  ByteView file;
  ElfHeader header;
  std::vector<Section> sections;
  std::vector<Symbol> symbols;

  // cuda: the file must be a CUDA ELF (EM_CUDA and a known ABI); else any 64-bit LE ELF (host objects).
  static Result<ElfFile> parse(ByteView file, bool cuda = true);
  const Section* find(std::string_view name) const;
  // The bytes of a section (empty for NOBITS).
  Result<ByteView> contents(const Section& s) const;
};

}  // namespace cubinrt::detail
