"""torch.ops.cubinrt.paged_decode: a decode launch as one opaque custom op, so torch.compile does
not trace into it and CUDA-graph capture records it as the one kernel it is.

The op names its plan by id (plan.op_id); plans are made outside the compiled region, once per
shape, as an engine makes them at warm-up. It writes `out` (and the workspace) in place and
returns nothing; its fake implementation does nothing, which is all a meta/fake tensor pass needs.
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
                 softmax_scale: float) -> None:
    plan = _PLANS.get(plan_id)
    if plan is None:
        from . import Error
        raise Error(f"cubinrt::paged_decode: no live plan has id {plan_id}", 1, "CUBINRT_ERROR_INVALID_ARGUMENT")
    plan.run(q, k, v, block_table, seq_lens, out, k_scale=k_scale, v_scale=v_scale, softmax_scale=softmax_scale, workspace=workspace)


@paged_decode.register_fake
def _paged_decode_fake(q, k, v, block_table, seq_lens, out, workspace, plan_id, k_scale, v_scale, softmax_scale) -> None:
    return None
