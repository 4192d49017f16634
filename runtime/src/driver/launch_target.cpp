#include "driver/launch_target.hpp"

#include <fmt/format.h>

namespace cubinrt {

namespace {

bool implicit_stream(CUstream s) { return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD; }

// The slow path, once an explicit stream's context is not the runtime's: which device it is on
// (its context entered for the question: cuCtxGetDevice asks the current one).
Status check_stream_device(const Runtime& rt, CUcontext ctx, std::string_view what) {
  const DriverApi& d = rt.driver();
  const DeviceInfo& dev = rt.device();
  CUdevice other = 0;
  {
    ContextGuard scope = CUBINRT_TRY(ContextGuard::enter(d, ctx, what));
    CUBINRT_TRY(d.check(d.cuCtxGetDevice(&other), "cuCtxGetDevice", fmt::format("{}: the stream's context", what)));
    CUBINRT_TRY(scope.leave(what));
  }
  if (static_cast<int>(other) == dev.ordinal) return {};
  return fail(Errc::invalid_argument, fmt::format("{}: the stream belongs to device {}, but this plan runs on {}; make a plan on a runtime of "
                                                  "device {}, or launch on a stream of device {}",
                                                  what, static_cast<int>(other), dev.str(), static_cast<int>(other), dev.ordinal));
}

Status check_tensors(const Runtime& rt, std::span<const LaunchTensor> tensors, std::string_view what) {
  const DriverApi& d = rt.driver();
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

}  // namespace

Result<ContextGuard> enter_launch_target(const Runtime& rt, CUstream stream, std::span<const LaunchTensor> tensors, std::string_view what) {
  const DriverApi& d = rt.driver();
  if (implicit_stream(stream)) {
    // The device's default stream: its context current for the launch (a no-op when it already is).
    ContextGuard guard = CUBINRT_TRY(ContextGuard::enter(d, rt.context(), what));
    CUBINRT_TRY(check_tensors(rt, tensors, what));
    return guard;
  }
  CUcontext ctx = nullptr;
  CUBINRT_TRY(d.check(d.cuStreamGetCtx(stream, &ctx), "cuStreamGetCtx", fmt::format("{}: the launch's stream", what)));
  if (ctx != rt.context()) CUBINRT_TRY(check_stream_device(rt, ctx, what));
  CUBINRT_TRY(check_tensors(rt, tensors, what));
  return ContextGuard::none(d);
}

}  // namespace cubinrt
