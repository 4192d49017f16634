// Expands the catalog's groups (cross products of named axes) into variants.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catalog/catalog.hpp"
#include "common/file_io.hpp"
#include "common/try.hpp"

namespace cubinrt {

namespace {

using nlohmann::json;

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// An axis value as the catalog writes it (a number or a name) in its canonical text.
Result<std::string> value_text(const json& v) {
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_string()) return v.get<std::string>();
  return fail(Errc::corrupt_manifest, fmt::format("axis value {} is neither a non-negative number nor a name", v.dump()));
}

// How the kernel source sees a value: a number as itself, a dtype as its macro in cubinrt/dtypes.h.
Result<std::string> define_value(std::string_view axis, std::string_view value) {
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec == std::errc() && end == value.data() + value.size()) return std::string(value);
  if (parse_dtype(value)) return "CUBINRT_DTYPE_" + upper(value);
  return fail(Errc::corrupt_manifest, fmt::format("axis {}: value '{}' is neither a number nor a dtype of cubinrt/dtypes.h", axis, value));
}

struct FamilyDecl {
  std::string name, symbol, id, abi_name, source;
  uint32_t abi_version = 0;
  std::vector<std::string> axes, include;
  // Macros every variant of the family is built with, beyond its axes' (a second family of one
  // source: paged_decode_g16 is paged_decode with CUBINRT_G16).
  std::vector<std::pair<std::string, std::string>> defines;
};

// A family's "defines": {"CUBINRT_NAME": "value"}. Names are CUBINRT_ macros the build does not
// define itself (no axis macro, no CUBINRT_KERNEL or CUBINRT_VARIANT_*); values are a number or
// an identifier, so the generated unit cannot be given arbitrary text.
Status read_defines(const json& f, FamilyDecl& fam) {
  if (!f.contains("defines")) return {};
  const json& d = f.at("defines");
  if (!d.is_object()) return fail(Errc::corrupt_manifest, fmt::format("family {}: 'defines' is not an object", fam.name));
  static const std::regex name_re("CUBINRT_[A-Z0-9_]+"), value_re("[A-Za-z0-9_]+");
  for (const auto& [name, value] : d.items()) {
    const bool axis_macro = std::ranges::any_of(fam.axes, [&](const std::string& a) { return name == "CUBINRT_" + upper(a); });
    if (!std::regex_match(name, name_re) || axis_macro || name == "CUBINRT_KERNEL" || name.starts_with("CUBINRT_VARIANT"))
      return fail(Errc::corrupt_manifest, fmt::format("family {}: define '{}' is not a CUBINRT_ macro of its own (axis macros, CUBINRT_KERNEL "
                                                      "and CUBINRT_VARIANT* are the build's)", fam.name, name));
    if (!value.is_string() || !std::regex_match(value.get<std::string>(), value_re))
      return fail(Errc::corrupt_manifest, fmt::format("family {}: define {} must be a number or an identifier, as a string", fam.name, name));
    fam.defines.emplace_back(name, value.get<std::string>());
  }
  return {};
}

// Every combination of the group's axis values, in the family's axis order (the last varies
// fastest). "same_as:<axis>" takes the value of an earlier axis of the same combination.
Status expand_group(const FamilyDecl& fam, const json& g, Catalog& catalog, std::set<std::string>& ids, std::set<std::string>& keys,
                    std::set<std::string>& symbols) {
  for (const auto& [name, values] : g.items())
    if (name != "why" && name != "arch" && std::ranges::find(fam.axes, name) == fam.axes.end())
      return fail(Errc::corrupt_manifest, fmt::format("family {}: a group names axis '{}', which is not one of the family's axes", fam.name, name));
  std::vector<std::vector<std::string>> lists;
  for (const std::string& axis : fam.axes) {
    if (!g.contains(axis)) return fail(Errc::corrupt_manifest, fmt::format("family {}: a group lacks axis '{}'", fam.name, axis));
    std::vector<std::string> list;
    for (const json& v : g.at(axis)) list.push_back(CUBINRT_TRY(value_text(v)));
    if (list.empty()) return fail(Errc::corrupt_manifest, fmt::format("family {}: a group lists no value of axis '{}'", fam.name, axis));
    lists.push_back(std::move(list));
  }
  for (const json& arch_json : g.at("arch")) {
    const std::string arch_text = arch_json.get<std::string>();
    const Arch arch = CUBINRT_TRY(Arch::parse(arch_text));
    // Unit and file names are made from the arch's text, here and in the build: one spelling.
    if (arch.str() != arch_text)
      return fail(Errc::corrupt_manifest, fmt::format("family {}: arch '{}' is not written as '{}'", fam.name, arch_text, arch.str()));
    std::vector<size_t> at(lists.size(), 0);
    for (;;) {
      CatalogVariant v;
      v.arch = arch;
      v.key.family = fam.name;
      for (size_t i = 0; i < lists.size(); ++i) {
        std::string value = lists[i][at[i]];
        if (value.starts_with("same_as:")) {
          const std::string_view ref = std::string_view(value).substr(8);
          const std::string_view earlier = v.key.axis(ref);
          if (earlier.empty())
            return fail(Errc::corrupt_manifest, fmt::format("family {}: axis {} says {}, but '{}' is not an earlier axis", fam.name, fam.axes[i], value, ref));
          value = std::string(earlier);
        }
        v.key.axes.emplace_back(fam.axes[i], value);
      }
      std::string id = fam.id, symbol = fam.symbol;
      for (const auto& [axis, value] : v.key.axes) {
        id = replace_all(id, "{" + axis + "}", value);
        symbol = replace_all(symbol, "{" + axis + "}", value);
        v.defines.emplace_back("CUBINRT_" + upper(axis), CUBINRT_TRY(define_value(axis, value)));
      }
      v.id = fmt::format("{}.{}.{}", fam.name, arch.str(), id);
      v.symbol = symbol;
      v.defines.emplace_back("CUBINRT_KERNEL", symbol);
      v.defines.insert(v.defines.end(), fam.defines.begin(), fam.defines.end());
      v.abi_name = fam.abi_name;
      v.abi_version = fam.abi_version;
      v.source = fam.source;
      v.include = fam.include;
      if (v.id.find('{') != std::string::npos || v.symbol.find('{') != std::string::npos)
        return fail(Errc::corrupt_manifest, fmt::format("family {}: id '{}' or symbol '{}' names an axis the family does not have", fam.name, v.id, v.symbol));
      if (!ids.insert(v.id).second) return fail(Errc::corrupt_manifest, fmt::format("variant {} is declared twice", v.id));
      // One kernel a key and arch, one symbol a unit: an id or symbol pattern that leaves out an
      // axis would make two variants of one name.
      if (!keys.insert(fmt::format("{} {} {}", v.arch.str(), v.key.family, v.key.str())).second)
        return fail(Errc::corrupt_manifest, fmt::format("family {}: key {} is declared twice for {}", fam.name, v.key.str(), v.arch.str()));
      if (!symbols.insert(v.unit() + " " + v.symbol).second)
        return fail(Errc::corrupt_manifest, fmt::format("family {}: symbol {} names two variants of {} (the symbol pattern must name every axis)",
                                                        fam.name, v.symbol, v.unit()));
      catalog.variants.push_back(std::move(v));
      // Next combination: the last axis fastest.
      size_t i = lists.size();
      while (i > 0 && ++at[i - 1] == lists[i - 1].size()) at[--i] = 0;
      if (i == 0) break;
    }
  }
  return {};
}

Result<Catalog> expand(const json& doc) {
  if (doc.value("format", "") != "cubinrt-catalog" || doc.value("version", 0) != 2)
    return fail(Errc::corrupt_manifest, "not a cubinrt-catalog version 2 document");
  Catalog catalog;
  std::set<std::string> ids, keys, symbols;
  for (const json& f : doc.at("families")) {
    FamilyDecl fam;
    fam.name = f.at("name");
    fam.symbol = f.at("symbol");
    fam.id = f.at("id");
    fam.source = f.at("source");
    fam.abi_name = f.at("abi").at("name");
    fam.abi_version = f.at("abi").at("version");
    fam.axes = f.at("axes").get<std::vector<std::string>>();
    fam.include = f.value("include", std::vector<std::string>{});
    if (fam.axes.empty()) return fail(Errc::corrupt_manifest, fmt::format("family {} declares no axes", fam.name));
    // Each axis becomes the macro CUBINRT_<AXIS>: a C identifier, and none the build defines itself.
    static const std::regex identifier("[a-z][a-z0-9_]*");
    for (const std::string& a : fam.axes)
      if (!std::regex_match(a, identifier) || a == "kernel" || a.starts_with("variant") || std::ranges::count(fam.axes, a) != 1)
        return fail(Errc::corrupt_manifest, fmt::format("family {}: axis '{}' is not a lowercase identifier, is reserved (kernel, variant*) or "
                                                        "is named twice", fam.name, a));
    CUBINRT_TRY(read_defines(f, fam));
    if (f.at("groups").empty()) return fail(Errc::corrupt_manifest, fmt::format("family {} has no groups", fam.name));
    for (const json& g : f.at("groups")) CUBINRT_TRY(expand_group(fam, g, catalog, ids, keys, symbols));
  }
  return catalog;
}

}  // namespace

std::string CatalogVariant::unit() const { return fmt::format("{}.{}", key.family, arch.str()); }

Result<Catalog> Catalog::parse(std::string_view text, std::string_view source_name) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return fail(Errc::corrupt_manifest, fmt::format("catalog {}: not valid JSON", source_name));
  try {
    auto catalog = expand(doc);
    if (!catalog) return std::unexpected(std::move(catalog).error().context(fmt::format("catalog {}", source_name)));
    return catalog;
  } catch (const json::exception& e) {
    return fail(Errc::corrupt_manifest, fmt::format("catalog {}: {}", source_name, e.what()));
  }
}

Result<Catalog> Catalog::load(const std::filesystem::path& path) {
  const auto bytes = CUBINRT_TRY(read_file(path));
  return parse(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
}

std::string unit_source(const Catalog& catalog, std::string_view unit, const std::filesystem::path& root) {
  std::string out = fmt::format("// Generated by catalog-expand from the catalog: every variant of {}, one namespace each.\n"
                                "#include \"cubinrt/dtypes.h\"\n",
                                unit);
  size_t n = 0;
  for (const CatalogVariant& v : catalog.variants) {
    if (v.unit() != unit) continue;
    out += fmt::format("\n// {}\n#define CUBINRT_VARIANT_NS cubinrt_variant_{}\n", v.id, n++);
    for (const auto& [name, value] : v.defines) out += fmt::format("#define {} {}\n", name, value);
    out += fmt::format("#define CUBINRT_VARIANT_KEY \"{}\"\n", v.key.str());
    out += fmt::format("#include \"{}\"\n#undef CUBINRT_VARIANT_NS\n#undef CUBINRT_VARIANT_KEY\n", (root / v.source).lexically_normal().string());
    for (const auto& [name, value] : v.defines) out += fmt::format("#undef {}\n", name);
  }
  return out;
}

}  // namespace cubinrt
