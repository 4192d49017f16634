// selfcheck: the start-up self-check as a command. Exit 0 all passed, 1 a step failed,
// 3 no GPU here (every static step passed; the GPU steps were skipped).
#include <fmt/format.h>

#include "cli.hpp"
#include "cubinrt/selfcheck.hpp"

namespace cli {

void add_selfcheck(CLI::App& app, Global& g) {
  auto* cmd = app.add_subcommand("selfcheck", "Check that this machine's driver, GPU and the bundle work together");
  struct Opts {
    int device = 0;
    bool quick = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--device", o->device, "CUDA device ordinal");
  cmd->add_flag("--quick", o->quick, "Only the static and load steps (no known-answer launches)");
  cmd->callback([&g, o] {
    cubinrt::SelfCheckOptions so;
    so.runtime.device_ordinal = o->device;
    so.known_answer = !o->quick;
    if (!g.bundle.empty()) so.runtime.bundle_path = g.bundle;
    else {
      auto b = default_bundle();
      if (!b) return void(exit_code = report_error(g, b.error()));
      so.runtime.bundle = std::make_shared<const cubinrt::Bundle>(std::move(*b));
    }
    const cubinrt::SelfCheckReport r = cubinrt::run_selfcheck(so);
    const bool static_ok = std::ranges::none_of(r.steps, [](const auto& s) { return s.status == cubinrt::StepStatus::fail; });
    exit_code = r.passed ? kOk : (r.no_gpu && static_ok) ? kNoGpu : kFailed;
    auto name = [](cubinrt::StepStatus s) { return s == cubinrt::StepStatus::pass ? "pass" : s == cubinrt::StepStatus::fail ? "FAIL" : "skipped"; };
    if (g.json) {
      nlohmann::ordered_json steps = nlohmann::ordered_json::array();
      for (const auto& s : r.steps) steps.push_back({{"step", s.name}, {"status", name(s.status)}, {"ms", s.ms}, {"detail", s.detail}});
      return print_json({{"passed", r.passed}, {"no_gpu", r.no_gpu}, {"exit_code", exit_code}, {"total_ms", r.total_ms}, {"steps", steps}});
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& s : r.steps) {
      const std::string st = s.status == cubinrt::StepStatus::pass ? green("pass") : s.status == cubinrt::StepStatus::fail ? red("FAIL") : "skipped";
      rows.push_back({s.name, st, fmt::format("{:.1f}", s.ms), s.detail});
    }
    fmt::print("{}", table({"step", "status", "ms", "detail"}, rows));
    if (r.passed) fmt::print("{} self-check passed in {:.1f} ms\n", green("OK"), r.total_ms);
    else if (exit_code == kNoGpu) fmt::print("no GPU on this machine: every cubin was validated statically; the GPU steps were skipped (exit {})\n", kNoGpu);
    else fmt::print("{} self-check failed\n", red("FAIL"));
  });
}

}  // namespace cli
