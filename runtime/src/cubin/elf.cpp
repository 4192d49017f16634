#include "cubin/elf.hpp"

namespace cubinrt::detail {

namespace {

Result<ElfHeader> parse_header(const ByteView& f, bool cuda) {
  if (f.size() < 64) return fail(Errc::corrupt_cubin, fmt::format("rule elf-header: {} bytes is smaller than an ELF64 header (64)", f.size()));
  const auto magic = CUBINRT_TRY(f.read<uint32_t>(0, "ELF magic"));
  if (magic != 0x464c457f) return fail(Errc::corrupt_cubin, "rule elf-magic: the file does not start with the ELF magic 7f 45 4c 46");
  ElfHeader h{};
  h.elf_class = CUBINRT_TRY(f.read<uint8_t>(4, "EI_CLASS"));
  h.data = CUBINRT_TRY(f.read<uint8_t>(5, "EI_DATA"));
  h.osabi = CUBINRT_TRY(f.read<uint8_t>(7, "EI_OSABI"));
  h.abi_version = CUBINRT_TRY(f.read<uint8_t>(8, "EI_ABIVERSION"));
  h.type = CUBINRT_TRY(f.read<uint16_t>(16, "e_type"));
  h.machine = CUBINRT_TRY(f.read<uint16_t>(18, "e_machine"));
  h.version = CUBINRT_TRY(f.read<uint32_t>(20, "e_version"));
  h.phoff = CUBINRT_TRY(f.read<uint64_t>(32, "e_phoff"));
  h.shoff = CUBINRT_TRY(f.read<uint64_t>(40, "e_shoff"));
  h.flags = CUBINRT_TRY(f.read<uint32_t>(48, "e_flags"));
  h.ehsize = CUBINRT_TRY(f.read<uint16_t>(52, "e_ehsize"));
  h.phentsize = CUBINRT_TRY(f.read<uint16_t>(54, "e_phentsize"));
  h.phnum = CUBINRT_TRY(f.read<uint16_t>(56, "e_phnum"));
  h.shentsize = CUBINRT_TRY(f.read<uint16_t>(58, "e_shentsize"));
  h.shnum = CUBINRT_TRY(f.read<uint16_t>(60, "e_shnum"));
  h.shstrndx = CUBINRT_TRY(f.read<uint16_t>(62, "e_shstrndx"));

  if (h.elf_class != 2 || h.data != 1)
    return fail(Errc::corrupt_cubin, fmt::format("rule elf-class: class {} data {} (a cubin is 64-bit little-endian: 2, 1)", h.elf_class, h.data));
  if (cuda && h.machine != kEmCuda)
    return fail(Errc::corrupt_cubin, fmt::format("rule elf-machine: e_machine is {}, not EM_CUDA (190)", h.machine));
  if (cuda && !((h.osabi == 0x33 && h.abi_version == 7) || (h.osabi == 0x41 && h.abi_version == 8)))
    return fail(Errc::corrupt_cubin, fmt::format("rule elf-abi: OSABI {:#x} with ABI version {} (known: 0x33 with 7, 0x41 with 8)", h.osabi, h.abi_version));
  if (h.ehsize != 64 || h.shentsize != 64 || (h.phnum != 0 && h.phentsize != 56))
    return fail(Errc::corrupt_cubin, fmt::format("rule elf-entsize: ehsize {} shentsize {} phentsize {} (expected 64, 64, 56)", h.ehsize, h.shentsize, h.phentsize));
  if (h.shnum == 0 || h.shstrndx >= h.shnum)
    return fail(Errc::corrupt_cubin, fmt::format("rule elf-sections: {} sections with the name table at index {}", h.shnum, h.shstrndx));
  if (!f.contains(h.shoff, uint64_t{h.shnum} * 64))
    return fail(Errc::corrupt_cubin, fmt::format("rule inside-file: the section header table ({} x 64 bytes at offset {}) lies outside the {} bytes", h.shnum, h.shoff, f.size()));
  if (h.phnum != 0 && !f.contains(h.phoff, uint64_t{h.phnum} * 56))
    return fail(Errc::corrupt_cubin, fmt::format("rule inside-file: the program header table ({} x 56 bytes at offset {}) lies outside the {} bytes", h.phnum, h.phoff, f.size()));
  return h;
}

}  // namespace

Result<ElfFile> ElfFile::parse(ByteView file, bool cuda) {
  ElfFile elf{file, CUBINRT_TRY(parse_header(file, cuda)), {}, {}};
  const ElfHeader& h = elf.header;
  std::vector<uint32_t> name_offsets;
  for (uint32_t i = 0; i < h.shnum; ++i) {
    const uint64_t at = h.shoff + uint64_t{i} * 64;
    Section s{};
    name_offsets.push_back(CUBINRT_TRY(file.read<uint32_t>(at, "sh_name")));
    s.type = CUBINRT_TRY(file.read<uint32_t>(at + 4, "sh_type"));
    s.flags = CUBINRT_TRY(file.read<uint64_t>(at + 8, "sh_flags"));
    s.offset = CUBINRT_TRY(file.read<uint64_t>(at + 24, "sh_offset"));
    s.size = CUBINRT_TRY(file.read<uint64_t>(at + 32, "sh_size"));
    s.link = CUBINRT_TRY(file.read<uint32_t>(at + 40, "sh_link"));
    s.info = CUBINRT_TRY(file.read<uint32_t>(at + 44, "sh_info"));
    s.entsize = CUBINRT_TRY(file.read<uint64_t>(at + 56, "sh_entsize"));
    if (s.type != kShtNobits && s.type != kShtNull && !file.contains(s.offset, s.size))
      return fail(Errc::corrupt_cubin, fmt::format("rule inside-file: section {} ({} bytes at offset {}) lies outside the {} bytes of the file", i, s.size, s.offset, file.size()));
    elf.sections.push_back(s);
  }
  const Section& shstr = elf.sections[h.shstrndx];
  if (shstr.type != kShtStrtab) return fail(Errc::corrupt_cubin, "rule elf-sections: e_shstrndx does not name a string table");
  const ByteView names = CUBINRT_TRY(file.sub(shstr.offset, shstr.size, "section name table"));
  for (size_t i = 0; i < elf.sections.size(); ++i)
    elf.sections[i].name = CUBINRT_TRY(names.cstr(name_offsets[i], fmt::format("name of section {}", i)));

  for (const Section& s : elf.sections) {
    if (s.type != kShtSymtab) continue;
    if (s.entsize != 24) return fail(Errc::corrupt_cubin, fmt::format("rule symtab-entsize: .symtab entsize is {}, not 24", s.entsize));
    if (s.link >= elf.sections.size() || elf.sections[s.link].type != kShtStrtab)
      return fail(Errc::corrupt_cubin, "rule symtab-link: .symtab does not link to a string table");
    const Section& strtab = elf.sections[s.link];
    const ByteView strs = CUBINRT_TRY(file.sub(strtab.offset, strtab.size, "symbol name table"));
    const ByteView syms = CUBINRT_TRY(file.sub(s.offset, s.size, ".symtab"));
    for (uint64_t at = 0; at + 24 <= syms.size(); at += 24) {
      Symbol sym{};
      const auto name = CUBINRT_TRY(syms.read<uint32_t>(at, "st_name"));
      sym.name = CUBINRT_TRY(strs.cstr(name, "symbol name"));
      sym.info = CUBINRT_TRY(syms.read<uint8_t>(at + 4, "st_info"));
      sym.other = CUBINRT_TRY(syms.read<uint8_t>(at + 5, "st_other"));
      sym.shndx = CUBINRT_TRY(syms.read<uint16_t>(at + 6, "st_shndx"));
      sym.value = CUBINRT_TRY(syms.read<uint64_t>(at + 8, "st_value"));
      sym.size = CUBINRT_TRY(syms.read<uint64_t>(at + 16, "st_size"));
      if (sym.shndx != 0 && sym.shndx < 0xff00 && sym.shndx >= elf.sections.size())
        return fail(Errc::corrupt_cubin, fmt::format("rule symtab-shndx: symbol '{}' names section {} of {}", sym.name, sym.shndx, elf.sections.size()));
      elf.symbols.push_back(sym);
    }
    break;
  }
  return elf;
}

const Section* ElfFile::find(std::string_view name) const {
  for (const Section& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

Result<ByteView> ElfFile::contents(const Section& s) const {
  if (s.type == kShtNobits) return ByteView({}, Errc::corrupt_cubin);
  return file.sub(s.offset, s.size, fmt::format("section {}", s.name));
}

}  // namespace cubinrt::detail
