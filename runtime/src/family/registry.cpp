// The families of this build (generated list, one per folder of runtime/src/families) and those
// registered at run time.
#include <algorithm>
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

void register_family(const Family& family) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  if (std::ranges::find(r.all, &family) == r.all.end()) r.all.push_back(&family);
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
