// The selection rules over a table of devices, and the sentence engines get when nothing fits.
#include <gtest/gtest.h>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"
#include "select/select.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

Arch A(const char* s) { return *Arch::parse(s); }

TEST(ArchMatch, Rules) {
  struct Row {
    const char *cubin, *device;
    ArchMatch want;
  };
  const Row rows[] = {
      {"sm_80", "sm_80", ArchMatch::exact},     {"sm_80", "sm_86", ArchMatch::lower_minor}, {"sm_80", "sm_89", ArchMatch::lower_minor},
      {"sm_89", "sm_86", ArchMatch::none},      {"sm_80", "sm_90", ArchMatch::none},        {"sm_90", "sm_100", ArchMatch::none},
      {"sm_90a", "sm_90", ArchMatch::exact},    {"sm_100a", "sm_103", ArchMatch::none},     {"sm_100a", "sm_100", ArchMatch::exact},
      {"sm_100f", "sm_103", ArchMatch::family}, {"sm_100f", "sm_100", ArchMatch::exact},    {"sm_103f", "sm_100", ArchMatch::none},
      {"sm_120", "sm_121", ArchMatch::lower_minor}, {"sm_100", "sm_120", ArchMatch::none},
  };
  for (const Row& r : rows) EXPECT_EQ(arch_match(A(r.cubin), A(r.device)), r.want) << r.cubin << " on " << r.device;
  std::string why;
  EXPECT_EQ(arch_match(A("sm_100a"), A("sm_103"), &why), ArchMatch::none);
  EXPECT_EQ(why, "sm_100a ('a': arch-specific) runs only on sm_100");
}

// A small manifest with plain, 'a' and 'f' cubins of one key.
Manifest family_manifest() {
  Manifest m;
  const KernelKey key = decode_key(128, Dtype::bf16, Dtype::bf16, 16);
  for (const char* a : {"sm_80", "sm_89", "sm_90", "sm_100f", "sm_103a"}) {
    ManifestEntry e;
    e.arch = A(a);
    e.key = key;
    e.id = "paged_decode." + e.arch.str() + ".hd128.bf16.bf16.p16";
    m.entries.push_back(e);
  }
  return m;
}

TEST(SelectEntry, DeviceTable) {
  const Manifest m = family_manifest();
  const KernelKey key = decode_key(128, Dtype::bf16, Dtype::bf16, 16);
  struct Row {
    const char* device;
    const char* chosen;  // nullptr: none
  };
  const Row rows[] = {{"sm_80", "sm_80"},   {"sm_86", "sm_80"},   {"sm_89", "sm_89"},  {"sm_90", "sm_90"}, {"sm_100", "sm_100f"},
                      {"sm_103", "sm_103a"}, {"sm_101", "sm_100f"}, {"sm_120", nullptr}, {"sm_75", nullptr}};
  for (const Row& r : rows) {
    const Selection s = select_entry(m, A(r.device), key);
    const Selection fast = select_entry(m, A(r.device), key, /*explain=*/false);
    EXPECT_EQ(s.chosen, fast.chosen) << r.device;
    if (r.chosen == nullptr) EXPECT_EQ(s.chosen, nullptr) << r.device;
    else {
      ASSERT_NE(s.chosen, nullptr) << r.device;
      EXPECT_EQ(s.chosen->arch.str(), r.chosen) << r.device;
    }
    EXPECT_EQ(s.candidates.size(), m.entries.size());
  }
  // On sm_103 the exact 'a' cubin beats the family cubin, and the reasons say so.
  const Selection s = select_entry(m, A("sm_103"), key);
  EXPECT_EQ(s.candidates[3].reason, "runs here, but paged_decode.sm_103a.hd128.bf16.bf16.p16 is a better match");
  EXPECT_EQ(s.candidates[4].reason, "chosen: exact arch match");
  EXPECT_EQ(s.candidates[0].reason, "sm_80 code runs only on compute capability 8.x; the device is 10.3");
}

TEST(SelectEntry, OtherKeysAreRejectedByTheFieldThatDiffers) {
  const Manifest m = family_manifest();
  const Selection s = select_entry(m, A("sm_90"), decode_key(256, Dtype::bf16, Dtype::bf16, 16));
  EXPECT_EQ(s.chosen, nullptr);
  EXPECT_EQ(s.candidates[2].reason, "head_dim 128 (asked 256)");
  const Selection p = select_entry(m, A("sm_90"), decode_key(128, Dtype::bf16, Dtype::bf16, 32));
  EXPECT_EQ(p.candidates[2].reason, "page_size 16 (asked 32)");
}

TEST(ExplainUnavailable, DefaultBundleSentences) {
  const Bundle bundle = *Bundle::embedded();
  const Manifest& m = bundle.manifest();
  EXPECT_EQ(explain_unavailable(m, "NVIDIA H200", A("sm_90"), decode_key(512, Dtype::bf16, Dtype::fp8_e4m3, 16)),
            "NVIDIA H200 (sm_90) cannot run paged_decode head_dim=512 q_dtype=bf16 kv_dtype=fp8_e4m3 page_size=16: head_dim=512 is built for "
            "sm_100a and sm_103a only; use an SM100 (Blackwell) GPU or head_dim <= 256");
  EXPECT_EQ(explain_unavailable(m, "NVIDIA B300", A("sm_103"), decode_key(96, Dtype::bf16, Dtype::bf16, 16)),
            "NVIDIA B300 (sm_103) cannot run paged_decode head_dim=96 q_dtype=bf16 kv_dtype=bf16 page_size=16: the bundle has no paged_decode kernel with "
            "head_dim=96 for any GPU");
  EXPECT_EQ(explain_unavailable(m, "NVIDIA H200", A("sm_90"), decode_key(128, Dtype::bf16, Dtype::bf16, 128)),
            "NVIDIA H200 (sm_90) cannot run paged_decode head_dim=128 q_dtype=bf16 kv_dtype=bf16 page_size=128: the bundle builds head_dim=128 "
            "for sm_100a, sm_103a, sm_120, sm_80, sm_89 and sm_90 but not with q_dtype=bf16 kv_dtype=bf16 page_size=128");
  EXPECT_EQ(explain_unavailable(m, "Tesla V100", A("sm_70"), decode_key(128, Dtype::bf16, Dtype::bf16, 16)),
            "Tesla V100 (sm_70) cannot run paged_decode head_dim=128 q_dtype=bf16 kv_dtype=bf16 page_size=16: the paged_decode family is "
            "built for sm_100a, sm_103a, sm_120, sm_80, sm_89 and sm_90 only; use an SM100 (Blackwell), SM120 (Blackwell GeForce/RTX), "
            "SM80 (Ampere/Ada) or SM90 (Hopper) GPU");
  // A family only SM100 builds (NVFP4 with interleaved V scales) is refused on the H200 as a family.
  EXPECT_EQ(explain_unavailable(m, "NVIDIA H200", A("sm_90"), decode_vsf_interleaved_key(128, Dtype::bf16, 16)),
            "NVIDIA H200 (sm_90) cannot run paged_decode_vsf_interleaved head_dim=128 q_dtype=bf16 kv_dtype=nvfp4 page_size=16: the "
            "paged_decode_vsf_interleaved family is built for sm_100a and sm_103a only; use an SM100 (Blackwell) GPU");
}

}  // namespace
}  // namespace cubinrt::test
