/* cubinrt's C ABI: the runtime, paged decode plans and launches, the self-check and versions, for
 * engines in C, C++17 or any language with a C FFI (the Python package is built on it).
 *
 * Conventions (after NCCL's and cuBLASLt's C APIs):
 * - Every call returns a cubinrt_status. On failure, cubinrt_last_error() holds this thread's
 *   message, one sentence with its full context (file, entry, kernel, device, driver call and its
 *   cuGetErrorName). A success does not clear it. No call aborts or throws.
 * - Handles are opaque. A runtime may be used from many threads; a plan is immutable once made and
 *   may be launched from many threads at once. Destroy plans before their runtime.
 * - Argument structs begin with struct_size: set it with the *_init function (it writes the size
 *   your header has). A later library reads what an older caller set and defaults the rest; a
 *   library older than your header refuses fields it does not know unless they are zero.
 * - Tensors follow DLPack: a data pointer, a DLPack dtype (code, bits, lanes), shape, and strides
 *   in ELEMENTS (not bytes); all-zero strides mean C-contiguous. The innermost stride is 1.
 * - The KV cache's logical dtype is never inferred: FP8 and NVFP4 KV live in uint8 storage
 *   with kv_declared naming the encoding. A float8 DLPack tensor is typed storage of that encoding.
 * - A launch allocates nothing and formats nothing unless it fails; it is capturable in a CUDA
 *   graph. */
#ifndef CUBINRT_H
#define CUBINRT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cubinrt/dtypes.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CUBINRT_API __attribute__((visibility("default")))
#else
#define CUBINRT_API
#endif

/* The C ABI's version: bumped only by an incompatible change (which also changes the SONAME,
 * libcubinrt.so.<version>). Additions grow the structs and add functions. */
#define CUBINRT_C_API_VERSION 1

typedef enum cubinrt_status {
  CUBINRT_SUCCESS = 0,
  CUBINRT_ERROR_INVALID_ARGUMENT = 1, /* the caller asked for something malformed (a tensor, a stride) */
  CUBINRT_ERROR_IO = 2,               /* a file could not be read */
  CUBINRT_ERROR_CORRUPT_CUBIN = 3,
  CUBINRT_ERROR_CORRUPT_FATBIN = 4,
  CUBINRT_ERROR_CORRUPT_BUNDLE = 5,
  CUBINRT_ERROR_CORRUPT_MANIFEST = 6,
  CUBINRT_ERROR_MISMATCH = 7,         /* manifest and cubin, or cubin and ABI, disagree */
  CUBINRT_ERROR_NOT_IN_BUNDLE = 8,    /* no bundle entry serves what was asked */
  CUBINRT_ERROR_UNSUPPORTED = 9,      /* this device or build cannot do it */
  CUBINRT_ERROR_NO_DRIVER = 10,       /* libcuda.so.1 missing or an entry point absent */
  CUBINRT_ERROR_DRIVER = 11,          /* a driver call failed */
  CUBINRT_ERROR_DRIVER_TOO_OLD = 12,
  CUBINRT_ERROR_NO_DEVICE = 13,
  CUBINRT_ERROR_SELF_CHECK_FAILED = 14,
  CUBINRT_ERROR_INTERNAL = 15         /* out of host memory, or a bug: the message says which */
} cubinrt_status;

typedef struct cubinrt_runtime cubinrt_runtime;
typedef struct cubinrt_decode_plan cubinrt_decode_plan;

/* ---- versions and errors ---------------------------------------------------------------- */

CUBINRT_API const char* cubinrt_version(void);         /* the library's, "0.1.0" */
CUBINRT_API uint32_t cubinrt_c_api_version(void);      /* CUBINRT_C_API_VERSION it was built with */
CUBINRT_API const char* cubinrt_status_name(cubinrt_status status); /* "CUBINRT_ERROR_DRIVER" */
CUBINRT_API const char* cubinrt_last_error(void);      /* this thread's last failure, "" if none */

/* ---- tensors ----------------------------------------------------------------------------- */

/* DLPack's dtype codes and device types, for the tensors below. */
#define CUBINRT_DL_INT 0
#define CUBINRT_DL_UINT 1
#define CUBINRT_DL_FLOAT 2
#define CUBINRT_DL_BFLOAT 4
#define CUBINRT_DL_FLOAT8_E4M3FN 10
#define CUBINRT_DL_FLOAT8_E5M2 12
#define CUBINRT_DL_CPU 1
#define CUBINRT_DL_CUDA 2
#define CUBINRT_DL_CUDA_MANAGED 13

#define CUBINRT_MAX_DIMS 6
typedef struct cubinrt_tensor {
  void* data;                         /* NULL: absent (where a tensor is optional) */
  uint8_t dtype_code;                 /* CUBINRT_DL_*: DLPack's DLDataType */
  uint8_t dtype_bits;
  uint16_t dtype_lanes;               /* 1 */
  int32_t ndim;
  int64_t shape[CUBINRT_MAX_DIMS];
  int64_t strides[CUBINRT_MAX_DIMS];  /* elements; all zero: C-contiguous */
  int32_t device_type;                /* CUBINRT_DL_CUDA (or CUDA_MANAGED) */
  int32_t device_id;                  /* the runtime's device ordinal */
} cubinrt_tensor;

/* ---- the runtime ------------------------------------------------------------------------- */

typedef enum cubinrt_kv_layout { CUBINRT_KV_NHD = 0, CUBINRT_KV_HND = 1 } cubinrt_kv_layout;

/* A paged decode kernel: what cubinrt_decode_supports and required keys name. kv_dtype is the
 * logical KV dtype (CUBINRT_DTYPE_FP8_E4M3, not uint8). */
typedef struct cubinrt_decode_key {
  uint32_t head_dim;
  int32_t q_dtype;   /* CUBINRT_DTYPE_FP16 | CUBINRT_DTYPE_BF16 */
  int32_t kv_dtype;  /* the q dtype | CUBINRT_DTYPE_FP8_E4M3 | CUBINRT_DTYPE_FP8_E5M2 */
  uint32_t page_size;
} cubinrt_decode_key;

typedef struct cubinrt_runtime_options {
  size_t struct_size;
  int32_t device_ordinal;
  const char* device_uuid;                  /* "GPU-..."; wins over the ordinal; NULL: none */
  const char* bundle_path;                  /* NULL: the bundle embedded in the library */
  int32_t lazy;                             /* nonzero: load each kernel on first use */
  int32_t self_check;                       /* nonzero: known-answer test of every loaded kernel */
  const cubinrt_decode_key* required_decode; /* init fails unless each of these runs here */
  size_t num_required_decode;
} cubinrt_runtime_options;

static inline void cubinrt_runtime_options_init(cubinrt_runtime_options* o) {
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
}

CUBINRT_API cubinrt_status cubinrt_runtime_create(const cubinrt_runtime_options* options, cubinrt_runtime** runtime);
CUBINRT_API void cubinrt_runtime_destroy(cubinrt_runtime* runtime); /* NULL is ignored */

typedef struct cubinrt_device_info {
  size_t struct_size;
  int32_t ordinal;
  int32_t sm;                /* compute capability x10: 90 */
  int32_t driver_version;    /* cuDriverGetVersion: 13000 */
  int32_t multiprocessors;
  char name[128];
  char uuid[64];
} cubinrt_device_info;

static inline void cubinrt_device_info_init(cubinrt_device_info* d) {
  memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
}
CUBINRT_API cubinrt_status cubinrt_runtime_device(const cubinrt_runtime* runtime, cubinrt_device_info* info);

typedef struct cubinrt_bundle_info {
  size_t struct_size;
  uint32_t manifest_version;
  uint32_t entries;
  uint64_t bytes;
  int32_t min_driver_version;
  char generator[64];        /* "cubinrt 0.1.0": what packed it */
  char toolkit[128];         /* the nvcc that built its cubins */
  char name[256];            /* "embedded" or the file */
} cubinrt_bundle_info;

static inline void cubinrt_bundle_info_init(cubinrt_bundle_info* b) {
  memset(b, 0, sizeof *b);
  b->struct_size = sizeof *b;
}
CUBINRT_API cubinrt_status cubinrt_runtime_bundle(const cubinrt_runtime* runtime, cubinrt_bundle_info* info);

/* Whether `key` runs on this device with this bundle (*supported 1 or 0). `reason` (may be NULL)
 * receives why not, or which entry serves it, truncated to reason_size bytes with a NUL. */
CUBINRT_API cubinrt_status cubinrt_decode_supports(const cubinrt_runtime* runtime, const cubinrt_decode_key* key, int32_t* supported,
                                                   char* reason, size_t reason_size);

/* The decode keys this device can run: *count gets the number; at most `capacity` are written. */
CUBINRT_API cubinrt_status cubinrt_decode_available(const cubinrt_runtime* runtime, cubinrt_decode_key* keys, size_t capacity,
                                                    size_t* count);

/* ---- the self-check ---------------------------------------------------------------------- */

typedef struct cubinrt_selfcheck_result {
  size_t struct_size;
  int32_t passed;    /* every step that ran passed (and, with a GPU, every step ran) */
  int32_t no_gpu;    /* no driver or device: the static steps ran, the GPU steps were skipped */
  double total_ms;
  char report[4096]; /* one line a step: "pass  known-answer  12.3 ms  ..." (truncated with "...") */
} cubinrt_selfcheck_result;

static inline void cubinrt_selfcheck_result_init(cubinrt_selfcheck_result* r) {
  memset(r, 0, sizeof *r);
  r->struct_size = sizeof *r;
}
/* Runs the init-time self-check on the device and bundle `options` name (lazy and required are
 * ignored). known_answer 0: only the static and load steps. Returns CUBINRT_SUCCESS when it passed,
 * CUBINRT_ERROR_SELF_CHECK_FAILED (the first failed step in cubinrt_last_error) when not; the
 * result is filled either way. */
CUBINRT_API cubinrt_status cubinrt_selfcheck(const cubinrt_runtime_options* options, int32_t known_answer,
                                             cubinrt_selfcheck_result* result);

/* ---- paged decode ------------------------------------------------------------------------ */

typedef enum cubinrt_split_merge {
  CUBINRT_MERGE_CHOOSE = 0,
  CUBINRT_MERGE_WORKSPACE = 1,
  CUBINRT_MERGE_CLUSTER = 2
} cubinrt_split_merge;

/* Whether a plan's launches may overlap the kernel before them on the stream (programmatic
 * dependent launch, compute capability 9.0 and later; LaunchOverlap in types.hpp): the launch and
 * its set-up run during that kernel's tail and it waits for that kernel's end and writes before it
 * touches memory, so results are the same either way. ALLOW (0, the default) takes it where the
 * device and kernel support it; NEVER keeps plain stream order. */
typedef enum cubinrt_launch_overlap { CUBINRT_OVERLAP_ALLOW = 0, CUBINRT_OVERLAP_NEVER = 1 } cubinrt_launch_overlap;

/* What stays fixed across calls of one shape (see DecodeShape in paged_decode.hpp). */
typedef struct cubinrt_decode_shape {
  size_t struct_size;
  uint32_t batch;
  uint32_t num_q_heads;
  uint32_t num_kv_heads;
  uint32_t head_dim;
  int32_t q_dtype;             /* CUBINRT_DTYPE_FP16 | CUBINRT_DTYPE_BF16 */
  int32_t kv_storage;          /* CUBINRT_DTYPE_*: the q dtype, or CUBINRT_DTYPE_UINT8 */
  int32_t kv_declared;         /* 0: none; CUBINRT_DTYPE_FP8_E4M3 | _FP8_E5M2 | _NVFP4 for uint8 */
  uint32_t page_size;
  int32_t layout;              /* cubinrt_kv_layout: the order of K's and V's dims */
  uint32_t block_table_stride; /* pages per block-table row */
  uint32_t max_seq_len;        /* 0: block_table_stride * page_size */
  int32_t num_splits;          /* 0: chosen from the device */
  int32_t merge;               /* cubinrt_split_merge */
  /* Appended after the first version (whose struct_size, padded, is the same): */
  int32_t overlap;             /* cubinrt_launch_overlap */
  /* Appended after the second (its struct_size ends at overlap): */
  int32_t v_sf_order;          /* NVFP4: CUBINRT_SCALE_ORDER_LINEAR (0) or _INTERLEAVED4 (1, TensorRT-LLM's
                                  order, read by SM100-only kernels): the order of V's block scales,
                                  which picks the kernels; the plan's launches take it for v_sf */
} cubinrt_decode_shape;

static inline void cubinrt_decode_shape_init(cubinrt_decode_shape* s) {
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
}

CUBINRT_API cubinrt_status cubinrt_decode_plan_create(const cubinrt_runtime* runtime, const cubinrt_decode_shape* shape,
                                                      cubinrt_decode_plan** plan);
CUBINRT_API void cubinrt_decode_plan_destroy(cubinrt_decode_plan* plan); /* NULL is ignored */

typedef struct cubinrt_decode_plan_info {
  size_t struct_size;
  uint64_t workspace_bytes;  /* zero it once when allocated; the kernel leaves it zeroed */
  int32_t num_splits;
  int32_t merge;             /* cubinrt_split_merge: WORKSPACE or CLUSTER */
  char kernel[128];          /* the bundle entry's id */
  /* Appended after the first version (whose struct_size ends at kernel): */
  int32_t overlaps_previous_kernel; /* 1: launches overlap the kernel before them (cubinrt_launch_overlap) */
} cubinrt_decode_plan_info;

static inline void cubinrt_decode_plan_info_init(cubinrt_decode_plan_info* i) {
  memset(i, 0, sizeof *i);
  i->struct_size = sizeof *i;
}
CUBINRT_API cubinrt_status cubinrt_decode_plan_info_get(const cubinrt_decode_plan* plan, cubinrt_decode_plan_info* info);

/* A launch's tensors. Shapes must match the plan; strides are free within the kernels' alignment
 * (q, K, V rows start at 16-byte multiples; out rows at 8; no view overlaps itself):
 *   q, out  [batch, num_q_heads, head_dim], the q dtype (q may be a view of a fused QKV projection)
 *   k, v    NHD: [num_pages, page_size, num_kv_heads, row]; HND: [num_pages, num_kv_heads,
 *           page_size, row]; row = head_dim, or head_dim / 2 for NVFP4 (two codes a byte); storage
 *           dtype (uint8 for FP8 and NVFP4); the same shape and strides (vLLM's cache[:, 0] and
 *           cache[:, 1])
 *   k_sf, v_sf  NVFP4 only (appended to the struct's first version): e4m3 block scales (uint8 or
 *           float8_e4m3fn), the cache's shape with row = head_dim / 16, one set of strides
 *   block_table  int32 [batch, block_table_stride], rows contiguous
 *   seq_lens     int32 [batch]
 *   lse          float32 [batch, num_q_heads], optional (data NULL) */
typedef struct cubinrt_decode_args {
  size_t struct_size;
  cubinrt_tensor q;
  cubinrt_tensor k;
  cubinrt_tensor v;
  int32_t kv_declared;       /* must be the plan's: the logical dtype of uint8 KV */
  float k_scale;             /* FP8 dequantisation scales, NVFP4 global ones; 0: 1 */
  float v_scale;
  cubinrt_tensor block_table;
  cubinrt_tensor seq_lens;
  cubinrt_tensor out;
  cubinrt_tensor lse;
  float softmax_scale;       /* 0: 1/sqrt(head_dim) */
  void* workspace;           /* cubinrt_decode_plan_info.workspace_bytes, device memory */
  uint64_t workspace_bytes;
  /* Appended after the first version (whose struct_size ends at workspace_bytes): */
  cubinrt_tensor k_sf;       /* NVFP4's block scales; data NULL for other dtypes */
  cubinrt_tensor v_sf;
} cubinrt_decode_args;

static inline void cubinrt_decode_args_init(cubinrt_decode_args* a) {
  memset(a, 0, sizeof *a);
  a->struct_size = sizeof *a;
}

/* Checks the tensors against the plan, then launches on `stream` (a CUstream or cudaStream_t of
 * the plan's device; NULL: that device's default stream, its context made current for the launch
 * and the caller's put back). */
CUBINRT_API cubinrt_status cubinrt_decode_plan_launch(const cubinrt_decode_plan* plan, const cubinrt_decode_args* args, void* stream);

/* ---- the cache writer (see kv_append.hpp) ------------------------------------------------- */

typedef struct cubinrt_kv_append_plan cubinrt_kv_append_plan;

typedef struct cubinrt_kv_append_shape {
  size_t struct_size;
  uint32_t num_kv_heads;
  uint32_t head_dim;           /* a multiple of 16 */
  int32_t in_dtype;            /* the new tokens': CUBINRT_DTYPE_FP16 | CUBINRT_DTYPE_BF16 */
  int32_t cache_storage;       /* the in dtype, or CUBINRT_DTYPE_UINT8 */
  int32_t cache_declared;      /* 0: none; CUBINRT_DTYPE_FP8_E4M3 | _FP8_E5M2 | _NVFP4 for uint8 */
  uint32_t page_size;
  int32_t layout;              /* cubinrt_kv_layout of the cache */
  /* Appended after the first version (whose struct_size, padded, is the same): */
  int32_t overlap;             /* cubinrt_launch_overlap */
  /* Appended after the second (its struct_size ends at overlap): */
  int32_t v_sf_order;          /* NVFP4: CUBINRT_SCALE_ORDER_LINEAR (0) or _INTERLEAVED4 (1): the order the
                                  plan's launches write V's block scales in (K's are linear) */
} cubinrt_kv_append_shape;

static inline void cubinrt_kv_append_shape_init(cubinrt_kv_append_shape* s) {
  memset(s, 0, sizeof *s);
  s->struct_size = sizeof *s;
}

CUBINRT_API cubinrt_status cubinrt_kv_append_plan_create(const cubinrt_runtime* runtime, const cubinrt_kv_append_shape* shape,
                                                         cubinrt_kv_append_plan** plan);
CUBINRT_API void cubinrt_kv_append_plan_destroy(cubinrt_kv_append_plan* plan); /* NULL is ignored */

/* One append's tensors (strides free within the kernels' alignment, as for the decode):
 *   k, v          [num_tokens, num_kv_heads, head_dim], the in dtype, rows 16-byte aligned
 *   slots         int64 [num_tokens]: page * page_size + offset; negative: padding, skipped
 *   k_cache, v_cache  the decode's K and V: NHD [num_pages, page_size, num_kv_heads, row] or HND
 *                 [num_pages, num_kv_heads, page_size, row], row = head_dim (16-bit, FP8) or
 *                 head_dim / 2 (NVFP4, two codes a byte); uint8 (or float8) storage for FP8 and NVFP4
 *   k_sf, v_sf    NVFP4 only: e4m3 block scales (uint8 or float8_e4m3fn), the cache's shape with
 *                 row = head_dim / 16; data NULL otherwise */
typedef struct cubinrt_kv_append_args {
  size_t struct_size;
  cubinrt_tensor k;
  cubinrt_tensor v;
  cubinrt_tensor slots;
  cubinrt_tensor k_cache;
  cubinrt_tensor v_cache;
  cubinrt_tensor k_sf;
  cubinrt_tensor v_sf;
  int32_t cache_declared;      /* must be the plan's */
  float k_scale;               /* FP8: stored = x / scale; NVFP4: the global decode scale */
  float v_scale;
} cubinrt_kv_append_args;

static inline void cubinrt_kv_append_args_init(cubinrt_kv_append_args* a) {
  memset(a, 0, sizeof *a);
  a->struct_size = sizeof *a;
}

/* Checks the tensors against the plan, then launches on `stream` (as cubinrt_decode_plan_launch). */
CUBINRT_API cubinrt_status cubinrt_kv_append_plan_launch(const cubinrt_kv_append_plan* plan, const cubinrt_kv_append_args* args, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* CUBINRT_H */
