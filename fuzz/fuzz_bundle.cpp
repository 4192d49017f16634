// Any bytes as a bundle: header, manifest, then every entry decompressed (never past its recorded
// size) and verified.
#include <cstddef>
#include <cstdint>

#include "bundle/verify.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto b = cubinrt::Bundle::from_view(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  if (!b) return 0;
  for (const auto& e : b->manifest().entries)
    if (e.size <= (size_t{64} << 20)) (void)cubinrt::verify_entry(*b, e);
  return 0;
}
