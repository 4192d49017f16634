// The host side of each kernel ABI: field offsets as the host compiler lays out the struct that
// the dispatcher fills. The kernels take the same fields, in the same order, as parameters.
#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "cubinrt/abi.hpp"
#include "cubinrt/abi/paged_decode_v1.h"

namespace cubinrt {

namespace {

#define CUBINRT_ABI_FIELD_(type, name)                                                         \
  AbiField{#name, static_cast<uint32_t>(offsetof(CubinrtPagedDecodeParamsV1, name)),          \
           static_cast<uint32_t>(sizeof(CubinrtPagedDecodeParamsV1::name))},

AbiLayout make_paged_decode_v1() {
  AbiLayout abi{CUBINRT_PAGED_DECODE_ABI_NAME, CUBINRT_PAGED_DECODE_ABI_VERSION, sizeof(CubinrtPagedDecodeParamsV1), 0,
                {CUBINRT_PAGED_DECODE_V1_FIELDS(CUBINRT_ABI_FIELD_)}, 32 * CUBINRT_PAGED_DECODE_MAX_GROUP};
  for (const AbiField& f : abi.fields) abi.param_bytes = std::max(abi.param_bytes, f.offset + f.size);
  return abi;
}

const AbiLayout kPagedDecodeV1 = make_paged_decode_v1();

#undef CUBINRT_ABI_FIELD_

const AbiLayout* const kAbis[] = {&kPagedDecodeV1};

}  // namespace

Result<const AbiLayout*> find_abi(std::string_view name, uint32_t version) {
  for (const AbiLayout* abi : kAbis)
    if (abi->name == name && abi->version == version) return abi;
  return fail(Errc::mismatch, fmt::format("parameter ABI {} v{} is unknown to this build of cubinrt (it knows {} v{})", name,
                                          version, kPagedDecodeV1.name, kPagedDecodeV1.version));
}

Status check_kernel_abi(const KernelInfo& kernel, const AbiLayout& abi) {
  if (kernel.params.size() != abi.fields.size())
    return fail(Errc::mismatch, fmt::format("kernel '{}' takes {} parameters, ABI {} v{} has {} fields", kernel.name,
                                            kernel.params.size(), abi.name, abi.version, abi.fields.size()));
  for (size_t i = 0; i < abi.fields.size(); ++i) {
    const AbiField& f = abi.fields[i];
    const ParamInfo& p = kernel.params[i];
    if (p.offset != f.offset || p.size != f.size)
      return fail(Errc::mismatch, fmt::format("kernel '{}' parameter {} is at offset {} size {}, but ABI {} v{} field '{}' is at "
                                              "offset {} size {}",
                                              kernel.name, i, p.offset, p.size, abi.name, abi.version, f.name, f.offset, f.size));
  }
  if (kernel.param_bytes != abi.param_bytes)
    return fail(Errc::mismatch, fmt::format("kernel '{}' has {} parameter bytes, ABI {} v{} has {}", kernel.name,
                                            kernel.param_bytes, abi.name, abi.version, abi.param_bytes));
  // The block size is the kernel's own statement (its launch bound), not a host constant, so each
  // variant may choose it; the kernel's warps-per-block arithmetic holds only at exactly that size.
  const auto& n = kernel.max_ntid;
  if (n[0] == 0 || n[1] > 1 || n[2] > 1 || n[0] % 32 != 0 || n[0] < abi.min_block_threads)
    return fail(Errc::mismatch, fmt::format("kernel '{}' has launch bounds ({}, {}, {}), but ABI {} v{} launches one-dimensional blocks "
                                            "of the launch bound: a multiple of 32 threads, at least {}",
                                            kernel.name, n[0], n[1], n[2], abi.name, abi.version, abi.min_block_threads));
  return {};
}

}  // namespace cubinrt
