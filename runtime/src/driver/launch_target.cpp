#include "driver/launch_target.hpp"

#include <fmt/format.h>

#include "driver/context_guard.hpp"

namespace cubinrt {

namespace {

bool implicit_stream(CUstream s) { return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

// The slow path, once the stream's context is not the runtime's: which device it is on. An
// explicit stream's context is entered for the question (cuCtxGetDevice asks the current one).
Status check_stream_device(const Runtime& rt, CUstream stream, CUcontext ctx, std::string_view what) {
  const DriverApi& d = rt.driver();
  const DeviceInfo& dev = rt.device();
  const bool implicit = implicit_stream(stream);
  if (ctx == nullptr)
    return fail(Errc::invalid_argument,
                fmt::format("{}: launched on the NULL stream with no CUDA context current on this thread; make the context of {} current "
                            "(cudaSetDevice({}) or Runtime::bind_context), or pass one of its streams",
                            what, dev.str(), dev.ordinal));
  CUdevice other = 0;
  if (implicit) {
    CUBINRT_TRY(d.check(d.cuCtxGetDevice(&other), "cuCtxGetDevice", fmt::format("{}: the current context", what)));
  } else {
    ContextGuard scope = CUBINRT_TRY(ContextGuard::enter(d, ctx, what));
    CUBINRT_TRY(d.check(d.cuCtxGetDevice(&other), "cuCtxGetDevice", fmt::format("{}: the stream's context", what)));
    CUBINRT_TRY(scope.leave(what));
  }
  if (static_cast<int>(other) == dev.ordinal) return {};
  if (implicit)
    return fail(Errc::invalid_argument, fmt::format("{}: launched on the NULL stream while device {}'s context is current on this thread, but "
                                                    "this plan runs on {}; make that device's context current (cudaSetDevice({})), or pass one of its streams",
                                                    what, static_cast<int>(other), dev.str(), dev.ordinal));
  return fail(Errc::invalid_argument, fmt::format("{}: the stream belongs to device {}, but this plan runs on {}; make a plan on a runtime of "
                                                  "device {}, or launch on a stream of device {}",
                                                  what, static_cast<int>(other), dev.str(), static_cast<int>(other), dev.ordinal));
}

}  // namespace

Status check_launch_target(const Runtime& rt, CUstream stream, std::span<const LaunchTensor> tensors, std::string_view what) {
  const DriverApi& d = rt.driver();
  CUcontext ctx = nullptr;
  const bool implicit = implicit_stream(stream);
  if (const CUresult r = implicit ? d.cuCtxGetCurrent(&ctx) : d.cuStreamGetCtx(stream, &ctx); r != CUDA_SUCCESS)
    return d.check(r, implicit ? "cuCtxGetCurrent" : "cuStreamGetCtx", fmt::format("{}: the launch's stream", what));
  if (ctx != rt.context()) CUBINRT_TRY(check_stream_device(rt, stream, ctx, what));
  for (const LaunchTensor& t : tensors) {
    if (t.data == nullptr) continue;
    int ordinal = -1;
    const CUresult r = d.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, reinterpret_cast<CUdeviceptr>(t.data));
    if (r == CUDA_SUCCESS && ordinal == rt.device().ordinal) continue;
    if (r != CUDA_SUCCESS)
      return fail(Errc::invalid_argument, fmt::format("{}: {} ({}) is not memory the CUDA driver knows ({}); cubinrt reads device memory of {}",
                                                      what, t.name, t.data, d.describe("cuPointerGetAttribute(DEVICE_ORDINAL)", r),
                                                      rt.device().str()));
    return fail(Errc::invalid_argument, fmt::format("{}: {} ({}) is on device {}, but this plan runs on {}; a plan reads the memory of its "
                                                    "runtime's device only",
                                                    what, t.name, t.data, ordinal, rt.device().str()));
  }
  return {};
}

}  // namespace cubinrt
