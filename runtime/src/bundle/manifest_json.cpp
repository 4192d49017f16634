// Manifest <-> JSON. Parsing checks types and required fields and never throws to the caller.
#include <cstdint>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/try.hpp"
#include "bundle/manifest.hpp"

namespace cubinrt {

namespace {

using nlohmann::ordered_json;

ordered_json axes_json(const KernelKey& key) {
  ordered_json axes = ordered_json::object();
  for (const auto& [name, value] : key.axes) axes[name] = value;
  return axes;
}

ordered_json entry_json(const ManifestEntry& e) {
  return {
      {"id", e.id},
      {"family", e.key.family},
      {"arch", e.arch.str()},
      {"axes", axes_json(e.key)},
      {"symbol", e.symbol},
      {"abi", {{"name", e.abi_name}, {"version", e.abi_version}}},
      {"sha256", e.sha256},
      {"offset", e.offset},
      {"compressed_size", e.compressed_size},
      {"size", e.size},
      {"toolkit_version", e.toolkit_version},
      {"min_driver_version", e.min_driver_version},
      {"registers", e.registers},
      {"static_shared", e.static_shared},
      {"dynamic_shared", e.dynamic_shared},
      {"max_threads", e.max_threads},
  };
}

// An unsigned field that must fit 32 bits, or its own error (nlohmann's get<uint32_t> would narrow
// 4294967297 registers to 1).
Result<uint32_t> u32(const ordered_json& j, std::string_view field, std::string_view where) {
  const ordered_json& v = j.at(std::string(field));
  if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX)
    return fail(Errc::corrupt_manifest, fmt::format("{}: '{}' is {}, not an unsigned 32-bit number", where, field, v.dump()));
  return static_cast<uint32_t>(v.get<uint64_t>());
}
// A driver version (cuDriverGetVersion's int: 13000 for CUDA 13.0).
Result<int> driver_version(const ordered_json& j, std::string_view where) {
  const uint32_t v = CUBINRT_TRY(u32(j, "min_driver_version", where));
  if (v > INT32_MAX) return fail(Errc::corrupt_manifest, fmt::format("{}: 'min_driver_version' {} is no driver version", where, v));
  return static_cast<int>(v);
}

// Version 2 keeps a key's axes in "axes" (strings, in the catalog's order); version 1 had the
// four paged-decode axes as fields of the entry.
Result<ManifestEntry> parse_entry(const ordered_json& j, uint32_t version) {
  ManifestEntry e;
  e.id = j.at("id").get<std::string>();
  e.key.family = j.at("family").get<std::string>();
  e.arch = CUBINRT_TRY(Arch::parse(j.at("arch").get<std::string>()));
  if (version == 1) {
    e.key.axes = {{"head_dim", std::to_string(j.at("head_dim").get<uint32_t>())},
                  {"q_dtype", j.at("q_dtype").get<std::string>()},
                  {"kv_dtype", j.at("kv_dtype").get<std::string>()},
                  {"page_size", std::to_string(j.at("page_size").get<uint32_t>())}};
  } else {
    const ordered_json& axes = j.at("axes");
    if (!axes.is_object()) return fail(Errc::corrupt_manifest, fmt::format("entry {}: 'axes' is not an object", e.id));
    for (const auto& [name, value] : axes.items()) e.key.axes.emplace_back(name, value.get<std::string>());
  }
  e.symbol = j.at("symbol").get<std::string>();
  e.abi_name = j.at("abi").at("name").get<std::string>();
  const std::string where = "entry " + e.id;
  e.abi_version = CUBINRT_TRY(u32(j.at("abi"), "version", where));
  e.sha256 = j.at("sha256").get<std::string>();
  e.offset = j.at("offset").get<uint64_t>();
  e.compressed_size = j.at("compressed_size").get<uint64_t>();
  e.size = j.at("size").get<uint64_t>();
  e.toolkit_version = CUBINRT_TRY(u32(j, "toolkit_version", where));
  e.min_driver_version = CUBINRT_TRY(driver_version(j, where));
  e.registers = CUBINRT_TRY(u32(j, "registers", where));
  e.static_shared = CUBINRT_TRY(u32(j, "static_shared", where));
  // Absent in manifests written before it existed.
  e.dynamic_shared = j.contains("dynamic_shared") ? CUBINRT_TRY(u32(j, "dynamic_shared", where)) : 0u;
  e.max_threads = CUBINRT_TRY(u32(j, "max_threads", where));
  if (e.sha256.size() != 64 || e.sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
    return fail(Errc::corrupt_manifest, fmt::format("entry {}: sha256 '{}' is not 64 lowercase hex digits", e.id, e.sha256));
  return e;
}

}  // namespace

std::string to_json(const ManifestEntry& entry) { return entry_json(entry).dump(); }

std::string Manifest::to_json() const {
  ordered_json entries_json = ordered_json::array();
  for (const ManifestEntry& e : entries) entries_json.push_back(entry_json(e));
  const ordered_json doc = {{"format", "cubinrt-manifest"},
                            {"version", kManifestVersion},  // always written in the current form
                            {"generator", generator},
                            {"toolkit", toolkit},
                            {"min_driver_version", min_driver_version},
                            {"entries", entries_json}};
  return doc.dump(1);
}

Result<Manifest> Manifest::parse(std::string_view text) {
  const ordered_json doc = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return fail(Errc::corrupt_manifest, "manifest: not a JSON object");
  try {
    if (doc.value("format", "") != "cubinrt-manifest")
      return fail(Errc::corrupt_manifest, "manifest: 'format' is not \"cubinrt-manifest\"");
    Manifest m;
    m.version = CUBINRT_TRY(u32(doc, "version", "manifest"));
    if (m.version != 1 && m.version != kManifestVersion)
      return fail(Errc::corrupt_manifest, fmt::format("manifest: version {} (this build reads versions 1 to {})", m.version, kManifestVersion));
    m.generator = doc.at("generator").get<std::string>();
    m.toolkit = doc.at("toolkit").get<std::string>();
    m.min_driver_version = CUBINRT_TRY(driver_version(doc, "manifest"));
    size_t index = 0;
    for (const ordered_json& j : doc.at("entries")) {
      auto e = parse_entry(j, m.version);
      if (!e) return std::unexpected(std::move(e).error().context(fmt::format("manifest entry {}", index)));
      m.entries.push_back(std::move(*e));
      ++index;
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    return fail(Errc::corrupt_manifest, fmt::format("manifest: {}", e.what()));
  }
}

const ManifestEntry* Manifest::find(std::string_view id) const {
  for (const ManifestEntry& e : entries)
    if (e.id == id) return &e;
  return nullptr;
}

}  // namespace cubinrt
