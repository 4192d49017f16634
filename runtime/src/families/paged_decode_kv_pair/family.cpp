// The paged decode kernels that take two neighbouring kv heads a block (NVFP4, head_dim 128, NHD
// pages): the paged decode family under its own name, built with CUBINRT_KV_PAIR, so that a plan
// whose cache keeps the two heads' rows side by side asks for them apart (plan.cpp says when;
// paged_decode/common.cuh why).
#include "families/paged_decode/family_parts.hpp"

namespace cubinrt::family_modules {

const Family& paged_decode_kv_pair() {
  static const paged_decode::DecodeFamily family(paged_decode::kKvPairFamily);
  return family;
}

}  // namespace cubinrt::family_modules
