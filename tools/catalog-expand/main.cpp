// catalog-expand: writes the translation unit of one family and arch of a catalog (the build's
// one cubin a unit), or lists the catalog's variants. The build's only reader of catalog axes.
//   catalog-expand --catalog manifest/catalog.json --root . --unit paged_decode.sm_90 --output x.cu
//   catalog-expand --catalog manifest/catalog.json --list
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "catalog/catalog.hpp"

namespace {

int usage() {
  std::fputs("usage: catalog-expand --catalog FILE (--list | --root DIR --unit FAMILY.ARCH --output FILE)\n", stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string catalog_path, root, unit, output;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& into) { return i + 1 < argc ? (into = argv[++i], true) : false; };
    if (a == "--list") list = true;
    else if (a == "--catalog" ? !value(catalog_path) : a == "--root" ? !value(root) : a == "--unit" ? !value(unit) : a == "--output" ? !value(output) : true)
      return usage();
  }
  if (catalog_path.empty() || (!list && (root.empty() || unit.empty() || output.empty()))) return usage();
  auto catalog = cubinrt::Catalog::load(catalog_path);
  if (!catalog) return std::fprintf(stderr, "catalog-expand: %s\n", catalog.error().message.c_str()), 1;
  if (list) {
    for (const cubinrt::CatalogVariant& v : catalog->variants) fmt::print("{} {} {}\n", v.unit(), v.id, v.symbol);
    return 0;
  }
  if (std::ranges::none_of(catalog->variants, [&](const cubinrt::CatalogVariant& v) { return v.unit() == unit; }))
    return std::fprintf(stderr, "catalog-expand: the catalog has no variant of unit %s\n", unit.c_str()), 1;
  const std::string text = cubinrt::unit_source(*catalog, unit, root);
  // Rewritten only when the text changes: the cubins depend on this file's time.
  std::ifstream old(output);
  std::stringstream current;
  current << old.rdbuf();
  if (old && current.str() == text) return 0;
  std::ofstream out(output, std::ios::trunc);
  if (!(out << text) || !out.flush()) return std::fprintf(stderr, "catalog-expand: cannot write %s\n", output.c_str()), 1;
  return 0;
}
