// The families of this build (generated list, one per folder of runtime/src/families) and those
// registered at run time.
#include <algorithm>
#include <charconv>
#include <mutex>

#include <fmt/format.h>

#include "family/family.hpp"

namespace cubinrt {

namespace family_modules {
#define CUBINRT_FAMILY(name) const Family& name();
#include "cubinrt_families.inc"
#undef CUBINRT_FAMILY
}  // namespace family_modules

namespace {

struct Registry {
  std::mutex mu;
  std::vector<const Family*> all;
  Registry() {
#define CUBINRT_FAMILY(name) all.push_back(&family_modules::name());
#include "cubinrt_families.inc"
#undef CUBINRT_FAMILY
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::vector<const Family*> families() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  return r.all;
}

const Family* find_family(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const Family* f : r.all)
    if (f->name() == name) return f;
  return nullptr;
}

Status register_family(const Family& family) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (const Family* f : r.all) {
    if (f == &family) return {};
    if (f->name() == family.name())
      return fail(Errc::invalid_argument, fmt::format("kernel family '{}' is already registered (another module of that name)", family.name()));
  }
  r.all.push_back(&family);
  return {};
}

Status check_key(const KernelKey& key) {
  const Family* f = find_family(key.family);
  if (f == nullptr) return std::unexpected(find_abi(key.family, "", 0).error());  // names the known families
  const auto axes = f->axes();
  bool same = axes.size() == key.axes.size();
  for (size_t i = 0; same && i < axes.size(); ++i) same = axes[i] == key.axes[i].first;
  if (same) return {};
  std::string want;
  for (std::string_view a : axes) want += fmt::format("{}{}", want.empty() ? "" : ", ", a);
  return fail(Errc::invalid_argument, fmt::format("kernel key '{}' of family {}: the family's axes are {}, in this order",
                                                  key.str(), key.family, want));
}

Result<uint32_t> axis_number(const KernelKey& key, std::string_view axis) {
  const std::string_view text = key.axis(axis);
  uint32_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return fail(Errc::invalid_argument, fmt::format("{} key '{}': axis {} is not a number", key.family, key.str(), axis));
  return n;
}

Result<const AbiLayout*> find_abi(std::string_view family, std::string_view abi_name, uint32_t abi_version) {
  const Family* f = find_family(family);
  if (f == nullptr) {
    std::string known;
    for (const Family* g : families()) known += fmt::format("{}{}", known.empty() ? "" : ", ", g->name());
    return fail(Errc::mismatch, fmt::format("kernel family '{}' is unknown to this build of cubinrt (it knows {})", family, known));
  }
  std::string known;
  for (const AbiLayout* abi : f->abis()) {
    if (abi->name == abi_name && abi->version == abi_version) return abi;
    known += fmt::format("{}{} v{}", known.empty() ? "" : ", ", abi->name, abi->version);
  }
  return fail(Errc::mismatch, fmt::format("parameter ABI {} v{} of family {} is unknown to this build of cubinrt (it knows {})", abi_name,
                                          abi_version, family, known));
}

}  // namespace cubinrt
