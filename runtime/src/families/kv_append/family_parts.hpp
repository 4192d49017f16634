// The kv_append family's face to the core and to its plan: its name, its parameter ABI.
#pragma once

#include <string_view>

#include "family/family.hpp"

namespace cubinrt::kv_append {

inline constexpr std::string_view kFamily = "kv_append";

const AbiLayout& abi_v2();

}  // namespace cubinrt::kv_append
