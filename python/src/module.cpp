// cubinrt._cubinrt: the C ABI (cubinrt.h) as Python sees it. Thin on purpose: handles and the
// calls. Tensors whose type has DLPack's C exchange API (torch's) are read here in C; any other
// goes through cubinrt._descriptor (cubinrt/__init__.py: __cuda_array_interface__, DLPack), which
// also gives the classes their Python shape. Every failure raises cubinrt.Error with the
// library's message and status.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <cubinrt/cubinrt.h>

namespace nb = nanobind;

namespace {

// Set by the package at import and kept for the life of the process (handles, not objects: no
// reference is dropped after the interpreter is gone).
nb::handle g_error;  // cubinrt.Error

[[noreturn]] void raise(cubinrt_status s) {
  nb::handle e = g_error.is_valid() ? g_error : nb::handle(PyExc_RuntimeError);
  PyErr_SetObject(e.ptr(), nb::make_tuple(std::string(cubinrt_last_error()), int(s), std::string(cubinrt_status_name(s))).ptr());
  throw nb::python_error();
}
void check(cubinrt_status s) {
  if (s != CUBINRT_SUCCESS) raise(s);
}

struct Runtime {
  cubinrt_runtime* h = nullptr;
  ~Runtime() { cubinrt_runtime_destroy(h); }
};

struct Plan {
  cubinrt_decode_plan* h = nullptr;
  nb::object runtime;  // keeps the runtime alive while the plan is
  ~Plan() { cubinrt_decode_plan_destroy(h); }
};

struct AppendPlan {
  cubinrt_kv_append_plan* h = nullptr;
  nb::object runtime;  // keeps the runtime alive while the plan is
  ~AppendPlan() { cubinrt_kv_append_plan_destroy(h); }
};

// One launch, the GIL released around it (an engine's other threads go on), its failure raised.
void launch_checked(const Plan& p, const cubinrt_decode_args& a, void* stream) {
  cubinrt_status status;
  {
    nb::gil_scoped_release unlocked;
    status = cubinrt_decode_plan_launch(p.h, &a, stream);
  }
  check(status);
}

using Key = std::tuple<uint32_t, int32_t, int32_t, uint32_t>;  // head_dim, q_dtype, kv_dtype, page_size

cubinrt_runtime_options options(int device, std::optional<std::string>& uuid, std::optional<std::string>& bundle, bool lazy, bool self_check,
                                std::vector<cubinrt_decode_key>& keys) {
  cubinrt_runtime_options o;
  cubinrt_runtime_options_init(&o);
  o.device_ordinal = device;
  o.device_uuid = uuid ? uuid->c_str() : nullptr;
  o.bundle_path = bundle ? bundle->c_str() : nullptr;
  o.lazy = lazy;
  o.self_check = self_check;
  o.required_decode = keys.data();
  o.num_required_decode = keys.size();
  return o;
}

std::vector<cubinrt_decode_key> c_keys(const std::vector<Key>& keys) {
  std::vector<cubinrt_decode_key> out;
  for (const Key& k : keys) out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k)});
  return out;
}

// A tensor descriptor from Python: (data, dtype_code, dtype_bits, shape, strides, device_type,
// device_id), strides in elements; None: absent.
cubinrt_tensor tensor(nb::handle d, const char* name) {
  cubinrt_tensor t{};
  if (d.is_none()) return t;
  if (!nb::isinstance<nb::tuple>(d)) throw nb::type_error((std::string(name) + ": a tensor descriptor is a tuple").c_str());
  nb::tuple tup = nb::borrow<nb::tuple>(d);
  if (tup.size() != 7) throw nb::value_error((std::string(name) + ": a tensor descriptor has 7 fields").c_str());
  t.data = reinterpret_cast<void*>(nb::cast<uintptr_t>(tup[0]));
  t.dtype_code = nb::cast<uint8_t>(tup[1]);
  t.dtype_bits = nb::cast<uint8_t>(tup[2]);
  t.dtype_lanes = 1;
  nb::handle shape = tup[3], strides = tup[4];
  const size_t n = nb::len(shape);
  if (n > CUBINRT_MAX_DIMS || nb::len(strides) != n)
    throw nb::value_error((std::string(name) + ": at most 6 dimensions, with one stride each").c_str());
  t.ndim = static_cast<int32_t>(n);
  for (size_t i = 0; i < n; ++i) {
    t.shape[i] = nb::cast<int64_t>(shape[i]);
    t.strides[i] = nb::cast<int64_t>(strides[i]);
  }
  t.device_type = nb::cast<int32_t>(tup[5]);
  t.device_id = nb::cast<int32_t>(tup[6]);
  return t;
}

// DLPack's C exchange API (DLPack 1.2+): a framework's tensor type may carry a capsule
// "dlpack_exchange_api" whose functions fill a DLTensor from a tensor object, and give the
// framework's current stream, in C with no Python call: the hot path for torch tensors. Declared
// here as DLPack's ABI lays it out (stable C structs).
struct DlDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DlDataType {
  uint8_t code, bits;
  uint16_t lanes;
};
struct DlTensor {
  void* data;
  DlDevice device;
  int32_t ndim;
  DlDataType dtype;
  int64_t* shape;
  int64_t* strides;  // NULL: C-contiguous
  uint64_t byte_offset;
};
struct DlVersion {
  uint32_t major, minor;
};
struct DlExchangeHeader {
  DlVersion version;
  DlExchangeHeader* prev_api;
};
struct DlExchangeApi {
  DlExchangeHeader header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, DlTensor* out);
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
};

// The exchange API of a tensor type, or null; looked up once per type (the capsule lives as long
// as its type). The GIL serialises the cache.
const DlExchangeApi* exchange_api(PyTypeObject* type) {
  struct Entry {
    PyTypeObject* type;
    const DlExchangeApi* api;
  };
  static Entry cache[8];
  static size_t used = 0;
  for (size_t i = 0; i < used; ++i)
    if (cache[i].type == type) return cache[i].api;
  const DlExchangeApi* api = nullptr;
  for (const char* name : {"__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"}) {
    PyObject* capsule = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), name);
    if (capsule == nullptr) {
      PyErr_Clear();
      continue;
    }
    if (PyCapsule_IsValid(capsule, "dlpack_exchange_api"))
      api = static_cast<const DlExchangeApi*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
    Py_DECREF(capsule);
    if (api != nullptr) break;
  }
  if (api != nullptr && (api->header.version.major != 1 || api->dltensor_from_py_object_no_sync == nullptr)) api = nullptr;
  if (used < 8) cache[used++] = {type, api};
  return api;
}

nb::handle g_descriptor;  // cubinrt._descriptor: the fallback for other tensor kinds
nb::handle g_stream;      // q -> its framework's current stream, where q's type has no exchange API

// Any tensor object as a cubinrt_tensor: through the exchange API when its type has one, else
// through cubinrt._descriptor (CuPy, __cuda_array_interface__, DLPack). *api gets the API used.
cubinrt_tensor any_tensor(nb::handle obj, const char* name, const DlExchangeApi** api_used = nullptr) {
  if (obj.is_none()) return cubinrt_tensor{};
  if (const DlExchangeApi* api = exchange_api(Py_TYPE(obj.ptr()))) {
    DlTensor dl{};
    if (api->dltensor_from_py_object_no_sync(obj.ptr(), &dl) != 0) throw nb::python_error();
    cubinrt_tensor t{};
    if (dl.ndim < 0 || dl.ndim > CUBINRT_MAX_DIMS)
      throw nb::value_error((std::string(name) + " has " + std::to_string(dl.ndim) + " dimensions: cubinrt takes at most 6").c_str());
    t.data = static_cast<char*>(dl.data) + dl.byte_offset;
    t.dtype_code = dl.dtype.code, t.dtype_bits = dl.dtype.bits, t.dtype_lanes = dl.dtype.lanes;
    t.ndim = dl.ndim;
    for (int i = 0; i < dl.ndim; ++i) {
      t.shape[i] = dl.shape[i];
      t.strides[i] = dl.strides ? dl.strides[i] : 0;
    }
    t.device_type = dl.device.device_type, t.device_id = dl.device.device_id;
    if (api_used) *api_used = api;
    return t;
  }
  return tensor(g_descriptor(obj, name), name);
}

// Bytes a workspace tensor holds.
uint64_t tensor_bytes(const cubinrt_tensor& t) {
  uint64_t n = t.data ? uint64_t{t.dtype_bits} * t.dtype_lanes / 8 : 0;
  for (int i = 0; i < t.ndim; ++i) n *= static_cast<uint64_t>(t.shape[i]);
  return n;
}

// The stream a launch takes: the given one, else the framework's current stream for the lead
// tensor's device (the exchange API's, else the package's hook), else the default stream.
void* launch_stream(nb::handle stream, nb::handle lead, const DlExchangeApi* api, const cubinrt_tensor& lead_t) {
  void* out = nullptr;
  if (!stream.is_none()) {
    out = reinterpret_cast<void*>(nb::cast<uintptr_t>(stream));
  } else if (api != nullptr && api->current_work_stream != nullptr && lead_t.device_type == CUBINRT_DL_CUDA) {
    if (api->current_work_stream(lead_t.device_type, lead_t.device_id, &out) != 0) throw nb::python_error();
  } else if (api == nullptr && g_stream.is_valid() && !lead.is_none()) {
    out = reinterpret_cast<void*>(nb::cast<uintptr_t>(g_stream(lead)));
  }
  return out;
}

// The launch arguments from tensor objects, and the stream (launch_stream, led by q).
cubinrt_decode_args launch_args(nb::handle q, nb::handle k, nb::handle v, nb::handle k_sf, nb::handle v_sf, nb::handle block_table,
                                nb::handle seq_lens, nb::handle out, nb::handle lse, int32_t kv_declared, float k_scale, float v_scale,
                                float softmax_scale, nb::handle workspace, nb::handle stream, void** stream_out) {
  cubinrt_decode_args a;
  cubinrt_decode_args_init(&a);
  const DlExchangeApi* q_api = nullptr;
  a.q = any_tensor(q, "q", &q_api), a.k = any_tensor(k, "k"), a.v = any_tensor(v, "v");
  a.k_sf = any_tensor(k_sf, "k_sf"), a.v_sf = any_tensor(v_sf, "v_sf");
  a.block_table = any_tensor(block_table, "block_table"), a.seq_lens = any_tensor(seq_lens, "seq_lens");
  a.out = any_tensor(out, "out"), a.lse = any_tensor(lse, "lse");
  a.kv_declared = kv_declared, a.k_scale = k_scale, a.v_scale = v_scale, a.softmax_scale = softmax_scale;
  const cubinrt_tensor ws = any_tensor(workspace, "workspace");
  a.workspace = ws.data, a.workspace_bytes = tensor_bytes(ws);
  *stream_out = launch_stream(stream, q, q_api, a.q);
  return a;
}

// A DLPack-exporting object (NumPy, JAX, ...) as a descriptor, through nanobind's importer.
nb::tuple dlpack_descriptor(nb::ndarray<nb::ro> a) {
  nb::list shape, strides;
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape.append(a.shape(i));
    strides.append(a.stride(i));
  }
  const nb::dlpack::dtype dt = a.dtype();
  return nb::make_tuple(reinterpret_cast<uintptr_t>(a.data()), int(dt.code), int(dt.bits), nb::tuple(shape), nb::tuple(strides), a.device_type(),
                        a.device_id());
}

}  // namespace

NB_MODULE(_cubinrt, m) {
  m.doc() = "cubinrt's C ABI (use the cubinrt package, not this module)";
  // The package's callbacks (g_error, g_descriptor, g_stream) live for the process, and through
  // them the package and its objects: nothing of them is freed before exit, and nanobind's exit
  // report of live instances would only say so.
  nb::set_leak_warnings(false);
  m.def("_set_error_type", [](nb::object e) { g_error = e.release(); });
  m.def("version", [] { return std::string(cubinrt_version()); });
  m.def("c_api_version", [] { return cubinrt_c_api_version(); });

  nb::class_<Runtime>(m, "Runtime")
      .def("__init__",
           [](Runtime* self, int device, std::optional<std::string> uuid, std::optional<std::string> bundle, bool lazy, bool self_check,
              std::vector<Key> required) {
             std::vector<cubinrt_decode_key> keys = c_keys(required);
             cubinrt_runtime_options o = options(device, uuid, bundle, lazy, self_check, keys);
             cubinrt_runtime* h = nullptr;
             check(cubinrt_runtime_create(&o, &h));
             new (self) Runtime{h};
           },
           nb::arg("device"), nb::arg("uuid").none(), nb::arg("bundle").none(), nb::arg("lazy"), nb::arg("self_check"), nb::arg("required"))
      .def("device",
           [](const Runtime& r) {
             cubinrt_device_info d;
             cubinrt_device_info_init(&d);
             check(cubinrt_runtime_device(r.h, &d));
             nb::dict out;
             out["ordinal"] = d.ordinal, out["name"] = std::string(d.name), out["uuid"] = std::string(d.uuid), out["sm"] = d.sm;
             out["driver_version"] = d.driver_version, out["multiprocessors"] = d.multiprocessors;
             return out;
           })
      .def("bundle",
           [](const Runtime& r) {
             cubinrt_bundle_info b;
             cubinrt_bundle_info_init(&b);
             check(cubinrt_runtime_bundle(r.h, &b));
             nb::dict out;
             out["name"] = std::string(b.name), out["entries"] = b.entries, out["bytes"] = b.bytes, out["generator"] = std::string(b.generator);
             out["toolkit"] = std::string(b.toolkit), out["manifest_version"] = b.manifest_version, out["min_driver_version"] = b.min_driver_version;
             return out;
           })
      .def("supports",
           [](const Runtime& r, Key k) {
             cubinrt_decode_key key{std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k)};
             int32_t ok = 0;
             char reason[1024];
             check(cubinrt_decode_supports(r.h, &key, &ok, reason, sizeof reason));
             return std::make_pair(ok != 0, std::string(reason));
           })
      .def("available", [](const Runtime& r) {
        size_t n = 0;
        check(cubinrt_decode_available(r.h, nullptr, 0, &n));
        std::vector<cubinrt_decode_key> keys(n);
        check(cubinrt_decode_available(r.h, keys.data(), keys.size(), &n));
        std::vector<Key> out;
        for (size_t i = 0; i < std::min(n, keys.size()); ++i) out.emplace_back(keys[i].head_dim, keys[i].q_dtype, keys[i].kv_dtype, keys[i].page_size);
        return out;
      });

  nb::class_<Plan>(m, "DecodePlan")
      .def("__init__",
           [](Plan* self, nb::object runtime, uint32_t batch, uint32_t num_q_heads, uint32_t num_kv_heads, uint32_t head_dim, int32_t q_dtype,
              int32_t kv_storage, int32_t kv_declared, uint32_t page_size, int32_t layout, uint32_t block_table_stride, uint32_t max_seq_len,
              int32_t num_splits, int32_t merge, int32_t overlap, int32_t v_sf_order) {
             const Runtime& r = nb::cast<const Runtime&>(runtime);
             cubinrt_decode_shape s;
             cubinrt_decode_shape_init(&s);
             s.batch = batch, s.num_q_heads = num_q_heads, s.num_kv_heads = num_kv_heads, s.head_dim = head_dim;
             s.q_dtype = q_dtype, s.kv_storage = kv_storage, s.kv_declared = kv_declared, s.page_size = page_size, s.layout = layout;
             s.block_table_stride = block_table_stride, s.max_seq_len = max_seq_len, s.num_splits = num_splits, s.merge = merge;
             s.overlap = overlap, s.v_sf_order = v_sf_order;
             cubinrt_decode_plan* h = nullptr;
             check(cubinrt_decode_plan_create(r.h, &s, &h));
             new (self) Plan{h, runtime};
           })
      .def("info",
           [](const Plan& p) {
             cubinrt_decode_plan_info i;
             cubinrt_decode_plan_info_init(&i);
             check(cubinrt_decode_plan_info_get(p.h, &i));
             return nb::make_tuple(i.workspace_bytes, i.num_splits, i.merge, std::string(i.kernel), i.overlaps_previous_kernel != 0);
           })
      // The hot path: tensor objects in (torch's through DLPack's C exchange API, with no Python
      // call), one C call, nothing allocated on success.
      .def("run",
           [](const Plan& p, nb::handle q, nb::handle k, nb::handle v, nb::handle k_sf, nb::handle v_sf, nb::handle block_table,
              nb::handle seq_lens, nb::handle out, nb::handle lse, int32_t kv_declared, float k_scale, float v_scale, float softmax_scale,
              nb::handle workspace, nb::handle stream) {
             void* s = nullptr;
             const cubinrt_decode_args a = launch_args(q, k, v, k_sf, v_sf, block_table, seq_lens, out, lse, kv_declared, k_scale, v_scale,
                                                       softmax_scale, workspace, stream, &s);
             launch_checked(p, a, s);
           },
           nb::arg("q").none(), nb::arg("k").none(), nb::arg("v").none(), nb::arg("k_sf").none(), nb::arg("v_sf").none(),
           nb::arg("block_table").none(), nb::arg("seq_lens").none(),
           nb::arg("out").none(), nb::arg("lse").none(), nb::arg("kv_declared"), nb::arg("k_scale"), nb::arg("v_scale"),
           nb::arg("softmax_scale"), nb::arg("workspace").none(), nb::arg("stream").none())
      // Host microseconds per launch of the C ABI itself (cubinrt_decode_plan_launch: the C++
      // launch path), arguments made once, n launches back to back: the overhead benchmark's floor.
      .def("_time_launches",
           [](const Plan& p, nb::handle q, nb::handle k, nb::handle v, nb::handle block_table, nb::handle seq_lens, nb::handle out,
              int32_t kv_declared, nb::handle workspace, int n) {
             void* s = nullptr;
             nb::handle none = nb::none();
             const cubinrt_decode_args a =
                 launch_args(q, k, v, none, none, block_table, seq_lens, out, none, kv_declared, 1.f, 1.f, 0.f, workspace, none, &s);
             const auto t0 = std::chrono::steady_clock::now();
             for (int i = 0; i < n; ++i) check(cubinrt_decode_plan_launch(p.h, &a, s));
             const auto t1 = std::chrono::steady_clock::now();
             return std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
           })
      // Descriptors in (the Python-side conversion), for callers that build them.
      .def("launch",
           [](const Plan& p, nb::handle q, nb::handle k, nb::handle v, nb::handle k_sf, nb::handle v_sf, nb::handle block_table, nb::handle seq_lens,
              nb::handle out, nb::handle lse, int32_t kv_declared, float k_scale, float v_scale, float softmax_scale, uintptr_t workspace,
              uint64_t workspace_bytes, uintptr_t stream) {
             cubinrt_decode_args a;
             cubinrt_decode_args_init(&a);
             a.q = tensor(q, "q"), a.k = tensor(k, "k"), a.v = tensor(v, "v");
             a.k_sf = tensor(k_sf, "k_sf"), a.v_sf = tensor(v_sf, "v_sf");
             a.block_table = tensor(block_table, "block_table"), a.seq_lens = tensor(seq_lens, "seq_lens");
             a.out = tensor(out, "out"), a.lse = tensor(lse, "lse");
             a.kv_declared = kv_declared, a.k_scale = k_scale, a.v_scale = v_scale, a.softmax_scale = softmax_scale;
             a.workspace = reinterpret_cast<void*>(workspace), a.workspace_bytes = workspace_bytes;
             launch_checked(p, a, reinterpret_cast<void*>(stream));
           },
           nb::arg("q").none(), nb::arg("k").none(), nb::arg("v").none(), nb::arg("k_sf").none(), nb::arg("v_sf").none(),
           nb::arg("block_table").none(), nb::arg("seq_lens").none(), nb::arg("out").none(), nb::arg("lse").none(), nb::arg("kv_declared"),
           nb::arg("k_scale"), nb::arg("v_scale"), nb::arg("softmax_scale"), nb::arg("workspace"), nb::arg("workspace_bytes"), nb::arg("stream"));

  nb::class_<AppendPlan>(m, "KvAppendPlan")
      .def("__init__",
           [](AppendPlan* self, nb::object runtime, uint32_t num_kv_heads, uint32_t head_dim, int32_t in_dtype, int32_t cache_storage,
              int32_t cache_declared, uint32_t page_size, int32_t layout, int32_t overlap, int32_t v_sf_order) {
             const Runtime& r = nb::cast<const Runtime&>(runtime);
             cubinrt_kv_append_shape s;
             cubinrt_kv_append_shape_init(&s);
             s.num_kv_heads = num_kv_heads, s.head_dim = head_dim, s.in_dtype = in_dtype, s.cache_storage = cache_storage;
             s.cache_declared = cache_declared, s.page_size = page_size, s.layout = layout, s.overlap = overlap, s.v_sf_order = v_sf_order;
             cubinrt_kv_append_plan* h = nullptr;
             check(cubinrt_kv_append_plan_create(r.h, &s, &h));
             new (self) AppendPlan{h, runtime};
           })
      // Tensor objects in, one C call (the GIL released around it), nothing allocated on success.
      .def("run",
           [](const AppendPlan& p, nb::handle k, nb::handle v, nb::handle slots, nb::handle k_cache, nb::handle v_cache, nb::handle k_sf,
              nb::handle v_sf, int32_t cache_declared, float k_scale, float v_scale, nb::handle stream) {
             cubinrt_kv_append_args a;
             cubinrt_kv_append_args_init(&a);
             const DlExchangeApi* k_api = nullptr;
             a.k = any_tensor(k, "k", &k_api), a.v = any_tensor(v, "v"), a.slots = any_tensor(slots, "slots");
             a.k_cache = any_tensor(k_cache, "k_cache"), a.v_cache = any_tensor(v_cache, "v_cache");
             a.k_sf = any_tensor(k_sf, "k_sf"), a.v_sf = any_tensor(v_sf, "v_sf");
             a.cache_declared = cache_declared, a.k_scale = k_scale, a.v_scale = v_scale;
             void* s = launch_stream(stream, k, k_api, a.k);
             cubinrt_status status;
             {
               nb::gil_scoped_release unlocked;
               status = cubinrt_kv_append_plan_launch(p.h, &a, s);
             }
             check(status);
           },
           nb::arg("k").none(), nb::arg("v").none(), nb::arg("slots").none(), nb::arg("k_cache").none(), nb::arg("v_cache").none(),
           nb::arg("k_sf").none(), nb::arg("v_sf").none(), nb::arg("cache_declared"), nb::arg("k_scale"), nb::arg("v_scale"),
           nb::arg("stream").none());

  m.def("_set_descriptor_fn", [](nb::object f) { g_descriptor = f.release(); });
  m.def("_set_stream_fn", [](nb::object f) { g_stream = f.release(); });
  m.def("_has_exchange_api", [](nb::handle obj) { return exchange_api(Py_TYPE(obj.ptr())) != nullptr; });
  m.def("selfcheck", [](int device, std::optional<std::string> bundle, bool known_answer) {
    std::optional<std::string> uuid;
    std::vector<cubinrt_decode_key> keys;
    cubinrt_runtime_options o = options(device, uuid, bundle, true, false, keys);
    cubinrt_selfcheck_result r;
    cubinrt_selfcheck_result_init(&r);
    const cubinrt_status s = cubinrt_selfcheck(&o, known_answer, &r);
    if (s != CUBINRT_SUCCESS && s != CUBINRT_ERROR_SELF_CHECK_FAILED) raise(s);
    return nb::make_tuple(r.passed != 0, r.no_gpu != 0, r.total_ms, std::string(r.report));
  }, nb::arg("device"), nb::arg("bundle").none(), nb::arg("known_answer"));
  m.def("dlpack_descriptor", &dlpack_descriptor);
}
