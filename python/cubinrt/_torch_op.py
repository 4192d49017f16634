"""torch.ops.cubinrt.paged_decode and torch.ops.cubinrt.kv_append: a decode launch and a cache
append as opaque custom ops, so torch.compile does not trace into them and CUDA-graph capture
records each as the one kernel it is.

An op names its plan by id (plan.op_id); plans are made outside the compiled region, once per
shape, as an engine makes them at warm-up. paged_decode writes `out` (and the workspace) in place,
kv_append the cache's K and V (and NVFP4's scales); both return nothing, and their fake
implementations do nothing, which is all a meta/fake tensor pass needs.
Eager callers should call plan.run directly: the custom-op dispatcher adds tens of microseconds.
"""
from __future__ import annotations

import weakref
from typing import Optional

import torch

_PLANS: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()


def register(plan) -> int:
    _PLANS[id(plan)] = plan
    return id(plan)


@torch.library.custom_op("cubinrt::paged_decode", mutates_args=("out", "workspace"), device_types="cuda")
def paged_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                 out: torch.Tensor, workspace: Optional[torch.Tensor], plan_id: int, k_scale: float, v_scale: float,
                 softmax_scale: float, k_sf: Optional[torch.Tensor] = None, v_sf: Optional[torch.Tensor] = None) -> None:
    plan = _PLANS.get(plan_id)
    if plan is None:
        from . import Error
        raise Error(f"cubinrt::paged_decode: no live plan has id {plan_id}", 1, "CUBINRT_ERROR_INVALID_ARGUMENT")
    plan.run(q, k, v, block_table, seq_lens, out, k_scale=k_scale, v_scale=v_scale, softmax_scale=softmax_scale, workspace=workspace,
             k_sf=k_sf, v_sf=v_sf)


@paged_decode.register_fake
def _paged_decode_fake(q, k, v, block_table, seq_lens, out, workspace, plan_id, k_scale, v_scale, softmax_scale, k_sf=None, v_sf=None) -> None:
    return None


@torch.library.custom_op("cubinrt::kv_append", mutates_args=("k_cache", "v_cache", "k_sf", "v_sf"), device_types="cuda")
def kv_append(k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              k_sf: Optional[torch.Tensor], v_sf: Optional[torch.Tensor], plan_id: int, k_scale: float, v_scale: float) -> None:
    plan = _PLANS.get(plan_id)
    if plan is None:
        from . import Error
        raise Error(f"cubinrt::kv_append: no live plan has id {plan_id}", 1, "CUBINRT_ERROR_INVALID_ARGUMENT")
    plan.run(k, v, slots, k_cache, v_cache, k_sf=k_sf, v_sf=v_sf, k_scale=k_scale, v_scale=v_scale)


@kv_append.register_fake
def _kv_append_fake(k, v, slots, k_cache, v_cache, k_sf, v_sf, plan_id, k_scale, v_scale) -> None:
    return None
