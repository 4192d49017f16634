/* A C11 program an engine would write against the installed C ABI (cubinrt.h, libcubinrt.so): it
 * asks what runs, plans a decode step and launches it on a vLLM-style one-tensor KV cache
 * [pages, 2, page_size, kv_heads, head_dim] (K and V are views of it), then checks a refusal.
 *
 * Device memory comes from libcuda.so.1 opened here (an engine has its own allocator). On a CPU
 * machine the test puts a stand-in libcuda.so.1 (an emulated H200, tests/support/fake_libcuda.cpp)
 * first on LD_LIBRARY_PATH: the launch is checked and recorded, not run. With
 * CUBINRT_CONSUMER_GPU=1 it runs for real and the output is checked: V is 0.5 everywhere, so every
 * output element is 0.5 whatever the attention weights. Exit 0 only when every check passed. */
#include <cubinrt/cubinrt.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long devptr;
static int (*mem_alloc)(devptr*, size_t);
static int (*mem_free)(devptr);
static int (*copy_in)(devptr, const void*, size_t);
static int (*copy_out)(void*, devptr, size_t);
static int (*synchronize)(void);
static int (*cu_init)(unsigned);
static int (*retain_primary)(void**, int);
static int (*set_current)(void*);

static int failures = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);          \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
      ++failures;                                          \
    }                                                      \
  } while (0)
#define CALL(expr)                                                                                         \
  do {                                                                                                     \
    cubinrt_status s_ = (expr);                                                                            \
    if (s_ != CUBINRT_SUCCESS) {                                                                           \
      printf("FAIL %s: %s: %s\n", #expr, cubinrt_status_name(s_), cubinrt_last_error());                  \
      exit(1);                                                                                             \
    }                                                                                                      \
  } while (0)

static cubinrt_tensor tensor(devptr data, uint8_t code, uint8_t bits, int ndim, const int64_t* shape, const int64_t* strides) {
  cubinrt_tensor t;
  memset(&t, 0, sizeof t);
  t.data = (void*)(uintptr_t)data;
  t.dtype_code = code;
  t.dtype_bits = bits;
  t.dtype_lanes = 1;
  t.ndim = ndim;
  for (int i = 0; i < ndim; ++i) {
    t.shape[i] = shape[i];
    t.strides[i] = strides ? strides[i] : 0;
  }
  t.device_type = CUBINRT_DL_CUDA;
  t.device_id = 0;
  return t;
}

static uint16_t bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

int main(void) {
  const int on_gpu = getenv("CUBINRT_CONSUMER_GPU") && strcmp(getenv("CUBINRT_CONSUMER_GPU"), "1") == 0;
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) return printf("FAIL no libcuda.so.1: %s\n", dlerror()), 1;
  mem_alloc = (int (*)(devptr*, size_t))dlsym(cuda, "cuMemAlloc_v2");
  mem_free = (int (*)(devptr))dlsym(cuda, "cuMemFree_v2");
  copy_in = (int (*)(devptr, const void*, size_t))dlsym(cuda, "cuMemcpyHtoD_v2");
  copy_out = (int (*)(void*, devptr, size_t))dlsym(cuda, "cuMemcpyDtoH_v2");
  synchronize = (int (*)(void))dlsym(cuda, "cuCtxSynchronize");
  cu_init = (int (*)(unsigned))dlsym(cuda, "cuInit");
  retain_primary = (int (*)(void**, int))dlsym(cuda, "cuDevicePrimaryCtxRetain");
  set_current = (int (*)(void*))dlsym(cuda, "cuCtxSetCurrent");
  if (!mem_alloc || !mem_free || !copy_in || !copy_out || !synchronize || !cu_init || !retain_primary || !set_current)
    return printf("FAIL libcuda.so.1 lacks an entry point\n"), 1;
  /* The engine's own context: device 0's primary context, current on this thread (cubinrt
   * launches in the caller's current context and loads into the primary one). */
  void* context = NULL;
  if (cu_init(0) != 0 || retain_primary(&context, 0) != 0 || set_current(context) != 0) return printf("FAIL no CUDA context\n"), 1;

  printf("cubinrt %s, C ABI %u\n", cubinrt_version(), cubinrt_c_api_version());
  CHECK(cubinrt_c_api_version() == CUBINRT_C_API_VERSION, "C ABI version %u, header %d", cubinrt_c_api_version(), CUBINRT_C_API_VERSION);

  /* A runtime that must serve bf16 head_dim 128 page 16; it loads the rest on first use. */
  cubinrt_decode_key need = {128, CUBINRT_DTYPE_BF16, CUBINRT_DTYPE_BF16, 16};
  cubinrt_runtime_options o;
  cubinrt_runtime_options_init(&o);
  o.lazy = 1;
  o.required_decode = &need;
  o.num_required_decode = 1;
  cubinrt_runtime* rt = NULL;
  CALL(cubinrt_runtime_create(&o, &rt));
  cubinrt_device_info dev;
  cubinrt_device_info_init(&dev);
  CALL(cubinrt_runtime_device(rt, &dev));
  cubinrt_bundle_info bundle;
  cubinrt_bundle_info_init(&bundle);
  CALL(cubinrt_runtime_bundle(rt, &bundle));
  printf("device %d '%s' sm_%d, driver %d; bundle '%s' (%u entries, by %s)\n", dev.ordinal, dev.name, dev.sm, dev.driver_version, bundle.name,
         bundle.entries, bundle.generator);
  CHECK(bundle.entries > 0, "the embedded bundle has no entries");

  /* What runs here, and why head_dim 512 does not (outside SM100). */
  int32_t ok = 0;
  char reason[512];
  CALL(cubinrt_decode_supports(rt, &need, &ok, reason, sizeof reason));
  CHECK(ok == 1, "bf16 hd128 p16 is not supported: %s", reason);
  cubinrt_decode_key big = {512, CUBINRT_DTYPE_BF16, CUBINRT_DTYPE_BF16, 16};
  CALL(cubinrt_decode_supports(rt, &big, &ok, reason, sizeof reason));
  printf("head_dim 512: %s: %s\n", ok ? "supported" : "refused", reason);
  CHECK(dev.sm / 10 == 10 ? ok == 1 : (ok == 0 && strstr(reason, "512") != NULL), "head_dim 512 on sm_%d: %d, '%s'", dev.sm, ok, reason);
  size_t count = 0;
  CALL(cubinrt_decode_available(rt, NULL, 0, &count));
  CHECK(count > 0, "no decode kernel runs here");

  /* A decode step: 2 sequences, 8 q heads over 2 kv heads, 4 pages of 16 tokens each at most. */
  enum { B = 2, HQ = 8, HKV = 2, D = 128, P = 16, PAGES = 8, ROW = 4 };
  cubinrt_decode_shape shape;
  cubinrt_decode_shape_init(&shape);
  shape.batch = B;
  shape.num_q_heads = HQ;
  shape.num_kv_heads = HKV;
  shape.head_dim = D;
  shape.q_dtype = CUBINRT_DTYPE_BF16;
  shape.kv_storage = CUBINRT_DTYPE_BF16;
  shape.page_size = P;
  shape.layout = CUBINRT_KV_NHD;
  shape.block_table_stride = ROW;
  cubinrt_decode_plan* plan = NULL;
  CALL(cubinrt_decode_plan_create(rt, &shape, &plan));
  cubinrt_decode_plan_info info;
  cubinrt_decode_plan_info_init(&info);
  CALL(cubinrt_decode_plan_info_get(plan, &info));
  printf("plan: kernel %s, %d splits, %llu workspace bytes, %s\n", info.kernel, info.num_splits, (unsigned long long)info.workspace_bytes,
         info.overlaps_previous_kernel ? "overlapping the previous kernel" : "in plain stream order");
  /* sm_90 and later kernels wait for the kernel before them, so their launches may overlap it. */
  CHECK(info.overlaps_previous_kernel == (dev.sm >= 90), "overlap %d on sm_%d", info.overlaps_previous_kernel, dev.sm);
  {
    cubinrt_decode_shape odd = shape;
    cubinrt_decode_plan* none = NULL;
    odd.overlap = 7;
    CHECK(cubinrt_decode_plan_create(rt, &odd, &none) == CUBINRT_ERROR_INVALID_ARGUMENT && none == NULL, "overlap 7 was accepted");
    CHECK(strstr(cubinrt_last_error(), "cubinrt_decode_shape.overlap is 7") != NULL, "message: %s", cubinrt_last_error());
    /* NVFP4 V scales in TensorRT-LLM's interleave are read by SM100-only kernels: asked of another
     * GPU, the plan says so; asked of a bf16 cache, or as no order at all, it is refused. */
    cubinrt_decode_shape quads = shape;
    quads.kv_storage = CUBINRT_DTYPE_UINT8, quads.kv_declared = CUBINRT_DTYPE_NVFP4, quads.v_sf_order = CUBINRT_SCALE_ORDER_INTERLEAVED4;
    const cubinrt_status st = cubinrt_decode_plan_create(rt, &quads, &none);
    if (dev.sm / 10 == 10) {
      CHECK(st == CUBINRT_SUCCESS, "interleaved NVFP4 V scales refused on sm_%d: %s", dev.sm, cubinrt_last_error());
      cubinrt_decode_plan_destroy(none);
    } else {
      CHECK(st == CUBINRT_ERROR_UNSUPPORTED && none == NULL, "interleaved NVFP4 V scales on sm_%d: status %d", dev.sm, (int)st);
      CHECK(strstr(cubinrt_last_error(), "the paged_decode_vsf_interleaved family is built for sm_100a and sm_103a only") != NULL, "message: %s",
            cubinrt_last_error());
    }
    odd = shape;
    odd.v_sf_order = CUBINRT_SCALE_ORDER_INTERLEAVED4;
    CHECK(cubinrt_decode_plan_create(rt, &odd, &none) == CUBINRT_ERROR_INVALID_ARGUMENT, "interleaved scales of a bf16 cache were accepted");
    odd.v_sf_order = 5;
    CHECK(cubinrt_decode_plan_create(rt, &odd, &none) == CUBINRT_ERROR_INVALID_ARGUMENT, "v_sf_order 5 was accepted");
    CHECK(strstr(cubinrt_last_error(), "cubinrt_decode_shape.v_sf_order is 5") != NULL, "message: %s", cubinrt_last_error());
  }

  /* Host data: q and K from a fixed sequence, V = 0.5; pages shuffled. */
  static uint16_t q[B * HQ * D], cache[PAGES * 2 * P * HKV * D], out[B * HQ * D];
  for (int i = 0; i < B * HQ * D; ++i) q[i] = bf16((float)((i * 37) % 101) / 101.f - 0.5f);
  for (int pg = 0; pg < PAGES; ++pg)
    for (int i = 0; i < P * HKV * D; ++i) {
      cache[(pg * 2 + 0) * P * HKV * D + i] = bf16((float)((i * 53 + pg * 7) % 97) / 97.f - 0.5f);
      cache[(pg * 2 + 1) * P * HKV * D + i] = bf16(0.5f);
    }
  const int32_t table[B * ROW] = {3, 0, 6, 1, 5, 2, 7, 4};
  const int32_t lens[B] = {37, 61};
  for (int i = 0; i < B * HQ * D; ++i) out[i] = 0xffff; /* NaN: an unwritten element fails */

  devptr dq, dcache, dtable, dlens, dout, dws = 0;
  CHECK(mem_alloc(&dq, sizeof q) == 0 && mem_alloc(&dcache, sizeof cache) == 0 && mem_alloc(&dtable, sizeof table) == 0 &&
            mem_alloc(&dlens, sizeof lens) == 0 && mem_alloc(&dout, sizeof out) == 0,
        "cuMemAlloc failed");
  if (info.workspace_bytes) CHECK(mem_alloc(&dws, info.workspace_bytes) == 0, "cuMemAlloc (workspace) failed");
  if (dws) {
    void* zeros = calloc(1, info.workspace_bytes);
    copy_in(dws, zeros, info.workspace_bytes);
    free(zeros);
  }
  copy_in(dq, q, sizeof q);
  copy_in(dcache, cache, sizeof cache);
  copy_in(dtable, table, sizeof table);
  copy_in(dlens, lens, sizeof lens);
  copy_in(dout, out, sizeof out);

  const int64_t rows[3] = {B, HQ, D};
  const int64_t kv_shape[4] = {PAGES, P, HKV, D};
  const int64_t kv_strides[4] = {2 * P * HKV * D, HKV * D, D, 1}; /* cache[:, 0] and cache[:, 1] */
  const int64_t table_shape[2] = {B, ROW}, lens_shape[1] = {B};
  cubinrt_decode_args a;
  cubinrt_decode_args_init(&a);
  a.q = tensor(dq, CUBINRT_DL_BFLOAT, 16, 3, rows, NULL);
  a.k = tensor(dcache, CUBINRT_DL_BFLOAT, 16, 4, kv_shape, kv_strides);
  a.v = tensor(dcache + (devptr)P * HKV * D * 2, CUBINRT_DL_BFLOAT, 16, 4, kv_shape, kv_strides);
  a.block_table = tensor(dtable, CUBINRT_DL_INT, 32, 2, table_shape, NULL);
  a.seq_lens = tensor(dlens, CUBINRT_DL_INT, 32, 1, lens_shape, NULL);
  a.out = tensor(dout, CUBINRT_DL_BFLOAT, 16, 3, rows, NULL);
  a.workspace = (void*)(uintptr_t)dws;
  a.workspace_bytes = info.workspace_bytes;
  CALL(cubinrt_decode_plan_launch(plan, &a, NULL));
  CHECK(synchronize() == 0, "cuCtxSynchronize failed");
  if (on_gpu) {
    copy_out(out, dout, sizeof out);
    double worst = 0;
    for (int i = 0; i < B * HQ * D; ++i) {
      const double e = fabs(from_bf16(out[i]) - 0.5);
      worst = e > worst || e != e ? e : worst;
    }
    printf("launch: every output within %.2e of 0.5\n", worst);
    CHECK(worst <= 1e-2, "output off by %g", worst);
  }

  /* A host tensor is refused before launch, with the library's sentence. */
  cubinrt_decode_args bad = a;
  bad.q.device_type = CUBINRT_DL_CPU;
  const cubinrt_status s = cubinrt_decode_plan_launch(plan, &bad, NULL);
  CHECK(s == CUBINRT_ERROR_INVALID_ARGUMENT, "a CPU q gave %s", cubinrt_status_name(s));
  CHECK(strstr(cubinrt_last_error(), "q is on DLPack device type 1 (CPU)") != NULL, "message: %s", cubinrt_last_error());
  printf("refused: %s\n", cubinrt_last_error());
  /* A caller struct newer than this library, with a field it does not know set, is refused. */
  struct {
    cubinrt_decode_args args;
    uint64_t future_field;
  } newer;
  newer.args = a;
  newer.args.struct_size = sizeof newer;
  newer.future_field = 1;
  CHECK(cubinrt_decode_plan_launch(plan, &newer.args, NULL) == CUBINRT_ERROR_INVALID_ARGUMENT, "an unknown set field was accepted");

  /* The cache writer: three new tokens, K 1.0 and V -3.0 everywhere, into an FP8 e4m3 cache at
   * slots 3, -1 (padding: skipped) and 17, with k_scale 0.5 and v_scale 0.25: every written K byte
   * is e4m3(2.0) = 0x40, every V byte e4m3(-12.0) = 0xd4, and the rest stays 0. */
  {
    enum { T = 3, CP = 2 };
    static uint16_t k_new[T * HKV * D], v_new[T * HKV * D];
    static uint8_t kc[CP * P * HKV * D], vc[CP * P * HKV * D];
    const int64_t slots[T] = {3, -1, 17};
    for (int i = 0; i < T * HKV * D; ++i) k_new[i] = bf16(1.f), v_new[i] = bf16(-3.f);
    devptr dk = 0, dv = 0, dslots = 0, dkc = 0, dvc = 0;
    CHECK(mem_alloc(&dk, sizeof k_new) == 0 && mem_alloc(&dv, sizeof v_new) == 0 && mem_alloc(&dslots, sizeof slots) == 0 &&
              mem_alloc(&dkc, sizeof kc) == 0 && mem_alloc(&dvc, sizeof vc) == 0,
          "cuMemAlloc failed");
    copy_in(dk, k_new, sizeof k_new), copy_in(dv, v_new, sizeof v_new), copy_in(dslots, slots, sizeof slots);
    copy_in(dkc, kc, sizeof kc), copy_in(dvc, vc, sizeof vc);
    cubinrt_kv_append_shape ws;
    cubinrt_kv_append_shape_init(&ws);
    ws.num_kv_heads = HKV, ws.head_dim = D, ws.in_dtype = CUBINRT_DTYPE_BF16, ws.cache_storage = CUBINRT_DTYPE_UINT8;
    ws.cache_declared = CUBINRT_DTYPE_FP8_E4M3, ws.page_size = P, ws.layout = CUBINRT_KV_NHD;
    cubinrt_kv_append_plan* writer = NULL;
    CALL(cubinrt_kv_append_plan_create(rt, &ws, &writer));
    const int64_t tok_shape[3] = {T, HKV, D}, slot_shape[1] = {T}, cache_shape[4] = {CP, P, HKV, D};
    cubinrt_kv_append_args w;
    cubinrt_kv_append_args_init(&w);
    w.k = tensor(dk, CUBINRT_DL_BFLOAT, 16, 3, tok_shape, NULL);
    w.v = tensor(dv, CUBINRT_DL_BFLOAT, 16, 3, tok_shape, NULL);
    w.slots = tensor(dslots, CUBINRT_DL_INT, 64, 1, slot_shape, NULL);
    w.k_cache = tensor(dkc, CUBINRT_DL_UINT, 8, 4, cache_shape, NULL);
    w.v_cache = tensor(dvc, CUBINRT_DL_UINT, 8, 4, cache_shape, NULL);
    w.cache_declared = CUBINRT_DTYPE_FP8_E4M3, w.k_scale = 0.5f, w.v_scale = 0.25f;
    CALL(cubinrt_kv_append_plan_launch(writer, &w, NULL));
    CHECK(synchronize() == 0, "cuCtxSynchronize failed");
    if (on_gpu) {
      copy_out(kc, dkc, sizeof kc), copy_out(vc, dvc, sizeof vc);
      int wrong = 0;
      for (int slot = 0; slot < CP * P; ++slot)
        for (int i = 0; i < HKV * D; ++i) {
          const int written = slot == 3 || slot == 17;
          wrong += kc[slot * HKV * D + i] != (written ? 0x40 : 0) || vc[slot * HKV * D + i] != (written ? 0xd4 : 0);
        }
      printf("kv_append: %d of %d cache bytes wrong\n", wrong, 2 * CP * P * HKV * D);
      CHECK(wrong == 0, "kv_append wrote %d wrong bytes", wrong);
    }
    /* A float8_e5m2 tensor handed to this e4m3 plan is refused, naming both: the encodings are
     * never confused. And the same uint8 cache with no declared encoding: never guessed. */
    cubinrt_kv_append_args e5m2 = w;
    e5m2.k_cache.dtype_code = CUBINRT_DL_FLOAT8_E5M2;
    CHECK(cubinrt_kv_append_plan_launch(writer, &e5m2, NULL) == CUBINRT_ERROR_INVALID_ARGUMENT, "an e5m2 cache was taken for e4m3");
    CHECK(strstr(cubinrt_last_error(), "k_cache is a float8_e5m2 tensor, but the cache is declared fp8_e4m3") != NULL, "message: %s",
          cubinrt_last_error());
    w.cache_declared = 0;
    CHECK(cubinrt_kv_append_plan_launch(writer, &w, NULL) == CUBINRT_ERROR_INVALID_ARGUMENT, "an undeclared uint8 cache was accepted");
    cubinrt_kv_append_plan_destroy(writer);
    /* The writer's V-scale order is NVFP4's: interleaving an FP8 cache's is refused at plan time;
     * an NVFP4 cache's is taken on every GPU (the writer computes either order). */
    cubinrt_kv_append_plan* quads = NULL;
    ws.v_sf_order = CUBINRT_SCALE_ORDER_INTERLEAVED4;
    CHECK(cubinrt_kv_append_plan_create(rt, &ws, &quads) == CUBINRT_ERROR_INVALID_ARGUMENT && quads == NULL, "interleaved FP8 scales accepted");
    CHECK(strstr(cubinrt_last_error(), "v_sf_order interleaved4 orders NVFP4's V block scales") != NULL, "message: %s", cubinrt_last_error());
    ws.cache_declared = CUBINRT_DTYPE_NVFP4;
    CALL(cubinrt_kv_append_plan_create(rt, &ws, &quads));
    cubinrt_kv_append_plan_destroy(quads);
    mem_free(dk), mem_free(dv), mem_free(dslots), mem_free(dkc), mem_free(dvc);
  }

  mem_free(dq), mem_free(dcache), mem_free(dtable), mem_free(dlens), mem_free(dout);
  if (dws) mem_free(dws);
  cubinrt_decode_plan_destroy(plan);
  cubinrt_runtime_destroy(rt);
  printf(failures ? "C consumer: %d checks failed\n" : "C consumer: all checks passed\n", failures);
  return failures ? 1 : 0;
}
