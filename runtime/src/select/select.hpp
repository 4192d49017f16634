// Which cubin of a bundle a device would run for a key, and why each other one would not.
// One implementation serves the runtime's loader and the inspector's `select`.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "bundle/manifest.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt {

// How well a cubin's arch fits a device; higher is better, none = cannot run.
enum class ArchMatch { none = 0, lower_minor = 1, family = 2, exact = 3 };

// The compatibility rules: a plain cubin runs on its major arch at an equal or higher minor;
// 'a' only on its exact arch; 'f' on its family (same major, equal or higher minor).
// `why` says, for none, which rule stops it.
ArchMatch arch_match(const Arch& cubin, const Arch& device, std::string* why = nullptr);

struct Candidate {
  const ManifestEntry* entry = nullptr;
  ArchMatch match = ArchMatch::none;
  std::string reason;  // why it was rejected, or why it was chosen
};

struct Selection {
  const ManifestEntry* chosen = nullptr;
  std::vector<Candidate> candidates;  // every entry of the key's family, in manifest order
};

// What the device would run for `key`. A candidate of another key is rejected with the field
// that differs; of the right key, by the arch rules; the best match wins.
// The best of these entries (all of one key) for the device, or null: the rule that both
// select_entry and the runtime apply.
const ManifestEntry* best_entry(std::span<const ManifestEntry* const> same_key, const Arch& device);

// With explain = false only `chosen` is filled (the loader's path: no strings are made).
Selection select_entry(const Manifest& manifest, const Arch& device, const KernelKey& key, bool explain = true);

// One sentence for the engine when nothing fits: names the device, what was asked and what the
// bundle offers for it instead (derived from the bundle's entries, never from a fixed list).
std::string explain_unavailable(const Manifest& manifest, std::string_view device_name, const Arch& device,
                                const KernelKey& key);

// "SM100 (Blackwell)" and the like, for messages.
std::string arch_family_name(uint32_t major);

}  // namespace cubinrt
