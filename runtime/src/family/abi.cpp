// The checks of a kernel against its family's parameter ABI.
#include <algorithm>

#include <fmt/format.h>

#include "family/abi.hpp"

namespace cubinrt {

AbiLayout make_abi_layout(std::string_view name, uint32_t version, uint32_t struct_size, std::vector<AbiField> fields,
                          uint32_t min_block_threads) {
  AbiLayout abi{name, version, struct_size, 0, std::move(fields), min_block_threads};
  for (const AbiField& f : abi.fields) abi.param_bytes = std::max(abi.param_bytes, f.offset + f.size);
  return abi;
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
