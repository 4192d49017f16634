// The paged decode kernels of NVFP4 caches whose V scales are in TensorRT-LLM's 4-token interleave
// (ScaleOrder::interleaved4, docs/formats.md): the paged decode family under its own name, built
// with CUBINRT_VSF_INTERLEAVED, so that a plan of that order asks for them apart (plan.cpp). The
// order is a build-time choice of the kernel (paged_decode/common.cuh says why).
#include "families/paged_decode/family_parts.hpp"

namespace cubinrt::family_modules {

const Family& paged_decode_vsf_interleaved() {
  static const paged_decode::DecodeFamily family(paged_decode::kVsfInterleavedFamily);
  return family;
}

}  // namespace cubinrt::family_modules
