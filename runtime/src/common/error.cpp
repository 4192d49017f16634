#include "cubinrt/error.hpp"

namespace cubinrt {

std::string_view errc_name(Errc code) {
  switch (code) {
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::io: return "io";
    case Errc::corrupt_cubin: return "corrupt_cubin";
    case Errc::corrupt_fatbin: return "corrupt_fatbin";
    case Errc::corrupt_bundle: return "corrupt_bundle";
    case Errc::corrupt_manifest: return "corrupt_manifest";
    case Errc::mismatch: return "mismatch";
    case Errc::not_in_bundle: return "not_in_bundle";
    case Errc::unsupported: return "unsupported";
    case Errc::no_driver: return "no_driver";
    case Errc::driver: return "driver";
    case Errc::driver_too_old: return "driver_too_old";
    case Errc::no_device: return "no_device";
  }
  return "unknown";
}

Error&& Error::context(std::string_view what) && {
  message.insert(0, std::string(what) + ": ");
  return std::move(*this);
}

}  // namespace cubinrt
