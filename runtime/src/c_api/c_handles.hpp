// What the C ABI's opaque handles hold, and the decode key's C <-> C++ forms.
#pragma once

#include <memory>
#include <optional>

#include "cubinrt/cubinrt.h"
#include "cubinrt/kv_append.hpp"
#include "cubinrt/paged_decode.hpp"
#include "cubinrt/runtime.hpp"

struct cubinrt_runtime {
  std::unique_ptr<cubinrt::Runtime> rt;
};

struct cubinrt_decode_plan {
  cubinrt::DecodePlan plan;
};

struct cubinrt_kv_append_plan {
  cubinrt::KvAppendPlan plan;
  cubinrt::ScaleOrder v_sf_order = cubinrt::ScaleOrder::linear;  // the C shape's: each launch's cache order
};

namespace cubinrt::c_api {

// A C decode key as the runtime's key, or why its dtype codes are not dtypes.
Result<KernelKey> decode_key_of(const cubinrt_decode_key& key);
// A paged decode key in C form; nothing for another family's key.
std::optional<cubinrt_decode_key> c_decode_key(const KernelKey& key);
// A CUBINRT_DTYPE_* code as a Dtype (`what` names the field in the error).
Result<Dtype> dtype_of(int32_t code, const char* what);
// A cubinrt_launch_overlap code as a LaunchOverlap (`what` names the field in the error).
Result<LaunchOverlap> overlap_of(int32_t code, const char* what);
// A CUBINRT_SCALE_ORDER_* code as a ScaleOrder (`what` names the field in the error).
Result<ScaleOrder> scale_order_of(int32_t code, const char* what);

}  // namespace cubinrt::c_api
