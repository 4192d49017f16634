// The one dtype table (cubinrt/dtypes.h) as host and kernels see it: the host enum is made from
// it, and the kernel sources test encodings by name, never by number or order.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <type_traits>

#include "cubinrt/dtypes.h"
#include "cubinrt/paged_decode.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt {
namespace {

// A plan comes from DecodePlan::create only: there is no empty plan to launch.
static_assert(!std::is_default_constructible_v<DecodePlan>);

TEST(Dtypes, HostEnumNamesAndBitsComeFromTheTable) {
  int n = 0;
#define CUBINRT_DTYPE_ROW_(name, code, bits, kind)                                   \
  EXPECT_EQ(static_cast<int>(Dtype::name), code);                                    \
  EXPECT_EQ(dtype_name(Dtype::name), #name);                                         \
  EXPECT_EQ(*parse_dtype(#name), Dtype::name);                                       \
  EXPECT_EQ(dtype_bits(Dtype::name), static_cast<uint32_t>(bits));                  \
  ++n;
  CUBINRT_DTYPES(CUBINRT_DTYPE_ROW_)
#undef CUBINRT_DTYPE_ROW_
  EXPECT_EQ(n, CUBINRT_DTYPE_COUNT);
  // nvfp4 follows the FP8 codes: a test "code >= fp8_e4m3" would take it for FP8.
  EXPECT_GT(CUBINRT_DTYPE_NVFP4, CUBINRT_DTYPE_FP8_E5M2);
  EXPECT_FALSE(CUBINRT_DTYPE_IS_FP8(CUBINRT_DTYPE_NVFP4));
  EXPECT_FALSE(CUBINRT_DTYPE_IS_FP8(CUBINRT_DTYPE_UINT8));
  EXPECT_EQ(CUBINRT_DTYPE_BITS(CUBINRT_DTYPE_NVFP4), 4);
}

TEST(Dtypes, DtypesHeaderCompilesAsC) {
  // The same header in a C translation unit (what the C ABI will include).
  const std::string dir = std::string(CUBINRT_TEST_BINARY_DIR) + "/dtypes_c";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/t.c") << "#include \"cubinrt/dtypes.h\"\nint codes[] = {CUBINRT_DTYPE_FP8_E4M3, CUBINRT_DTYPE_BITS(CUBINRT_DTYPE_NVFP4)};\n";
  const std::string cmd = "cc -std=c11 -Wall -Werror -c -I" CUBINRT_TEST_SOURCE_DIR "/runtime/include " + dir + "/t.c -o " + dir + "/t.o";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// Kernel sources compare a dtype macro only with a CUBINRT_DTYPE_* name or a CUBINRT_DTYPE_IS_*
// predicate: "kKvDtype >= 3" or "== 2" would silently change meaning with a new code.
TEST(Dtypes, KernelSourcesTestEncodingsByName) {
  // A dtype against a number (either side), or ordered against anything.
  const std::string dtype = R"((kQDtype|kKvDtype|CUBINRT_(Q|KV)_DTYPE|CUBINRT_DTYPE)\b)";
  const std::regex numeric(dtype + R"(\s*(==|!=|>=|<=|>|<)\s*[0-9]|[0-9]\s*(==|!=|>=|<=|>|<)\s*)" + dtype + "|" + dtype +
                           R"(\s+(>=|<=|>|<)\s+\w|\w\s+(>=|<=|>|<)\s+)" + dtype);
  int files = 0;
  for (const auto& root : {"cubins", "tests/families"})
    for (const auto& f : std::filesystem::recursive_directory_iterator(std::string(CUBINRT_TEST_SOURCE_DIR) + "/" + root)) {
      if (f.path().extension() != ".cu" && f.path().extension() != ".cuh") continue;
      std::ifstream in(f.path());
      std::stringstream text;
      text << in.rdbuf();
      ++files;
      std::smatch m;
      const std::string s = text.str();
      EXPECT_FALSE(std::regex_search(s, m, numeric)) << f.path() << ": " << m.str();
    }
  EXPECT_GE(files, 4);  // paged_decode.cu, its common.cuh and mma_loop.cuh, test_copy.cu
}

}  // namespace
}  // namespace cubinrt
