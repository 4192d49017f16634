// The CUDA driver as a checked table of function pointers. The library never links libcuda:
// open_driver() dlopens libcuda.so.1 and resolves every entry point; tests build a table of
// their own that emulates devices and faults. Needs <cuda.h> (types only) from the CUDA Toolkit.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <string_view>

#include "cubinrt/error.hpp"
#include "family/abi.hpp"

namespace cubinrt {

// X(name): every driver entry point the runtime calls (the self-check's known answers need the
// memory calls; a launch asks the stream's context and each tensor's device). open_driver fails,
// naming it, when one is missing. Types come from cuda.h.
#define CUBINRT_DRIVER_FUNCTIONS(X)                                                              \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)      \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceGetUuid)                   \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxGetCurrent) \
  X(cuCtxSynchronize) X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernel)              \
  X(cuKernelGetFunction) X(cuKernelSetAttribute) X(cuFuncGetParamInfo)                           \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuLaunchKernelEx) X(cuMemAlloc) X(cuMemFree)  \
  X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuStreamGetCtx) X(cuCtxGetDevice) X(cuPointerGetAttribute)

// Entry points only the benchmark and the GPU tests call: resolved when the driver has them,
// never required (a null pointer where it lacks one).
#define CUBINRT_DRIVER_OPTIONAL_FUNCTIONS(X)                                                     \
  X(cuMemcpyDtoD) X(cuMemsetD8) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)          \
  X(cuEventElapsedTime) X(cuEventDestroy) X(cuLaunchKernel)

struct DriverApi {
#define CUBINRT_DRIVER_PTR_(name) decltype(&::name) name = nullptr;
  CUBINRT_DRIVER_FUNCTIONS(CUBINRT_DRIVER_PTR_)
  CUBINRT_DRIVER_OPTIONAL_FUNCTIONS(CUBINRT_DRIVER_PTR_)
#undef CUBINRT_DRIVER_PTR_
  std::string origin;  // "libcuda.so.1" or the test double's name
  void* handle = nullptr;

  // "cuLibraryGetKernel failed: CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is available ...)".
  std::string describe(std::string_view call, CUresult status) const;
  // Errc::no_driver naming every entry point the table lacks (a test double or a partial driver).
  Status validate() const;
  // Err(Errc::driver) with `what` (the cubin, kernel, device involved) and the call's description.
  Status check(CUresult status, std::string_view call, std::string_view what) const;
};

// Every parameter of a resolved function, as cuFuncGetParamInfo reports it, at the offset and size
// of the ABI's field, and no parameter more. `what` names the kernel for the message.
Status check_driver_abi(const DriverApi& driver, CUfunction function, const AbiLayout& abi, std::string_view what);

// Opens libcuda.so.1 (or `library`) and resolves every entry point through cuGetProcAddress.
// A missing library or entry point is an Errc::no_driver error, never a crash.
Result<std::shared_ptr<const DriverApi>> open_driver(const char* library = "libcuda.so.1");

}  // namespace cubinrt
