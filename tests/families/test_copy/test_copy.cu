// The test-only family's kernel: y[i] = 2 * x[i] for n elements of a 16-bit float dtype, each
// thread taking CUBINRT_VECTOR consecutive elements. Variant macros (the catalog's axes):
// CUBINRT_DTYPE (a cubinrt/dtypes.h name), CUBINRT_VECTOR, CUBINRT_KERNEL. Includable once per
// variant in one translation unit, inside CUBINRT_VARIANT_NS, as every family's source is.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "cubinrt/dtypes.h"
#include "test_copy_abi.h"

#ifndef CUBINRT_VARIANT_NS
#define CUBINRT_VARIANT_NS cubinrt_test_copy_single
#endif

namespace CUBINRT_VARIANT_NS {

static_assert(CUBINRT_DTYPE_IS_FLOAT16(CUBINRT_DTYPE), "test_copy takes a 16-bit float dtype");
using T = typename std::conditional<CUBINRT_DTYPE == CUBINRT_DTYPE_BF16, __nv_bfloat16, __half>::type;

#define CUBINRT_CAT2_(a, b) a##b
#define CUBINRT_CAT_(a, b) CUBINRT_CAT2_(a, b)
// The key this kernel is (the reader checks it against the manifest); the unit source defines it.
extern "C" __device__ const char CUBINRT_CAT_(cubinrt_key_, CUBINRT_KERNEL)[] = CUBINRT_VARIANT_KEY;
#define CUBINRT_PARAM_DECL_(type, name) , type name
#define CUBINRT_DROP_FIRST_(first, ...) __VA_ARGS__
#define CUBINRT_LIST_(...) CUBINRT_DROP_FIRST_(__VA_ARGS__)
extern "C" __global__ void __launch_bounds__(CUBINRT_TEST_COPY_THREADS)
CUBINRT_KERNEL(CUBINRT_LIST_(0 CUBINRT_TEST_COPY_V1_FIELDS(CUBINRT_PARAM_DECL_))) {
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * CUBINRT_VECTOR;
#pragma unroll
  for (int i = 0; i < CUBINRT_VECTOR; ++i)
    if (first + i < n) static_cast<T*>(y)[first + i] = static_cast<T>(2.0f * static_cast<float>(static_cast<const T*>(x)[first + i]));
}
#undef CUBINRT_PARAM_DECL_
#undef CUBINRT_DROP_FIRST_
#undef CUBINRT_LIST_
#undef CUBINRT_CAT2_
#undef CUBINRT_CAT_

}  // namespace CUBINRT_VARIANT_NS
