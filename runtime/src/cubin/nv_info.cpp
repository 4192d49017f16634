#include "cubin/nv_info.hpp"

namespace cubinrt::detail {

Result<std::vector<NvInfoRecord>> parse_nv_info(const ByteView& s, std::string_view name, std::vector<std::string>* warnings) {
  std::vector<NvInfoRecord> records;
  uint64_t at = 0;
  while (at < s.size()) {
    NvInfoRecord r{};
    r.at = at;
    r.format = CUBINRT_TRY(s.read<uint8_t>(at, "attribute format"));
    r.attribute = CUBINRT_TRY(s.read<uint8_t>(at + 1, "attribute code"));
    if (r.format < 1 || r.format > 4)
      return fail(Errc::corrupt_cubin, fmt::format("rule nv-info-format: {} record at offset {} has format {} (1-4 are defined)", name, at, r.format));
    if (r.attribute >= kAttrLast && name.starts_with(".nv.info") && warnings != nullptr)
      warnings->push_back(fmt::format("{} record at offset {}: attribute {:#x} is unknown to this build (newer than its codes, which end at "
                                      "{:#x}); skipped", name, at, r.attribute, uint8_t{kAttrLast}));
    r.value = CUBINRT_TRY(s.read<uint16_t>(at + 2, "attribute value"));
    at += 4;
    if (r.format == 4) {
      if (!s.contains(at, r.value))
        return fail(Errc::corrupt_cubin, fmt::format("rule nv-info-tiling: {} record at offset {} has a {}-byte payload past the section's end ({} bytes)", name, r.at, r.value, s.size()));
      r.payload = CUBINRT_TRY(s.sub(at, r.value, "attribute payload"));
      at += r.value;
    }
    records.push_back(r);
  }
  return records;
}

}  // namespace cubinrt::detail
