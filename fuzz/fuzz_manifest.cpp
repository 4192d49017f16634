// Any text as a manifest and as a catalog: parsed or refused, no exception escapes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "catalog/catalog.hpp"
#include "bundle/manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto m = cubinrt::Manifest::parse(text)) (void)m->to_json();
  (void)cubinrt::Catalog::parse(text, "fuzz");
  return 0;
}
