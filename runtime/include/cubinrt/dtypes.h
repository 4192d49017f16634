/* The element types cubinrt knows: one table for the host (C, C++), the kernels (CUDA) and the
 * build (the catalog's dtype names become these codes' macro names, never numbers).
 *
 * A code is stable once published (it crosses the C ABI and the bundle's kernel builds); add new
 * types at the end. Kernels test an encoding by name (CUBINRT_DTYPE_IS_FP8(c), c ==
 * CUBINRT_DTYPE_FP8_E4M3), never by order: "code >= 3" would take nvfp4 for an FP8 encoding.
 * Everything here is a macro or, in C++, a constexpr function, so it works in #if, in device
 * code and in C. */
#ifndef CUBINRT_DTYPES_H
#define CUBINRT_DTYPES_H

#define CUBINRT_DTYPE_FP16 1     /* IEEE half */
#define CUBINRT_DTYPE_BF16 2     /* bfloat16 */
#define CUBINRT_DTYPE_FP8_E4M3 3 /* OCP FP8 E4M3 (finite only, NaN = S.1111.111) */
#define CUBINRT_DTYPE_FP8_E5M2 4 /* OCP FP8 E5M2 (IEEE-like, with inf and NaN) */
#define CUBINRT_DTYPE_NVFP4 5    /* E2M1, two a byte, with E4M3 scales per 16 elements */
#define CUBINRT_DTYPE_UINT8 6    /* raw bytes: storage only, the logical dtype is declared */

/* The orders of NVFP4's block scales within a page and kv head (cubinrt::ScaleOrder, formats.md):
 * the scale of block s of token t is byte s of row t (LINEAR), or, the rows of t's 4-token quad
 * read as one array, byte 4 * s + t % 4 of it (INTERLEAVED4: TensorRT-LLM's V scales on SM100). */
#define CUBINRT_SCALE_ORDER_LINEAR 0
#define CUBINRT_SCALE_ORDER_INTERLEAVED4 1

/* X(name, CODE, bits per element, kind): the table, in code order. */
#define CUBINRT_DTYPE_KIND_FLOAT16 1 /* 16-bit float: q, out and 16-bit KV */
#define CUBINRT_DTYPE_KIND_FP8 2     /* an FP8 encoding: KV, held in uint8 storage */
#define CUBINRT_DTYPE_KIND_FP4 3     /* a scaled 4-bit encoding: KV, held in uint8 storage */
#define CUBINRT_DTYPE_KIND_STORAGE 4 /* bytes whose meaning is declared separately */
#define CUBINRT_DTYPES(X)                                                \
  X(fp16, CUBINRT_DTYPE_FP16, 16, CUBINRT_DTYPE_KIND_FLOAT16)            \
  X(bf16, CUBINRT_DTYPE_BF16, 16, CUBINRT_DTYPE_KIND_FLOAT16)            \
  X(fp8_e4m3, CUBINRT_DTYPE_FP8_E4M3, 8, CUBINRT_DTYPE_KIND_FP8)         \
  X(fp8_e5m2, CUBINRT_DTYPE_FP8_E5M2, 8, CUBINRT_DTYPE_KIND_FP8)         \
  X(nvfp4, CUBINRT_DTYPE_NVFP4, 4, CUBINRT_DTYPE_KIND_FP4)               \
  X(uint8, CUBINRT_DTYPE_UINT8, 8, CUBINRT_DTYPE_KIND_STORAGE)

#define CUBINRT_DTYPE_COUNT 6

/* By name, usable in #if and in device code. */
#define CUBINRT_DTYPE_IS_FLOAT16(c) ((c) == CUBINRT_DTYPE_FP16 || (c) == CUBINRT_DTYPE_BF16)
#define CUBINRT_DTYPE_IS_FP8(c) ((c) == CUBINRT_DTYPE_FP8_E4M3 || (c) == CUBINRT_DTYPE_FP8_E5M2)
#define CUBINRT_DTYPE_BITS(c)                                                  \
  (CUBINRT_DTYPE_IS_FLOAT16(c) ? 16                                            \
   : (CUBINRT_DTYPE_IS_FP8(c) || (c) == CUBINRT_DTYPE_UINT8) ? 8              \
   : (c) == CUBINRT_DTYPE_NVFP4                                  ? 4          \
                                                                 : 0)

#if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L)
#ifndef __cplusplus
#define CUBINRT_DTYPE_STATIC_ASSERT_ _Static_assert
#else
#define CUBINRT_DTYPE_STATIC_ASSERT_ static_assert
#endif
/* The predicates above agree with the table, entry by entry: a new dtype that is added to the
 * table but not to a predicate (or the reverse) stops every host (C or C++) and kernel build. */
#define CUBINRT_DTYPE_CHECK_(name, code, bits, kind)                                                      \
  CUBINRT_DTYPE_STATIC_ASSERT_(CUBINRT_DTYPE_BITS(code) == (bits), "CUBINRT_DTYPE_BITS disagrees with the table: " #name); \
  CUBINRT_DTYPE_STATIC_ASSERT_(CUBINRT_DTYPE_IS_FLOAT16(code) == ((kind) == CUBINRT_DTYPE_KIND_FLOAT16),                  \
                "CUBINRT_DTYPE_IS_FLOAT16 disagrees with the table: " #name);                                \
  CUBINRT_DTYPE_STATIC_ASSERT_(CUBINRT_DTYPE_IS_FP8(code) == ((kind) == CUBINRT_DTYPE_KIND_FP8),                          \
                "CUBINRT_DTYPE_IS_FP8 disagrees with the table: " #name);                                    \
  CUBINRT_DTYPE_STATIC_ASSERT_((code) >= 1 && (code) <= CUBINRT_DTYPE_COUNT, "dtype codes are 1..CUBINRT_DTYPE_COUNT: " #name);
CUBINRT_DTYPES(CUBINRT_DTYPE_CHECK_)
#undef CUBINRT_DTYPE_CHECK_
#undef CUBINRT_DTYPE_STATIC_ASSERT_
#endif

#endif /* CUBINRT_DTYPES_H */
