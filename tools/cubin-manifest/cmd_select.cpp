// select: which entry a device would run for a key, and why every other candidate was rejected.
#include <fmt/format.h>

#include "cli.hpp"
#include "cubinrt/paged_decode.hpp"
#include "select/select.hpp"

namespace cli {

void add_select(CLI::App& app, Global& g) {
  auto* cmd = app.add_subcommand("select", "Which entry the runtime would choose for a device, and why");
  struct Opts {
    std::string arch, q = "bf16", kv, name, family = "paged_decode";
    std::vector<std::string> axes;
    uint32_t head_dim = 0, page_size = 16;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--arch", o->arch, "The device's arch (compute capability), e.g. sm_90")->required();
  cmd->add_option("--family", o->family, "kernel family (default paged_decode)");
  cmd->add_option("--axis", o->axes, "NAME=VALUE, each axis of the key in the catalog's order (any family; replaces the paged decode options)");
  cmd->add_option("--head-dim", o->head_dim, "paged decode: head_dim");
  cmd->add_option("--q-dtype", o->q, "q dtype (fp16, bf16)");
  cmd->add_option("--kv-dtype", o->kv, "kv dtype (default: the q dtype)");
  cmd->add_option("--page-size", o->page_size, "tokens per page");
  cmd->add_option("--device-name", o->name, "name for messages (default: the arch)");
  cmd->callback([&g, o] {
    auto b = open_bundle(g.bundle);
    if (!b) return void(exit_code = report_error(g, b.error()));
    auto arch = cubinrt::Arch::parse(o->arch);
    auto q = cubinrt::parse_dtype(o->q);
    auto kv = cubinrt::parse_dtype(o->kv.empty() ? o->q : o->kv);
    if (!arch) return void(exit_code = report_error(g, arch.error()));
    if (!q) return void(exit_code = report_error(g, q.error()));
    if (!kv) return void(exit_code = report_error(g, kv.error()));
    const cubinrt::Arch device = cubinrt::Arch::from_sm(arch->sm());
    cubinrt::KernelKey key = cubinrt::decode_key(o->head_dim, *q, *kv, o->page_size);
    if (!o->axes.empty() || o->family != "paged_decode") {
      key = {o->family, {}};
      for (const std::string& a : o->axes) {
        const size_t eq = a.find('=');
        if (eq == std::string::npos || eq == 0)
          return void(exit_code = report_error(g, cubinrt::Error{cubinrt::Errc::invalid_argument, fmt::format("--axis '{}' is not NAME=VALUE", a)}));
        key.axes.emplace_back(a.substr(0, eq), a.substr(eq + 1));
      }
    } else if (o->head_dim == 0) {
      report_error(g, cubinrt::Error{cubinrt::Errc::invalid_argument, "select: give --head-dim (paged decode) or --axis NAME=VALUE"});
      return void(exit_code = kUsage);
    }
    const auto sel = cubinrt::select_entry((*b)->manifest(), device, key);
    const std::string device_name = o->name.empty() ? std::string("the device") : o->name;
    const std::string why_not = sel.chosen ? "" : cubinrt::explain_unavailable((*b)->manifest(), device_name, device, key);
    exit_code = sel.chosen ? kOk : kFailed;
    if (g.json) {
      nlohmann::ordered_json c = nlohmann::ordered_json::array();
      for (const auto& x : sel.candidates) c.push_back({{"entry", x.entry->id}, {"runs", x.match != cubinrt::ArchMatch::none}, {"reason", x.reason}});
      return print_json({{"device", device.str()}, {"key", key.str()}, {"chosen", sel.chosen ? sel.chosen->id : ""},
                         {"error", why_not}, {"candidates", c}});
    }
    // Candidates of another key are many; show the ones with this key, and count the rest.
    std::vector<std::vector<std::string>> rows;
    size_t other_keys = 0;
    for (const auto& x : sel.candidates) {
      if (!(x.entry->key == key)) { ++other_keys; continue; }
      rows.push_back({x.entry->id, x.entry == sel.chosen ? green("chosen") : x.match != cubinrt::ArchMatch::none ? "runs" : red("rejected"), x.reason});
    }
    fmt::print("device {}, {}\n", device.str(), key.str());
    if (!rows.empty()) fmt::print("{}", table({"entry", "verdict", "why"}, rows));
    fmt::print("{} entries of other keys rejected (an axis differs)\n", other_keys);
    if (sel.chosen) fmt::print("{} {}\n", green("selected"), sel.chosen->id);
    else fmt::print("{} {}\n", red("none:"), why_not);
  });
}

}  // namespace cli
