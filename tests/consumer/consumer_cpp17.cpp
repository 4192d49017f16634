// A C++17 program against the installed C ABI (an engine that cannot build C++23): handles held
// by unique_ptr, an FP8 cache in uint8 storage declared fp8_e4m3 (never inferred), separate K and V
// caches heads-first (FlashInfer's HND), and the refusals an engine meets first. Device memory as in
// consumer_c.c; with CUBINRT_CONSUMER_GPU=1 the launch runs and V = 0.5 makes every output 0.5.
#include <cubinrt/cubinrt.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) std::printf("FAIL %s\n", what.c_str()), ++failures;
}
void call(cubinrt_status s, const char* what) {
  if (s != CUBINRT_SUCCESS) std::printf("FAIL %s: %s: %s\n", what, cubinrt_status_name(s), cubinrt_last_error()), std::exit(1);
}

struct RuntimeDeleter {
  void operator()(cubinrt_runtime* r) const { cubinrt_runtime_destroy(r); }
};
struct PlanDeleter {
  void operator()(cubinrt_decode_plan* p) const { cubinrt_decode_plan_destroy(p); }
};
using RuntimePtr = std::unique_ptr<cubinrt_runtime, RuntimeDeleter>;
using PlanPtr = std::unique_ptr<cubinrt_decode_plan, PlanDeleter>;

using devptr = unsigned long long;
struct Cuda {
  int (*alloc)(devptr*, size_t);
  int (*release)(devptr);
  int (*in)(devptr, const void*, size_t);
  int (*out)(void*, devptr, size_t);
  int (*sync)();
};

cubinrt_tensor tensor(devptr data, uint8_t code, uint8_t bits, std::vector<int64_t> shape) {
  cubinrt_tensor t{};
  t.data = reinterpret_cast<void*>(data);
  t.dtype_code = code;
  t.dtype_bits = bits;
  t.dtype_lanes = 1;
  t.ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  t.device_type = CUBINRT_DL_CUDA;
  return t;
}

}  // namespace

int main() {
  const char* gpu_env = std::getenv("CUBINRT_CONSUMER_GPU");
  const bool on_gpu = gpu_env && std::string(gpu_env) == "1";
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) return std::printf("FAIL no libcuda.so.1\n"), 1;
  const Cuda cuda{reinterpret_cast<int (*)(devptr*, size_t)>(dlsym(h, "cuMemAlloc_v2")), reinterpret_cast<int (*)(devptr)>(dlsym(h, "cuMemFree_v2")),
                  reinterpret_cast<int (*)(devptr, const void*, size_t)>(dlsym(h, "cuMemcpyHtoD_v2")),
                  reinterpret_cast<int (*)(void*, devptr, size_t)>(dlsym(h, "cuMemcpyDtoH_v2")), reinterpret_cast<int (*)()>(dlsym(h, "cuCtxSynchronize"))};
  if (!cuda.alloc || !cuda.release || !cuda.in || !cuda.out || !cuda.sync) return std::printf("FAIL libcuda.so.1 lacks an entry point\n"), 1;
  // The engine's own context: device 0's primary context, current on this thread.
  auto cu_init = reinterpret_cast<int (*)(unsigned)>(dlsym(h, "cuInit"));
  auto retain = reinterpret_cast<int (*)(void**, int)>(dlsym(h, "cuDevicePrimaryCtxRetain"));
  auto set_current = reinterpret_cast<int (*)(void*)>(dlsym(h, "cuCtxSetCurrent"));
  void* context = nullptr;
  if (!cu_init || !retain || !set_current || cu_init(0) != 0 || retain(&context, 0) != 0 || set_current(context) != 0)
    return std::printf("FAIL no CUDA context\n"), 1;

  cubinrt_runtime_options o;
  cubinrt_runtime_options_init(&o);
  o.lazy = 1;
  cubinrt_runtime* raw = nullptr;
  call(cubinrt_runtime_create(&o, &raw), "cubinrt_runtime_create");
  const RuntimePtr rt(raw);

  // An options struct from no _init (struct_size 0) is refused, not read.
  cubinrt_runtime_options zeroed{};
  cubinrt_runtime* never = nullptr;
  check(cubinrt_runtime_create(&zeroed, &never) == CUBINRT_ERROR_INVALID_ARGUMENT && never == nullptr, "a zero struct_size was accepted");
  check(std::string(cubinrt_last_error()).find("struct_size is 0") != std::string::npos, std::string("message: ") + cubinrt_last_error());

  enum : uint32_t { B = 3, HQ = 16, HKV = 2, D = 128, P = 16, PAGES = 12, ROW = 4 };
  cubinrt_decode_shape shape;
  cubinrt_decode_shape_init(&shape);
  shape.batch = B;
  shape.num_q_heads = HQ;
  shape.num_kv_heads = HKV;
  shape.head_dim = D;
  shape.q_dtype = CUBINRT_DTYPE_FP16;
  shape.kv_storage = CUBINRT_DTYPE_UINT8;
  shape.page_size = P;
  shape.layout = CUBINRT_KV_HND;
  shape.block_table_stride = ROW;
  // uint8 storage with nothing declared: refused, never guessed.
  cubinrt_decode_plan* p = nullptr;
  check(cubinrt_decode_plan_create(rt.get(), &shape, &p) == CUBINRT_ERROR_INVALID_ARGUMENT, "undeclared uint8 KV was planned");
  check(std::string(cubinrt_last_error()).find("never infers the encoding") != std::string::npos, std::string("message: ") + cubinrt_last_error());
  shape.kv_declared = CUBINRT_DTYPE_FP8_E4M3;
  call(cubinrt_decode_plan_create(rt.get(), &shape, &p), "cubinrt_decode_plan_create");
  const PlanPtr plan(p);
  cubinrt_decode_plan_info info;
  cubinrt_decode_plan_info_init(&info);
  call(cubinrt_decode_plan_info_get(plan.get(), &info), "cubinrt_decode_plan_info_get");
  std::printf("plan: kernel %s, %d splits\n", info.kernel, info.num_splits);
  check(std::string(info.kernel).find("fp8_e4m3") != std::string::npos, std::string("kernel ") + info.kernel);

  // fp16 q (0.25 = 0x3400), K as FP8 codes, V = 0.5 in e4m3 (0x30).
  std::vector<uint16_t> q(B * HQ * D, 0x3400), out(B * HQ * D, 0xffff);
  std::vector<uint8_t> k(size_t{PAGES} * HKV * P * D), v(k.size(), 0x30);
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>((i * 29) % 0x38);  // finite, below 1
  const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, lens = {1, 33, 64};
  devptr dq = 0, dk = 0, dv = 0, dt = 0, dl = 0, dout = 0, dws = 0;
  check(cuda.alloc(&dq, q.size() * 2) == 0 && cuda.alloc(&dk, k.size()) == 0 && cuda.alloc(&dv, v.size()) == 0 &&
            cuda.alloc(&dt, table.size() * 4) == 0 && cuda.alloc(&dl, lens.size() * 4) == 0 && cuda.alloc(&dout, out.size() * 2) == 0,
        "cuMemAlloc failed");
  if (info.workspace_bytes) {
    check(cuda.alloc(&dws, info.workspace_bytes) == 0, "cuMemAlloc (workspace) failed");
    const std::vector<char> zeros(info.workspace_bytes, 0);
    cuda.in(dws, zeros.data(), zeros.size());
  }
  cuda.in(dq, q.data(), q.size() * 2);
  cuda.in(dk, k.data(), k.size());
  cuda.in(dv, v.data(), v.size());
  cuda.in(dt, table.data(), table.size() * 4);
  cuda.in(dl, lens.data(), lens.size() * 4);
  cuda.in(dout, out.data(), out.size() * 2);

  cubinrt_decode_args a;
  cubinrt_decode_args_init(&a);
  a.q = tensor(dq, CUBINRT_DL_FLOAT, 16, {B, HQ, D});
  a.k = tensor(dk, CUBINRT_DL_UINT, 8, {PAGES, HKV, P, D});
  a.v = tensor(dv, CUBINRT_DL_UINT, 8, {PAGES, HKV, P, D});
  a.kv_declared = CUBINRT_DTYPE_FP8_E4M3;
  a.k_scale = a.v_scale = 1.f;
  a.block_table = tensor(dt, CUBINRT_DL_INT, 32, {B, ROW});
  a.seq_lens = tensor(dl, CUBINRT_DL_INT, 32, {B});
  a.out = tensor(dout, CUBINRT_DL_FLOAT, 16, {B, HQ, D});
  a.workspace = reinterpret_cast<void*>(dws);
  a.workspace_bytes = info.workspace_bytes;
  call(cubinrt_decode_plan_launch(plan.get(), &a, nullptr), "cubinrt_decode_plan_launch");
  check(cuda.sync() == 0, "cuCtxSynchronize failed");
  if (on_gpu) {
    cuda.out(out.data(), dout, out.size() * 2);
    double worst = 0;
    for (uint16_t x : out) {  // fp16: sign, 5 exponent bits (bias 15), 10 mantissa bits
      const int e = (x >> 10) & 31, m = x & 1023;
      const double value = (x >> 15 ? -1 : 1) * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
      const double err = e == 31 ? INFINITY : std::fabs(value - 0.5);
      worst = std::max(worst, err);
    }
    std::printf("launch: every output within %.2e of 0.5\n", worst);
    check(worst <= 1e-2, "outputs differ from 0.5");
  }

  // The refusals an engine meets first: a wrong dtype, a tensor on another device, a bad stride.
  cubinrt_decode_args bad = a;
  bad.q = tensor(dq, CUBINRT_DL_BFLOAT, 16, {B, HQ, D});
  check(cubinrt_decode_plan_launch(plan.get(), &bad, nullptr) == CUBINRT_ERROR_INVALID_ARGUMENT &&
            std::string(cubinrt_last_error()) == "paged decode launch: q has dtype bfloat16 (DLPack code 4, 16 bits, 1 lanes); the plan takes float16",
        std::string("wrong dtype: ") + cubinrt_last_error());
  bad = a;
  bad.out.device_id = 1;
  check(cubinrt_decode_plan_launch(plan.get(), &bad, nullptr) == CUBINRT_ERROR_INVALID_ARGUMENT &&
            std::string(cubinrt_last_error()) == "paged decode launch: out is on CUDA device 1, but this runtime runs on device 0",
        std::string("other device: ") + cubinrt_last_error());
  bad = a;
  bad.q.strides[0] = HQ * D, bad.q.strides[1] = D + 4, bad.q.strides[2] = 1;
  check(cubinrt_decode_plan_launch(plan.get(), &bad, nullptr) == CUBINRT_ERROR_INVALID_ARGUMENT &&
            std::string(cubinrt_last_error()).find("q has head stride 132 elements (264 bytes), not a multiple of 16 bytes") != std::string::npos,
        std::string("bad stride: ") + cubinrt_last_error());
  bad = a;
  bad.kv_declared = CUBINRT_DTYPE_FP8_E5M2;
  check(cubinrt_decode_plan_launch(plan.get(), &bad, nullptr) == CUBINRT_ERROR_INVALID_ARGUMENT, "a KV declaration unlike the plan's was launched");

  for (devptr d : {dq, dk, dv, dt, dl, dout, dws})
    if (d) cuda.release(d);
  std::printf(failures ? "C++17 consumer: %d checks failed\n" : "C++17 consumer: all checks passed\n", failures);
  return failures ? 1 : 0;
}
