"""PyTorch scaled_dot_product_attention decode on the same shapes as cubinrt_bench, for the
side-by-side in docs/benchmarks.md. Contiguous bf16 cache (SDPA has no paged form), GQA through
enable_gqa, so the KV read is the same bytes as cubinrt's. Times: CUDA events, median of 25.
Usage: sdpa_baseline.py [--only TEXT] [JSON]: only the shapes whose name contains TEXT; rows to
JSON."""
import argparse
import json

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

SHAPES = [
    ("B64 L8192 32q/8kv D128", 64, 8192, 32, 8, 128),
    ("B64 L8192 16q/8kv D256", 64, 8192, 16, 8, 256),
    ("B1 L32768 32q/8kv D128", 1, 32768, 32, 8, 128),
    ("B1 L128 32q/8kv D128", 1, 128, 32, 8, 128),
]
BACKENDS = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]


def time_ms(fn, reps=25):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    out.sort()
    return out[len(out) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("json", nargs="?")
    args = ap.parse_args()
    rows = []
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print("| shape | backend | time (us) | KV TB/s |\n|---|---|---|---|")
    for name, b, l, hq, hk, d in SHAPES:
        if args.only not in name:
            continue
        q = torch.rand(b, hq, 1, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
        k = torch.rand(b, hk, l, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
        v = torch.rand(b, hk, l, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
        kv_bytes = 2 * b * l * hk * d * 2
        for bname, backend in BACKENDS:
            try:
                with sdpa_kernel(backend):
                    ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
                tbps = kv_bytes / (ms * 1e-3) / 1e12
                print(f"| {name} | {bname} | {ms * 1e3:.1f} | {tbps:.2f} |")
                rows.append({"shape": name, "backend": bname, "us": ms * 1e3, "tbps": tbps})
            except Exception as e:  # a backend that refuses a shape says so
                print(f"| {name} | {bname} | not run: {type(e).__name__}: {str(e).splitlines()[0][:120]} | |")
        del q, k, v
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
