// The attributes a plan's cuLaunchKernelEx carries, filled without allocation: the cluster of a
// cluster merge, and the overlap with the kernel before it on the stream.
#pragma once

#include <cuda.h>

#include "cubinrt/types.hpp"
#include "loader/loaded_kernel.hpp"

namespace cubinrt {

class LaunchAttributes {
 public:
  // Splits along grid z launched as one cluster each.
  void cluster_along_z(unsigned size) {
    CUlaunchAttribute& a = attrs_[count_++];
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = a.value.clusterDim.y = 1;
    a.value.clusterDim.z = size;
  }
  // Programmatic dependent launch: the launch may begin while the previous kernel on the stream
  // runs. Only for kernels that wait for it before touching memory (cubins/grid_dependency.cuh).
  void overlap_previous_kernel() {
    CUlaunchAttribute& a = attrs_[count_++];
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
  }
  void apply(CUlaunchConfig& config) {
    config.attrs = count_ ? attrs_ : nullptr;
    config.numAttrs = count_;
  }

 private:
  CUlaunchAttribute attrs_[2]{};
  unsigned count_ = 0;
};

// Whether a plan's launches overlap the previous kernel: asked for (the default) and stated by the
// kernel, which only sm_90 and later builds do (so only devices that run them see the attribute).
inline bool takes_overlap(LaunchOverlap asked, const LoadedKernel& kernel) {
  return asked == LaunchOverlap::allow && kernel.waits_on_prior_grids;
}

}  // namespace cubinrt
