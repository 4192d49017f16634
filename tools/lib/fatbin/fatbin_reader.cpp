#include <algorithm>

#include <lz4.h>
#include <zstd.h>

#include "common/byte_view.hpp"
#include "cubin/elf.hpp"
#include "cubin/cubin.hpp"
#include "fatbin/fatbin.hpp"

namespace cubinrt {

using namespace detail;

namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr uint64_t kFlagLz4 = 0x2000, kFlagZstd = 0x8000, kFlagAccel = 0x100000, kFlagFamily = 0x200000;

// The sizes read so far and their limits.
struct Budget {
  const FatbinLimits& limits;
  uint64_t total = 0;
};

// Decompresses one entry into `out`, or says why not (the entry's error).
Status decompress(const ByteView& stored, uint64_t flags, uint64_t size, Budget& budget, std::vector<std::byte>& out) {
  auto bad = [&](std::string m) { return fail(Errc::corrupt_fatbin, std::move(m)); };
  const FatbinLimits& lim = budget.limits;
  if (size > lim.max_entry_bytes) return bad(fmt::format("uncompressed size {} is implausible (over {} bytes)", size, lim.max_entry_bytes));
  if (size / lim.max_ratio > stored.size())
    return bad(fmt::format("{} bytes would decompress to {}, more than {}-fold: refused before decompressing", stored.size(), size, lim.max_ratio));
  if (size > lim.max_total_bytes - budget.total)
    return bad(fmt::format("its {} bytes would take the file's decompressed entries past {} bytes", size, lim.max_total_bytes));
  budget.total += size;
  out.assign(size, std::byte{0});
  if (flags & kFlagZstd) {
    const size_t n = ZSTD_decompress(out.data(), out.size(), stored.bytes().data(), stored.size());
    if (ZSTD_isError(n)) return bad(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
    if (n != size) return bad(fmt::format("zstd gave {} bytes, the entry records {}", n, size));
  } else {
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(stored.bytes().data()), reinterpret_cast<char*>(out.data()),
                                      static_cast<int>(stored.size()), static_cast<int>(out.size()));
    if (n < 0 || static_cast<uint64_t>(n) != size) return bad(fmt::format("LZ4 gave {} bytes, the entry records {}", n, size));
  }
  return {};
}

// An entry's contents: decompressed, then (ELF) read as a cubin or recognised as relocatable code.
// Any fault lands in entry.error.
void read_entry(const ByteView& data, uint64_t compressed, Budget& budget, FatbinEntry& entry) {
  auto failed = [&](const Error& e) { entry.error = e.message; };
  // LTO IR is linked by the driver's JIT linker; its payload is not decompressed here.
  if (entry.kind == FatbinEntry::Kind::lto_ir || (entry.raw_kind != 1 && entry.raw_kind != 2)) return;
  if (entry.compression != "none") {
    auto stored = data.sub(0, compressed, "compressed entry");
    if (!stored) return failed(stored.error());
    if (auto ok = decompress(*stored, entry.flags, entry.size, budget, entry.data); !ok) return failed(ok.error());
  } else {
    const uint64_t n = entry.size != 0 && entry.size <= data.size() ? entry.size : data.size();
    entry.data.assign(data.bytes().begin(), data.bytes().begin() + static_cast<ptrdiff_t>(n));
  }
  if (entry.kind != FatbinEntry::Kind::elf) return;
  // ET_REL (1): relocatable device code, which nvlink or the driver's linker finishes.
  const ByteView elf(entry.data, Errc::corrupt_fatbin);
  if (elf.read<uint16_t>(16, "ELF type").value_or(0) == 1) {
    entry.relocatable = true;
    return;
  }
  auto info = read_cubin(entry.data);
  if (!info) return failed(info.error());
  if (info->arch.sm() != entry.arch.sm() || (entry.arch.variant == Arch::Variant::accel) != (info->arch.variant == Arch::Variant::accel))
    return void(entry.error = fmt::format("the entry says {}, its cubin is {}", entry.arch.str(), info->arch.str()));
  entry.cubin = std::move(*info);
}

Status walk_container(const ByteView& v, uint64_t& at, const std::function<void(FatbinEntry&)>& visit, Budget& budget, size_t& count) {
  const auto magic = CUBINRT_TRY(v.read<uint32_t>(at, "fatbin magic"));
  if (magic != kFatbinMagic) return fail(Errc::corrupt_fatbin, fmt::format("no fatbin magic at offset {}", at));
  const auto header_size = CUBINRT_TRY(v.read<uint16_t>(at + 6, "fatbin header size"));
  const auto body_size = CUBINRT_TRY(v.read<uint64_t>(at + 8, "fatbin size"));
  if (header_size != 16) return fail(Errc::corrupt_fatbin, fmt::format("container at {}: header size {} (16 expected)", at, header_size));
  const ByteView body = CUBINRT_TRY(v.sub(at + 16, body_size, "fatbin entries"));
  uint64_t e = 0;
  while (e < body.size()) {
    // The walk needs the header size and payload size; a fault in those ends it (the next entry
    // cannot be found). Everything else is this entry's.
    auto where = [&](std::string m) { return fail(Errc::corrupt_fatbin, fmt::format("entry at offset {}: {}", e, m)); };
    FatbinEntry entry;
    entry.offset = e;
    entry.raw_kind = CUBINRT_TRY(body.read<uint16_t>(e, "entry kind"));
    const auto hdr = CUBINRT_TRY(body.read<uint32_t>(e + 4, "entry header size"));
    const auto payload = CUBINRT_TRY(body.read<uint64_t>(e + 8, "entry payload size"));
    if (hdr < 64) return where(fmt::format("header size {} (at least 64)", hdr));
    const ByteView data = CUBINRT_TRY(body.sub(e + hdr, payload, fmt::format("entry at offset {}: payload", e)));
    const auto compressed = CUBINRT_TRY(body.read<uint32_t>(e + 0x10, "entry compressed size"));
    const auto sm = CUBINRT_TRY(body.read<uint32_t>(e + 0x1c, "entry SM"));
    entry.flags = CUBINRT_TRY(body.read<uint64_t>(e + 0x28, "entry flags"));
    entry.size = CUBINRT_TRY(body.read<uint64_t>(e + 0x38, "entry uncompressed size"));
    entry.kind = static_cast<FatbinEntry::Kind>(entry.raw_kind);
    entry.arch = Arch::from_sm(std::clamp<uint32_t>(sm, 10, 999), entry.flags & kFlagAccel ? Arch::Variant::accel
                                                                : entry.flags & kFlagFamily ? Arch::Variant::family : Arch::Variant::plain);
    const bool is_compressed = (entry.flags & (kFlagLz4 | kFlagZstd)) != 0;
    entry.compression = entry.flags & kFlagZstd ? "zstd" : entry.flags & kFlagLz4 ? "lz4" : "none";
    entry.stored_size = is_compressed ? compressed : payload;
    // Any well-formed SM is an architecture; one that no sm_NNN spells is corruption (of this entry).
    if (entry.raw_kind != 1 && entry.raw_kind != 2 && entry.raw_kind != 8)
      entry.error = fmt::format("kind {} is unknown to this build (1 PTX, 2 ELF, 8 LTO IR); skipped", entry.raw_kind);
    else if (sm < 10 || sm > 999)
      entry.error = fmt::format("SM {} is no architecture (sm_10 to sm_999)", sm);
    else
      read_entry(data, compressed, budget, entry);
    visit(entry);
    ++count;
    e += uint64_t{hdr} + payload;
  }
  at += 16 + body_size;
  return {};
}

}  // namespace

std::string_view FatbinEntry::kind_name() const {
  switch (raw_kind) {
    case 1: return "ptx";
    case 2: return relocatable ? "relocatable" : "cubin";
    case 8: return "lto-ir";
    default: return "unknown";
  }
}

std::string FatbinEntry::explanation() const {
  if (raw_kind == 1)
    return fmt::format("PTX for compute_{}: the driver compiles it at load for that GPU or a newer one; not a cubin, so not validated", arch.sm());
  if (raw_kind == 8)
    return fmt::format("LTO IR for {} (nvcc -dlto / code=lto_{}): linked and compiled at load by the JIT linker (nvJitLink); not a cubin, so "
                       "neither decompressed nor validated",
                       arch.str(), arch.sm());
  if (relocatable)
    return "relocatable device code (nvcc -rdc, ELF type ET_REL): nvlink or the driver's linker must resolve it before it loads; not a "
           "loadable cubin, so not validated";
  return "";
}

bool looks_like_fatbin(std::span<const std::byte> bytes) {
  const ByteView v(bytes, Errc::corrupt_fatbin);
  const auto magic = v.read<uint32_t>(0, "magic");
  return magic && *magic == kFatbinMagic;
}

Result<size_t> for_each_fatbin_entry(std::span<const std::byte> bytes, const std::function<void(FatbinEntry&)>& visit, const FatbinLimits& limits) {
  ByteView v(bytes, Errc::corrupt_fatbin);
  if (!looks_like_fatbin(bytes)) {
    // A host object: its .nv_fatbin section, or __nv_relfatbin (relocatable device code, -rdc).
    auto parsed = ElfFile::parse(ByteView(bytes, Errc::corrupt_fatbin), /*cuda=*/false);
    if (!parsed) return std::unexpected(std::move(parsed).error());
    const ElfFile& elf = *parsed;
    const Section* s = elf.find(".nv_fatbin");
    if (s == nullptr) s = elf.find("__nv_relfatbin");
    if (s == nullptr) return fail(Errc::corrupt_fatbin, "the ELF object has neither a .nv_fatbin nor a __nv_relfatbin section");
    v = CUBINRT_TRY(elf.contents(*s));
  }
  size_t count = 0;
  uint64_t at = 0;
  Budget budget{limits};
  while (at + 16 <= v.size()) {
    if (v.read<uint32_t>(at, "magic").value_or(0) != kFatbinMagic) {  // padding between containers
      at += 8;
      continue;
    }
    CUBINRT_TRY(walk_container(v, at, visit, budget, count));
  }
  if (count == 0) return fail(Errc::corrupt_fatbin, "no fatbin entries found");
  return count;
}

Result<std::vector<FatbinEntry>> read_fatbin(std::span<const std::byte> bytes, const FatbinLimits& limits) {
  std::vector<FatbinEntry> entries;
  CUBINRT_TRY(for_each_fatbin_entry(bytes, [&](FatbinEntry& e) { entries.push_back(std::move(e)); }, limits));
  return entries;
}

}  // namespace cubinrt
