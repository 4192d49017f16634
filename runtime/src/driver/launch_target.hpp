// Where a launch runs and what it reads. A plan runs on its runtime's device: on an explicit
// stream, which must be that device's; on the NULL (legacy or per-thread) stream, that device's
// default stream, with its context made current for the launch and the caller's put back (as a
// PyTorch op guards its tensors' device). Every tensor must be CUDA memory of that device. Asked
// of the driver before every launch (one call for the stream, one a tensor), because a kernel
// handed another device's memory either faults, which poisons that context for every later call,
// or (peer access on) reads it across the interconnect at a fraction of the bandwidth with no
// sign. Any family's launch calls this; nothing is formatted unless it fails.
#pragma once

#include <span>

#include "cubinrt/runtime.hpp"
#include "driver/context_guard.hpp"
#include "driver/driver.hpp"

namespace cubinrt {

struct LaunchTensor {
  const void* data;  // may be null: an optional tensor that is absent
  const char* name;  // "q", "kv.k", ...
};

// The guard to launch under (leave() it after the launch), or Err(invalid_argument) naming the
// stream or tensor, its device and the runtime's: a stream of another device, or a tensor that is
// not CUDA memory or lives on another device. A stream of another context on the runtime's
// device (a green context) passes: the driver decides.
Result<ContextGuard> enter_launch_target(const Runtime& runtime, CUstream stream, std::span<const LaunchTensor> tensors, std::string_view what);

}  // namespace cubinrt
