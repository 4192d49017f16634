// The C ABI's tensor descriptors (DLPack-style cubinrt_tensor) as the families' launches check
// them: element types, and the checks every tensor gets before its strides reach a C++ launch.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "cubinrt/cubinrt.h"
#include "cubinrt/paged_decode.hpp"
#include "cubinrt/error.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt::c_api {

// An element type a tensor may have: the dtypes of the table, and the index and LSE types.
enum class Elem { fp16, bf16, fp8_e4m3, fp8_e5m2, uint8, int32, int64, float32, other };

Elem elem_of(const cubinrt_tensor& t);
Elem elem_of(Dtype d);
std::string_view elem_name(Elem e);

struct Strides {
  int64_t v[CUBINRT_MAX_DIMS] = {};
};
// The checks every tensor gets: present, on this runtime's device, of dtype `want`, with the
// plan's shape and (`rows`: the last dimension is read whole, as head_dim is) a unit innermost
// stride. Returns its element strides (all zero: C-contiguous). `launch` prefixes the message.
Result<Strides> check_tensor(std::string_view launch, const char* name, const cubinrt_tensor& t, Elem want, std::span<const int64_t> shape,
                             int ordinal, bool rows = false);

// (page, token, head) strides from a paged cache tensor's dims in its layout (NHD or HND).
KvStrides kv_strides_in_layout(const Strides& s, bool nhd);
// NVFP4's two block-scale tensors (uint8 or float8_e4m3fn) of `shape` (the cache's, with rows of
// head_dim / 16): checked as every tensor, and of one layout. Returns their shared strides.
Result<KvStrides> check_nvfp4_scales(std::string_view launch, const cubinrt_tensor& k_sf, const cubinrt_tensor& v_sf,
                                     std::span<const int64_t> shape, int ordinal, bool nhd);

}  // namespace cubinrt::c_api
