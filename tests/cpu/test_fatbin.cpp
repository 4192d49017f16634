// The fatbin reader on containers nvcc wrote: plain, LZ4 (--compress-mode=speed) and zstd
// (--compress-mode=size), and inside a host object's .nv_fatbin.
#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"
#include "cubin/cubin.hpp"
#include "fatbin/fatbin.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

std::vector<std::byte> file(const std::string& name) { return *read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/" + name); }

void expect_probe_entries(const std::vector<FatbinEntry>& entries, std::string_view compression) {
  std::vector<std::string> cubins;
  for (const FatbinEntry& e : entries) {
    EXPECT_EQ(e.error, "") << e.arch.str();
    if (e.kind != FatbinEntry::Kind::elf) continue;
    cubins.push_back(e.arch.str());
    EXPECT_EQ(e.compression, compression) << e.arch.str();
    ASSERT_TRUE(e.cubin.has_value());
    const std::optional<CubinInfo>& info = e.cubin;
    EXPECT_EQ(info->arch.sm(), e.arch.sm());
    EXPECT_NE(info->kernel("probe_params"), nullptr);
    // The same kernels as nvcc -cubin makes for that arch (the bytes differ only by the ptxas
    // command line recorded in .note.nv.tkinfo).
    const CubinInfo direct = *read_cubin(file("probe." + e.arch.str() + ".cubin"));
    ASSERT_EQ(info->kernels.size(), direct.kernels.size());
    for (const KernelInfo& k : direct.kernels) {
      ASSERT_NE(info->kernel(k.name), nullptr) << k.name;
      EXPECT_EQ(info->kernel(k.name)->registers, k.registers) << k.name;
      EXPECT_EQ(info->kernel(k.name)->params, k.params) << k.name;
    }
  }
  EXPECT_EQ(cubins, (std::vector<std::string>{"sm_80", "sm_90a"}));
}

struct Container {
  const char* file;
  const char* compression;
};
class FatbinKinds : public ::testing::TestWithParam<Container> {};

TEST_P(FatbinKinds, HoldTheProbeCubins) {
  auto e = read_fatbin(file(GetParam().file));
  CUBINRT_ASSERT_OK(e);
  expect_probe_entries(*e, GetParam().compression);
}

INSTANTIATE_TEST_SUITE_P(Containers, FatbinKinds,
                         ::testing::Values(Container{"probe.none.fatbin", "none"}, Container{"probe.speed.fatbin", "lz4"},
                                           Container{"probe.size.fatbin", "zstd"}, Container{"probe.host.o", "none"}),
                         [](const auto& p) { return std::string(p.param.compression) + (std::string(p.param.file).ends_with(".o") ? "_host_object" : ""); });

TEST(Fatbin, CorruptionIsReported) {
  auto b = file("probe.size.fatbin");
  std::vector<std::byte> cut(b.begin(), b.begin() + static_cast<ptrdiff_t>(b.size() / 2));
  auto r = read_fatbin(cut);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::corrupt_fatbin);
  EXPECT_NE(r.error().message.find("inside-file"), std::string::npos) << r.error().message;
  // Compressed payloads flipped (headers kept): each entry's decompression or validation fails,
  // as that entry's error, and every entry is still listed.
  auto flipped = b;
  const uint64_t first_payload = 16 + 64;
  for (size_t i = first_payload + 8; i < flipped.size(); i += 101) flipped[i] ^= std::byte{0x5a};
  auto f = read_fatbin(flipped);
  if (f) {
    EXPECT_EQ(f->size(), read_fatbin(b)->size());
    EXPECT_TRUE(std::ranges::any_of(*f, [](const FatbinEntry& e) { return !e.error.empty(); }));
  } else {
    EXPECT_EQ(f.error().code, Errc::corrupt_fatbin);  // a flip landed in an entry header's sizes
  }
  auto zeros = read_fatbin(std::vector<std::byte>(64, std::byte{0}));
  ASSERT_FALSE(zeros.has_value());
  EXPECT_EQ(zeros.error().message, "rule elf-magic: the file does not start with the ELF magic 7f 45 4c 46");
}

// What a library ships besides cubins is named, with why it is not validated, and not refused:
// relocatable device code in a host object's __nv_relfatbin, LTO IR, and PTX.
TEST(Fatbin, RelocatableLtoAndPtxEntriesAreNamedNotRefused) {
  auto rdc = read_fatbin(file("kinds.rdc.o"));
  CUBINRT_ASSERT_OK(rdc);
  ASSERT_EQ(rdc->size(), 1u);
  EXPECT_EQ((*rdc)[0].kind_name(), "relocatable");
  EXPECT_TRUE((*rdc)[0].relocatable);
  EXPECT_FALSE((*rdc)[0].cubin.has_value());
  EXPECT_EQ((*rdc)[0].error, "");
  EXPECT_NE((*rdc)[0].explanation().find("nvlink"), std::string::npos);
  auto lto = read_fatbin(file("kinds.lto.fatbin"));
  CUBINRT_ASSERT_OK(lto);
  ASSERT_EQ(lto->size(), 1u);
  EXPECT_EQ((*lto)[0].kind_name(), "lto-ir");
  EXPECT_EQ((*lto)[0].arch.str(), "sm_90");
  EXPECT_EQ((*lto)[0].error, "");
  EXPECT_TRUE((*lto)[0].data.empty());  // not decompressed
  EXPECT_EQ((*lto)[0].explanation(),
            "LTO IR for sm_90 (nvcc -dlto / code=lto_90): linked and compiled at load by the JIT linker (nvJitLink); not a cubin, so "
            "neither decompressed nor validated");
  auto ptx = read_fatbin(file("kinds.ptx.fatbin"));
  CUBINRT_ASSERT_OK(ptx);
  ASSERT_EQ(ptx->size(), 1u);
  EXPECT_EQ((*ptx)[0].kind_name(), "ptx");
  EXPECT_EQ((*ptx)[0].error, "");
  const std::string_view text(reinterpret_cast<const char*>((*ptx)[0].data.data()), (*ptx)[0].data.size());
  EXPECT_NE(text.find(".entry _Z12large_paramsc3Bigd4Vec4sPf"), std::string_view::npos);
}

// A small fatbin of `entries` zstd entries of `kind` (2 a cubin, 1 PTX), each the frame of `zeros`
// zero bytes and claiming `size` bytes.
std::vector<std::byte> bomb(uint64_t zeros, uint64_t size, int entries, uint16_t kind = 2) {
  const std::vector<char> plain(zeros, 0);
  std::vector<std::byte> frame(ZSTD_compressBound(zeros));
  frame.resize(ZSTD_compress(frame.data(), frame.size(), plain.data(), plain.size(), 19));
  const uint64_t payload = (frame.size() + 7) / 8 * 8, entry = 64 + payload;
  std::vector<std::byte> out(16 + entry * entries);
  auto put = [&](size_t at, auto v) { std::memcpy(out.data() + at, &v, sizeof v); };
  put(0, uint32_t{0xBA55ED50});
  put(4, uint16_t{1});
  put(6, uint16_t{16});
  put(8, uint64_t{entry * entries});
  for (int i = 0; i < entries; ++i) {
    const size_t e = 16 + entry * i;
    put(e, kind);
    put(e + 4, uint32_t{64});
    put(e + 8, payload);
    put(e + 0x10, static_cast<uint32_t>(frame.size()));
    put(e + 0x1c, uint32_t{90});
    put(e + 0x28, uint64_t{0x8000});  // zstd
    put(e + 0x38, size);
    std::memcpy(out.data() + e + 64, frame.data(), frame.size());
  }
  return out;
}

// The one entry's error, checking that there is exactly one entry.
std::string only_error(const Result<std::vector<FatbinEntry>>& r) {
  EXPECT_TRUE(r.has_value()) << r.error().message;
  if (!r) return "";
  EXPECT_EQ(r->size(), 1u);
  return r->empty() ? "" : r->front().error;
}

// Decompression is bounded before it allocates: by entry, by ratio, and for the whole file. Each
// refusal is its entry's; the entries around it are still read.
TEST(Fatbin, DecompressionBombsAreRefusedBeforeAllocating) {
  EXPECT_EQ(only_error(read_fatbin(bomb(1, uint64_t{1} << 40, 1))), "uncompressed size 1099511627776 is implausible (over 268435456 bytes)");
  // 64 MiB of zeros is a few KB of zstd: more than 1000-fold.
  EXPECT_NE(only_error(read_fatbin(bomb(uint64_t{64} << 20, uint64_t{64} << 20, 1)))
                .find("would decompress to 67108864, more than 1000-fold: refused before decompressing"),
            std::string::npos);
  // Entries each within the limits, more than the total in all (limits scaled down, so the test
  // allocates KBs, not the default 1 GiB): the fifth 4 KiB PTX entry is refused at 16 KiB.
  const auto five = bomb(4096, 4096, 5, /*kind=*/1);
  auto all = read_fatbin(five, {.max_total_bytes = 20480});
  CUBINRT_ASSERT_OK(all);
  for (const FatbinEntry& e : *all) EXPECT_EQ(e.error, "");
  auto total = read_fatbin(five, {.max_total_bytes = 16384});
  CUBINRT_ASSERT_OK(total);
  ASSERT_EQ(total->size(), 5u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*total)[i].error, "") << i;
  EXPECT_EQ((*total)[4].error, "its 4096 bytes would take the file's decompressed entries past 16384 bytes");
}

// One bad entry of a container is reported for that entry; the others are still listed and read.
TEST(Fatbin, OneBadEntryLeavesTheOthersListed) {
  auto three = bomb(4096, 4096, 3, /*kind=*/1);
  const size_t entry = (three.size() - 16) / 3;
  std::memcpy(three.data() + 16 + entry + 0x1c, "\xff\xff\xff\xff", 4);  // the second entry's SM
  std::memcpy(three.data() + 16 + 2 * entry, "\x07\x00", 2);              // the third's kind
  auto r = read_fatbin(three);
  CUBINRT_ASSERT_OK(r);
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].error, "");
  EXPECT_EQ((*r)[0].data.size(), 4096u);
  EXPECT_EQ((*r)[1].error, "SM 4294967295 is no architecture (sm_10 to sm_999)");  // not shown as sm_4294967295
  EXPECT_EQ((*r)[1].offset, entry);
  EXPECT_EQ((*r)[2].error, "kind 7 is unknown to this build (1 PTX, 2 ELF, 8 LTO IR); skipped");
  EXPECT_EQ((*r)[2].kind_name(), "unknown");
}

}  // namespace
}  // namespace cubinrt::test
