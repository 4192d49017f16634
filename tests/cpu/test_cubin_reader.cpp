// The cubin reader against ptxas's own report (-Xptxas -v) for probe kernels built over several
// archs: registers, barriers, static shared memory, stack frame, constant bank, plus parameter
// layouts, launch bounds, clusters and the arch variant, field by field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"
#include "cubin/cubin.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

struct PtxasKernel {
  unsigned registers = 0, barriers = 0, smem = 0, stack = 0, cmem0 = 0;
};

// Parses ptxas -v output: one record per "Compiling entry function" block.
std::map<std::string, PtxasKernel> parse_ptxas(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, PtxasKernel> out;
  std::string line, current;
  const std::regex entry(R"(Compiling entry function '(\w+)')"), stack(R"((\d+) bytes stack frame)"),
      used(R"(Used (\d+) registers, used (\d+) barriers)"), smem(R"((\d+) bytes smem)"), cmem(R"((\d+) bytes cmem\[0\])");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) current = m[1];
    else if (std::regex_search(line, m, stack)) out[current].stack = std::stoul(m[1]);
    else if (std::regex_search(line, m, used)) {
      out[current].registers = std::stoul(m[1]);
      out[current].barriers = std::stoul(m[2]);
      if (std::regex_search(line, m, smem)) out[current].smem = std::stoul(m[1]);
      if (std::regex_search(line, m, cmem)) out[current].cmem0 = std::stoul(m[1]);
    }
  }
  return out;
}

CubinInfo read_probe(const std::string& arch) {
  auto bytes = read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/probe." + arch + ".cubin");
  EXPECT_TRUE(bytes.has_value());
  auto info = read_cubin(*bytes);
  EXPECT_TRUE(info.has_value()) << (info ? "" : info.error().message);
  return *info;
}

class ProbeByArch : public ::testing::TestWithParam<std::string> {};

TEST_P(ProbeByArch, AgreesWithPtxasFieldByField) {
  const std::string arch = GetParam();
  const CubinInfo info = read_probe(arch);
  const auto ptxas = parse_ptxas(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/probe." + arch + ".ptxas.txt");
  ASSERT_GE(ptxas.size(), 2u) << "ptxas -v output not parsed";
  EXPECT_EQ(info.arch.str(), arch);
  EXPECT_EQ(info.abi_version, 8u);
  EXPECT_EQ(info.toolkit_version, 130u);
  EXPECT_EQ(info.virtual_sm, info.arch.sm());
  EXPECT_EQ(info.tool_name, "ptxas");
  EXPECT_NE(info.tool_options.find("-arch " + arch), std::string::npos) << info.tool_options;
  EXPECT_EQ(info.kernels.size(), ptxas.size());
  for (const auto& [name, want] : ptxas) {
    const KernelInfo* k = info.kernel(name);
    ASSERT_NE(k, nullptr) << name;
    EXPECT_EQ(k->registers, want.registers) << name;
    EXPECT_EQ(k->num_barriers, want.barriers) << name;
    EXPECT_EQ(k->static_shared, want.smem) << name;
    EXPECT_EQ(k->local_bytes, want.stack) << name;
    if (want.cmem0) EXPECT_EQ(k->param_base + k->param_bytes, want.cmem0) << name;  // ptxas prints cmem[0] below sm_90
  }
  const KernelInfo* p = info.kernel("probe_params");
  ASSERT_NE(p, nullptr);
  // (ptr, ptr, int, float, struct{int,float,double,char}, char, short, double, struct{int[33]})
  const std::vector<ParamInfo> layout = {{0, 0, 8}, {1, 8, 8}, {2, 16, 4}, {3, 20, 4}, {4, 24, 24}, {5, 48, 1}, {6, 50, 2}, {7, 56, 8}, {8, 64, 132}};
  EXPECT_EQ(p->params, layout);
  EXPECT_EQ(p->param_bytes, 196u);
  EXPECT_EQ(p->dynamic_shared, 70000u);
  EXPECT_TRUE(p->waits_on_prior_grids);
  EXPECT_EQ(p->max_threads, 256u);
  EXPECT_EQ(p->max_ntid, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(p->max_reg_count, 128u);  // __launch_bounds__(256, 2) caps registers at 65536 / 512
  EXPECT_EQ(p->param_base, info.arch.major >= 10 ? 0x380u : info.arch.major == 9 ? 0x210u : 0x160u);
  const KernelInfo* l = info.kernel("probe_local");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->max_threads, 128u);
  EXPECT_EQ(l->max_reg_count, 255u);
  EXPECT_EQ(l->params, (std::vector<ParamInfo>{{0, 0, 8}, {1, 8, 4}}));
  EXPECT_EQ(l->dynamic_shared, 0u);
  EXPECT_FALSE(l->waits_on_prior_grids);
  const KernelInfo* c = info.kernel("probe_cluster");
  if (info.arch.major >= 9) {
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->cluster, (std::array<uint32_t, 3>{2, 1, 1}));
    EXPECT_TRUE(c->explicit_cluster);
    EXPECT_EQ(c->dynamic_shared, 0u);  // states nothing
    EXPECT_EQ(c->max_threads, 1024u);
  } else {
    EXPECT_EQ(c, nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ProbeByArch,
                         ::testing::Values("sm_80", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_100f", "sm_103a", "sm_120"),
                         [](const auto& p) { return p.param; });

TEST(CubinReader, VariantMarks) {
  EXPECT_EQ(read_probe("sm_90").arch.variant, Arch::Variant::plain);
  EXPECT_EQ(read_probe("sm_90a").arch.variant, Arch::Variant::accel);   // from .nv.compat, e_flags are equal
  EXPECT_EQ(read_probe("sm_90").e_flags, read_probe("sm_90a").e_flags);
  EXPECT_EQ(read_probe("sm_100f").arch.variant, Arch::Variant::family);  // from the ptxas options alone
  EXPECT_EQ(read_probe("sm_100a").e_flags, 0x06006402u);
  EXPECT_EQ(read_probe("sm_103a").e_flags, 0x06006702u);
  EXPECT_EQ(read_probe("sm_120").e_flags, 0x06007802u);
}

// Every kernel of tests/cubins/kinds.cu is listed, whatever its binding, and a parameter block
// past 4 KiB is read from its KPARAM_INFO_V2 records, on both archs built.
TEST(CubinReader, EveryKernelKindAndLargeParameterBlocks) {
  for (const char* arch : {"sm_90", "sm_100a"}) {
    SCOPED_TRACE(arch);
    auto bytes = read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/kinds." + arch + ".cubin");
    CUBINRT_ASSERT_OK(bytes);
    auto info = read_cubin(*bytes);
    CUBINRT_ASSERT_OK(info);
    std::map<std::string, KernelInfo::Binding> bindings;
    for (const KernelInfo& k : info->kernels) bindings[k.name] = k.binding;
    ASSERT_EQ(bindings.size(), 4u);
    using B = KernelInfo::Binding;
    EXPECT_EQ(bindings.at("_Z12large_paramsc3Bigd4Vec4sPf"), B::global);
    EXPECT_EQ(bindings.at("_Z13static_kernelPi"), B::local);
    EXPECT_NE(bindings.find("_Z15template_kernelILi3EEvPi"), bindings.end());
    // The anonymous namespace's mangled name carries a per-file hash: found by its tail.
    const auto anon = std::ranges::find_if(info->kernels, [](const KernelInfo& k) { return k.name.ends_with("16anonymous_kernelEPi"); });
    ASSERT_NE(anon, info->kernels.end());
    EXPECT_EQ(anon->binding, B::local);
    const KernelInfo* big = info->kernel("_Z12large_paramsc3Bigd4Vec4sPf");
    // char at 0, Big at 4, double at 8008, Vec4 (16-aligned) at 8016, short at 8032, pointer at 8040.
    EXPECT_EQ(big->params, (std::vector<ParamInfo>{{0, 0, 1}, {1, 4, 8000}, {2, 8008, 8}, {3, 8016, 16}, {4, 8032, 2}, {5, 8040, 8}}));
    EXPECT_EQ(big->param_bytes, 8048u);
    EXPECT_TRUE(info->warnings.empty());
  }
}

// ELF ABI v7 (CUDA <= 12.x): the SM, the virtual SM and the 'a' mark live in e_flags. nvcc 13
// writes only v8, so v7 headers are made from a v8 probe with the layout cubin-format.md records
// (sm_90a under 12.8: e_flags 0x005a0d5a; sm_80: 0x00500550).
TEST(CubinReader, AbiVersion7Flags) {
  auto v7 = [](const char* arch, uint32_t flags) {
    auto bytes = *read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/probe." + arch + ".cubin");
    bytes[7] = std::byte{0x33};
    bytes[8] = std::byte{7};
    std::memcpy(bytes.data() + 48, &flags, 4);
    return read_cubin(bytes);
  };
  auto a = v7("sm_90", 0x005a0d5a);
  CUBINRT_ASSERT_OK(a);
  EXPECT_EQ(a->abi_version, 7u);
  EXPECT_EQ(a->arch.str(), "sm_90a");
  auto p = v7("sm_80", 0x00500550);
  CUBINRT_ASSERT_OK(p);
  EXPECT_EQ(p->arch.str(), "sm_80");
  EXPECT_EQ(p->kernel("probe_params")->params.size(), 9u);
}

}  // namespace
}  // namespace cubinrt::test
