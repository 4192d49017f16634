// Any bytes: read_cubin returns a value or an error, never crashes, hangs or reads out of bounds.
#include <cstddef>
#include <cstdint>

#include "cubin/cubin.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = cubinrt::read_cubin(std::span(reinterpret_cast<const std::byte*>(data), size));
  if (r)
    for (const auto& k : r->kernels) (void)k.params.size();
  return 0;
}
