/* The parameter ABI of the test-only family test_copy: y[i] = 2 * x[i] over n 16-bit floats.
 * Shared by the kernel (test_copy.cu) and the host (family.cpp), like every family's ABI. */
#ifndef CUBINRT_TEST_COPY_ABI_H
#define CUBINRT_TEST_COPY_ABI_H

#include <stdint.h>

#define CUBINRT_TEST_COPY_ABI_NAME "TestCopyParams"
#define CUBINRT_TEST_COPY_ABI_VERSION 1

#define CUBINRT_TEST_COPY_V1_FIELDS(X) \
  X(const void*, x)                    \
  X(void*, y)                          \
  X(int64_t, n)

#define CUBINRT_ABI_FIELD_DECL_(type, name) type name;
typedef struct CubinrtTestCopyParamsV1 {
  CUBINRT_TEST_COPY_V1_FIELDS(CUBINRT_ABI_FIELD_DECL_)
} CubinrtTestCopyParamsV1;
#undef CUBINRT_ABI_FIELD_DECL_

#define CUBINRT_TEST_COPY_THREADS 128

#endif
