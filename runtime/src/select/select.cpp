#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cubinrt/select.hpp"

namespace cubinrt {

ArchMatch arch_match(const Arch& cubin, const Arch& device, std::string* why) {
  auto no = [&](std::string text) {
    if (why) *why = std::move(text);
    return ArchMatch::none;
  };
  if (cubin.major != device.major)
    return no(fmt::format("{} code runs only on compute capability {}.x; the device is {}.{}", cubin.str(), cubin.major,
                          device.major, device.minor));
  if (cubin.variant == Arch::Variant::accel) {
    if (cubin.minor != device.minor)
      return no(fmt::format("{} ('a': arch-specific) runs only on sm_{}", cubin.str(), cubin.sm()));
    return ArchMatch::exact;
  }
  if (cubin.minor > device.minor)
    return no(fmt::format("{} needs compute capability {}.{} or higher in its family; the device is {}.{}", cubin.str(),
                          cubin.major, cubin.minor, device.major, device.minor));
  if (cubin.minor == device.minor) return ArchMatch::exact;
  return cubin.variant == Arch::Variant::family ? ArchMatch::family : ArchMatch::lower_minor;
}

const ManifestEntry* best_entry(std::span<const ManifestEntry* const> same_key, const Arch& device) {
  const ManifestEntry* best = nullptr;
  ArchMatch best_match = ArchMatch::none;
  for (const ManifestEntry* e : same_key) {
    const ArchMatch m = arch_match(e->arch, device);
    if (m != ArchMatch::none && (best == nullptr || m > best_match || (m == best_match && e->arch.minor > best->arch.minor)))
      best = e, best_match = m;
  }
  return best;
}

Selection select_entry(const Manifest& manifest, const Arch& device, const KernelKey& key, bool explain) {
  Selection sel;
  std::vector<const ManifestEntry*> same_key;
  for (const ManifestEntry& e : manifest.entries)
    if (e.key == key) same_key.push_back(&e);
  sel.chosen = best_entry(same_key, device);
  if (!explain) return sel;
  for (const ManifestEntry& e : manifest.entries) {
    if (e.key.family != key.family) continue;
    Candidate c{&e, ArchMatch::none, {}};
    const KernelKey& k = e.key;
    if (k.head_dim != key.head_dim) c.reason = fmt::format("head_dim {} (asked {})", k.head_dim, key.head_dim);
    else if (k.q_dtype != key.q_dtype) c.reason = fmt::format("q dtype {} (asked {})", dtype_name(k.q_dtype), dtype_name(key.q_dtype));
    else if (k.kv_dtype != key.kv_dtype) c.reason = fmt::format("kv dtype {} (asked {})", dtype_name(k.kv_dtype), dtype_name(key.kv_dtype));
    else if (k.page_size != key.page_size) c.reason = fmt::format("page size {} (asked {})", k.page_size, key.page_size);
    else c.match = arch_match(e.arch, device, &c.reason);
    sel.candidates.push_back(std::move(c));
  }
  for (Candidate& c : sel.candidates) {
    if (c.match == ArchMatch::none) continue;
    if (c.entry == sel.chosen) {
      c.reason = c.match == ArchMatch::exact ? "chosen: exact arch match"
                 : c.match == ArchMatch::family ? "chosen: family match"
                                                : "chosen: same major arch, lower minor";
    } else {
      c.reason = fmt::format("runs here, but {} is a better match", sel.chosen->id);
    }
  }
  return sel;
}

std::string arch_family_name(uint32_t major) {
  switch (major) {
    case 7: return "SM70 (Volta/Turing)";
    case 8: return "SM80 (Ampere/Ada)";
    case 9: return "SM90 (Hopper)";
    case 10: return "SM100 (Blackwell)";
    case 11: return "SM110 (Blackwell)";
    case 12: return "SM120 (Blackwell GeForce/RTX)";
    default: return fmt::format("SM{}0", major);
  }
}

std::string explain_unavailable(const Manifest& manifest, std::string_view device_name, const Arch& device,
                                const KernelKey& key) {
  std::set<std::string> archs_for_key, archs_for_head_dim;
  std::set<uint32_t> majors;
  std::set<uint32_t> head_dims_here;
  for (const ManifestEntry& e : manifest.entries) {
    if (e.key.family != key.family) continue;
    if (e.key == key) archs_for_key.insert(e.arch.str()), majors.insert(e.arch.major);
    if (e.key.head_dim == key.head_dim) archs_for_head_dim.insert(e.arch.str());
    if (arch_match(e.arch, device) != ArchMatch::none) head_dims_here.insert(e.key.head_dim);
  }
  const std::string asked = fmt::format("{} {}", key.family, key.str());
  const std::string head = fmt::format("{} ({}) cannot run {}", device_name, Arch::from_sm(device.sm()).str(), asked);
  auto list = [](const std::set<std::string>& s, std::string_view conj = "and") {
    std::vector<std::string> v(s.begin(), s.end());
    if (v.size() == 1) return v[0];
    const std::string last = v.back();
    v.pop_back();
    return fmt::format("{} {} {}", fmt::join(v, ", "), conj, last);
  };
  std::string advice;
  if (!head_dims_here.empty()) {
    const uint32_t max_here = *head_dims_here.rbegin();
    advice = key.head_dim > max_here ? fmt::format("head_dim <= {}", max_here)
                                     : fmt::format("a head_dim of {}", fmt::join(head_dims_here, ", "));
  }
  if (archs_for_key.empty() && archs_for_head_dim.empty())
    return fmt::format("{}: the bundle has no kernel with head_dim={} for any GPU", head, key.head_dim);
  if (archs_for_key.empty())
    return fmt::format("{}: the bundle builds head_dim={} for {} but not with q={} kv={} page_size={}", head, key.head_dim,
                       list(archs_for_head_dim), dtype_name(key.q_dtype), dtype_name(key.kv_dtype), key.page_size);
  std::set<std::string> families;
  for (uint32_t m : majors) families.insert(arch_family_name(m));
  const std::string offers = archs_for_key == archs_for_head_dim
                                 ? fmt::format("head_dim={} is built for {} only", key.head_dim, list(archs_for_key))
                                 : fmt::format("this kernel is built for {} only", list(archs_for_key));
  return fmt::format("{}: {}; use an {} GPU{}", head, offers, list(families, "or"), advice.empty() ? "" : " or " + advice);
}

}  // namespace cubinrt
