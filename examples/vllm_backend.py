"""A vLLM-style decode attention backend on cubinrt: the surface an engine's attention backend
has, computed from the bundle for the current device.

    backend = CubinrtDecodeBackend(num_heads=32, head_size=128, num_kv_heads=8,
                                   kv_cache_dtype="fp8", block_size=16, dtype=torch.bfloat16)
    out = backend.forward(query, kv_cache, block_table, seq_lens, "fp8", k_scale, v_scale)

kv_cache is vLLM's one tensor, [num_blocks, 2, block_size, num_kv_heads, head_size] (or the
heads-first [num_blocks, 2, num_kv_heads, block_size, head_size] with heads_first=True), of uint8
for FP8 caches: K and V are passed as views of it, with no copy. kv_cache_dtype takes vLLM's
strings: "auto" (the model dtype), "fp8" (= fp8_e4m3, as in vLLM), "fp8_e4m3", "fp8_e5m2". uint8
storage is FP8 because the string says so, never by guess (NVFP4, with its scale tensors, goes
through cubinrt.DecodePlan directly: docs/engines.md).
"""
from __future__ import annotations

import torch

import cubinrt

_MODEL_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}
_KV_DTYPES = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}


def _kv_dtype(kv_cache_dtype: str, model_dtype: str) -> tuple[str, str | None]:
    """(storage, declared) for a vLLM kv_cache_dtype string."""
    if kv_cache_dtype == "auto":
        return model_dtype, None
    if kv_cache_dtype in _KV_DTYPES:
        return "uint8", _KV_DTYPES[kv_cache_dtype]
    # NVFP4 caches carry block-scale tensors that this example's one-tensor cache does not hold;
    # cubinrt.DecodePlan takes them (k_sf, v_sf: docs/engines.md).
    raise cubinrt.Error(f"kv_cache_dtype {kv_cache_dtype!r} is not served by this example backend: use auto, fp8, fp8_e4m3 or "
                        "fp8_e5m2 (NVFP4: cubinrt.DecodePlan with k_sf and v_sf)", 9, "CUBINRT_ERROR_UNSUPPORTED")


def _runtime(device: int) -> cubinrt.Runtime:
    if device not in _runtimes:
        _runtimes[device] = cubinrt.Runtime(device)
    return _runtimes[device]


_runtimes: dict[int, cubinrt.Runtime] = {}


class CubinrtDecodeBackend:
    @staticmethod
    def get_supported_head_sizes(device: int = 0) -> list[int]:
        return sorted({key[0] for key in _runtime(device).available()})

    @staticmethod
    def supports_combination(head_size: int, dtype: torch.dtype, kv_cache_dtype: str, block_size: int, device: int = 0) -> tuple[bool, str]:
        """(True, the entry that serves it) or (False, why not), from the bundle for this device."""
        model = _MODEL_DTYPES.get(dtype)
        if model is None:
            return False, f"model dtype {dtype} is not served (float16 or bfloat16)"
        try:
            storage, declared = _kv_dtype(kv_cache_dtype, model)
        except cubinrt.Error as e:
            return False, str(e)
        return _runtime(device).supports(head_size, model, declared or storage, block_size)

    def __init__(self, num_heads: int, head_size: int, num_kv_heads: int, kv_cache_dtype: str = "auto", block_size: int = 16,
                 dtype: torch.dtype = torch.bfloat16, device: int | None = None, heads_first: bool = False):
        self.device = torch.cuda.current_device() if device is None else device
        self.num_heads, self.head_size, self.num_kv_heads = num_heads, head_size, num_kv_heads
        self.block_size, self.heads_first = block_size, heads_first
        self.model_dtype = _MODEL_DTYPES[dtype]
        self.kv_cache_dtype = kv_cache_dtype
        self.storage, self.declared = _kv_dtype(kv_cache_dtype, self.model_dtype)
        self.rt = _runtime(self.device)
        # Refused here, at init, in one sentence (head_dim 512 outside SM100, say), not at the
        # first request or during graph capture.
        ok, why = self.rt.supports(head_size, self.model_dtype, self.declared or self.storage, block_size)
        if not ok:
            raise cubinrt.Error(why, 9, "CUBINRT_ERROR_UNSUPPORTED")
        self._plans: dict[tuple[int, int], tuple[cubinrt.DecodePlan, torch.Tensor | None]] = {}

    def plan(self, batch: int, blocks_per_seq: int):
        """The plan (and its zeroed workspace) for a batch shape: made once, outside any graph capture."""
        key = (batch, blocks_per_seq)
        if key not in self._plans:
            plan = cubinrt.DecodePlan(self.rt, batch=batch, num_q_heads=self.num_heads, num_kv_heads=self.num_kv_heads,
                                      head_dim=self.head_size, q_dtype=self.model_dtype, kv_storage=self.storage,
                                      kv_declared=self.declared, page_size=self.block_size, block_table_stride=blocks_per_seq)
            ws = torch.zeros(plan.workspace_bytes, dtype=torch.uint8, device=self.device) if plan.workspace_bytes else None
            self._plans[key] = (plan, ws)
        return self._plans[key]

    def forward(self, query: torch.Tensor, kv_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                kv_cache_dtype: str, k_scale: float = 1.0, v_scale: float = 1.0, out: torch.Tensor | None = None) -> torch.Tensor:
        """query [batch, num_heads, head_size] (any strides the kernels can load, e.g. a slice of a
        fused QKV projection); returns out [batch, num_heads, head_size]."""
        if kv_cache_dtype != self.kv_cache_dtype:
            raise cubinrt.Error(f"kv_cache_dtype {kv_cache_dtype!r} differs from the backend's {self.kv_cache_dtype!r}", 1,
                                "CUBINRT_ERROR_INVALID_ARGUMENT")
        k, v = kv_cache[:, 0], kv_cache[:, 1]
        if self.heads_first:  # [blocks, heads, block, D] -> an NHD-shaped view with heads-first strides
            k, v = k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
        plan, ws = self.plan(query.shape[0], block_table.shape[1])
        if out is None:
            out = torch.empty(query.shape, dtype=query.dtype, device=query.device)
        plan.run(query, k, v, block_table, seq_lens, out, k_scale=k_scale, v_scale=v_scale, workspace=ws)
        return out
