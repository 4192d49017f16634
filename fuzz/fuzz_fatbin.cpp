// Any bytes as a fatbin or host object: decompression is bounded by the recorded sizes.
#include <cstddef>
#include <cstdint>

#include "fatbin/fatbin.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)cubinrt::read_fatbin(std::span(reinterpret_cast<const std::byte*>(data), size));
  return 0;
}
