// GPU tests run only where a CUDA driver and device answer; elsewhere they skip, saying why.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "common/version.hpp"
#include "cubinrt/paged_decode.hpp"
#include "cubinrt/runtime.hpp"
#include "driver/driver.hpp"
#include "families/paged_decode/known_answer.hpp"
#include "families/paged_decode/planner.hpp"
#include "loader/loaded_kernel.hpp"

namespace cubinrt::test {

// The real driver, or the reason there is none (no libcuda.so.1, or cuInit found no device).
struct GpuProbe {
  std::shared_ptr<const DriverApi> driver;
  std::string why_not;
};
const GpuProbe& gpu();

// A paged decode key's axes as values (tests read them often).
struct DecodeAxes {
  uint32_t head_dim = 0;
  Dtype q_dtype = Dtype::bf16, kv_dtype = Dtype::bf16;
  uint32_t page_size = 0;
};
DecodeAxes decode_axes(const KernelKey& key);

// A file the build made: the environment variable of the same name wins (for a test binary
// copied to another machine), else the build-time path.
std::string build_file(const char* env_name, const char* build_path);

#define CUBINRT_REQUIRE_GPU()                                                             \
  do {                                                                                    \
    if (!::cubinrt::test::gpu().driver) GTEST_SKIP() << "no GPU: " << ::cubinrt::test::gpu().why_not; \
  } while (0)

// ASSERT on a Result/Status, printing the error's message.
#define CUBINRT_ASSERT_OK(expr)                                              \
  do {                                                                       \
    const auto& cubinrt_r_ = (expr);                                         \
    ASSERT_TRUE(cubinrt_r_.has_value()) << cubinrt_r_.error().message;       \
  } while (0)

}  // namespace cubinrt::test
