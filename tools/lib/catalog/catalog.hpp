// The kernel catalog (manifest/catalog.json): data that declares every variant the build makes.
// This is the one place the catalog is expanded: the build's wrapper sources (one translation unit
// per family and arch, catalog-expand), the pack step and the tests all take variants from here.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cubinrt/error.hpp"
#include "cubinrt/types.hpp"

namespace cubinrt {

struct CatalogVariant {
  std::string id;      // "paged_decode.sm_90.hd128.bf16.fp8_e4m3.p16"
  Arch arch;
  KernelKey key;
  std::string symbol;  // the kernel entry point its cubin must define
  std::string abi_name;
  uint32_t abi_version = 0;
  std::string source;                // the family's kernel source, relative to the catalog's root
  std::vector<std::string> include;  // include directories, likewise
  // The variant's macros for the kernel source: CUBINRT_<AXIS>=<value> (dtypes by their names in
  // cubinrt/dtypes.h, CUBINRT_DTYPE_BF16), then CUBINRT_KERNEL=<symbol>, then the family's own
  // "defines".
  std::vector<std::pair<std::string, std::string>> defines;
  // The translation unit (and cubin) that holds this variant's kernel: "<family>.<arch>".
  std::string unit() const;
};

struct Catalog {
  std::vector<CatalogVariant> variants;

  static Result<Catalog> parse(std::string_view json_text, std::string_view source_name);
  static Result<Catalog> load(const std::filesystem::path& path);
};

// The source of one translation unit: every variant of `unit` compiled into one cubin, each
// under its own namespace (the kernel sources' inclusion contract, cubins/paged_decode.cu).
// `root` is where the catalog's relative source paths start.
std::string unit_source(const Catalog& catalog, std::string_view unit, const std::filesystem::path& root);

}  // namespace cubinrt
