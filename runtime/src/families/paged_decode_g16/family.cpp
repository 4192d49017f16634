// The 16-heads-a-block paged decode kernels: the paged decode family under its own name, so that
// its kernels are keys of their own in the catalog and the bundle (built with CUBINRT_G16) and the
// plan can ask for them apart (paged_decode_abi.h says why; plan.cpp says when).
#include "families/paged_decode/family_parts.hpp"

namespace cubinrt::family_modules {

const Family& paged_decode_g16() {
  static const paged_decode::DecodeFamily family(paged_decode::kG16Family);
  return family;
}

}  // namespace cubinrt::family_modules
