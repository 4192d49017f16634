// A kernel resolved on a device, ready to launch.
#pragma once

#include <cstdint>

#include "bundle/manifest.hpp"

struct CUfunc_st;
struct CUlib_st;
struct CUkern_st;

namespace cubinrt {

struct LoadedKernel {
  const ManifestEntry* entry = nullptr;
  CUlib_st* library = nullptr;    // shared by the kernels of one cubin
  CUkern_st* kernel = nullptr;
  CUfunc_st* function = nullptr;  // resolved for this device's context
  uint32_t registers = 0;
  uint32_t static_shared = 0;
  uint32_t dynamic_shared = 0;    // passed by every launch (the kernel's own statement, verified)
  uint32_t block_threads = 0;     // every launch's block size: the kernel's launch bound (verified)
  bool waits_on_prior_grids = false;  // may be launched to overlap the previous kernel (the cubin's statement)
  int blocks_per_sm = 0;          // occupancy at the kernel's block size
  double load_ms = 0;             // verify + load + resolve + ABI check
};

}  // namespace cubinrt
