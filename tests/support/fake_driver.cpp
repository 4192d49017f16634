#include "support/fake_driver.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <list>

namespace cubinrt::test {

namespace {

FakeState g_state;
thread_local int t_current = 0;  // 1-based device of the current context, 0 = none

struct FakeLibrary {
  CubinInfo info;
};
struct FakeKernel {
  const FakeLibrary* lib;
  const KernelInfo* kernel;
  int max_dynamic_shared = -1;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, -1 until set
};
std::mutex g_objects_mu;
std::list<FakeLibrary> g_libraries;
std::list<FakeKernel> g_kernels;
// Device memory (host memory here) by start: its size and the device whose context was current
// at allocation (device 0 when none), for CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL.
std::mutex g_memory_mu;
std::map<uintptr_t, std::pair<size_t, int>> g_allocations;

int current_or_first() { return t_current > 0 ? t_current - 1 : 0; }

CUresult name_of(CUresult r, const char** s) {
  switch (r) {
    case CUDA_SUCCESS: *s = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "CUDA_ERROR_NO_BINARY_FOR_GPU"; break;
    case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_INVALID_CLUSTER_SIZE: *s = "CUDA_ERROR_INVALID_CLUSTER_SIZE"; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult string_of(CUresult r, const char** s) {
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
    case CUDA_ERROR_NO_DEVICE: *s = "no CUDA-capable device is detected"; break;
    case CUDA_ERROR_INVALID_IMAGE: *s = "device kernel image is invalid"; break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *s = "no kernel image is available for execution on the device"; break;
    default: *s = "emulated error"; break;
  }
  return CUDA_SUCCESS;
}

const FakeDevice* dev(int ordinal) {
  return ordinal >= 0 && ordinal < static_cast<int>(g_state.devices.size()) ? &g_state.devices[ordinal] : nullptr;
}

CUresult init(unsigned) { return g_state.faults.init; }
CUresult driver_version(int* v) { return *v = g_state.faults.driver_version, CUDA_SUCCESS; }
CUresult device_count(int* n) { return *n = static_cast<int>(g_state.devices.size()), CUDA_SUCCESS; }
CUresult device_get(CUdevice* d, int ordinal) { return dev(ordinal) ? (*d = ordinal, CUDA_SUCCESS) : CUDA_ERROR_INVALID_DEVICE; }
CUresult device_name(char* name, int len, CUdevice d) {
  if (!dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::strncpy(name, dev(d)->name.c_str(), static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult device_attribute(int* v, CUdevice_attribute a, CUdevice d) {
  const FakeDevice* x = dev(d);
  if (!x) return CUDA_ERROR_INVALID_DEVICE;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = x->major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = x->minor; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = x->multiprocessors; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = x->shared_optin; break;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = x->major >= 9; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult device_uuid(CUuuid* u, CUdevice d) {
  if (!dev(d)) return CUDA_ERROR_INVALID_DEVICE;
  std::memset(u->bytes, 0xab, sizeof u->bytes);
  u->bytes[15] = static_cast<char>(dev(d)->uuid_tail);
  return CUDA_SUCCESS;
}
CUresult ctx_retain(CUcontext* c, CUdevice d) { return *c = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(d + 1)), CUDA_SUCCESS; }
CUresult ctx_release(CUdevice) { return CUDA_SUCCESS; }
CUresult ctx_set(CUcontext c) { return t_current = static_cast<int>(reinterpret_cast<uintptr_t>(c)), CUDA_SUCCESS; }
CUresult ctx_get(CUcontext* c) { return *c = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(t_current)), CUDA_SUCCESS; }
CUresult ctx_sync() { return CUDA_SUCCESS; }
CUresult ctx_device(CUdevice* d) { return t_current > 0 ? (*d = t_current - 1, CUDA_SUCCESS) : CUDA_ERROR_INVALID_CONTEXT; }
CUresult stream_ctx(CUstream s, CUcontext* c) {
  int device = current_or_first();
  if (const auto it = g_state.stream_device.find(s); it != g_state.stream_device.end()) device = it->second;
  return *c = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(device + 1)), CUDA_SUCCESS;
}
// A pointer inside an allocation is on its device; any other (a test's made-up address) is on the
// current context's device, as if it were memory allocated there.
CUresult pointer_attribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
  if (a != CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) return CUDA_ERROR_NOT_SUPPORTED;
  int device = current_or_first();
  std::lock_guard lock(g_memory_mu);
  if (auto it = g_allocations.upper_bound(p); it != g_allocations.begin() && p < (--it)->first + it->second.first) device = it->second.second;
  return *static_cast<int*>(data) = device, CUDA_SUCCESS;
}

CUresult library_load(CUlibrary* lib, const void* image, CUjit_option*, void**, unsigned, CUlibraryOption*, void**, unsigned) {
  // The image's size is not passed (as with the real driver); the fake reads the ELF header's view
  // of it: section headers are last in nvcc's cubins.
  const auto* bytes = static_cast<const std::byte*>(image);
  uint64_t shoff = 0, phoff = 0;
  uint16_t shnum = 0, phnum = 0;
  std::memcpy(&phoff, bytes + 32, 8);
  std::memcpy(&shoff, bytes + 40, 8);
  std::memcpy(&phnum, bytes + 56, 2);
  std::memcpy(&shnum, bytes + 60, 2);
  const uint64_t size = std::max(shoff + uint64_t{shnum} * 64, phoff + uint64_t{phnum} * 56);
  auto info = read_cubin(std::span<const std::byte>(bytes, size));
  if (!info) return CUDA_ERROR_INVALID_IMAGE;
  const FakeFaults& f = g_state.faults;
  if (f.load != CUDA_SUCCESS && (f.load_only_for.empty() || std::ranges::any_of(info->kernels, [&](const KernelInfo& k) { return k.name.find(f.load_only_for) != std::string::npos; })))
    return f.load;
  std::lock_guard lock(g_objects_mu);
  g_libraries.push_back({std::move(*info)});
  *lib = reinterpret_cast<CUlibrary>(&g_libraries.back());
  ++g_state.loads;
  return CUDA_SUCCESS;
}
CUresult library_unload(CUlibrary) { return ++g_state.unloads, CUDA_SUCCESS; }
CUresult library_get_kernel(CUkernel* k, CUlibrary lib, const char* name) {
  if (g_state.faults.get_kernel != CUDA_SUCCESS) return g_state.faults.get_kernel;
  const auto* l = reinterpret_cast<const FakeLibrary*>(lib);
  const KernelInfo* ki = l->info.kernel(name);
  if (!ki) return CUDA_ERROR_NOT_FOUND;
  // The real driver's rule: SASS runs on its major arch at an equal or higher minor; 'a' exactly.
  const FakeDevice* d = dev(t_current - 1);
  if (!d) return CUDA_ERROR_INVALID_CONTEXT;
  const Arch& a = l->info.arch;
  const bool runs = static_cast<int>(a.major) == d->major &&
                    (a.variant == Arch::Variant::accel ? static_cast<int>(a.minor) == d->minor : static_cast<int>(a.minor) <= d->minor);
  if (!runs) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  std::lock_guard lock(g_objects_mu);
  g_kernels.push_back({l, ki, -1});
  *k = reinterpret_cast<CUkernel>(&g_kernels.back());
  return CUDA_SUCCESS;
}
CUresult kernel_function(CUfunction* f, CUkernel k) { return *f = reinterpret_cast<CUfunction>(k), CUDA_SUCCESS; }
// The real driver's rules for dynamic shared memory: a block may take up to 48 KiB less its
// static part by default; more only up to the device's opt-in, once this attribute allows it.
constexpr int kDefaultSharedPerBlock = 48 * 1024;
CUresult kernel_set_attribute(CUfunction_attribute a, int v, CUkernel k, CUdevice device) {
  auto* fk = reinterpret_cast<FakeKernel*>(k);
  const FakeDevice* d = dev(device);
  if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || !d) return CUDA_SUCCESS;
  if (v < 0 || v + static_cast<int>(fk->kernel->static_shared) > d->shared_optin) return CUDA_ERROR_INVALID_VALUE;
  fk->max_dynamic_shared = v;
  return CUDA_SUCCESS;
}
CUresult param_info(CUfunction f, size_t i, size_t* offset, size_t* size) {
  const auto* k = reinterpret_cast<const FakeKernel*>(f);
  if (i >= k->kernel->params.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = k->kernel->params[i].offset + static_cast<size_t>(g_state.faults.param_offset_skew);
  *size = k->kernel->params[i].size;
  return CUDA_SUCCESS;
}
CUresult occupancy(int* n, CUfunction, int, size_t) { return *n = 4, CUDA_SUCCESS; }
CUresult launch_ex(const CUlaunchConfig* config, CUfunction f, void**, void** extra) {
  if (g_state.faults.launch != CUDA_SUCCESS) return g_state.faults.launch;
  const auto* fk = reinterpret_cast<const FakeKernel*>(f);
  const int allowed = std::max(fk->max_dynamic_shared, kDefaultSharedPerBlock - static_cast<int>(fk->kernel->static_shared));
  if (config->sharedMemBytes > static_cast<unsigned>(allowed)) return CUDA_ERROR_INVALID_VALUE;
  if (!g_state.faults.record_launches) return CUDA_SUCCESS;
  LaunchRecord r;
  r.config = *config;
  r.attrs.assign(config->attrs, config->attrs + config->numAttrs);
  for (const CUlaunchAttribute& a : r.attrs) {
    // Stricter than the driver: an overlapped launch of code that cannot wait for the kernel before
    // it would race with that kernel, so the tests make it an error.
    if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION && !fk->kernel->waits_on_prior_grids) return CUDA_ERROR_NOT_SUPPORTED;
    if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      // As the driver: clusters need sm_90 code, at most 8 blocks (portable), and whole clusters.
      const unsigned n = a.value.clusterDim.x * a.value.clusterDim.y * a.value.clusterDim.z;
      if (fk->lib->info.arch.major < 9) return CUDA_ERROR_NOT_SUPPORTED;  // the code it runs predates clusters
      if (n == 0 || n > 8 || config->gridDimX % a.value.clusterDim.x || config->gridDimY % a.value.clusterDim.y ||
          config->gridDimZ % a.value.clusterDim.z)
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    }
  }
  r.kernel = reinterpret_cast<const FakeKernel*>(f)->kernel->name;
  CUcontext ctx = nullptr;
  stream_ctx(config->hStream, &ctx);
  r.device = static_cast<int>(reinterpret_cast<uintptr_t>(ctx)) - 1;
  const void* buf = nullptr;
  size_t size = 0;
  for (void** e = extra; e && *e != CU_LAUNCH_PARAM_END; e += 2) {
    if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = e[1];
    if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<size_t*>(e[1]);
  }
  if (!buf) return CUDA_ERROR_INVALID_VALUE;
  r.params.assign(static_cast<const std::byte*>(buf), static_cast<const std::byte*>(buf) + size);
  std::function<void(const LaunchRecord&)> run;
  for (const auto& [prefix, fn] : g_state.emulate)
    if (r.kernel.starts_with(prefix)) run = fn;
  if (run) run(r);
  std::lock_guard lock(g_state.mu);
  g_state.launches.push_back(std::move(r));
  return CUDA_SUCCESS;
}

}  // namespace

FakeState& fake_state() { return g_state; }

std::shared_ptr<DriverApi> make_fake_driver(std::vector<FakeDevice> devices, FakeFaults faults) {
  g_state.devices = std::move(devices);
  g_state.faults = faults;
  g_state.loads = 0;
  g_state.unloads = 0;
  g_state.launches.clear();
  g_state.emulate.clear();
  g_state.stream_device.clear();
  t_current = 0;
  auto d = std::make_shared<DriverApi>();
  d->origin = "fake driver";
  d->cuInit = init;
  d->cuDriverGetVersion = driver_version;
  d->cuGetErrorName = name_of;
  d->cuGetErrorString = string_of;
  d->cuDeviceGetCount = device_count;
  d->cuDeviceGet = device_get;
  d->cuDeviceGetName = device_name;
  d->cuDeviceGetAttribute = device_attribute;
  d->cuDeviceGetUuid = device_uuid;
  d->cuDevicePrimaryCtxRetain = ctx_retain;
  d->cuDevicePrimaryCtxRelease = ctx_release;
  d->cuCtxSetCurrent = ctx_set;
  d->cuCtxGetCurrent = ctx_get;
  d->cuCtxSynchronize = ctx_sync;
  d->cuLibraryLoadData = library_load;
  d->cuLibraryUnload = library_unload;
  d->cuLibraryGetKernel = library_get_kernel;
  d->cuKernelGetFunction = kernel_function;
  d->cuKernelSetAttribute = kernel_set_attribute;
  d->cuFuncGetParamInfo = param_info;
  d->cuOccupancyMaxActiveBlocksPerMultiprocessor = occupancy;
  d->cuLaunchKernelEx = launch_ex;
  // Device memory is host memory (for kernels run by `emulate`); streams and events are not
  // emulated: each is still set, to an error, so a stray call fails loudly.
  d->cuMemAlloc = [](CUdeviceptr* p, size_t n) {
    auto* bytes = new (std::nothrow) std::byte[std::max<size_t>(n, 1)];
    if (bytes == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = reinterpret_cast<CUdeviceptr>(bytes);
    std::lock_guard lock(g_memory_mu);
    g_allocations[*p] = {std::max<size_t>(n, 1), current_or_first()};
    return CUDA_SUCCESS;
  };
  d->cuMemFree = [](CUdeviceptr p) {
    {
      std::lock_guard lock(g_memory_mu);
      g_allocations.erase(p);
    }
    return delete[] reinterpret_cast<std::byte*>(p), CUDA_SUCCESS;
  };
  d->cuStreamGetCtx = stream_ctx;
  d->cuCtxGetDevice = ctx_device;
  d->cuPointerGetAttribute = pointer_attribute;
  d->cuMemcpyHtoD = [](CUdeviceptr dst, const void* src, size_t n) { return std::memcpy(reinterpret_cast<void*>(dst), src, n), CUDA_SUCCESS; };
  d->cuMemcpyDtoH = [](void* dst, CUdeviceptr src, size_t n) { return std::memcpy(dst, reinterpret_cast<const void*>(src), n), CUDA_SUCCESS; };
  d->cuMemcpyDtoD = [](CUdeviceptr, CUdeviceptr, size_t) { return CUDA_ERROR_NOT_SUPPORTED; };
  d->cuMemsetD8 = [](CUdeviceptr, unsigned char, size_t) { return CUDA_ERROR_NOT_SUPPORTED; };
  d->cuEventCreate = [](CUevent*, unsigned) { return CUDA_ERROR_NOT_SUPPORTED; };
  d->cuEventRecord = [](CUevent, CUstream) { return CUDA_ERROR_NOT_SUPPORTED; };
  d->cuEventSynchronize = [](CUevent) { return CUDA_ERROR_NOT_SUPPORTED; };
  d->cuEventElapsedTime = [](float*, CUevent, CUevent) { return CUDA_ERROR_NOT_SUPPORTED; };
  d->cuEventDestroy = [](CUevent) { return CUDA_ERROR_NOT_SUPPORTED; };
  d->cuLaunchKernel = [](CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**) {
    return CUDA_ERROR_NOT_SUPPORTED;
  };
  return d;
}

}  // namespace cubinrt::test
