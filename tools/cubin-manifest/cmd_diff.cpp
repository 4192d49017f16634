// diff A B: entries added, removed and changed between two bundles.
#include <fmt/format.h>

#include "cli.hpp"

namespace cli {

void add_diff(CLI::App& app, Global& g) {
  auto* cmd = app.add_subcommand("diff", "What changed between two bundles");
  auto a = std::make_shared<std::string>(), b = std::make_shared<std::string>();
  cmd->add_option("a", *a, "Old bundle")->required();
  cmd->add_option("b", *b, "New bundle")->required();
  cmd->callback([&g, a, b] {
    auto ba = open_bundle(*a);
    if (!ba) return void(exit_code = report_error(g, ba.error()));
    auto bb = open_bundle(*b);
    if (!bb) return void(exit_code = report_error(g, bb.error()));
    nlohmann::ordered_json added = nlohmann::ordered_json::array(), removed = added, changed = added;
    for (const auto& e : (*bb)->manifest().entries) {
      const auto* old = (*ba)->manifest().find(e.id);
      if (old == nullptr) { added.push_back(e.id); continue; }
      std::vector<std::string> what;
      if (old->sha256 != e.sha256) what.push_back("cubin (sha256)");
      if (old->symbol != e.symbol) what.push_back(fmt::format("symbol {} -> {}", old->symbol, e.symbol));
      if (old->abi_version != e.abi_version || old->abi_name != e.abi_name) what.push_back(fmt::format("ABI {} v{} -> {} v{}", old->abi_name, old->abi_version, e.abi_name, e.abi_version));
      if (old->registers != e.registers) what.push_back(fmt::format("registers {} -> {}", old->registers, e.registers));
      if (old->static_shared != e.static_shared) what.push_back(fmt::format("static shared {} -> {}", old->static_shared, e.static_shared));
      if (old->dynamic_shared != e.dynamic_shared) what.push_back(fmt::format("dynamic shared {} -> {}", old->dynamic_shared, e.dynamic_shared));
      if (old->min_driver_version != e.min_driver_version) what.push_back(fmt::format("minimum driver {} -> {}", old->min_driver_version, e.min_driver_version));
      if (!what.empty()) changed.push_back({{"entry", e.id}, {"changes", what}});
    }
    for (const auto& e : (*ba)->manifest().entries)
      if ((*bb)->manifest().find(e.id) == nullptr) removed.push_back(e.id);
    const bool same = added.empty() && removed.empty() && changed.empty();
    exit_code = kOk;
    if (g.json) return print_json({{"a", *a}, {"b", *b}, {"same", same}, {"added", added}, {"removed", removed}, {"changed", changed}});
    for (const auto& id : added) fmt::print("{} {}\n", green("+"), id.get<std::string>());
    for (const auto& id : removed) fmt::print("{} {}\n", red("-"), id.get<std::string>());
    for (const auto& c : changed) {
      std::string list;
      for (const auto& w : c["changes"]) list += (list.empty() ? "" : "; ") + w.get<std::string>();
      fmt::print("~ {}: {}\n", c["entry"].get<std::string>(), list);
    }
    fmt::print("{} added, {} removed, {} changed\n", added.size(), removed.size(), changed.size());
  });
}

}  // namespace cli
