#include <fmt/format.h>

#include "driver/driver.hpp"

namespace cubinrt {

Status check_driver_abi(const DriverApi& d, CUfunction function, const AbiLayout& abi, std::string_view what) {
  for (size_t i = 0; i <= abi.fields.size(); ++i) {
    size_t offset = 0, size = 0;
    const CUresult r = d.cuFuncGetParamInfo(function, i, &offset, &size);
    if (i == abi.fields.size()) {
      // Past the last field the driver must answer INVALID_VALUE: a success is an extra parameter.
      if (r == CUDA_SUCCESS)
        return fail(Errc::mismatch, fmt::format("{}: the driver reports more than the {} parameters of ABI {} v{}", what, abi.fields.size(), abi.name, abi.version));
      return {};
    }
    if (auto s = d.check(r, fmt::format("cuFuncGetParamInfo({})", i), what); !s) return s;
    const AbiField& f = abi.fields[i];
    if (offset != f.offset || size != f.size)
      return fail(Errc::mismatch, fmt::format("{}: the driver puts parameter {} at offset {} size {}, ABI {} v{} field '{}' is at offset {} size {}",
                                              what, i, offset, size, abi.name, abi.version, f.name, f.offset, f.size));
  }
  return {};
}

}  // namespace cubinrt
