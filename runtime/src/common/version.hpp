// Version numbers as people read them.
#pragma once

#include <string>

namespace cubinrt {

// A CUDA API version as the driver reports it (13000) in its usual form ("13.0").
std::string cuda_version_text(int version);

}  // namespace cubinrt
