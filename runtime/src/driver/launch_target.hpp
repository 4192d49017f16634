// Where a launch runs and what it reads: the stream's device and each tensor's device must be the
// runtime's. Asked of the driver before every launch (one call for the stream, one a tensor),
// because a kernel handed another device's memory either faults, which poisons that context for
// every later call, or (peer access on) reads it across the interconnect at a fraction of the
// bandwidth with no sign. Any family's launch calls this; nothing is formatted unless it fails.
#pragma once

#include <span>

#include "cubinrt/runtime.hpp"
#include "driver/driver.hpp"

namespace cubinrt {

struct LaunchTensor {
  const void* data;  // may be null: an optional tensor that is absent
  const char* name;  // "q", "kv.k", ...
};

// Err(invalid_argument) naming the stream or tensor, its device and the runtime's: a stream of
// another device, the NULL (or legacy, or per-thread) stream with another device's context (or
// none) current, or a tensor that is not CUDA memory or lives on another device. A stream of
// another context on the runtime's device (a green context) passes: the driver decides.
Status check_launch_target(const Runtime& runtime, CUstream stream, std::span<const LaunchTensor> tensors, std::string_view what);

}  // namespace cubinrt
