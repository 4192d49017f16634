// Programmatic dependent launch (compute capability 9.0 and later). A kernel launched with
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION may start while the kernel before it on
// the stream is still running; `griddepcontrol.wait` then holds it until that kernel has finished
// and its writes are visible, so a kernel that waits before its first global access sees exactly
// what it would without the attribute, while its launch, block scheduling and prologue overlap the
// previous kernel's tail. `griddepcontrol.launch_dependents` lets the next kernel on the stream do
// the same with ours once every block of ours has issued it. Both are no-ops in a launch without
// the attribute, and do not exist before sm_90, where these functions are empty.
//
// A kernel that calls cubinrt_wait_for_prior_grids() before touching global memory says so in a
// 4-byte device object cubinrt_grid_dependency_<kernel> (value 1, sm_90 and later builds only),
// which the cubin reader finds by name: the runtime asks for the overlap only for such kernels, so
// a cubin built before this, or for an older arch, is launched in plain stream order.
#ifndef CUBINRT_GRID_DEPENDENCY_CUH_
#define CUBINRT_GRID_DEPENDENCY_CUH_

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CUBINRT_HAS_GRID_DEPENDENCY 1
#else
#define CUBINRT_HAS_GRID_DEPENDENCY 0
#endif

// The kernel's statement (above), at namespace scope beside the kernel: nothing before sm_90.
#define CUBINRT_GRID_DEPENDENCY_CAT2_(a, b) a##b
#define CUBINRT_GRID_DEPENDENCY_CAT_(a, b) CUBINRT_GRID_DEPENDENCY_CAT2_(a, b)
#if CUBINRT_HAS_GRID_DEPENDENCY
#define CUBINRT_STATE_GRID_DEPENDENCY(kernel) \
  extern "C" __device__ const uint32_t CUBINRT_GRID_DEPENDENCY_CAT_(cubinrt_grid_dependency_, kernel) = 1;
#else
#define CUBINRT_STATE_GRID_DEPENDENCY(kernel)
#endif

__device__ __forceinline__ void cubinrt_wait_for_prior_grids() {
#if CUBINRT_HAS_GRID_DEPENDENCY
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void cubinrt_allow_dependent_grids() {
#if CUBINRT_HAS_GRID_DEPENDENCY
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif  // CUBINRT_GRID_DEPENDENCY_CUH_
