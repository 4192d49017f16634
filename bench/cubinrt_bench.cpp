// cubinrt_bench: performance on a real GPU against ceilings measured in the same run.
//   ceilings: device-to-device copy bandwidth (bytes read + written), a read-only kernel, and a
//             bare kernel launch, both back to back and single (timed as the decode "time" is);
//   decode:   the shapes, KV bytes read per second over the copy bandwidth;
//   init:     Runtime::create of the default bundle over a bare cuLibraryLoadData+GetKernel loop;
//   selfcheck: the full and quick self-check.
// Prints a table; with CUBINRT_BENCH_MD=<file> also appends Markdown rows. Never a test.
#include <algorithm>
#include <array>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <optional>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <span>
#include <type_traits>
#include <thread>
#include <vector>

#include <dlfcn.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bundle/bundle.hpp"
#include "common/file_io.hpp"
#include "common/kv_strides.hpp"
#include "common/version.hpp"
#include "driver/driver.hpp"
#include "driver/launch_attributes.hpp"
#include "loader/loaded_kernel.hpp"
#include "cubinrt/kv_append.hpp"
#include "cubinrt/paged_decode.hpp"
#include "select/select.hpp"
#include "cubinrt/selfcheck.hpp"

using namespace cubinrt;

namespace {

const DriverApi* g_d = nullptr;
std::string g_md;

void check(CUresult r, const char* call) {
  if (r != CUDA_SUCCESS) {
    fmt::print(stderr, "{}\n", g_d->describe(call, r));
    std::exit(1);
  }
}
// A launch (or other step) that failed ends the benchmark with its message.
void ok_or_die(const Status& s) {
  if (!s) {
    fmt::print(stderr, "{}\n", s.error().message);
    std::exit(1);
  }
}
template <class T>
T value_or_die(Result<T> r, const char* what) {
  if (!r) {
    fmt::print(stderr, "{}: {}\n", what, r.error().message);
    std::exit(1);
  }
  return std::move(*r);
}
void md(const std::string& line) {
  fmt::print("{}\n", line);
  g_md += line + "\n";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Events {
  CUevent a = nullptr, b = nullptr;
  Events() {
    check(g_d->cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
    check(g_d->cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  ~Events() {
    g_d->cuEventDestroy(a);
    g_d->cuEventDestroy(b);
  }
  // Milliseconds of `body` on `stream` (default the null stream), timed with events.
  template <class F>
  double time(F&& body, CUstream stream = nullptr) {
    check(g_d->cuEventRecord(a, stream), "cuEventRecord");
    body();
    check(g_d->cuEventRecord(b, stream), "cuEventRecord");
    check(g_d->cuEventSynchronize(b), "cuEventSynchronize");
    float ms = 0;
    check(g_d->cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
    return ms;
  }
};

// CUDA-graph entry points for the replay timings (the runtime's table has none: a launch never
// needs them), resolved from the same libcuda through cuGetProcAddress.
struct GraphApi {
  CUresult (*stream_create)(CUstream*, unsigned) = nullptr;
  CUresult (*stream_destroy)(CUstream) = nullptr;
  CUresult (*begin_capture)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*end_capture)(CUstream, CUgraph*) = nullptr;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*launch)(CUgraphExec, CUstream) = nullptr;
  CUresult (*exec_destroy)(CUgraphExec) = nullptr;
  CUresult (*graph_destroy)(CUgraph) = nullptr;
  CUresult (*stream_sync)(CUstream) = nullptr;
};

GraphApi load_graph_api(const DriverApi& d) {
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get = reinterpret_cast<GetProc>(dlsym(d.handle, "cuGetProcAddress_v2"));
  if (get == nullptr) {
    fmt::print(stderr, "cuGetProcAddress_v2 not found\n");
    std::exit(1);
  }
  GraphApi g;
  auto bind = [&](const char* name, auto& fn) {
    void* p = nullptr;
    CUdriverProcAddressQueryResult found{};
    check(get(name, &p, 12040, CU_GET_PROC_ADDRESS_DEFAULT, &found), name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  bind("cuStreamCreate", g.stream_create);
  bind("cuStreamDestroy", g.stream_destroy);
  bind("cuStreamBeginCapture", g.begin_capture);
  bind("cuStreamEndCapture", g.end_capture);
  bind("cuGraphInstantiateWithFlags", g.instantiate);
  bind("cuGraphLaunch", g.launch);
  bind("cuGraphExecDestroy", g.exec_destroy);
  bind("cuGraphDestroy", g.graph_destroy);
  bind("cuStreamSynchronize", g.stream_sync);
  return g;
}

// Microseconds a launch under CUDA-graph replay: `launch(stream)` captured 100 times into one
// graph, the graph replayed 20 times; the median of 5 such timings, over 100 launches each.
template <class F>
double replay_us(const GraphApi& g, Events& ev, F&& launch) {
  constexpr int kCaptured = 100, kReplays = 20;
  CUstream s = nullptr;
  check(g.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  check(g.begin_capture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  for (int i = 0; i < kCaptured; ++i) launch(s);
  CUgraph graph = nullptr;
  check(g.end_capture(s, &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  check(g.instantiate(&exec, graph, 0), "cuGraphInstantiateWithFlags");
  check(g.launch(exec, s), "cuGraphLaunch");
  check(g.stream_sync(s), "cuStreamSynchronize");
  std::vector<double> per;
  for (int rep = 0; rep < 5; ++rep)
    per.push_back(ev.time([&] { for (int i = 0; i < kReplays; ++i) check(g.launch(exec, s), "cuGraphLaunch"); }, s) * 1e3 / (kReplays * kCaptured));
  g.exec_destroy(exec);
  g.graph_destroy(graph);
  g.stream_destroy(s);
  return median(per);
}

struct BenchKernels {
  CUlibrary lib = nullptr;
  CUfunction empty = nullptr, fill16 = nullptr, fill8 = nullptr, read = nullptr, spin = nullptr;
};

BenchKernels load_bench_kernels(const std::string& path) {
  auto bytes = value_or_die(read_file(path), "bench kernels");
  BenchKernels k;
  check(g_d->cuLibraryLoadData(&k.lib, bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData(bench)");
  auto get = [&](const char* name) {
    CUkernel kern = nullptr;
    CUfunction f = nullptr;
    check(g_d->cuLibraryGetKernel(&kern, k.lib, name), "cuLibraryGetKernel(bench)");
    check(g_d->cuKernelGetFunction(&f, kern), "cuKernelGetFunction(bench)");
    return f;
  };
  k.empty = get("bench_empty");
  k.fill16 = get("bench_fill16");
  k.fill8 = get("bench_fill8");
  k.read = get("bench_read");
  k.spin = get("bench_spin");
  return k;
}

void fill(const BenchKernels& k, CUdeviceptr p, uint64_t elems, int bits, Dtype d, uint64_t seed) {
  int bf16 = d == Dtype::bf16;
  void* args16[] = {&p, &elems, &seed, &bf16};
  void* args8[] = {&p, &elems, &seed};
  check(g_d->cuLaunchKernel(bits == 16 ? k.fill16 : k.fill8, 1024, 1, 1, 256, 1, 1, 0, nullptr, bits == 16 ? args16 : args8, nullptr), "cuLaunchKernel(fill)");
}

struct Ceilings {
  double copy_tbps = 0;   // (read + write) bytes / s
  double read_tbps = 0;   // bytes read / s by a kernel that only reads
  double launch_us = 0;   // back-to-back empty kernel launches
  double single_us = 0;   // one empty kernel launch between two events, as the decode "time" column
  double queued_us = 0;   // the same launch queued behind a busy kernel, as the decode "device us" column
};

// Milliseconds of one launch queued behind half a millisecond of busy GPU (bench_spin, 10^6
// clocks): the device's time for it, the host's launch latency hidden (FlashInfer's "gpu us").
template <class F>
double queued_time(const BenchKernels& k, Events& ev, F&& launch) {
  long long cycles = 1'000'000;
  void* args[] = {&cycles};
  check(g_d->cuLaunchKernel(k.spin, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), "cuLaunchKernel(spin)");
  return ev.time(launch);
}

Ceilings measure_ceilings(const BenchKernels& k, int multiprocessors) {
  Ceilings c;
  const size_t bytes = size_t{2} << 30;
  CUdeviceptr a = 0, b = 0;
  check(g_d->cuMemAlloc(&a, bytes), "cuMemAlloc");
  check(g_d->cuMemAlloc(&b, bytes), "cuMemAlloc");
  fill(k, a, bytes / 2, 16, Dtype::bf16, 1);
  Events ev;
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) ms.push_back(ev.time([&] { check(g_d->cuMemcpyDtoD(b, a, bytes), "cuMemcpyDtoD"); }));
  c.copy_tbps = 2.0 * bytes / (median(ms) * 1e-3) / 1e12;
  // The read-only ceiling, over the same 2 GiB: a full multiprocessor's threads on each.
  const unsigned read_blocks = 4 * static_cast<unsigned>(multiprocessors), read_threads = 512;
  CUdeviceptr sink = 0;
  check(g_d->cuMemAlloc(&sink, size_t{read_blocks} * read_threads * 4), "cuMemAlloc");
  uint64_t words = bytes / 16;
  void* read_args[] = {&a, &words, &sink};
  ms.clear();
  for (int i = 0; i < 12; ++i)
    ms.push_back(ev.time([&] { check(g_d->cuLaunchKernel(k.read, read_blocks, 1, 1, read_threads, 1, 1, 0, nullptr, read_args, nullptr), "cuLaunchKernel(read)"); }));
  c.read_tbps = double(bytes) / (median(ms) * 1e-3) / 1e12;
  g_d->cuMemFree(sink);
  g_d->cuMemFree(a);
  g_d->cuMemFree(b);
  auto launch_empty = [&] { check(g_d->cuLaunchKernel(k.empty, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr), "cuLaunchKernel(empty)"); };
  constexpr int kLaunches = 2000;
  std::vector<double> per;
  for (int rep = 0; rep < 5; ++rep)
    per.push_back(ev.time([&] {
      for (int i = 0; i < kLaunches; ++i) launch_empty();
    }) * 1e3 / kLaunches);
  c.launch_us = median(per);
  std::vector<double> single;
  for (int i = 0; i < 25; ++i) single.push_back(ev.time(launch_empty) * 1e3);
  c.single_us = median(single);
  single.clear();
  for (int i = 0; i < 25; ++i) single.push_back(queued_time(k, ev, launch_empty) * 1e3);
  c.queued_us = median(single);
  return c;
}

struct Shape {
  const char* name;
  uint32_t batch, len, hq, hk, d, page;
  uint32_t splits = 0;  // 0: the planner's choice; else forced, to check that choice
  KvLayout layout = KvLayout::nhd;
  SplitMerge merge = SplitMerge::choose;
};

// One decode shape on the current device: its KV filled (random, in range for its dtype), pages
// shuffled, every sequence at full length, and its plan; freed with it.
struct DecodeSetup {
  DecodePlan plan;
  DecodeArgs args;
  std::vector<CUdeviceptr> owned;
  double kv_bytes = 0;  // K and V bytes a launch reads
  DecodeSetup(DecodePlan p, std::vector<CUdeviceptr> o) : plan(std::move(p)), owned(std::move(o)) {}
  DecodeSetup(const DecodeSetup&) = delete;
  ~DecodeSetup() {
    for (CUdeviceptr p : owned) g_d->cuMemFree(p);
  }
  void launch(CUstream stream = nullptr) const { ok_or_die(plan.launch(args, stream)); }
};

// Whether the decode plans' launches overlap the kernel before them (--overlap; the runtime's
// default is allow). The graph-replay table times both in the same process.
LaunchOverlap g_overlap = LaunchOverlap::allow;
// The order of NVFP4's V scales (--v-sf-order): interleaved4 times the kernels that read
// TensorRT-LLM's order (SM100 only; on the H200 their sm_90 builds in the test bundle).
ScaleOrder g_v_sf_order = ScaleOrder::linear;
ScaleOrder v_sf_order_of(Dtype kv) { return kv == Dtype::nvfp4 ? g_v_sf_order : ScaleOrder::linear; }
// Where NVFP4's scale rows lie (--sf-layout): with the codes' layout (the default), or forced to NHD
// or HND whatever the codes' layout, so that one call can tell the scale reads' share of a
// layout's cost from the codes'.
std::optional<KvLayout> g_sf_layout;
KernelKey bench_key(const Shape& s, Dtype kv) {
  return v_sf_order_of(kv) == ScaleOrder::interleaved4 ? decode_vsf_interleaved_key(s.d, Dtype::bf16, s.page) : decode_key(s.d, Dtype::bf16, kv, s.page);
}

std::unique_ptr<DecodeSetup> make_setup(const Runtime& rt, const BenchKernels& k, const Shape& s, Dtype kv, LaunchOverlap overlap = g_overlap) {
  const bool fp8 = dtype_bits(kv) == 8, nvfp4 = kv == Dtype::nvfp4, bytes = fp8 || nvfp4;
  const uint32_t pages_per_seq = (s.len + s.page - 1) / s.page;
  const int64_t num_pages = int64_t{s.batch} * pages_per_seq;
  const uint64_t kv_elems = uint64_t(num_pages) * s.page * s.hk * s.d;
  // NVFP4: two codes a byte, and one e4m3 scale a 16 elements in tensors of their own.
  const uint64_t kv_bytes_each = nvfp4 ? kv_elems / 2 : kv_elems * (fp8 ? 1 : 2), sf_bytes_each = nvfp4 ? kv_elems / 16 : 0;
  const uint64_t q_elems = uint64_t{s.batch} * s.hq * s.d;
  std::vector<CUdeviceptr> owned;
  auto alloc = [&](size_t bytes) {
    CUdeviceptr p = 0;
    check(g_d->cuMemAlloc(&p, bytes), "cuMemAlloc");
    owned.push_back(p);
    return p;
  };
  const CUdeviceptr q = alloc(q_elems * 2), kc = alloc(kv_bytes_each), vc = alloc(kv_bytes_each), out = alloc(q_elems * 2);
  fill(k, q, q_elems, 16, Dtype::bf16, 7);
  // NVFP4's codes: random bytes (every code is finite); its scales: FP8 codes below 4.
  fill(k, kc, kv_bytes_each / (bytes ? 1 : 2), bytes ? 8 : 16, kv, 8);
  fill(k, vc, kv_bytes_each / (bytes ? 1 : 2), bytes ? 8 : 16, kv, 9);
  const CUdeviceptr ksf = nvfp4 ? alloc(sf_bytes_each) : 0, vsf = nvfp4 ? alloc(sf_bytes_each) : 0;
  if (nvfp4) fill(k, ksf, sf_bytes_each, 8, Dtype::fp8_e4m3, 10), fill(k, vsf, sf_bytes_each, 8, Dtype::fp8_e4m3, 11);
  std::vector<int32_t> pages(static_cast<size_t>(num_pages));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(3));
  std::vector<int32_t> seq(s.batch, static_cast<int32_t>(s.len));
  const CUdeviceptr table = alloc(pages.size() * 4), lens = alloc(seq.size() * 4);
  check(g_d->cuMemcpyHtoD(table, pages.data(), pages.size() * 4), "cuMemcpyHtoD");
  check(g_d->cuMemcpyHtoD(lens, seq.data(), seq.size() * 4), "cuMemcpyHtoD");

  DecodeShape shape{.batch = s.batch, .num_q_heads = s.hq, .num_kv_heads = s.hk, .head_dim = s.d, .q_dtype = Dtype::bf16,
                    .kv_storage = bytes ? Dtype::uint8 : kv, .kv_declared = bytes ? std::optional<Dtype>(kv) : std::nullopt,
                    .page_size = s.page, .layout = s.layout, .block_table_stride = pages_per_seq, .num_splits = static_cast<int>(s.splits), .merge = s.merge, .overlap = overlap,
                    .v_sf_order = v_sf_order_of(kv)};
  auto setup = std::make_unique<DecodeSetup>(value_or_die(DecodePlan::create(rt, shape), "plan"), std::move(owned));
  CUdeviceptr ws = 0;
  if (setup->plan.workspace_bytes()) {
    check(g_d->cuMemAlloc(&ws, setup->plan.workspace_bytes()), "cuMemAlloc");
    setup->owned.push_back(ws);
    check(g_d->cuMemsetD8(ws, 0, setup->plan.workspace_bytes()), "cuMemsetD8");
  }
  DecodeArgs& a = setup->args;
  a.q = reinterpret_cast<void*>(q);
  a.kv = {reinterpret_cast<void*>(kc), reinterpret_cast<void*>(vc), shape.kv_storage, shape.kv_declared, 0.5f, 0.5f, reinterpret_cast<void*>(ksf),
          s.layout, s.page, s.hk, num_pages};
  a.kv.v_sf = reinterpret_cast<void*>(vsf);
  if (nvfp4 && g_sf_layout) a.kv.sf_strides = resolve_kv_strides({}, *g_sf_layout, s.page, s.hk, s.d / 16);
  a.kv.v_sf_order = shape.v_sf_order;  // the scales are random codes: either order reads them
  a.block_table = reinterpret_cast<const int32_t*>(table);
  a.seq_lens = reinterpret_cast<const int32_t*>(lens);
  a.out = reinterpret_cast<void*>(out);
  a.workspace = reinterpret_cast<void*>(ws);
  a.workspace_bytes = setup->plan.workspace_bytes();
  // Bytes a launch reads: K and V, and NVFP4's scales (0.5 + 1/16 bytes an element).
  setup->kv_bytes = 2.0 * double(uint64_t{s.batch} * s.len * s.hk * s.d) * (nvfp4 ? 0.5625 : fp8 ? 1 : 2);
  return setup;
}

// A bare launch replayed as the decode's are (replay_us), in plain stream order and overlapped.
struct BareReplay {
  double plain_us = 0, overlapped_us = 0;
};

// One decode shape: its row of the main table, or with `graph` its row of the graph-replay table
// (per launch under replay in plain stream order and overlapped, against a bare launch replayed
// the same ways).
void bench_decode(const Runtime& rt, const BenchKernels& k, const Ceilings& c, const Shape& s, Dtype kv, const GraphApi* graph = nullptr,
                  BareReplay bare = {}) {
  const auto setup = make_setup(rt, k, s, kv, graph ? LaunchOverlap::never : g_overlap);
  const DecodePlan& plan = setup->plan;
  auto launch = [&] { setup->launch(); };
  Events ev;
  for (int i = 0; i < 3; ++i) launch();
  check(g_d->cuCtxSynchronize(), "cuCtxSynchronize");
  if (graph != nullptr) {
    const double plain = replay_us(*graph, ev, [&](CUstream stream) { setup->launch(stream); });
    const auto overlapping = make_setup(rt, k, s, kv, LaunchOverlap::allow);
    std::string overlapped = "- | -";  // the kernel or device takes no overlap
    if (overlapping->plan.overlaps_previous_kernel()) {
      const double us = replay_us(*graph, ev, [&](CUstream stream) { overlapping->launch(stream); });
      overlapped = fmt::format("{:.2f} | {:.2f}", us, us / bare.overlapped_us);
    }
    md(fmt::format("| {} | {} | {}{} | {:.2f} | {:.2f} | {} |", s.name, dtype_name(kv), plan.num_splits(),
                   plan.merge() == SplitMerge::cluster ? " cluster" : "", plain, plain / bare.plain_us, overlapped));
    return;
  }
  std::vector<double> ms;
  for (int i = 0; i < 25; ++i) ms.push_back(ev.time(launch));
  const double t = median(ms);
  ms.clear();
  for (int i = 0; i < 25; ++i) ms.push_back(queued_time(k, ev, launch));
  const double queued = median(ms);
  const double tbps = setup->kv_bytes / (t * 1e-3) / 1e12, queued_tbps = setup->kv_bytes / (queued * 1e-3) / 1e12;
  // Back-to-back launches, as the bare-launch ceiling was measured.
  constexpr int kLoop = 1000;
  const double per_launch_us = ev.time([&] { for (int i = 0; i < kLoop; ++i) launch(); }) * 1e3 / kLoop;
  const std::string splits = fmt::format("{}{}", plan.num_splits(), plan.merge() == SplitMerge::cluster ? " cluster" : "");
  md(fmt::format("| {} | {} | {} | {} | {:.1f} | {:.2f} | {:.1f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {:.2f} |", s.name, dtype_name(kv), splits,
                 plan.kernel().entry->id, t * 1e3, t * 1e3 / c.single_us, queued * 1e3, queued_tbps / c.copy_tbps, tbps, tbps / c.copy_tbps, tbps / c.read_tbps, per_launch_us,
                 per_launch_us / c.launch_us));
}

// A decode step as an engine runs it for each layer: kv_append of the batch's new tokens (one a
// sequence) into the cache, then the decode that reads that cache, the pair captured 100 times into
// one graph; microseconds a pair under replay, with both plans' launches in plain stream order or
// overlapping the kernel before (the decode overlaps the append, the append the previous decode).
double step_replay_us(const Runtime& rt, const BenchKernels& k, const GraphApi& g, const Shape& s, Dtype kv, LaunchOverlap overlap) {
  const auto setup = make_setup(rt, k, s, kv, overlap);
  const KvCacheDesc& cache = setup->args.kv;
  const KvAppendPlan append = value_or_die(KvAppendPlan::create(rt, {.num_kv_heads = s.hk, .head_dim = s.d, .in_dtype = Dtype::bf16,
                                                                     .cache_storage = cache.storage, .cache_declared = cache.declared,
                                                                     .page_size = s.page, .layout = s.layout, .overlap = overlap}),
                                          "kv_append plan");
  const size_t in_bytes = size_t{s.batch} * s.hk * s.d * 2;
  CUdeviceptr kin = 0, vin = 0, slots = 0;
  for (auto [p, n] : {std::pair{&kin, in_bytes}, {&vin, in_bytes}, {&slots, size_t{s.batch} * 8}}) check(g_d->cuMemAlloc(p, n), "cuMemAlloc");
  fill(k, kin, in_bytes / 2, 16, Dtype::bf16, 13);
  fill(k, vin, in_bytes / 2, 16, Dtype::bf16, 14);
  // One token a sequence, each into a page of its own (which page does not matter to the timing).
  std::vector<int64_t> slot(s.batch);
  for (uint32_t b = 0; b < s.batch; ++b) slot[b] = int64_t{b} * (cache.num_pages / s.batch) * s.page;
  check(g_d->cuMemcpyHtoD(slots, slot.data(), slot.size() * 8), "cuMemcpyHtoD");
  KvAppendArgs a;
  a.k = reinterpret_cast<void*>(kin);
  a.v = reinterpret_cast<void*>(vin);
  a.slots = reinterpret_cast<const int64_t*>(slots);
  a.num_tokens = s.batch;
  a.cache = cache;
  Events ev;
  const double us = replay_us(g, ev, [&](CUstream stream) {
    ok_or_die(append.launch(a, stream));
    setup->launch(stream);
  });
  for (CUdeviceptr p : {kin, vin, slots}) g_d->cuMemFree(p);
  return us;
}

// kv_append: new tokens of 8 kv heads of 128 into a cache of each dtype, bytes read plus written
// over the copy ceiling, and over a copy of the same bytes (cuMemcpyDtoD: at 64 tokens both are a
// launch's latency, not bandwidth). Single launches between two events keep the host's launch
// latency in (about 5 us, a fifth of the 8192-token figures); queued behind a busy kernel, as the
// decode's "device us" column, the launch and the copy are timed on the device alone.
void bench_append(const Runtime& rt, const BenchKernels& k, const Ceilings& c) {
  md("\n| kv_append | cache | tokens | time (us) | device us, queued | bytes read + written | queued TB/s | / copy BW | "
     "copy of the same bytes, queued (us) | / that copy |\n"
     "|---|---|---|---|---|---|---|---|---|---|");
  constexpr uint32_t H = 8, D = 128, P = 16;
  for (const uint32_t T : {64u, 8192u}) {
    for (const Dtype cache : {Dtype::bf16, Dtype::fp8_e4m3, Dtype::nvfp4}) {
      const bool narrow = cache != Dtype::bf16, nvfp4 = cache == Dtype::nvfp4;
      const KvAppendPlan plan = value_or_die(KvAppendPlan::create(rt, {.num_kv_heads = H, .head_dim = D, .in_dtype = Dtype::bf16,
                                                                      .cache_storage = narrow ? Dtype::uint8 : Dtype::bf16,
                                                                      .cache_declared = narrow ? std::optional<Dtype>(cache) : std::nullopt,
                                                                      .page_size = P}),
                                             "kv_append plan");
      const int64_t pages = (T + P - 1) / P, row = nvfp4 ? D / 2 : narrow ? D : 2 * D;  // bytes a row
      const size_t in_bytes = size_t{T} * H * D * 2, cache_bytes = size_t(pages) * P * H * row, sf_bytes = nvfp4 ? size_t(pages) * P * H * D / 16 : 0;
      CUdeviceptr kin = 0, vin = 0, slots = 0, kc = 0, vc = 0, ksf = 0, vsf = 0;
      for (auto [p, n] : {std::pair{&kin, in_bytes}, {&vin, in_bytes}, {&slots, size_t{T} * 8}, {&kc, cache_bytes}, {&vc, cache_bytes},
                          {&ksf, std::max<size_t>(sf_bytes, 256)}, {&vsf, std::max<size_t>(sf_bytes, 256)}})
        check(g_d->cuMemAlloc(p, n), "cuMemAlloc");
      fill(k, kin, in_bytes / 2, 16, Dtype::bf16, 11);
      fill(k, vin, in_bytes / 2, 16, Dtype::bf16, 12);
      std::vector<int64_t> slot(T);
      std::iota(slot.begin(), slot.end(), 0);
      std::shuffle(slot.begin(), slot.end(), std::mt19937(5));
      check(g_d->cuMemcpyHtoD(slots, slot.data(), slot.size() * 8), "cuMemcpyHtoD");
      KvAppendArgs a;
      a.k = reinterpret_cast<void*>(kin);
      a.v = reinterpret_cast<void*>(vin);
      a.slots = reinterpret_cast<const int64_t*>(slots);
      a.num_tokens = T;
      a.cache = {reinterpret_cast<void*>(kc), reinterpret_cast<void*>(vc), narrow ? Dtype::uint8 : Dtype::bf16,
                 narrow ? std::optional<Dtype>(cache) : std::nullopt, 0.05f, 0.05f, reinterpret_cast<void*>(ksf), KvLayout::nhd, P, H, pages};
      a.cache.v_sf = reinterpret_cast<void*>(vsf);
      auto launch = [&] { ok_or_die(plan.launch(a, nullptr)); };
      Events ev;
      for (int i = 0; i < 3; ++i) launch();
      check(g_d->cuCtxSynchronize(), "cuCtxSynchronize");
      std::vector<double> ms, queued_ms, copy_ms;
      for (int i = 0; i < 25; ++i) ms.push_back(ev.time(launch));
      for (int i = 0; i < 25; ++i) queued_ms.push_back(queued_time(k, ev, launch));
      const double moved = 2.0 * in_bytes + 2.0 * (size_t{T} * H * row + (nvfp4 ? size_t{T} * H * D / 16 : 0));
      // The same bytes copied (read + write = moved): half of them, device to device.
      CUdeviceptr from = 0, to = 0;
      const size_t half = static_cast<size_t>(moved / 2);
      check(g_d->cuMemAlloc(&from, half), "cuMemAlloc");
      check(g_d->cuMemAlloc(&to, half), "cuMemAlloc");
      // On the null stream, behind the spin as the launch is (a device-to-device copy does not wait for the host).
      for (int i = 0; i < 25; ++i) copy_ms.push_back(queued_time(k, ev, [&] { check(g_d->cuMemcpyDtoD(to, from, half), "cuMemcpyDtoD"); }));
      g_d->cuMemFree(from);
      g_d->cuMemFree(to);
      const double t = median(ms), tq = median(queued_ms), tc = median(copy_ms), tbps = moved / (tq * 1e-3) / 1e12;
      md(fmt::format("| bf16 -> {} | {} | {} | {:.1f} | {:.1f} | {:.0f} | {:.2f} | {:.2f} | {:.1f} | {:.2f} |", dtype_name(cache), nvfp4 ? "NHD + scales" : "NHD",
                     T, t * 1e3, tq * 1e3, moved, tbps, tbps / c.copy_tbps, tc * 1e3, tc / tq));
      for (CUdeviceptr p : {kin, vin, slots, kc, vc, ksf, vsf}) g_d->cuMemFree(p);
    }
  }
}

// Milliseconds a launch of `setup` takes on the current device, in the window the every-GPU mode
// compares: 10 timings of 20 back-to-back launches, the median.
double windowed_ms(const DecodeSetup& setup) {
  Events ev;
  std::vector<double> ms;
  for (int i = 0; i < 10; ++i) ms.push_back(ev.time([&] { for (int j = 0; j < 20; ++j) setup.launch(); }) / 20);
  return median(ms);
}

// Every GPU of the host: the big-batch shape timed on each device alone, then on all of them at
// once (one host thread a device, started together), as KV TB/s and the ratio of the two.
void bench_devices(const std::shared_ptr<const DriverApi>& drv, const std::optional<std::filesystem::path>& bundle_path, const std::string& kernels) {
  auto rts = value_or_die(Runtime::create_all({.bundle_path = bundle_path, .lazy = true, .driver = drv}), "runtimes");
  const size_t n = rts.size();
  std::vector<BenchKernels> ks;
  std::vector<Ceilings> cs;
  for (const auto& rt : rts) {
    if (!rt->bind_context()) std::exit(1);
    md(fmt::format("device: {}, driver CUDA {}", rt->device().str(), cuda_version_text(rt->device().driver_version)));
    ks.push_back(load_bench_kernels(kernels));
    cs.push_back(measure_ceilings(ks.back(), rt->device().multiprocessors));
  }
  md(fmt::format("\n| shape ({} device(s)) | kv | device | copy ceiling alone (TB/s) | KV TB/s alone | / copy | KV TB/s, all devices at once | "
                 "/ alone |\n|---|---|---|---|---|---|---|---|",
                 n));
  const Shape s{"B64 L8192 32q/8kv D128 p16", 64, 8192, 32, 8, 128, 16};
  for (Dtype kv : {Dtype::bf16, Dtype::fp8_e4m3}) {
    std::vector<std::unique_ptr<DecodeSetup>> setups;
    std::vector<double> alone(n), together(n);
    for (size_t i = 0; i < n; ++i) {
      if (!rts[i]->bind_context()) std::exit(1);
      setups.push_back(make_setup(*rts[i], ks[i], s, kv));
      for (int w = 0; w < 3; ++w) setups[i]->launch();
      check(g_d->cuCtxSynchronize(), "cuCtxSynchronize");
      alone[i] = windowed_ms(*setups[i]);
    }
    std::barrier start(static_cast<std::ptrdiff_t>(n));
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        if (!rts[i]->bind_context()) std::exit(1);
        start.arrive_and_wait();
        together[i] = windowed_ms(*setups[i]);
      });
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < n; ++i) {
      const double a = setups[i]->kv_bytes / (alone[i] * 1e-3) / 1e12, b = setups[i]->kv_bytes / (together[i] * 1e-3) / 1e12;
      md(fmt::format("| {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.3f} |", s.name, dtype_name(kv), i, cs[i].copy_tbps, a,
                     a / cs[i].copy_tbps, b, b / a));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!rts[i]->bind_context()) std::exit(1);
      setups[i].reset();
    }
  }
}

void bench_init(const std::shared_ptr<const DriverApi>& drv) {
  auto bundle = std::make_shared<const Bundle>(value_or_die(Bundle::embedded(), "bundle"));
  // The floor: the same cubins, already decompressed, through the driver and nothing else.
  auto probe = value_or_die(Runtime::create({.lazy = true, .driver = drv}), "runtime");
  // Each cubin once (the kernels of a family and arch share one), with the symbols chosen in it.
  std::map<uint64_t, std::pair<std::vector<std::byte>, std::vector<std::string>>> cubins;
  for (const ManifestEntry& e : bundle->manifest().entries)
    if (select_entry(bundle->manifest(), probe->device().arch, e.key).chosen == &e) {
      auto& [bytes, symbols] = cubins[e.offset];
      if (bytes.empty()) bytes = value_or_die(bundle->cubin(e), "cubin");
      symbols.push_back(e.symbol);
    }
  probe.reset();
  std::vector<double> floor_ms, init_ms, lazy_ms;
  for (int rep = 0; rep < 7; ++rep) {
    {
      auto keep = value_or_die(Runtime::create({.lazy = true, .driver = drv}), "runtime");  // keeps the primary context alive
      check(keep->bind_context().has_value() ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN, "bind_context");
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<CUlibrary> libs;
      for (auto& [offset, cubin] : cubins) {
        CUlibrary lib = nullptr;
        check(drv->cuLibraryLoadData(&lib, cubin.first.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cuLibraryLoadData");
        for (const std::string& sym : cubin.second) {
          CUkernel kern = nullptr;
          CUfunction f = nullptr;
          check(drv->cuLibraryGetKernel(&kern, lib, sym.c_str()), "cuLibraryGetKernel");
          check(drv->cuKernelGetFunction(&f, kern), "cuKernelGetFunction");
        }
        libs.push_back(lib);
      }
      floor_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      for (CUlibrary l : libs) drv->cuLibraryUnload(l);

      auto t1 = std::chrono::steady_clock::now();
      auto rt = value_or_die(Runtime::create({.bundle = bundle, .driver = drv}), "runtime");
      init_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
      rt.reset();
      t1 = std::chrono::steady_clock::now();
      auto lazy = value_or_die(Runtime::create({.bundle = bundle, .lazy = true, .driver = drv}), "runtime");
      lazy_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count());
    }
  }
  md(fmt::format("| init, {} cubins: floor (cuLibraryLoadData + cuLibraryGetKernel + cuKernelGetFunction loop) | {:.2f} ms |", cubins.size(), median(floor_ms)));
  md(fmt::format("| init: Runtime::create, eager, default bundle (verify + load + resolve + ABI + occupancy) | {:.2f} ms ({:.2f}x floor) |", median(init_ms), median(init_ms) / median(floor_ms)));
  md(fmt::format("| init: Runtime::create, lazy (a runtime that loads no cubin) | {:.2f} ms |", median(lazy_ms)));
}

void bench_selfcheck(const std::shared_ptr<const DriverApi>& drv) {
  auto bundle = std::make_shared<const Bundle>(value_or_die(Bundle::embedded(), "bundle"));
  for (bool full : {true, false}) {
    std::vector<double> total;
    SelfCheckReport last;
    for (int rep = 0; rep < 5; ++rep) {
      SelfCheckOptions o;
      o.runtime.bundle = bundle;
      o.runtime.driver = drv;
      o.known_answer = full;
      last = run_selfcheck(o);
      if (!last.passed) {
        fmt::print(stderr, "self-check failed\n");
        std::exit(1);
      }
      total.push_back(last.total_ms);
    }
    std::string steps;
    for (const auto& s : last.steps) steps += fmt::format("{} {:.1f}; ", s.name, s.ms);
    md(fmt::format("| self-check {} | {:.1f} ms (median of 5) | {}|", full ? "full" : "quick (static + load)", median(total), steps));
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, sweep = false, grid = false, replay = false, devices = false, append = false, nvfp4 = false, e5m2 = false;
  std::optional<std::filesystem::path> bundle_path;
  std::string only;
  std::vector<uint32_t> forced_splits, forced_cluster_splits;
  CLI::App app{"cubinrt_bench: paged decode against ceilings measured in the same run (docs/benchmarks.md)"};
  app.add_flag("--quick", quick, "the ceilings and decode only (no start-up or self-check timings)");
  app.add_option("--bundle", bundle_path, "time the decode kernels of this bundle instead of the embedded one (kernel experiments)");
  app.add_option("--only", only, "time only the decode shapes whose name contains this text");
  app.add_flag("--nvfp4", nvfp4, "time NVFP4 KV beside bf16 and FP8 e4m3 (the decode shapes, sweep or grid)");
  app.add_flag("--e5m2", e5m2, "time FP8 e5m2 KV beside e4m3 (issue 18 asks both at the memory limit)");
  app.add_flag("--sweep", sweep, "instead of the issue's shapes: batch 1 to 16 x 256 to 8192 tokens, the planner's merge against "
                                 "the workspace's and a cluster's, to check where it picks a cluster");
  app.add_flag("--grid", grid, "instead of the issue's shapes: batch 1, 4, 16, 64, 256 x tokens 128, 1024, 8192, 32768, D128 32q/8kv, "
                               "bf16 and FP8, as KV TB/s over the copy ceiling (the regression table of docs/benchmarks.md)");
  app.add_flag("--replay", replay, "instead of the issue's shapes: small batches under CUDA-graph replay (100 launches captured), "
                                   "per launch, against a bare launch replayed the same way");
  app.add_flag("--devices", devices, "instead of the issue's shapes: B64 L8192 32q/8kv D128 on every GPU alone, then on all at once "
                                     "(one thread a device), as KV TB/s and their ratio");
  app.add_option("--overlap", g_overlap, "allow: decode launches overlap the kernel before them where the device and kernel take it (the "
                                        "runtime's default); never: plain stream order. The graph-replay table times both")
      ->transform(CLI::CheckedTransformer(std::map<std::string, LaunchOverlap>{{"allow", LaunchOverlap::allow}, {"never", LaunchOverlap::never}}));
  app.add_option("--v-sf-order", g_v_sf_order, "NVFP4's V-scale order: linear, or interleaved4 (TensorRT-LLM's; its kernels are SM100's, "
                                              "on the H200 the test bundle's sm_90 builds: --bundle hd512_sm90.bundle --nvfp4)")
      ->transform(CLI::CheckedTransformer(std::map<std::string, ScaleOrder>{{"linear", ScaleOrder::linear}, {"interleaved4", ScaleOrder::interleaved4}}));
  app.add_option("--sf-layout", g_sf_layout, "NVFP4's scale rows in nhd or hnd order whatever the codes' layout (default: the codes')")
      ->transform(CLI::CheckedTransformer(std::map<std::string, KvLayout>{{"nhd", KvLayout::nhd}, {"hnd", KvLayout::hnd}}));
  app.add_option("--splits", forced_splits, "also time each chosen shape (the issue's, --sweep's, --grid's; narrowed by --only) at these split "
                 "counts, merged through the workspace: the planner's choice against its neighbours")
      ->check(CLI::Range(1u, 1024u));
  app.add_option("--cluster-splits", forced_cluster_splits, "the same at these split counts, merged in a cluster (2 to 8)")->check(CLI::Range(2u, 8u));
  app.add_flag("--append", append, "instead of the issue's shapes: kv_append of 64 and 8192 tokens into bf16, FP8 and NVFP4 caches");
  CLI11_PARSE(app, argc, argv);
  auto drv = value_or_die(open_driver(), "driver");
  g_d = drv.get();
  std::string dir = argv[0];
  dir = dir.substr(0, dir.find_last_of('/') + 1);
  if (devices) {
    bench_devices(drv, bundle_path, dir + "bench_kernels.fatbin");
    if (const char* path = std::getenv("CUBINRT_BENCH_MD")) std::ofstream(path) << g_md;
    return 0;
  }
  auto rt = value_or_die(Runtime::create({.bundle_path = bundle_path, .lazy = true, .driver = drv}), "runtime");
  if (!rt->bind_context()) return 1;
  const BenchKernels k = load_bench_kernels(dir + "bench_kernels.fatbin");
  md(fmt::format("device: {}, driver CUDA {}, bundle {}", rt->device().str(), cuda_version_text(rt->device().driver_version),
                 rt->bundle().name()));
  const Ceilings c = measure_ceilings(k, rt->device().multiprocessors);
  md(fmt::format("| ceiling | value |\n|---|---|\n| copy bandwidth (2 GiB cuMemcpyDtoD, read + write) | {:.2f} TB/s |\n| read bandwidth (2 GiB read by a kernel that only reads) | {:.2f} TB/s |\n| bare launch (empty kernel, 2000 back to back) | {:.2f} us |\n| bare launch, single (empty kernel between two events, median of 25) | {:.2f} us |\n| bare launch, queued (the same behind 0.5 ms of busy GPU: the device's time, as FlashInfer's gpu us) | {:.2f} us |",
                 c.copy_tbps, c.read_tbps, c.launch_us, c.single_us, c.queued_us));
  if (append) {
    bench_append(*rt, k, c);
    if (const char* path = std::getenv("CUBINRT_BENCH_MD")) std::ofstream(path) << g_md;
    return 0;
  }
  if (!replay) {
    md(fmt::format("\nDecode launches {} (--overlap {}).", g_overlap == LaunchOverlap::allow ? "overlap the kernel before them where the kernel "
                   "takes it (sm_90 builds)" : "keep plain stream order", g_overlap == LaunchOverlap::allow ? "allow" : "never"));
    if (g_sf_layout)
      md(fmt::format("NVFP4 rows: the block scales' rows in {} order whatever the codes' layout (--sf-layout).", *g_sf_layout == KvLayout::nhd ? "NHD" : "HND"));
    if (g_v_sf_order == ScaleOrder::interleaved4)
      md("NVFP4 rows: V's block scales in TensorRT-LLM's 4-token interleave (--v-sf-order interleaved4), read by their own kernels.");
    md("\n| shape | kv | splits | kernel | time (us) | / bare single | device us, queued | its / copy BW | KV TB/s | / copy BW | / read BW | us per launch, back to back | / bare launch |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  }
  const Shape shapes[] = {
      {"B64 L8192 32q/8kv D128 p16", 64, 8192, 32, 8, 128, 16},
      {"B64 L8192 16q/8kv D256 p16", 64, 8192, 16, 8, 256, 16},
      {"B1 L32768 32q/8kv D128 p16", 1, 32768, 32, 8, 128, 16},
      {"B1 L128 32q/8kv D128 p16", 1, 128, 32, 8, 128, 16},
      // Long context at small batch (issue 18's first item), with the planner's splits against
      // twice and four times as many (4 and 8 blocks an SM instead of 2).
      {"B4 L32768 32q/8kv D128 p16", 4, 32768, 32, 8, 128, 16},
      {"B1 L131072 32q/8kv D128 p16", 1, 131072, 32, 8, 128, 16},
      {"B4 L131072 32q/8kv D128 p16", 4, 131072, 32, 8, 128, 16},
      {"B1 L131072 32q/8kv D128 p16, forced", 1, 131072, 32, 8, 128, 16, 64},
      {"B1 L131072 32q/8kv D128 p16, forced", 1, 131072, 32, 8, 128, 16, 128},
      // The planner's 8 workspace splits at B4 against the same 8 as a cluster (its choice before
      // commit 7a8c1f0) and 16 through the workspace: clusters are placed within a GPC, and at long
      // ranges their blocks ended further apart than the workspace's (runs 106-107).
      {"B4 L32768 32q/8kv D128 p16, forced", 4, 32768, 32, 8, 128, 16, 8, KvLayout::nhd, SplitMerge::cluster},
      {"B4 L32768 32q/8kv D128 p16, forced", 4, 32768, 32, 8, 128, 16, 16, KvLayout::nhd, SplitMerge::workspace},
      {"B4 L131072 32q/8kv D128 p16, forced", 4, 131072, 32, 8, 128, 16, 8, KvLayout::nhd, SplitMerge::cluster},
      // Query-head groups of 8 and 16 (Llama-3-70B, Qwen2-72B: 64/8; Llama-3-405B: 128/8).
      {"B64 L8192 64q/8kv D128 p16", 64, 8192, 64, 8, 128, 16},
      {"B64 L8192 128q/8kv D128 p16", 64, 8192, 128, 8, 128, 16},
      {"B64 L8192 64q/4kv D128 p16", 64, 8192, 64, 4, 128, 16},
      {"B64 L8192 32q/4kv D256 p16", 64, 8192, 32, 4, 256, 16},
      // Multi-query attention: every q head on one kv head (two head chunks of 16).
      {"B64 L8192 32q/1kv D128 p16", 64, 8192, 32, 1, 128, 16},
      {"B64 L8192 32q/1kv D128 p16, forced", 64, 8192, 32, 1, 128, 16, 4, KvLayout::nhd, SplitMerge::cluster},
      {"B64 L8192 32q/1kv D128 p16, forced", 64, 8192, 32, 1, 128, 16, 8, KvLayout::nhd, SplitMerge::cluster},
      {"B64 L8192 32q/1kv D128 p16, forced", 64, 8192, 32, 1, 128, 16, 8},
      // head_dim 512 (SM100 only in the default bundle; on the H200 from the test bundle:
      // --bundle hd512_sm90.bundle), issue 18's proxy shape.
      {"B16 L8192 32q/4kv D512 p16", 16, 8192, 32, 4, 512, 16},
      {"B16 L8192 32q/4kv D512 p16, forced", 16, 8192, 32, 4, 512, 16, 8, KvLayout::nhd, SplitMerge::cluster},
      {"B16 L8192 32q/4kv D512 p16, forced", 16, 8192, 32, 4, 512, 16, 16},
      {"B64 L8192 32q/4kv D512 p16", 64, 8192, 32, 4, 512, 16},
      // Heads-first pages: a kv head's tokens of a page are contiguous.
      {"B64 L8192 32q/8kv D128 p16 HND", 64, 8192, 32, 8, 128, 16, 0, KvLayout::hnd},
      {"B64 L8192 16q/8kv D256 p16 HND", 64, 8192, 16, 8, 256, 16, 0, KvLayout::hnd},
      // The planner's split choice against its neighbours (forced).
      {"B64 L8192 32q/8kv D128 p16, forced", 64, 8192, 32, 8, 128, 16, 2},
      {"B64 L8192 32q/8kv D128 p16, forced", 64, 8192, 32, 8, 128, 16, 9},
      {"B64 L8192 16q/8kv D256 p16, forced", 64, 8192, 16, 8, 256, 16, 2},
      // Where a kernel holding 3 blocks an SM (FP8 head_dim 256, FP8 16-head) would stream a
      // fourth alone unsplit, the planner splits in 2 (planner.cpp): its choice against unsplit.
      {"B64 L8192 16q/8kv D256 p16, forced", 64, 8192, 16, 8, 256, 16, 1},
      // More splits, so that rounds of 3 blocks an SM end fuller (FP8 head_dim 256 is behind
      // FlashInfer's XQA there: docs/benchmarks.md, run 99).
      {"B64 L8192 16q/8kv D256 p16, forced", 64, 8192, 16, 8, 256, 16, 3},
      {"B64 L8192 16q/8kv D256 p16, forced", 64, 8192, 16, 8, 256, 16, 3, KvLayout::nhd, SplitMerge::cluster},
      {"B64 L8192 16q/8kv D256 p16, forced", 64, 8192, 16, 8, 256, 16, 4, KvLayout::nhd, SplitMerge::cluster},
      {"B64 L8192 128q/8kv D128 p16, forced", 64, 8192, 128, 8, 128, 16, 1},
      {"B64 L8192 128q/8kv D128 p16, forced", 64, 8192, 128, 8, 128, 16, 2},
      {"B64 L8192 128q/8kv D128 p16, forced", 64, 8192, 128, 8, 128, 16, 2, KvLayout::nhd, SplitMerge::cluster},
      {"B1 L32768 32q/8kv D128 p16, forced", 1, 32768, 32, 8, 128, 16, 16},
      {"B1 L32768 32q/8kv D128 p16, forced", 1, 32768, 32, 8, 128, 16, 24},
      {"B1 L32768 32q/8kv D128 p16, forced", 1, 32768, 32, 8, 128, 16, 33},
      {"B1 L32768 32q/8kv D128 p16, forced", 1, 32768, 32, 8, 128, 16, 48},
      {"B1 L32768 32q/8kv D128 p16, forced", 1, 32768, 32, 8, 128, 16, 64},
      {"B1 L128 32q/8kv D128 p16, forced", 1, 128, 32, 8, 128, 16, 2},
      {"B1 L128 32q/8kv D128 p16, forced", 1, 128, 32, 8, 128, 16, 4},
      {"B1 L128 32q/8kv D128 p16, forced", 1, 128, 32, 8, 128, 16, 1},
      {"B1 L128 32q/8kv D128 p16, forced", 1, 128, 32, 8, 128, 16, 2, KvLayout::nhd, SplitMerge::cluster},
      {"B1 L128 32q/8kv D128 p16, forced", 1, 128, 32, 8, 128, 16, 4, KvLayout::nhd, SplitMerge::cluster},
      {"B1 L128 32q/8kv D128 p16, forced", 1, 128, 32, 8, 128, 16, 8, KvLayout::nhd, SplitMerge::cluster},
      // A small batch where the planner splits through the workspace, against clusters.
      {"B4 L512 32q/8kv D128 p16", 4, 512, 32, 8, 128, 16},
      {"B4 L512 32q/8kv D128 p16, forced", 4, 512, 32, 8, 128, 16, 2, KvLayout::nhd, SplitMerge::cluster},
      {"B4 L512 32q/8kv D128 p16, forced", 4, 512, 32, 8, 128, 16, 4, KvLayout::nhd, SplitMerge::cluster},
  };
  // The sweep's shapes; their names live as long as the loop that times them (Shape holds its
  // name by pointer, so the names never reallocate: reserved up front).
  constexpr std::array kSweepBatches{1u, 2u, 4u, 8u, 16u};
  constexpr std::array kSweepLens{256u, 1024u, 4096u, 8192u};
  std::vector<std::string> sweep_names;
  sweep_names.reserve(kSweepBatches.size() * kSweepLens.size());
  std::vector<Shape> sweep_shapes;
  for (uint32_t batch : kSweepBatches)
    for (uint32_t len : kSweepLens) {
      const char* name = sweep_names.emplace_back(fmt::format("B{} L{} 32q/8kv D128 p16", batch, len)).c_str();
      // The planner's merge, the workspace and a cluster at the planner's split counts (a forced
      // cluster that finds no 2 to 8 splits to take runs unsplit).
      for (SplitMerge m : {SplitMerge::choose, SplitMerge::workspace, SplitMerge::cluster})
        sweep_shapes.push_back({name, batch, len, 32, 8, 128, 16, 0, KvLayout::nhd, m});
    }
  // The regression grid's shapes, named the same way.
  constexpr std::array kGridBatches{1u, 4u, 16u, 64u, 256u};
  constexpr std::array kGridLens{128u, 1024u, 8192u, 32768u};
  if (grid) {
    sweep_names.clear();
    sweep_names.reserve(kGridBatches.size() * kGridLens.size());
    sweep_shapes.clear();
    for (uint32_t batch : kGridBatches)
      for (uint32_t len : kGridLens)
        sweep_shapes.push_back({sweep_names.emplace_back(fmt::format("B{} L{} 32q/8kv D128 p16", batch, len)).c_str(), batch, len, 32, 8, 128, 16});
  }
  // Graph replay: small batches, per launch, against an empty kernel replayed the same way.
  const Shape replay_shapes[] = {
      {"B1 L128 32q/8kv D128 p16", 1, 128, 32, 8, 128, 16},
      {"B4 L512 32q/8kv D128 p16", 4, 512, 32, 8, 128, 16},
      {"B1 L1024 32q/8kv D128 p16", 1, 1024, 32, 8, 128, 16},
      // The planner's choice for B4 L512 against its neighbours, under replay (forced).
      {"B4 L512 32q/8kv D128 p16, forced", 4, 512, 32, 8, 128, 16, 1},
      {"B4 L512 32q/8kv D128 p16, forced", 4, 512, 32, 8, 128, 16, 2, KvLayout::nhd, SplitMerge::cluster},
      {"B4 L512 32q/8kv D128 p16, forced", 4, 512, 32, 8, 128, 16, 8, KvLayout::nhd, SplitMerge::cluster},
      {"B4 L512 32q/8kv D128 p16, forced", 4, 512, 32, 8, 128, 16, 4, KvLayout::nhd, SplitMerge::workspace},
  };
  std::optional<GraphApi> graph;
  BareReplay bare;
  if (replay) {
    graph = load_graph_api(*drv);
    Events ev;
    auto empty = [&](CUstream stream, bool overlap) {
      CUlaunchConfig config{};
      config.gridDimX = config.gridDimY = config.gridDimZ = 1;
      config.blockDimX = 32, config.blockDimY = config.blockDimZ = 1;
      config.hStream = stream;
      LaunchAttributes attrs;
      if (overlap) attrs.overlap_previous_kernel();
      attrs.apply(config);
      check(g_d->cuLaunchKernelEx(&config, k.empty, nullptr, nullptr), "cuLaunchKernelEx(empty)");
    };
    bare.plain_us = replay_us(*graph, ev, [&](CUstream stream) { empty(stream, false); });
    bare.overlapped_us = replay_us(*graph, ev, [&](CUstream stream) { empty(stream, true); });
    md(fmt::format("| bare launch (empty kernel), graph replay | {:.2f} us |\n| the same, each launch overlapping the one before | {:.2f} us |",
                   bare.plain_us, bare.overlapped_us));
    md("\n| shape (graph replay) | kv | splits | us per launch | / bare | us per launch, overlapping the one before | / bare, overlapping |\n"
       "|---|---|---|---|---|---|---|");
  }
  const std::span<const Shape> listed = replay ? std::span<const Shape>(replay_shapes)
                                        : (sweep || grid) ? std::span<const Shape>(sweep_shapes)
                                                          : std::span<const Shape>(shapes);
  // --splits and --cluster-splits: each listed shape the planner picks for (neither forced nor, as
  // the sweep's rows beside the planner's, merged one way), then again at each forced count; the
  // names live in a deque (Shape holds its name by pointer).
  std::deque<std::string> forced_names;
  std::vector<Shape> with_forced;
  for (const Shape& s : listed) {
    with_forced.push_back(s);
    if (s.splits != 0 || s.merge != SplitMerge::choose || !std::string_view(s.name).contains(only)) continue;
    const char* name = forced_names.emplace_back(fmt::format("{}, forced", s.name)).c_str();
    for (uint32_t n : forced_splits) with_forced.push_back({name, s.batch, s.len, s.hq, s.hk, s.d, s.page, n, s.layout, SplitMerge::workspace});
    for (uint32_t n : forced_cluster_splits) with_forced.push_back({name, s.batch, s.len, s.hq, s.hk, s.d, s.page, n, s.layout, SplitMerge::cluster});
  }
  const std::span<const Shape> chosen(with_forced);
  for (const Shape& s : chosen)
    for (Dtype kv : {Dtype::bf16, Dtype::fp8_e4m3, Dtype::fp8_e5m2, Dtype::nvfp4})
      if ((kv != Dtype::nvfp4 || nvfp4) && (kv != Dtype::fp8_e5m2 || e5m2) && std::string_view(s.name).contains(only) && rt->supports(bench_key(s, kv)))
        bench_decode(*rt, k, c, s, kv, graph ? &*graph : nullptr, bare);
  if (replay) {
    md("\n| step (graph replay): kv_append of one token a sequence, then the decode | kv | us per step, plain stream order | "
       "us per step, overlapping |\n|---|---|---|---|");
    // An experiment bundle (--bundle) holds decode kernels only: its step rows are left out, said so.
    for (const Shape& s : std::span(replay_shapes).first(3))
      for (Dtype kv : {Dtype::bf16, Dtype::fp8_e4m3}) {
        if (!std::string_view(s.name).contains(only)) continue;
        if (!rt->supports(kv_append_key(Dtype::bf16, kv))) {
          md(fmt::format("| {} | {} | - (the bundle has no kv_append kernel for it) | - |", s.name, dtype_name(kv)));
          continue;
        }
        md(fmt::format("| {} | {} | {:.2f} | {:.2f} |", s.name, dtype_name(kv), step_replay_us(*rt, k, *graph, s, kv, LaunchOverlap::never),
                       step_replay_us(*rt, k, *graph, s, kv, LaunchOverlap::allow)));
      }
  }
  if (!quick) {
    md("\n| start-up | time |\n|---|---|");
    bench_init(drv);
    bench_selfcheck(drv);
  }
  if (const char* path = std::getenv("CUBINRT_BENCH_MD")) std::ofstream(path) << g_md;
  return 0;
}
