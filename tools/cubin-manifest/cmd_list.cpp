// list: the bundle's entries as a table, JSON, or the supported-combinations Markdown of docs/.
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli.hpp"
#include "common/version.hpp"

namespace cli {

namespace {

// One table a family: a row for each combination of its axes but the last, whose values each
// arch builds are listed in the arch's column (page sizes, for paged decode).
std::string markdown(const cubinrt::Manifest& m) {
  std::vector<std::string> families;
  for (const auto& e : m.entries)
    if (std::ranges::find(families, e.key.family) == families.end()) families.push_back(e.key.family);
  std::string out;
  for (const std::string& family : families) {
    std::vector<std::string> archs, axes;
    std::map<std::vector<std::string>, std::map<std::string, std::vector<std::string>>> cells;
    std::vector<std::vector<std::string>> order;
    for (const auto& e : m.entries) {
      if (e.key.family != family || e.key.axes.empty()) continue;
      if (axes.empty())
        for (const auto& [name, value] : e.key.axes) axes.push_back(name);
      if (std::ranges::find(archs, e.arch.str()) == archs.end()) archs.push_back(e.arch.str());
      std::vector<std::string> row;
      for (size_t i = 0; i + 1 < e.key.axes.size(); ++i) row.push_back(e.key.axes[i].second);
      if (!cells.contains(row)) order.push_back(row);
      auto& cell = cells[row][e.arch.str()];
      if (std::ranges::find(cell, e.key.axes.back().second) == cell.end()) cell.push_back(e.key.axes.back().second);
    }
    if (axes.empty()) continue;
    const std::string last = axes.back();
    axes.pop_back();
    if (families.size() > 1) out += fmt::format("{}{}:\n\n", out.empty() ? "" : "\n", family);
    out += fmt::format("| {} | {} |\n|", fmt::join(axes, " | "), fmt::join(archs, " | "));
    for (size_t i = 0; i < axes.size() + archs.size(); ++i) out += "---|";
    out += fmt::format("\n");
    for (const auto& row : order) {
      out += fmt::format("| {} |", fmt::join(row, " | "));
      for (const auto& a : archs) {
        const auto it = cells[row].find(a);
        out += it == cells[row].end() ? " - |" : fmt::format(" {} |", fmt::join(it->second, ", "));
      }
      out += "\n";
    }
    out += fmt::format("\nCells list the {} values built for each arch.\n", last);
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
      rows.push_back({e.arch.str(), e.key.family, e.key.str(), e.symbol, human_bytes(e.size), std::to_string(e.registers),
                      human_bytes(e.static_shared)});
    }
    if (g.json) return print_json({{"bundle", (*b)->name()}, {"entries", j}});
    fmt::print("{}", table({"arch", "family", "key", "kernel", "cubin", "regs", "smem"}, rows));
    fmt::print("{} entries in {} ({}, toolkit: {}, minimum driver CUDA {})\n", rows.size(), (*b)->name(), human_bytes((*b)->size()),
               m.toolkit, cubinrt::cuda_version_text(m.min_driver_version));
  });
}

}  // namespace cli
