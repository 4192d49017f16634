// The default bundle, linked into the library by embedded_bundle.S (.incbin of the built bundle).
#include "bundle/bundle.hpp"

extern "C" const std::byte cubinrt_embedded_bundle_begin[];
extern "C" const uint64_t cubinrt_embedded_bundle_size;

namespace cubinrt {

Result<Bundle> Bundle::embedded() {
  if (cubinrt_embedded_bundle_size == 0)
    return fail(Errc::not_in_bundle, "this binary was built without an embedded bundle (the build's pack tool): name a bundle file");
  // The bytes live in the library image for the life of the process: no copy, no owner.
  return from_view(std::span<const std::byte>(cubinrt_embedded_bundle_begin, cubinrt_embedded_bundle_size), "<embedded default bundle>");
}

}  // namespace cubinrt
