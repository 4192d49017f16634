#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "select/select.hpp"

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
    // The first axis that differs (in the catalog's order) is the reason.
    for (const auto& [axis, value] : e.key.axes)
      if (const std::string_view asked = key.axis(axis); asked != value) {
        c.reason = fmt::format("{} {} (asked {})", axis, value, asked.empty() ? "nothing" : asked);
        break;
      }
    if (c.reason.empty() && e.key.axes.size() != key.axes.size()) c.reason = fmt::format("axes {} (asked {})", e.key.str(), key.str());
    if (c.reason.empty()) c.match = arch_match(e.arch, device, &c.reason);
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

namespace {

// Numbers compare as numbers, names as text: "64" < "128".
bool value_less(const std::string& a, const std::string& b) {
  const bool na = !a.empty() && a.find_first_not_of("0123456789") == std::string::npos;
  const bool nb = !b.empty() && b.find_first_not_of("0123456789") == std::string::npos;
  if (na && nb) return a.size() != b.size() ? a.size() < b.size() : a < b;
  if (na != nb) return na;
  return a < b;
}
struct ValueLess {
  bool operator()(const std::string& a, const std::string& b) const { return value_less(a, b); }
};

}  // namespace

// The key's first axis (head_dim for attention) is its size class: the sentence says which archs
// build the asked value of it, and which values this device runs instead. Nothing here names an
// axis, an arch or a value: all of it comes from the bundle's entries.
std::string explain_unavailable(const Manifest& manifest, std::string_view device_name, const Arch& device,
                                const KernelKey& key) {
  if (key.axes.empty()) return fmt::format("{} ({}) cannot run {}: the key names no axes", device_name, Arch::from_sm(device.sm()).str(), key.family);
  const std::string primary = key.axes.empty() ? std::string() : key.axes.front().first;
  const std::string asked_primary = key.axes.empty() ? std::string() : key.axes.front().second;
  std::set<std::string> archs_for_key, archs_for_primary, archs_for_family;
  std::set<uint32_t> majors;
  std::set<std::string, ValueLess> primary_here;
  for (const ManifestEntry& e : manifest.entries) {
    if (e.key.family != key.family) continue;
    archs_for_family.insert(e.arch.str());
    if (e.key == key) archs_for_key.insert(e.arch.str()), majors.insert(e.arch.major);
    if (e.key.axis(primary) == asked_primary) archs_for_primary.insert(e.arch.str());
    if (arch_match(e.arch, device) != ArchMatch::none) primary_here.insert(std::string(e.key.axis(primary)));
  }
  const std::string asked = fmt::format("{} {}", key.family, key.str());
  const std::string head = fmt::format("{} ({}) cannot run {}", device_name, Arch::from_sm(device.sm()).str(), asked);
  auto list = [](const auto& s, std::string_view conj = "and") {
    std::vector<std::string> v(s.begin(), s.end());
    if (v.size() == 1) return v[0];
    const std::string last = v.back();
    v.pop_back();
    return fmt::format("{} {} {}", fmt::join(v, ", "), conj, last);
  };
  std::string advice;
  if (!primary_here.empty()) {
    const std::string& max_here = *primary_here.rbegin();
    advice = value_less(max_here, asked_primary) ? fmt::format("{} <= {}", primary, max_here)
                                                 : fmt::format("a {} of {}", primary, fmt::join(primary_here, ", "));
  }
  if (archs_for_key.empty() && archs_for_primary.empty())
    return fmt::format("{}: the bundle has no {} kernel with {}={} for any GPU", head, key.family, primary, asked_primary);
  if (archs_for_key.empty()) {
    KernelKey rest = key;
    rest.axes.erase(rest.axes.begin());
    return fmt::format("{}: the bundle builds {}={} for {} but not with {}", head, primary, asked_primary, list(archs_for_primary), rest.str());
  }
  std::set<std::string> families;
  for (uint32_t m : majors) families.insert(arch_family_name(m));
  // A family none of whose kernels this device runs is the family's limit, not the size class's.
  const std::string offers = primary_here.empty() && archs_for_key == archs_for_family
                                 ? fmt::format("the {} family is built for {} only", key.family, list(archs_for_family))
                             : archs_for_key == archs_for_primary
                                 ? fmt::format("{}={} is built for {} only", primary, asked_primary, list(archs_for_key))
                                 : fmt::format("this kernel is built for {} only", list(archs_for_key));
  return fmt::format("{}: {}; use an {} GPU{}", head, offers, list(families, "or"), advice.empty() ? "" : " or " + advice);
}

}  // namespace cubinrt
