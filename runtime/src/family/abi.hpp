// Host-side layouts of kernel parameter ABIs (each family makes its own from the field list its
// kernels use) and the checks of a kernel against one.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "cubin/cubin.hpp"
#include "cubinrt/error.hpp"

namespace cubinrt {

struct AbiField {
  std::string_view name;
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct AbiLayout {
  std::string_view name;
  uint32_t version = 0;
  uint32_t size = 0;         // sizeof the host struct (with its tail padding)
  uint32_t param_bytes = 0;  // end of the last field: the kernel's parameter block, as launched
  std::vector<AbiField> fields;
  // A kernel of this ABI is launched with blocks of its launch bound (which it must declare): a
  // whole number of warps, at least this many threads.
  uint32_t min_block_threads = 32;
};

// The layout of a field list: param_bytes computed from the fields.
AbiLayout make_abi_layout(std::string_view name, uint32_t version, uint32_t struct_size, std::vector<AbiField> fields,
                          uint32_t min_block_threads);

// The block size every launch of the kernel uses: its launch bound, one-dimensional.
inline uint32_t block_threads(const KernelInfo& kernel) { return kernel.max_ntid[0]; }

// Every parameter of the kernel at the offset and size of the ABI's field of the same ordinal,
// and a launch bound the host can launch with (block_threads).
Status check_kernel_abi(const KernelInfo& kernel, const AbiLayout& abi);

}  // namespace cubinrt
