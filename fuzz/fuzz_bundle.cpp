// Any bytes as a bundle: header, manifest, then every entry decompressed (never past its recorded
// size, which the reader caps before allocating) and verified. Every claimed size is tried: the
// reader's caps (bundle_header.hpp) make a huge claim an error, not an allocation.
#include <cstddef>
#include <cstdint>

#include "bundle/verify.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto b = cubinrt::Bundle::from_view(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  if (!b) return 0;
  for (const auto& e : b->manifest().entries)
    (void)cubinrt::verify_entry(*b, e);
  return 0;
}
