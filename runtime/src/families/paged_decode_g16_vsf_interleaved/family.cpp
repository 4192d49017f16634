// The 16-heads-a-block kernels (paged_decode_g16) of NVFP4 caches whose V scales are interleaved
// by 4 tokens (paged_decode_vsf_interleaved): built with CUBINRT_G16 and CUBINRT_VSF_INTERLEAVED.
#include "families/paged_decode/family_parts.hpp"

namespace cubinrt::family_modules {

const Family& paged_decode_g16_vsf_interleaved() {
  static const paged_decode::DecodeFamily family(paged_decode::kG16VsfInterleavedFamily);
  return family;
}

}  // namespace cubinrt::family_modules
