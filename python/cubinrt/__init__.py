"""cubinrt: prebuilt paged-decode attention kernels, loaded and dispatched for the GPU at hand.

    rt = cubinrt.Runtime()                                   # device 0, the embedded bundle
    ok, why = rt.supports(128, "bf16", "fp8_e4m3", 16)
    plan = cubinrt.DecodePlan(rt, batch=..., num_q_heads=..., num_kv_heads=..., head_dim=128,
                              q_dtype="bf16", kv_storage="uint8", kv_declared="fp8_e4m3",
                              page_size=16, block_table_stride=...)
    plan.run(q, k, v, block_table, seq_lens, out, k_scale=..., v_scale=...)

Tensors are torch tensors, CuPy arrays (anything with __cuda_array_interface__) or any DLPack
exporter; they are passed by pointer, shape and strides (no copy). With torch tensors the launch
goes on torch's current stream. The KV dtype is never inferred: uint8 storage is FP8 only when
kv_declared says which. Every failure raises cubinrt.Error carrying the library's sentence.
"""
from __future__ import annotations

from . import _cubinrt

__all__ = ["Error", "Runtime", "DecodePlan", "selfcheck", "version", "DTYPES"]

version = _cubinrt.version()
c_api_version = _cubinrt.c_api_version()


class Error(RuntimeError):
    """A cubinrt failure: str(e) is the library's message; e.status its status name."""

    def __init__(self, message: str, code: int = 0, status: str = ""):
        super().__init__(message)
        self.code = code
        self.status = status


_cubinrt._set_error_type(Error)

# cubinrt/dtypes.h codes.
DTYPES = {"fp16": 1, "bf16": 2, "fp8_e4m3": 3, "fp8_e5m2": 4, "nvfp4": 5, "uint8": 6}
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
_LAYOUTS = {"nhd": 0, "hnd": 1}
_MERGES = {"choose": 0, "workspace": 1, "cluster": 2}
# NVFP4's V block scales: linear, or TensorRT-LLM's 4-token interleave (docs/formats.md).
_SCALE_ORDERS = {"linear": 0, "interleaved4": 1}
_DL_CUDA, _DL_CPU = 2, 1


def _code(table: dict, value, what: str) -> int:
    if value is None:
        return 0
    try:
        return table[value]
    except KeyError:
        raise Error(f"{what} is {value!r}: one of {', '.join(table)}", 1, "CUBINRT_ERROR_INVALID_ARGUMENT") from None


try:  # torch is optional: it gives the fast path for its tensors and the current stream
    import torch as _torch

    _TORCH_DL = {
        _torch.float16: (2, 16), _torch.bfloat16: (4, 16), _torch.float32: (2, 32), _torch.uint8: (1, 8),
        _torch.int32: (0, 32), _torch.int64: (0, 64), _torch.float8_e4m3fn: (10, 8), _torch.float8_e5m2: (12, 8),
    }
    _current_stream = _torch._C._cuda_getCurrentRawStream
    # torch without DLPack's C exchange API: its current stream from Python.
    _cubinrt._set_stream_fn(lambda q: _current_stream(q.get_device()) if isinstance(q, _torch.Tensor) and q.is_cuda else 0)
except Exception:  # pragma: no cover - no torch
    _torch = None

_cubinrt._set_descriptor_fn(lambda t, name: _descriptor(t, name))

_CAI_TYPES = {"<f2": (2, 16), "<f4": (2, 32), "|u1": (1, 8), "<i4": (0, 32), "<i8": (0, 64)}


def _descriptor(t, name: str):
    """(data, dtype code, bits, shape, strides in elements, device type, device id), or None."""
    if t is None:
        return None
    if _torch is not None and isinstance(t, _torch.Tensor):
        code_bits = _TORCH_DL.get(t.dtype)
        if code_bits is None:
            raise Error(f"paged decode launch: {name} has torch dtype {t.dtype}, which cubinrt does not take", 1,
                        "CUBINRT_ERROR_INVALID_ARGUMENT")
        dev = t.get_device()
        return (t.data_ptr(), code_bits[0], code_bits[1], t.shape, t.stride(), _DL_CUDA if dev >= 0 else _DL_CPU, max(dev, 0))
    cai = getattr(t, "__cuda_array_interface__", None)
    if cai is not None:
        code_bits = _CAI_TYPES.get(cai["typestr"])
        if code_bits is None:
            raise Error(f"paged decode launch: {name} has type {cai['typestr']}, which cubinrt does not take", 1,
                        "CUBINRT_ERROR_INVALID_ARGUMENT")
        size = code_bits[1] // 8
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        strides = tuple(s // size for s in strides) if strides else (0,) * len(shape)
        device = getattr(t, "device", None)
        device_id = getattr(device, "id", 0) if device is not None and not isinstance(device, str) else 0
        return (cai["data"][0], code_bits[0], code_bits[1], shape, strides, _DL_CUDA, int(device_id))
    if hasattr(t, "__dlpack__"):
        try:
            return _cubinrt.dlpack_descriptor(t)
        except TypeError as e:
            raise Error(f"paged decode launch: {name} could not be read through DLPack: {e}", 1,
                        "CUBINRT_ERROR_INVALID_ARGUMENT") from None
    raise Error(f"paged decode launch: {name} is a {type(t).__name__}, not a tensor (torch, __cuda_array_interface__ or DLPack)",
                1, "CUBINRT_ERROR_INVALID_ARGUMENT")


class Runtime:
    """The kernels of a bundle, selected and loaded for one device (see cubinrt/runtime.hpp)."""

    def __init__(self, device: int = 0, *, device_uuid: str | None = None, bundle_path: str | None = None, lazy: bool = True,
                 self_check: bool = False, required=()):
        keys = [(int(hd), _code(DTYPES, q, "q_dtype"), _code(DTYPES, kv, "kv_dtype"), int(ps)) for hd, q, kv, ps in required]
        self._rt = _cubinrt.Runtime(device, device_uuid, bundle_path, lazy, self_check, keys)
        self.device = self._rt.device()
        self.bundle = self._rt.bundle()

    def supports(self, head_dim: int, q_dtype: str, kv_dtype: str, page_size: int) -> tuple[bool, str]:
        """(True, which entry serves it) or (False, why not), without loading anything."""
        return self._rt.supports((head_dim, _code(DTYPES, q_dtype, "q_dtype"), _code(DTYPES, kv_dtype, "kv_dtype"), page_size))

    def available(self) -> list[tuple[int, str, str, int]]:
        """The (head_dim, q_dtype, kv_dtype, page_size) keys this device can run."""
        return [(hd, _DTYPE_NAMES[q], _DTYPE_NAMES[kv], ps) for hd, q, kv, ps in self._rt.available()]


class DecodePlan:
    """One decode shape resolved to a kernel and a launch shape (cubinrt/paged_decode.hpp)."""

    def __init__(self, runtime: Runtime, *, batch: int, num_q_heads: int, num_kv_heads: int, head_dim: int, q_dtype: str,
                 kv_storage: str, kv_declared: str | None = None, page_size: int, layout: str = "nhd", block_table_stride: int,
                 max_seq_len: int = 0, num_splits: int = 0, merge: str = "choose", overlap: bool = True,
                 v_sf_order: str = "linear"):
        """overlap: launches may begin during the tail of the kernel before them on the stream and
        wait for its end before touching memory (programmatic dependent launch, sm_90 and later;
        results are the same); False keeps plain stream order. `overlaps_previous_kernel` says
        whether this device and kernel take it. v_sf_order (NVFP4): "linear", or "interleaved4",
        TensorRT-LLM's order of V's block scales, which vLLM also writes on SM10x; its kernels
        are built for the SM100 family only."""
        self.runtime = runtime
        self.kv_declared = kv_declared
        self._declared = _code(DTYPES, kv_declared, "kv_declared")
        self._plan = _cubinrt.DecodePlan(runtime._rt, batch, num_q_heads, num_kv_heads, head_dim, _code(DTYPES, q_dtype, "q_dtype"),
                                         _code(DTYPES, kv_storage, "kv_storage"), self._declared, page_size,
                                         _code(_LAYOUTS, layout, "layout"), block_table_stride, max_seq_len, num_splits,
                                         _code(_MERGES, merge, "merge"), 0 if overlap else 1,
                                         _code(_SCALE_ORDERS, v_sf_order, "v_sf_order"))
        self.workspace_bytes, self.num_splits, merge_code, self.kernel, self.overlaps_previous_kernel = self._plan.info()
        self.merge = "cluster" if merge_code == 2 else "workspace"

    @property
    def op_id(self) -> int:
        """This plan's id for torch.ops.cubinrt.paged_decode (registers it on first use)."""
        from . import _torch_op
        return _torch_op.register(self)

    def run(self, q, k, v, block_table, seq_lens, out, *, lse=None, k_scale: float = 1.0, v_scale: float = 1.0,
            softmax_scale: float = 0.0, workspace=None, k_sf=None, v_sf=None, stream: int | None = None) -> None:
        """Launches on `stream` (a CUstream as int); default: the tensors' framework's current
        stream (torch's, through DLPack's C exchange API), else the legacy default stream.
        `workspace`: zeroed device memory of workspace_bytes when the plan has any (it stays zeroed
        after each complete launch). NVFP4 (kv_declared="nvfp4"): k and v are uint8 rows of
        head_dim / 2 bytes, k_sf and v_sf their e4m3 block scales (uint8 or float8_e4m3fn, rows
        of head_dim / 16), k_scale and v_scale the global scales (docs/formats.md)."""
        self._plan.run(q, k, v, k_sf, v_sf, block_table, seq_lens, out, lse, self._declared, k_scale, v_scale, softmax_scale, workspace,
                       stream)


class KvAppendPlan:
    """The cache writer for one cache (cubinrt/kv_append.hpp): new K and V tokens
    [tokens, kv_heads, head_dim] into their slots (int64, page * page_size + offset; negative:
    padding, skipped), as the cache's dtype: copied (16-bit), x / scale saturated (FP8 declared on
    uint8 storage), or NVFP4 with e4m3 block scales in k_sf / v_sf (global scales k_scale,
    v_scale; docs/formats.md)."""

    def __init__(self, runtime: Runtime, *, num_kv_heads: int, head_dim: int, in_dtype: str, cache_storage: str,
                 cache_declared: str | None = None, page_size: int, layout: str = "nhd", overlap: bool = True,
                 v_sf_order: str = "linear"):
        """overlap: as DecodePlan's (programmatic dependent launch where the device has it).
        v_sf_order (NVFP4): the order V's block scales are written in, "linear" or "interleaved4"
        (TensorRT-LLM's; any GPU writes it)."""
        self.runtime = runtime
        self.cache_declared = cache_declared
        self._declared = _code(DTYPES, cache_declared, "cache_declared")
        self._plan = _cubinrt.KvAppendPlan(runtime._rt, num_kv_heads, head_dim, _code(DTYPES, in_dtype, "in_dtype"),
                                           _code(DTYPES, cache_storage, "cache_storage"), self._declared, page_size,
                                           _code(_LAYOUTS, layout, "layout"), 0 if overlap else 1,
                                           _code(_SCALE_ORDERS, v_sf_order, "v_sf_order"))

    @property
    def op_id(self) -> int:
        """This plan's id for torch.ops.cubinrt.kv_append (registers it on first use)."""
        from . import _torch_op
        return _torch_op.register(self)

    def run(self, k, v, slots, k_cache, v_cache, *, k_sf=None, v_sf=None, k_scale: float = 1.0, v_scale: float = 1.0,
            stream: int | None = None) -> None:
        """Launches on `stream` (default: the tensors' framework's current stream, as DecodePlan.run)."""
        self._plan.run(k, v, slots, k_cache, v_cache, k_sf, v_sf, self._declared, k_scale, v_scale, stream)


def selfcheck(device: int = 0, *, bundle_path: str | None = None, known_answer: bool = True):
    """The init-time self-check: (passed, no_gpu, total_ms, report text)."""
    return _cubinrt.selfcheck(device, bundle_path, known_answer)


if _torch is not None:
    from . import _torch_op  # noqa: F401  (registers torch.ops.cubinrt.paged_decode and kv_append)
