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

Result<std::vector<std::byte>> decompress(const ByteView& stored, uint64_t flags, uint64_t size, uint64_t entry_at, Budget& budget) {
  auto bad = [&](std::string m) { return fail(Errc::corrupt_fatbin, fmt::format("entry at offset {}: {}", entry_at, m)); };
  const FatbinLimits& lim = budget.limits;
  if (size > lim.max_entry_bytes) return bad(fmt::format("uncompressed size {} is implausible (over {} bytes)", size, lim.max_entry_bytes));
  if (size / lim.max_ratio > stored.size())
    return bad(fmt::format("{} bytes would decompress to {}, more than {}-fold: refused before decompressing", stored.size(), size, lim.max_ratio));
  if (size > lim.max_total_bytes - budget.total)
    return bad(fmt::format("its {} bytes would take the file's decompressed entries past {} bytes", size, lim.max_total_bytes));
  budget.total += size;
  std::vector<std::byte> out(size);
  if (flags & kFlagZstd) {
    const size_t n = ZSTD_decompress(out.data(), out.size(), stored.bytes().data(), stored.size());
    if (ZSTD_isError(n)) return bad(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
    if (n != size) return bad(fmt::format("zstd gave {} bytes, the entry records {}", n, size));
  } else {
    const int n = LZ4_decompress_safe(reinterpret_cast<const char*>(stored.bytes().data()), reinterpret_cast<char*>(out.data()),
                                      static_cast<int>(stored.size()), static_cast<int>(out.size()));
    if (n < 0 || static_cast<uint64_t>(n) != size) return bad(fmt::format("LZ4 gave {} bytes, the entry records {}", n, size));
  }
  return out;
}

Status read_container(const ByteView& v, uint64_t& at, std::vector<FatbinEntry>& entries, Budget& budget) {
  const auto magic = CUBINRT_TRY(v.read<uint32_t>(at, "fatbin magic"));
  if (magic != kFatbinMagic) return fail(Errc::corrupt_fatbin, fmt::format("no fatbin magic at offset {}", at));
  const auto header_size = CUBINRT_TRY(v.read<uint16_t>(at + 6, "fatbin header size"));
  const auto body_size = CUBINRT_TRY(v.read<uint64_t>(at + 8, "fatbin size"));
  if (header_size != 16) return fail(Errc::corrupt_fatbin, fmt::format("container at {}: header size {} (16 expected)", at, header_size));
  const ByteView body = CUBINRT_TRY(v.sub(at + 16, body_size, "fatbin entries"));
  uint64_t e = 0;
  while (e < body.size()) {
    FatbinEntry entry;
    const auto kind = CUBINRT_TRY(body.read<uint16_t>(e, "entry kind"));
    const auto hdr = CUBINRT_TRY(body.read<uint32_t>(e + 4, "entry header size"));
    const auto payload = CUBINRT_TRY(body.read<uint64_t>(e + 8, "entry payload size"));
    const auto compressed = CUBINRT_TRY(body.read<uint32_t>(e + 0x10, "entry compressed size"));
    const auto sm = CUBINRT_TRY(body.read<uint32_t>(e + 0x1c, "entry SM"));
    entry.flags = CUBINRT_TRY(body.read<uint64_t>(e + 0x28, "entry flags"));
    const auto size = CUBINRT_TRY(body.read<uint64_t>(e + 0x38, "entry uncompressed size"));
    if (hdr < 64) return fail(Errc::corrupt_fatbin, fmt::format("entry at offset {}: header size {} (at least 64)", e, hdr));
    if (kind != 1 && kind != 2 && kind != 8) return fail(Errc::corrupt_fatbin, fmt::format("entry at offset {}: kind {} is unknown", e, kind));
    // Any well-formed SM is an architecture; one that no sm_NNN spells is corruption.
    if (sm < 10 || sm > 999) return fail(Errc::corrupt_fatbin, fmt::format("entry at offset {}: SM {} is no architecture (sm_10 to sm_999)", e, sm));
    const ByteView data = CUBINRT_TRY(body.sub(e + hdr, payload, "entry payload"));
    entry.kind = static_cast<FatbinEntry::Kind>(kind);
    entry.arch = Arch::from_sm(sm, entry.flags & kFlagAccel ? Arch::Variant::accel
                                  : entry.flags & kFlagFamily ? Arch::Variant::family : Arch::Variant::plain);
    const bool is_compressed = (entry.flags & (kFlagLz4 | kFlagZstd)) != 0;
    entry.compression = entry.flags & kFlagZstd ? "zstd" : entry.flags & kFlagLz4 ? "lz4" : "none";
    if (is_compressed) {
      const ByteView stored = CUBINRT_TRY(data.sub(0, compressed, "compressed entry"));
      entry.stored_size = compressed;
      entry.data = CUBINRT_TRY(decompress(stored, entry.flags, size, e, budget));
    } else {
      entry.stored_size = payload;
      const uint64_t n = size != 0 && size <= payload ? size : payload;
      entry.data.assign(data.bytes().begin(), data.bytes().begin() + static_cast<ptrdiff_t>(n));
    }
    if (entry.kind == FatbinEntry::Kind::elf) {
      auto info = read_cubin(entry.data);
      if (!info) return fail(Errc::corrupt_fatbin, fmt::format("entry at offset {} ({}): {}", e, entry.arch.str(), info.error().message));
      if (info->arch.sm() != sm || ((entry.flags & kFlagAccel) != 0) != (info->arch.variant == Arch::Variant::accel))
        return fail(Errc::corrupt_fatbin, fmt::format("entry at offset {}: the entry says {}, its cubin is {}", e, entry.arch.str(), info->arch.str()));
    }
    entries.push_back(std::move(entry));
    e += uint64_t{hdr} + payload;
  }
  at += 16 + body_size;
  return {};
}

}  // namespace

bool looks_like_fatbin(std::span<const std::byte> bytes) {
  const ByteView v(bytes, Errc::corrupt_fatbin);
  const auto magic = v.read<uint32_t>(0, "magic");
  return magic && *magic == kFatbinMagic;
}

Result<std::vector<FatbinEntry>> read_fatbin(std::span<const std::byte> bytes, const FatbinLimits& limits) {
  ByteView v(bytes, Errc::corrupt_fatbin);
  if (!looks_like_fatbin(bytes)) {
    // A host object: take its .nv_fatbin section.
    auto parsed = ElfFile::parse(ByteView(bytes, Errc::corrupt_fatbin), /*cuda=*/false);
    if (!parsed) return std::unexpected(std::move(parsed).error().context("neither a fatbin nor an ELF object"));
    const ElfFile& elf = *parsed;
    const Section* s = elf.find(".nv_fatbin");
    if (s == nullptr) return fail(Errc::corrupt_fatbin, "the object has no .nv_fatbin section");
    v = CUBINRT_TRY(elf.contents(*s));
  }
  std::vector<FatbinEntry> entries;
  uint64_t at = 0;
  Budget budget{limits};
  while (at + 16 <= v.size()) {
    if (v.read<uint32_t>(at, "magic").value_or(0) != kFatbinMagic) {  // padding between containers
      at += 8;
      continue;
    }
    CUBINRT_TRY(read_container(v, at, entries, budget));
  }
  if (entries.empty()) return fail(Errc::corrupt_fatbin, "no fatbin entries found");
  return entries;
}

}  // namespace cubinrt
