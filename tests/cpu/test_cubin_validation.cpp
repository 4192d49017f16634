// One malformed-input test per validation rule: a real cubin, mutated at the field the rule
// guards, must be rejected with that rule's name and the kernel or field involved.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>

#include "cubin/elf.hpp"
#include "cubin/nv_info.hpp"
#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"
#include "cubin/cubin.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

using detail::ByteView;
using detail::ElfFile;

std::vector<std::byte> probe() {
  static const std::vector<std::byte> bytes = *read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/probe.sm_90.cubin");
  return bytes;
}

template <class T>
void poke(std::vector<std::byte>& b, uint64_t at, T v) {
  ASSERT_LE(at + sizeof v, b.size());
  std::memcpy(b.data() + at, &v, sizeof v);
}

struct Located {
  uint64_t header;  // offset of the section header
  detail::Section s;
};
Located section(const std::vector<std::byte>& b, std::string_view name) {
  const ElfFile elf = *ElfFile::parse(ByteView(b, Errc::corrupt_cubin));
  for (size_t i = 0; i < elf.sections.size(); ++i)
    if (elf.sections[i].name == name) return {elf.header.shoff + i * 64, elf.sections[i]};
  ADD_FAILURE() << "no section " << name;
  return {};
}
// Offset in the file of the first record with this attribute in a section.
uint64_t record(const std::vector<std::byte>& b, std::string_view sec, uint8_t attribute) {
  const Located l = section(b, sec);
  const auto records = *detail::parse_nv_info(ByteView(std::span(b).subspan(l.s.offset, l.s.size), Errc::corrupt_cubin), sec);
  for (const auto& r : records)
    if (r.attribute == attribute) return l.s.offset + r.at;
  ADD_FAILURE() << "no attribute " << int(attribute) << " in " << sec;
  return 0;
}

void expect_rule(const std::vector<std::byte>& b, std::string_view rule, std::string_view detail = "") {
  auto r = read_cubin(b);
  ASSERT_FALSE(r.has_value()) << "accepted a cubin that breaks " << rule;
  EXPECT_EQ(r.error().code, Errc::corrupt_cubin);
  EXPECT_NE(r.error().message.find(std::string("rule ") + std::string(rule)), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(std::string(detail)), std::string::npos) << r.error().message;
}

TEST(CubinValidation, TheProbeItselfIsValid) { CUBINRT_ASSERT_OK(read_cubin(probe())); }

TEST(CubinValidation, ElfHeader) {
  auto b = probe();
  b.resize(40);
  expect_rule(b, "elf-header", "40 bytes");
}
TEST(CubinValidation, ElfMagic) {
  auto b = probe();
  b[0] = std::byte{0};
  expect_rule(b, "elf-magic");
}
TEST(CubinValidation, ElfClass) {
  auto b = probe();
  b[4] = std::byte{1};
  expect_rule(b, "elf-class", "class 1");
}
TEST(CubinValidation, ElfMachine) {
  auto b = probe();
  poke<uint16_t>(b, 18, 62);
  expect_rule(b, "elf-machine", "e_machine is 62");
}
TEST(CubinValidation, ElfAbi) {
  auto b = probe();
  b[8] = std::byte{7};  // ABI 7 with the v8 OSABI 0x41
  expect_rule(b, "elf-abi", "OSABI 0x41 with ABI version 7");
}
TEST(CubinValidation, ElfEntsize) {
  auto b = probe();
  poke<uint16_t>(b, 58, 40);
  expect_rule(b, "elf-entsize", "shentsize 40");
}
TEST(CubinValidation, ElfSections) {
  auto b = probe();
  poke<uint16_t>(b, 62, 999);
  expect_rule(b, "elf-sections", "index 999");
}
TEST(CubinValidation, InsideFileTruncated) {
  auto b = probe();
  b.resize(6000);
  expect_rule(b, "inside-file");
}
TEST(CubinValidation, InsideFileSectionOffset) {
  auto b = probe();
  poke<uint64_t>(b, section(b, ".nv.info").header + 24, uint64_t{1} << 40);
  expect_rule(b, "inside-file", "section");
}
TEST(CubinValidation, NamesTerminated) {
  auto b = probe();
  const Located strtab = section(b, ".shstrtab");
  // Overwrite the table's final NUL: the last name now runs off its end.
  b[strtab.s.offset + strtab.s.size - 1] = std::byte{'x'};
  expect_rule(b, "names-terminated");
}
TEST(CubinValidation, SymtabEntsize) {
  auto b = probe();
  poke<uint64_t>(b, section(b, ".symtab").header + 56, 16);
  expect_rule(b, "symtab-entsize", "entsize is 16");
}
TEST(CubinValidation, SymtabShndx) {
  auto b = probe();
  const Located symtab = section(b, ".symtab");
  poke<uint16_t>(b, symtab.s.offset + 24 + 6, 500);  // symbol 1's section index
  expect_rule(b, "symtab-shndx", "section 500");
}
// File offset of a symbol's table entry, and the symbol.
std::pair<uint64_t, detail::Symbol> symbol(const std::vector<std::byte>& b, std::string_view name) {
  const ElfFile elf = *ElfFile::parse(ByteView(b, Errc::corrupt_cubin));
  const Located symtab = section(b, ".symtab");
  for (size_t i = 0; i < elf.symbols.size(); ++i)
    if (elf.symbols[i].name == name) return {symtab.s.offset + i * 24, elf.symbols[i]};
  ADD_FAILURE() << "no symbol " << name;
  return {};
}
TEST(CubinValidation, DynamicSmemIsAFourByteObject) {
  auto b = probe();
  poke<uint64_t>(b, symbol(b, "cubinrt_dynamic_smem_probe_params").first + 16, 8);  // st_size
  expect_rule(b, "dynamic-smem", "probe_params");
}
TEST(CubinValidation, DynamicSmemInsideItsSection) {
  auto b = probe();
  poke<uint64_t>(b, symbol(b, "cubinrt_dynamic_smem_probe_params").first + 8, uint64_t{1} << 40);  // st_value
  expect_rule(b, "inside-file", "cubinrt_dynamic_smem_probe_params");
}
// The grid-dependency statement is a 4-byte 1: anything else is a cubin this reader cannot trust
// to wait before it touches memory.
TEST(CubinValidation, GridDependencyIsAFourByteOne) {
  auto b = probe();
  const auto [at, sym] = symbol(b, "cubinrt_grid_dependency_probe_params");
  const ElfFile elf = *ElfFile::parse(ByteView(b, Errc::corrupt_cubin));
  auto two = b;
  poke<uint32_t>(two, elf.sections[sym.shndx].offset + sym.value, 2);
  expect_rule(two, "grid-dependency", "cubinrt_grid_dependency_probe_params is 2, not 1");
  poke<uint64_t>(b, at + 16, 2);  // st_size
  expect_rule(b, "grid-dependency", "is not a 4-byte object");
}
TEST(CubinValidation, SharedSizeWithinAnyGpu) {
  auto b = probe();
  const auto [at, sym] = symbol(b, "cubinrt_dynamic_smem_probe_params");
  const ElfFile elf = *ElfFile::parse(ByteView(b, Errc::corrupt_cubin));
  poke<uint32_t>(b, elf.sections[sym.shndx].offset + sym.value, 240000);
  expect_rule(b, "shared-size", "240000 dynamic");
}
// A corrupt 4 GiB + 2 KiB shared section is refused, not narrowed to the 1 KiB it would read as.
TEST(CubinValidation, SharedSectionTooLargeIsRefusedNotNarrowed) {
  auto b = probe();
  const ElfFile elf = *ElfFile::parse(ByteView(b, Errc::corrupt_cubin));
  std::string name;
  for (const auto& sec : elf.sections)
    if (sec.name.starts_with(".nv.shared.") && sec.size > 0) name = std::string(sec.name);
  ASSERT_FALSE(name.empty());
  poke<uint64_t>(b, section(b, name).header + 32, (uint64_t{1} << 32) + 2048);  // sh_size
  expect_rule(b, "shared-size", name + " holds 4294969344 bytes of shared memory");
}
// Any SM an sm_NNN spells is read (a newer toolkit's sm_107 is not refused); below 10 is none.
TEST(CubinValidation, AnyWellFormedSmIsAnArchitecture) {
  auto b = probe();
  poke<uint8_t>(b, 48 + 1, 107);  // v8: the SM is e_flags bits 8-15
  auto r = read_cubin(b);
  CUBINRT_ASSERT_OK(r);
  EXPECT_EQ(r->arch.str(), "sm_107");
  poke<uint8_t>(b, 48 + 1, 5);
  expect_rule(b, "elf-sm", "SM 5, which is no GPU architecture");
}
TEST(CubinValidation, NvInfoFormat) {
  auto b = probe();
  poke<uint8_t>(b, section(b, ".nv.info").s.offset, 9);
  expect_rule(b, "nv-info-format", "format 9");
}
// An attribute code newer than this build (ptxas 13.5 writes 0x66 and 0x6b) is a well-formed
// record: skipped and reported, the cubin still read with every kernel.
TEST(CubinValidation, UnknownNvInfoAttributeIsSkippedAndReported) {
  auto b = probe();
  const size_t kernels = read_cubin(b)->kernels.size();
  // The kernel's CUDA API version record, which the reader does not use, given a code from beyond.
  const uint64_t at = record(b, ".nv.info.probe_params", detail::kCudaApiVersion);
  poke<uint8_t>(b, at + 1, 0x70);
  auto r = read_cubin(b);
  CUBINRT_ASSERT_OK(r);
  EXPECT_EQ(r->kernels.size(), kernels);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0], fmt::format(".nv.info.probe_params record at offset {}: attribute 0x70 is unknown to this build (newer than its codes, "
                                        "which end at 0x60); skipped", at - section(b, ".nv.info.probe_params").s.offset));
}
TEST(CubinValidation, NvInfoTiling) {
  auto b = probe();
  poke<uint16_t>(b, record(b, ".nv.info.probe_params", detail::kKparamInfo) + 2, 0xfff0);
  expect_rule(b, "nv-info-tiling", "65520-byte payload");
}
TEST(CubinValidation, RegCount) {
  auto b = probe();
  // REGCOUNT records in .nv.info: {symbol, registers}; set every one to 300.
  const Located info = section(b, ".nv.info");
  const auto records = *detail::parse_nv_info(ByteView(std::span(b).subspan(info.s.offset, info.s.size), Errc::corrupt_cubin), ".nv.info");
  for (const auto& r : records)
    if (r.attribute == detail::kRegCount) poke<uint32_t>(b, info.s.offset + r.at + 8, 300);
  expect_rule(b, "regcount", "REGCOUNT is 300");
}
TEST(CubinValidation, KparamInsideParameterBlock) {
  auto b = probe();
  poke<uint16_t>(b, record(b, ".nv.info.probe_params", detail::kCbankParamSize) + 2, 100);
  expect_rule(b, "kparam-size", "kernel 'probe_params': parameters end at byte 196 but CBANK_PARAM_SIZE is 100");
}
TEST(CubinValidation, ConstantBankHoldsParameters) {
  auto b = probe();
  poke<uint64_t>(b, section(b, ".nv.constant0.probe_params").header + 32, 16);
  expect_rule(b, "cbank-size", "kernel 'probe_params': .nv.constant0 holds 16 bytes, less than parameter base 528 + 196");
}
TEST(CubinValidation, ExitOffsets) {
  auto b = probe();
  poke<uint32_t>(b, record(b, ".nv.info.probe_params", detail::kExitInstrOffsets) + 4, 3);
  expect_rule(b, "exit-offsets", "exit instruction offset 3");
}
// An exit offset must be an instruction slot of the cubin's arch: 16 bytes from sm_70 on, 8 in
// Maxwell and Pascal SASS (NVIDIA's libraries still ship sm_50 and sm_60 cubins).
TEST(CubinValidation, ExitOffsetsAreInstructionSlotsOfTheArch) {
  auto b = probe();
  const uint64_t at = record(b, ".nv.info.probe_params", detail::kExitInstrOffsets) + 4;
  uint32_t offset = 0;
  std::memcpy(&offset, b.data() + at, 4);
  poke<uint32_t>(b, at, offset + 8);
  expect_rule(b, "exit-offsets", fmt::format("exit instruction offset {} is not a 16-byte slot", offset + 8));
  uint32_t flags = 0;
  std::memcpy(&flags, b.data() + 48, 4);
  poke<uint32_t>(b, 48, (flags & ~0xff00u) | (60u << 8));  // ELF ABI v8: the SM in bits 8-15
  auto pascal = read_cubin(b);
  CUBINRT_ASSERT_OK(pascal);
  EXPECT_EQ(pascal->arch.str(), "sm_60");
}
TEST(CubinValidation, MaxThreads) {
  auto b = probe();
  poke<uint32_t>(b, record(b, ".nv.info.probe_params", detail::kMaxThreads) + 4, 4096);
  expect_rule(b, "max-threads", "4096 threads");
}
TEST(CubinValidation, KparamOrdinals) {
  auto b = probe();
  poke<uint16_t>(b, record(b, ".nv.info.probe_params", detail::kKparamInfo) + 4 + 4, 42);
  expect_rule(b, "kparam-ordinals", "kernel 'probe_params'");
}
TEST(CubinValidation, KernelSections) {
  auto b = probe();
  // Retarget .nv.info.probe_params (sh_info) at another section: the kernel has no info of its own.
  poke<uint32_t>(b, section(b, ".nv.info.probe_params").header + 44, 1);
  expect_rule(b, "kernel-sections", "kernel 'probe_params'");
}

// Every prefix of a real cubin is rejected or read; none crashes or hangs (ASan checks the reads).
TEST(CubinValidation, EveryTruncationIsHandled) {
  const auto b = probe();
  size_t rejected = 0;
  for (size_t n = 0; n < b.size(); n += 37) {
    const std::vector<std::byte> prefix(b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
    if (!read_cubin(prefix)) ++rejected;
  }
  EXPECT_GT(rejected, b.size() / 37 * 9 / 10);
}

}  // namespace
}  // namespace cubinrt::test
