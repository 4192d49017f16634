// Records of .nv.info, .nv.info.<kernel> and .nv.compat: u8 format, u8 attribute, then a payload.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_view.hpp"

namespace cubinrt::detail {

enum NvInfoAttr : uint8_t {
  kMaxThreads = 0x05, kParamCbank = 0x0a, kReqNtid = 0x10, kFrameSize = 0x11, kMinStackSize = 0x12,
  kKparamInfo = 0x17, kCbankParamSize = 0x19, kMaxRegCount = 0x1b, kExitInstrOffsets = 0x1c,
  kMaxStackSize = 0x23, kRegCount = 0x2f, kCudaApiVersion = 0x37, kCtaPerCluster = 0x3d,
  kExplicitCluster = 0x3e, kKparamInfoV2 = 0x45, kNumBarriers = 0x4c, kAttrLast = 0x60,  // codes from kAttrLast on are unknown here
};
inline constexpr uint8_t kCompatAcceleratorTarget = 0x09;

struct NvInfoRecord {
  uint8_t format;     // 1 none, 2 byte, 3 half, 4 sized payload
  uint8_t attribute;
  uint16_t value;     // formats 2 and 3
  ByteView payload;   // format 4
  uint64_t at;        // offset inside the section, for messages

  Result<uint32_t> word(uint32_t index) const { return payload.read<uint32_t>(uint64_t{index} * 4, "attribute payload word"); }
};

// Parses a whole section; records must tile it exactly. A record of an attribute code this build
// does not know (newer ptxas writes 0x66, 0x6b, ...) is well formed all the same: it is kept (the
// readers skip codes they do not use) and, with `warnings`, named there once.
Result<std::vector<NvInfoRecord>> parse_nv_info(const ByteView& section, std::string_view section_name,
                                                std::vector<std::string>* warnings = nullptr);

}  // namespace cubinrt::detail
