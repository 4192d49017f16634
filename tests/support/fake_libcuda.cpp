// A stand-in libcuda.so.1 for CPU tests of programs that open the real one (the C and C++17
// consumers of the installed library): cuGetProcAddress_v2 hands out the fake driver's table (one
// emulated H200), and the few entry points a program calls by name forward to it. Device memory
// is host memory and kernels are not run, so a launch is checked, recorded and succeeds.
#include <cstring>

#include "support/fake_driver.hpp"

namespace {
const cubinrt::DriverApi& table() {
  static const auto d = cubinrt::test::make_fake_driver({cubinrt::test::h200()});
  return *d;
}
}  // namespace

#define CUBINRT_EXPORT_ extern "C"

CUBINRT_EXPORT_ CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int, cuuint64_t, CUdriverProcAddressQueryResult* found) {
  const cubinrt::DriverApi& d = table();
  *fn = nullptr;
#define CUBINRT_LOOKUP_(name) \
  if (std::strcmp(symbol, #name) == 0) *fn = reinterpret_cast<void*>(d.name);
  CUBINRT_DRIVER_FUNCTIONS(CUBINRT_LOOKUP_)
  CUBINRT_DRIVER_OPTIONAL_FUNCTIONS(CUBINRT_LOOKUP_)
#undef CUBINRT_LOOKUP_
  if (found) *found = *fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUBINRT_EXPORT_ CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t n) { return table().cuMemAlloc(p, n); }
CUBINRT_EXPORT_ CUresult cuMemFree_v2(CUdeviceptr p) { return table().cuMemFree(p); }
CUBINRT_EXPORT_ CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) { return table().cuMemcpyHtoD(dst, src, n); }
CUBINRT_EXPORT_ CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) { return table().cuMemcpyDtoH(dst, src, n); }
CUBINRT_EXPORT_ CUresult cuCtxSynchronize() { return table().cuCtxSynchronize(); }
CUBINRT_EXPORT_ CUresult cuInit(unsigned flags) { return table().cuInit(flags); }
CUBINRT_EXPORT_ CUresult cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice d) { return table().cuDevicePrimaryCtxRetain(c, d); }
CUBINRT_EXPORT_ CUresult cuCtxSetCurrent(CUcontext c) { return table().cuCtxSetCurrent(c); }
