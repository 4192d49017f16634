// cubin-manifest as a user runs it: exit codes, the lines it prints, JSON, and docs kept current.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "pack/pack.hpp"
#include "support/gpu.hpp"

namespace cubinrt::test {
namespace {

struct CliRun {
  int code;
  std::string out;  // stdout and stderr
};
CliRun cli(const std::string& args) {
  const std::string cmd = std::string(CUBINRT_TEST_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}
std::string tmp(const std::string& name) { return (std::filesystem::temp_directory_path() / ("cubinrt_cli_" + name)).string(); }

TEST(Cli, VerifyEmbedded) {
  const CliRun r = cli("verify");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "OK <embedded default bundle>: all 750 entries verified (sha256, zstd, ELF, manifest vs cubin, ABI layout)\n");
}

TEST(Cli, VerifyCorruptedCopyFailsWithOneLinePerEntry) {
  auto bytes = *read_file(CUBINRT_TEST_DEFAULT_BUNDLE);
  auto b = *Bundle::open(CUBINRT_TEST_DEFAULT_BUNDLE);
  uint64_t payload = 0;
  std::memcpy(&payload, bytes.data() + 32, 8);
  std::set<uint64_t> hit;
  for (size_t i : {3u, 200u}) {
    const ManifestEntry& e = b.manifest().entries[i];
    bytes[payload + e.offset + e.compressed_size - 9] ^= std::byte{0xff};
    hit.insert(e.offset);
  }
  // Every kernel of the two damaged cubins (two families-and-archs) fails, each on its own line.
  size_t expected = 0;
  for (const ManifestEntry& e : b.manifest().entries) expected += hit.contains(e.offset);
  ASSERT_EQ(expected, 72u + 72u);
  const std::string path = tmp("corrupt.bundle");
  ASSERT_TRUE(write_file(path, bytes));
  const CliRun r = cli("verify " + path);
  EXPECT_EQ(r.code, 1);
  std::istringstream lines(r.out);
  std::string line;
  int fails = 0;
  while (std::getline(lines, line)) fails += line.rfind("FAIL bundle " + path + ": entry ", 0) == 0;
  EXPECT_EQ(fails, static_cast<int>(expected)) << r.out;
  EXPECT_NE(r.out.find(path + ": " + std::to_string(expected) + " of 750 entries failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FAIL bundle " + path + ": entry " + b.manifest().entries[200].id + ": "), std::string::npos) << r.out;
  const CliRun j = cli("--json verify " + path);
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["ok"], false);
  EXPECT_EQ(doc["failures"].size(), expected);
}

TEST(Cli, SelectExplainsHd512OnSm90AndChoosesOnSm100AndSm103) {
  const CliRun h = cli("select --arch sm_90 --head-dim 512 --q-dtype bf16 --kv-dtype fp8_e4m3 --device-name 'NVIDIA H200'");
  EXPECT_EQ(h.code, 1);
  EXPECT_NE(h.out.find("paged_decode.sm_100a.hd512.bf16.fp8_e4m3.p16  rejected  sm_100a code runs only on compute capability 10.x; the device is 9.0"),
            std::string::npos) << h.out;
  EXPECT_NE(h.out.find("none: NVIDIA H200 (sm_90) cannot run paged_decode head_dim=512 q_dtype=bf16 kv_dtype=fp8_e4m3 page_size=16: head_dim=512 is "
                       "built for sm_100a and sm_103a only; use an SM100 (Blackwell) GPU or head_dim <= 256"),
            std::string::npos) << h.out;
  const CliRun b = cli("--json select --arch sm_100 --head-dim 512 --q-dtype bf16 --kv-dtype fp8_e4m3");
  EXPECT_EQ(b.code, 0);
  EXPECT_EQ(nlohmann::json::parse(b.out)["chosen"], "paged_decode.sm_100a.hd512.bf16.fp8_e4m3.p16");
  const CliRun c = cli("--json select --arch sm_103 --head-dim 512 --q-dtype bf16 --kv-dtype fp8_e4m3");
  EXPECT_EQ(c.code, 0);
  const auto doc = nlohmann::json::parse(c.out);
  EXPECT_EQ(doc["chosen"], "paged_decode.sm_103a.hd512.bf16.fp8_e4m3.p16");
  bool saw_100a = false;
  for (const auto& cand : doc["candidates"])
    if (cand["entry"] == "paged_decode.sm_100a.hd512.bf16.fp8_e4m3.p16") {
      saw_100a = true;
      EXPECT_EQ(cand["reason"], "sm_100a ('a': arch-specific) runs only on sm_100");
    }
  EXPECT_TRUE(saw_100a);
}

TEST(Cli, ListAndShow) {
  const CliRun l = cli("--json list --arch sm_89");
  EXPECT_EQ(l.code, 0);
  EXPECT_EQ(nlohmann::json::parse(l.out)["entries"].size(), 104u);  // 72 paged_decode, 24 paged_decode_g16, 8 kv_append
  // Global options after the subcommand too, where people type them.
  const CliRun after = cli("list --arch sm_89 --json");
  EXPECT_EQ(after.code, 0) << after.out;
  EXPECT_EQ(after.out, l.out);
  const CliRun show_after = cli("show --json paged_decode.sm_120.hd64.fp16.fp8_e5m2.p32");
  EXPECT_EQ(show_after.code, 0) << show_after.out;
  EXPECT_EQ(nlohmann::json::parse(show_after.out)["entry"]["arch"], "sm_120");
  EXPECT_EQ(cli("list --no-such-option").code, 2);
  const CliRun s = cli("--json show paged_decode.sm_120.hd64.fp16.fp8_e5m2.p32");
  EXPECT_EQ(s.code, 0) << s.out;
  const auto doc = nlohmann::json::parse(s.out);
  EXPECT_EQ(doc["cubin"]["arch"], "sm_120");
  // The entry's cubin is its family and arch's: 72 kernels, this one among them.
  ASSERT_EQ(doc["cubin"]["kernels"].size(), 72u);
  bool found = false;
  for (const auto& k : doc["cubin"]["kernels"])
    if (k["name"] == "cubinrt_paged_decode_hd64_fp16_fp8_e5m2_p32") {
      found = true;
      EXPECT_EQ(k["params"].size(), 32u);
      EXPECT_EQ(k["waits_on_prior_grids"], true);  // sm_90 and later builds wait for the kernel before them
    }
  EXPECT_TRUE(found);
  // sm_89 has no griddepcontrol: its kernels state nothing and are launched in plain stream order.
  const auto ada = nlohmann::json::parse(cli("--json show paged_decode.sm_89.hd64.fp16.fp8_e5m2.p32").out);
  for (const auto& k : ada["cubin"]["kernels"]) EXPECT_EQ(k["waits_on_prior_grids"], false) << k["name"];
  const CliRun f = cli("--json show " + std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/probe.speed.fatbin");
  EXPECT_EQ(f.code, 0) << f.out;
  EXPECT_EQ(nlohmann::json::parse(f.out)["fatbin_entries"][0]["compression"], "lz4");
}

TEST(Cli, BadInputIsAClearErrorNotACrash) {
  const std::string junk = tmp("junk.bin");
  std::ofstream(junk) << "this is not a cubin";
  const CliRun r = cli("show " + junk);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "cubin-manifest: " + junk + ": not a cubin, a fatbin or an ELF object (it starts with 74 68 69 73)\n");
  // A cubin cut short: one cause, once.
  auto probe = *read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/probe.sm_90.cubin");
  probe.resize(probe.size() / 2);
  const std::string cut = tmp("cut.cubin");
  ASSERT_TRUE(write_file(cut, probe));
  const CliRun c = cli("show " + cut);
  EXPECT_EQ(c.code, 1);
  EXPECT_EQ(c.out.rfind("cubin-manifest: " + cut + ": rule inside-file: ", 0), 0u) << c.out;
  EXPECT_EQ(std::count(c.out.begin(), c.out.end(), '\n'), 1) << c.out;
  const CliRun missing = cli("verify /nonexistent/x.bundle");
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.out, "cubin-manifest: /nonexistent/x.bundle: cannot open: No such file or directory\n");
  const CliRun entry = cli("show no.such.entry");
  EXPECT_EQ(entry.code, 1);
  EXPECT_EQ(entry.out, "cubin-manifest: 'no.such.entry' is neither a file nor an entry of bundle <embedded default bundle>\n");
  EXPECT_EQ(cli("select --arch sm_90").code, 2);  // --head-dim is required
  EXPECT_EQ(cli("frobnicate").code, 2);
}

// Hostile inputs get one clear refusal and exit 1, never an abort or a hang: a directory, a named
// pipe (no read that can block), a name the OS refuses, and a cubin whose toolkit note is not
// UTF-8 shown as JSON (printed with U+FFFD, not thrown).
TEST(Cli, HostileInputsAreRefusedNotCrashedOn) {
  const std::string dir = tmp("a_directory");
  std::filesystem::create_directories(dir);
  const CliRun d = cli("show " + dir);
  EXPECT_EQ(d.code, 1) << d.out;
  EXPECT_EQ(d.out, "cubin-manifest: " + dir + ": not a regular file (a directory, pipe or device is not read)\n");
  EXPECT_EQ(cli("--bundle " + dir + " list").code, 1);
  const std::string fifo = tmp("a_fifo");
  std::filesystem::remove(fifo);
  ASSERT_EQ(std::system(("mkfifo " + fifo).c_str()), 0);
  const CliRun f = cli("show " + fifo);  // no writer: a blocking open would hang here
  EXPECT_EQ(f.code, 1) << f.out;
  EXPECT_NE(f.out.find("not a regular file"), std::string::npos) << f.out;
  std::filesystem::remove(fifo);
  const CliRun longname = cli("show " + std::string(5000, 'a'));
  EXPECT_EQ(longname.code, 1) << longname.out;
  EXPECT_NE(longname.out.find("is neither a file nor an entry of bundle"), std::string::npos) << longname.out;

  auto cubin = *read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/probe.sm_80.cubin");
  const std::string_view text(reinterpret_cast<const char*>(cubin.data()), cubin.size());
  const size_t at = text.find("Cuda compilation tools");
  ASSERT_NE(at, std::string_view::npos);
  cubin[at] = std::byte{0xff};  // not UTF-8
  const std::string bad = tmp("bad_utf8.cubin");
  ASSERT_TRUE(write_file(bad, cubin));
  const CliRun j = cli("--json show " + bad);
  EXPECT_EQ(j.code, 0) << j.out;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_NE(doc.dump().find("\xEF\xBF\xBDuda compilation tools"), std::string::npos) << j.out;  // U+FFFD, then the rest
}

// What real libraries ship: C++ kernels demangled, local ones marked, >4 KiB parameter blocks
// listed; relocatable code and LTO IR named with why they are not validated; exit 0.
TEST(Cli, ShowsEveryKernelAndEveryEntryKind) {
  const std::string dir = std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/";
  const CliRun k = cli("show " + dir + "kinds.sm_90.cubin");
  EXPECT_EQ(k.code, 0) << k.out;
  EXPECT_NE(k.out.find("kernel _Z13static_kernelPi (local)\n  static_kernel(int*)\n"), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("  (anonymous namespace)::anonymous_kernel(int*)\n"), std::string::npos) << k.out;
  EXPECT_NE(k.out.find("  void template_kernel<3>(int*)\n"), std::string::npos) << k.out;  // a template's mangling keeps its return type
  EXPECT_NE(k.out.find("  6 parameters, 8048 bytes at constant bank offset"), std::string::npos) << k.out;
  const auto doc = nlohmann::json::parse(cli("--json show " + dir + "kinds.sm_100a.cubin").out);
  for (const auto& kernel : doc["cubin"]["kernels"])
    if (kernel["name"] == "_Z13static_kernelPi") EXPECT_EQ(kernel["binding"], "local");
  const CliRun rdc = cli("show " + dir + "kinds.rdc.o");
  EXPECT_EQ(rdc.code, 0) << rdc.out;
  EXPECT_NE(rdc.out.find("relocatable entry sm_90 at offset 0"), std::string::npos) << rdc.out;
  EXPECT_NE(rdc.out.find("nvlink or the driver's linker must resolve it before it loads"), std::string::npos) << rdc.out;
  const auto lto = nlohmann::json::parse(cli("--json show " + dir + "kinds.lto.fatbin").out);
  EXPECT_EQ(lto["fatbin_entries"][0]["kind"], "lto-ir");
  EXPECT_EQ(lto["unreadable_entries"], 0);
}

// One unreadable entry: the others are listed, the entry says why, the summary says how many,
// and the exit code is 1.
TEST(Cli, AnUnreadableEntryIsReportedWhileTheOthersAreListed) {
  auto fatbin = *read_file(std::string(CUBINRT_TEST_BINARY_DIR) + "/probe/probe.none.fatbin");
  // The first entry's payload starts 16 + 64 bytes in (its header is 64 bytes or more): break its
  // ELF magic, so its cubin cannot be read.
  uint32_t header = 0;
  std::memcpy(&header, fatbin.data() + 16 + 4, 4);
  fatbin[16 + header] = std::byte{0};
  const std::string bad = tmp("one_bad_entry.fatbin");
  ASSERT_TRUE(write_file(bad, fatbin));
  const CliRun r = cli("show " + bad);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("could not be read: rule elf-magic"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernel probe_params"), std::string::npos) << r.out;  // the other cubin entry
  EXPECT_NE(r.out.find(": 1 of "), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(cli("--json show " + bad).out);
  EXPECT_EQ(doc["unreadable_entries"], 1);
}

TEST(Cli, DiffOfTwoBundles) {
  const CliRun same = cli(std::string("diff ") + CUBINRT_TEST_DEFAULT_BUNDLE + " " + CUBINRT_TEST_DEFAULT_BUNDLE);
  EXPECT_EQ(same.code, 0);
  EXPECT_EQ(same.out, "0 added, 0 removed, 0 changed\n");
  const CliRun d = cli(std::string("--json diff ") + CUBINRT_TEST_DEFAULT_BUNDLE + " " + CUBINRT_TEST_HD512_BUNDLE);
  const auto doc = nlohmann::json::parse(d.out);
  EXPECT_EQ(doc["added"].size(), 13u);
  EXPECT_EQ(doc["removed"].size(), 750u);
}

TEST(Cli, PackRebuildsTheDefaultBundleByteForByte) {
  const std::string out = tmp("repacked.bundle");
  const CliRun r = cli(std::string("pack --catalog ") + CUBINRT_TEST_CATALOG + " --cubin-dir " + CUBINRT_TEST_BUNDLE_CUBINS + " --output " + out);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(*sha256_hex(*read_file(out)), *sha256_hex(*read_file(CUBINRT_TEST_DEFAULT_BUNDLE)));
  const CliRun missing = cli(std::string("pack --catalog ") + CUBINRT_TEST_CATALOG + " --cubin-dir /tmp --output " + out);
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("catalog variant paged_decode.sm_80.hd64.fp16.fp16.p16 has no cubin: /tmp/paged_decode.sm_80.cubin: cannot open"),
            std::string::npos) << missing.out;
}

TEST(Cli, SupportedCombinationsDocIsCurrent) {
  const CliRun r = cli("list --markdown");
  ASSERT_EQ(r.code, 0);
  std::ifstream in(std::string(CUBINRT_TEST_SOURCE_DIR) + "/docs/supported.md");
  std::stringstream doc;
  doc << in.rdbuf();
  EXPECT_NE(doc.str().find(r.out), std::string::npos)
      << "docs/supported.md is out of date: regenerate its table with `cubin-manifest list --markdown`";
}

TEST(Cli, SelfcheckWithoutGpuSaysSoAndStillValidates) {
  const CliRun r = cli("selfcheck");
  if (gpu().driver) {
    EXPECT_EQ(r.code, 0) << r.out;
    return;
  }
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nstatic +pass +[0-9.]+ +750 \(all\) kernels)"))) << r.out;
  EXPECT_NE(r.out.find("750 (all) kernels: sha256, zstd, ELF, manifest vs cubin, ABI layout"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no GPU on this machine: every cubin was validated statically; the GPU steps were skipped (exit 3)"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(cli("--json selfcheck").out);
  EXPECT_EQ(doc["no_gpu"], true);
  EXPECT_EQ(doc["exit_code"], 3);
}

}  // namespace
}  // namespace cubinrt::test
