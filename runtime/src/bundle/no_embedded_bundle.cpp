// An empty embedded bundle, linked only into the build's pack tool (which makes the real one).
#include <cstddef>
#include <cstdint>

extern "C" {
extern const std::byte cubinrt_embedded_bundle_begin[1];
extern const uint64_t cubinrt_embedded_bundle_size;
const std::byte cubinrt_embedded_bundle_begin[1] = {};
const uint64_t cubinrt_embedded_bundle_size = 0;
}
