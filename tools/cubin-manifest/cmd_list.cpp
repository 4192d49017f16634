// list: the bundle's entries as a table, JSON, or the supported-combinations Markdown of docs/.
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli.hpp"

namespace cli {

namespace {

std::string markdown(const cubinrt::Manifest& m) {
  std::vector<std::string> archs;
  std::map<std::tuple<uint32_t, std::string, std::string>, std::map<std::string, std::set<uint32_t>>> cells;
  for (const auto& e : m.entries) {
    if (std::ranges::find(archs, e.arch.str()) == archs.end()) archs.push_back(e.arch.str());
    cells[{e.key.head_dim, std::string(cubinrt::dtype_name(e.key.q_dtype)), std::string(cubinrt::dtype_name(e.key.kv_dtype))}][e.arch.str()].insert(e.key.page_size);
  }
  std::string out = fmt::format("| head_dim | q | kv | {} |\n|---|---|---|", fmt::join(archs, " | "));
  for (size_t i = 0; i < archs.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& [key, per_arch] : cells) {
    out += fmt::format("| {} | {} | {} |", std::get<0>(key), std::get<1>(key), std::get<2>(key));
    for (const auto& a : archs) {
      const auto it = per_arch.find(a);
      out += it == per_arch.end() ? " - |" : fmt::format(" {} |", fmt::join(it->second, ", "));
    }
    out += "\n";
  }
  return out;
}

}  // namespace

void add_list(CLI::App& app, Global& g) {
  auto* cmd = app.add_subcommand("list", "Table of the bundle's entries");
  auto md = std::make_shared<bool>(false);
  auto arch = std::make_shared<std::string>();
  cmd->add_flag("--markdown", *md, "Write the supported-combinations table kept in docs/supported.md");
  cmd->add_option("--arch", *arch, "Only entries of this arch (e.g. sm_90)");
  cmd->callback([&g, md, arch] {
    auto b = open_bundle(g.bundle);
    if (!b) return void(exit_code = report_error(g, b.error()));
    const auto& m = (*b)->manifest();
    if (*md) return void(fmt::print("{}", markdown(m)));
    std::vector<std::vector<std::string>> rows;
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& e : m.entries) {
      if (!arch->empty() && e.arch.str() != *arch) continue;
      j.push_back(entry_json(e));
      rows.push_back({e.arch.str(), std::to_string(e.key.head_dim), std::string(cubinrt::dtype_name(e.key.q_dtype)),
                      std::string(cubinrt::dtype_name(e.key.kv_dtype)), std::to_string(e.key.page_size), e.symbol,
                      human_bytes(e.size), std::to_string(e.registers), human_bytes(e.static_shared)});
    }
    if (g.json) return print_json({{"bundle", (*b)->name()}, {"entries", j}});
    fmt::print("{}", table({"arch", "head_dim", "q", "kv", "page", "kernel", "size", "regs", "smem"}, rows));
    fmt::print("{} entries in {} ({}, toolkit: {}, minimum driver CUDA {})\n", rows.size(), (*b)->name(), human_bytes((*b)->size()),
               m.toolkit, cubinrt::cuda_version_text(m.min_driver_version));
  });
}

}  // namespace cli
