"""The Python package on a GPU, through torch: every KV layout an engine hands over (vLLM's
one-tensor cache NHD and heads-first, FlashInfer's separate NHD and HND caches), q sliced from a
fused QKV projection, strided out and lse, against a float64 reference; CUDA-graph capture and
replay with changing lengths, eager and through the torch custom op; the vLLM-style backend
example. Skips, saying why, without torch or a GPU. CUBINRT_OVERHEAD=path also measures host
microseconds per call and writes them there."""
import math
import os
import sys
import time
import unittest

try:
    import torch
    HAVE_GPU = torch.cuda.is_available()
    WHY = "" if HAVE_GPU else "torch sees no CUDA device"
except ImportError:
    torch, HAVE_GPU, WHY = None, False, "torch is not installed"

import cubinrt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))


def tolerance(q_dtype):
    return 1e-2 if q_dtype == torch.bfloat16 else 2e-3  # as ref::tolerance (reference.cpp)


def reference(q, k, v, block_table, seq_lens, kv_dtype, k_scale, v_scale):
    """float64 attention: q [B, Hq, D]; k, v [pages, P, Hkv, D] views (any strides) holding the
    KV encoding in their storage dtype (uint8 FP8 decoded as kv_dtype)."""
    def decode(x, scale):  # the scales dequantise FP8 KV only (as in vLLM); 16-bit KV is taken as is
        if x.dtype == torch.uint8:
            x = x.view(kv_dtype)
        fp8 = x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
        return x.to(torch.float64) * (scale if fp8 else 1.0)
    B, Hq, D = q.shape
    P, Hkv = k.shape[1], k.shape[2]
    out = torch.empty(B, Hq, D, dtype=torch.float64, device=q.device)
    lse = torch.empty(B, Hq, dtype=torch.float64, device=q.device)
    for b in range(B):
        n = int(seq_lens[b])
        pages = block_table[b, : (n + P - 1) // P].long()
        kb = decode(k[pages].reshape(-1, Hkv, D)[:n], k_scale)
        vb = decode(v[pages].reshape(-1, Hkv, D)[:n], v_scale)
        for h in range(Hq):
            g = h // (Hq // Hkv)
            s = kb[:, g] @ q[b, h].to(torch.float64) / math.sqrt(D)
            lse[b, h] = torch.logsumexp(s, 0)
            out[b, h] = torch.softmax(s, 0) @ vb[:, g]
    return out, lse


def rel(got, want):
    return (torch.linalg.norm(got.to(torch.float64) - want) / torch.linalg.norm(want)).item()


def fp8_codes(shape, gen, device):
    """Random FP8 codes finite and below 4 in both encodings (as the C++ reference makes them)."""
    x = torch.randint(0, 256, shape, generator=gen, dtype=torch.int32).to(torch.uint8)
    mag = x & 0x7F
    ok = mag < 0x40  # e4m3 < 2 and e5m2 < 2
    return torch.where(ok, x, x & 0xBF).to(device)


def nvfp4_dequant(codes, sf, scale):
    """NVFP4 exactly, in float64: e2m1 (element 2i in the low nibble of byte i) x e4m3 block scale
    (linear rows of head_dim / 16) x global scale."""
    e2m1 = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64, device=codes.device)
    c = codes.long()
    x = torch.stack((e2m1[c & 15], e2m1[c >> 4]), -1).flatten(-2)
    return x * sf.contiguous().view(torch.float8_e4m3fn).to(torch.float64).repeat_interleave(16, -1) * scale


@unittest.skipUnless(HAVE_GPU, WHY)
class OnTheGpu(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rt = cubinrt.Runtime(torch.cuda.current_device())
        cls.gen = torch.Generator().manual_seed(7)

    def problem(self, B=3, Hq=16, Hkv=2, D=128, P=16, q_dtype=None, lens=(1, 77, 1000)):
        q_dtype = q_dtype or torch.bfloat16
        dev = "cuda"
        row = max(math.ceil(n / P) for n in lens) + 1
        pages = B * row + 3
        qkv = (torch.rand(B, (Hq + 2 * Hkv) * D, generator=self.gen) * 2 - 1).to(q_dtype).to(dev)
        q = qkv[:, : Hq * D].view(B, Hq, D)  # a view of the fused projection: batch stride (Hq + 2 Hkv) D
        perm = torch.randperm(pages, generator=self.gen)[: B * row].view(B, row).to(torch.int32).to(dev)
        seq_lens = torch.tensor(lens, dtype=torch.int32, device=dev)
        return q, perm, seq_lens, pages


    def new_tokens(self, table, lens, Hkv, D, P):
        """Every token of the sequences as new: its slot from the block table, bf16 K and V of
        about N(0, 4)."""
        T = int(lens.sum())
        slots = torch.tensor([int(table[b, i // P]) * P + i % P for b in range(len(lens)) for i in range(int(lens[b]))],
                             dtype=torch.int64, device="cuda")
        new_k = (torch.randn(T, Hkv, D, generator=self.gen) * 2).to(torch.bfloat16).to("cuda")
        new_v = (torch.randn(T, Hkv, D, generator=self.gen) * 2).to(torch.bfloat16).to("cuda")
        return slots, new_k, new_v

    def nvfp4_decode_matches(self, plan, q, k, v, k_sf, v_sf, table, lens, k_scale, v_scale, kd, vd, what):
        """One NVFP4 decode into NaN-filled out and lse, against float64 attention over the
        dequantized cache kd, vd: asserted within tolerance and printed. Returns (out, workspace)."""
        B, Hq, D = q.shape
        out = torch.full((B, Hq, D), float("nan"), dtype=q.dtype, device="cuda")
        lse = torch.full((B, Hq), float("nan"), dtype=torch.float32, device="cuda")
        ws = torch.zeros(plan.workspace_bytes, dtype=torch.uint8, device="cuda") if plan.workspace_bytes else None
        plan.run(q, k, v, table, lens, out, lse=lse, k_scale=k_scale, v_scale=v_scale, workspace=ws, k_sf=k_sf, v_sf=v_sf)
        torch.cuda.synchronize()
        want, want_lse = reference(q, kd, vd, table, lens, None, 1.0, 1.0)
        err, lse_err = rel(out, want), rel(lse, want_lse)
        print(f"\n{what}: output {err:.2e}, lse {lse_err:.2e} (relative L2 against float64)")
        self.assertLess(err, tolerance(q.dtype))
        self.assertLess(lse_err, tolerance(q.dtype))
        return out, ws
    def cache(self, pages, P, Hkv, D, dtype, fp8, heads_first):
        """vLLM's one tensor: [pages, 2, P, Hkv, D] or [pages, 2, Hkv, P, D]."""
        shape = (pages, 2, Hkv, P, D) if heads_first else (pages, 2, P, Hkv, D)
        if fp8:
            return fp8_codes(shape, self.gen, "cuda")
        return (torch.rand(shape, generator=self.gen) * 2 - 1).to(dtype).to("cuda")

    def check(self, q, k, v, table, lens, kv_dtype_name, q_dtype, declared, storage, layout="nhd", k_scale=1.0, v_scale=1.0,
              strided_out=False, **plan_kw):
        B, Hq, D = q.shape
        kv_dt = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}.get(declared)
        plan = cubinrt.DecodePlan(self.rt, batch=B, num_q_heads=Hq, num_kv_heads=k.shape[2] if layout == "nhd" else k.shape[1],
                                  head_dim=D, q_dtype=kv_dtype_name, kv_storage=storage, kv_declared=declared,
                                  page_size=k.shape[1] if layout == "nhd" else k.shape[2], layout=layout,
                                  block_table_stride=table.shape[1], **plan_kw)
        out_store = torch.full((B, Hq, D + 64) if strided_out else (B, Hq, D), float("nan"), dtype=q_dtype, device="cuda")
        out = out_store[:, :, :D]
        lse_store = torch.full((Hq, B), float("nan"), dtype=torch.float32, device="cuda")
        lse = lse_store.t()  # strides (1, B)
        ws = torch.zeros(plan.workspace_bytes, dtype=torch.uint8, device="cuda") if plan.workspace_bytes else None
        plan.run(q, k, v, table, lens, out, lse=lse, k_scale=k_scale, v_scale=v_scale, workspace=ws)
        torch.cuda.synchronize()
        kn, vn = (k, v) if layout == "nhd" else (k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3))
        want, want_lse = reference(q, kn, vn, table, lens, kv_dt, k_scale, v_scale)
        err, lse_err = rel(out, want), rel(lse, want_lse)
        self.assertLessEqual(err, tolerance(q_dtype), plan.kernel)
        self.assertLessEqual(lse_err, tolerance(q_dtype), plan.kernel)
        return err

    def test_every_layout_matches_float64(self):
        rows = []
        D, P, Hkv = 128, 16, 2
        for name, q_dtype, fp8, declared in [("bf16", torch.bfloat16, False, None), ("fp16", torch.float16, True, "fp8_e4m3"),
                                             ("bf16", torch.bfloat16, True, "fp8_e5m2")]:
            q, table, lens, pages = self.problem(q_dtype=q_dtype)
            storage = "uint8" if fp8 else name
            # vLLM, NHD and heads-first: K and V are views of one tensor.
            for heads_first in (False, True):
                cache = self.cache(pages, P, Hkv, D, q_dtype, fp8, heads_first)
                k, v = cache[:, 0], cache[:, 1]
                if heads_first:  # the same memory as NHD-shaped views with heads-first strides
                    k, v = k.permute(0, 2, 1, 3), v.permute(0, 2, 1, 3)
                err = self.check(q, k, v, table, lens, name, q_dtype, declared, storage, k_scale=0.75, v_scale=1.25, strided_out=True)
                rows.append((f"vLLM one tensor {'HND' if heads_first else 'NHD'}", name, declared or name, err))
            # FlashInfer: separate K and V caches, NHD and HND (layout named, contiguous).
            for layout in ("nhd", "hnd"):
                shape = (pages, P, Hkv, D) if layout == "nhd" else (pages, Hkv, P, D)
                k = fp8_codes(shape, self.gen, "cuda") if fp8 else (torch.rand(shape, generator=self.gen) * 2 - 1).to(q_dtype).cuda()
                v = fp8_codes(shape, self.gen, "cuda") if fp8 else (torch.rand(shape, generator=self.gen) * 2 - 1).to(q_dtype).cuda()
                err = self.check(q, k, v, table, lens, name, q_dtype, declared, storage, layout=layout, num_splits=3, merge="workspace")
                rows.append((f"separate K, V {layout.upper()} (3 splits)", name, declared or name, err))
        report = "\n".join(f"| {a} | {b} | {c} | {e:.2e} |" for a, b, c, e in rows)
        print("\n| layout | q | KV | rel. error |\n|---|---|---|---|\n" + report)

    def test_kv_append_then_decode(self):
        """Tokens appended by cubinrt into a cache (bf16 as is, FP8 e4m3 as torch quantizes it), then
        decoded from it against float64: the writer and the reader agree on the layout."""
        B, Hq, Hkv, D, P = 2, 8, 2, 128, 16
        q, table, lens, pages = self.problem(B=B, Hq=Hq, Hkv=Hkv, D=D, P=P, lens=(300, 77))
        T = int(lens.sum())
        # Token t of sequence b goes to its page and offset: slot = page * P + offset; padding at -1.
        slot_list = [int(table[b, i // P]) * P + i % P for b in range(B) for i in range(int(lens[b]))]
        slots = torch.tensor(slot_list[:5] + [-1] + slot_list[5:], dtype=torch.int64, device="cuda")
        new_k = (torch.rand(T + 1, Hkv, D, generator=self.gen) * 8 - 4).to(torch.bfloat16).to("cuda")
        new_v = (torch.rand(T + 1, Hkv, D, generator=self.gen) * 8 - 4).to(torch.bfloat16).to("cuda")
        for declared, storage in ((None, "bf16"), ("fp8_e4m3", "uint8")):
            dtype = torch.uint8 if storage == "uint8" else torch.bfloat16
            cache = torch.zeros(pages, 2, P, Hkv, D, dtype=dtype, device="cuda")
            w = cubinrt.KvAppendPlan(self.rt, num_kv_heads=Hkv, head_dim=D, in_dtype="bf16", cache_storage=storage,
                                     cache_declared=declared, page_size=P)
            k_scale, v_scale = (0.05, 0.025) if declared else (1.0, 1.0)
            w.run(new_k, new_v, slots, cache[:, 0], cache[:, 1], k_scale=k_scale, v_scale=v_scale)
            torch.cuda.synchronize()
            keep = slots >= 0
            if declared:  # the writer's bytes are torch's e4m3 of x / scale (values within 448: no saturation)
                # (a CUDA 0-d divisor: torch divides by a Python scalar through its reciprocal)
                want_k = (new_k[keep].float() / torch.full((), k_scale, device="cuda")).to(torch.float8_e4m3fn).view(torch.uint8)
                got_k = cache[:, 0].reshape(-1, Hkv, D)[slots[keep]]
                self.assertTrue(torch.equal(got_k, want_k), "FP8 K bytes differ from torch's quantization")
            else:
                self.assertTrue(torch.equal(cache[:, 1].reshape(-1, Hkv, D)[slots[keep]], new_v[keep]))
            self.check(q, cache[:, 0], cache[:, 1], table, lens, "bf16", torch.bfloat16, declared, storage,
                       k_scale=k_scale, v_scale=v_scale)
        # Under CUDA-graph capture, as an engine's captured step writes its cache: the launch
        # (its device checks too) captured on torch's capture stream, new tokens copied into the
        # captured inputs, the graph replayed, the bytes torch's quantization of the new tokens.
        cache = torch.zeros(pages, 2, P, Hkv, D, dtype=torch.uint8, device="cuda")
        w = cubinrt.KvAppendPlan(self.rt, num_kv_heads=Hkv, head_dim=D, in_dtype="bf16", cache_storage="uint8",
                                 cache_declared="fp8_e4m3", page_size=P)
        static_k, static_v = new_k.clone(), new_v.clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            w.run(static_k, static_v, slots, cache[:, 0], cache[:, 1], k_scale=0.05, v_scale=0.025)
        static_k.copy_(new_k.flip(0))
        static_v.copy_(new_v.flip(0))
        graph.replay()
        torch.cuda.synchronize()
        keep = slots >= 0
        want_k = (static_k[keep].float() / torch.full((), 0.05, device="cuda")).to(torch.float8_e4m3fn).view(torch.uint8)
        self.assertTrue(torch.equal(cache[:, 0].reshape(-1, Hkv, D)[slots[keep]], want_k), "the replayed append's K bytes")

    def test_nvfp4_append_then_decode_in_vllm_page_layout(self):
        """NVFP4 end to end on vLLM's page layout, [K codes | K scales | V codes | V scales] in one
        uint8 page: cubinrt's writer quantizes new tokens, its decoder reads them; the decode
        against float64 attention over the exactly dequantized cache (e2m1 x e4m3 scale x global
        scale), the quantization error against the input reported; a missing scale tensor refused."""
        B, Hq, Hkv, D, P = 2, 8, 2, 128, 16
        q, table, lens, pages = self.problem(B=B, Hq=Hq, Hkv=Hkv, D=D, P=P, lens=(300, 77))
        slots, new_k, new_v = self.new_tokens(table, lens, Hkv, D, P)
        codes, scales = P * Hkv * D // 2, P * Hkv * D // 16  # bytes of one page's codes and scales
        page = torch.zeros(pages, 2 * (codes + scales), dtype=torch.uint8, device="cuda")

        def view(offset, row):
            return page.as_strided((pages, P, Hkv, row), (page.stride(0), Hkv * row, row, 1), page.storage_offset() + offset)
        k, k_sf = view(0, D // 2), view(codes, D // 16)
        v, v_sf = view(codes + scales, D // 2), view(2 * codes + scales, D // 16)
        k_scale, v_scale = 0.02, 0.01  # global scales: the block scales stay well inside e4m3
        w = cubinrt.KvAppendPlan(self.rt, num_kv_heads=Hkv, head_dim=D, in_dtype="bf16", cache_storage="uint8",
                                 cache_declared="nvfp4", page_size=P)
        w.run(new_k, new_v, slots, k, v, k_sf=k_sf, v_sf=v_sf, k_scale=k_scale, v_scale=v_scale)
        torch.cuda.synchronize()

        kd, vd = nvfp4_dequant(k, k_sf, k_scale), nvfp4_dequant(v, v_sf, v_scale)
        got = kd.reshape(-1, Hkv, D)[slots]
        qerr = rel(got, new_k.double())
        self.assertLess(qerr, 0.15, "NVFP4 quantization error of the appended K")
        print(f"\nNVFP4 append: K quantization error {qerr:.3f} (relative L2 against the bf16 input)")

        plan = cubinrt.DecodePlan(self.rt, batch=B, num_q_heads=Hq, num_kv_heads=Hkv, head_dim=D, q_dtype="bf16", kv_storage="uint8",
                                  kv_declared="nvfp4", page_size=P, block_table_stride=table.shape[1])
        self.assertIn("nvfp4", plan.kernel)
        out, ws = self.nvfp4_decode_matches(plan, q, k, v, k_sf, v_sf, table, lens, k_scale, v_scale, kd, vd, "NVFP4 decode after append")
        # The same through the torch custom op, scales as float8_e4m3fn tensors.
        out2 = torch.full_like(out, float("nan"))
        torch.ops.cubinrt.paged_decode(q, k, v, table, lens, out2, ws, plan.op_id, k_scale, v_scale, 0.0,
                                       k_sf.view(torch.float8_e4m3fn), v_sf.view(torch.float8_e4m3fn))
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out2, out))
        with self.assertRaises(cubinrt.Error) as e:
            plan.run(q, k, v, table, lens, out, k_scale=k_scale, v_scale=v_scale, workspace=ws)
        self.assertIn("k_sf is missing", str(e.exception))

    @unittest.skipUnless(os.environ.get("CUBINRT_TEST_HD512_BUNDLE"),
                         "CUBINRT_TEST_HD512_BUNDLE (the test bundle with sm_90 builds of the SM100-only kernels) is not set")
    def test_nvfp4_interleaved_v_scales_append_then_decode(self):
        """TensorRT-LLM's V-scale order (vLLM's on SM10x) end to end in vLLM's page layout: the
        writer puts each V scale where vLLM's formula says (codes and K scales as in linear order),
        and the reader of that order (SM100-only; its sm_90 build from the test bundle) decodes the
        cache against float64 attention over it, dequantized through the same formula."""
        B, Hq, Hkv, D, P = 2, 8, 2, 128, 16
        S = D // 16
        q, table, lens, pages = self.problem(B=B, Hq=Hq, Hkv=Hkv, D=D, P=P, lens=(200, 45))
        slots, new_k, new_v = self.new_tokens(table, lens, Hkv, D, P)
        codes, scales = P * Hkv * D // 2, P * Hkv * S
        k_scale, v_scale = 0.02, 0.01

        def append(order):
            page = torch.zeros(pages, 2 * (codes + scales), dtype=torch.uint8, device="cuda")

            def view(offset, row):
                return page.as_strided((pages, P, Hkv, row), (page.stride(0), Hkv * row, row, 1), page.storage_offset() + offset)
            k, k_sf, v, v_sf = view(0, D // 2), view(codes, S), view(codes + scales, D // 2), view(2 * codes + scales, S)
            w = cubinrt.KvAppendPlan(self.rt, num_kv_heads=Hkv, head_dim=D, in_dtype="bf16", cache_storage="uint8",
                                     cache_declared="nvfp4", page_size=P, v_sf_order=order)
            w.run(new_k, new_v, slots, k, v, k_sf=k_sf, v_sf=v_sf, k_scale=k_scale, v_scale=v_scale)
            torch.cuda.synchronize()
            return k, k_sf, v, v_sf
        k, k_sf, v, v_sf = append("interleaved4")
        lk, lk_sf, lv, lv_sf = append("linear")
        self.assertTrue(torch.equal(k, lk) and torch.equal(v, lv) and torch.equal(k_sf, lk_sf))
        # vLLM's swizzle_scale_offset, written out: token t's scale of block s, within its page and head.
        t = torch.arange(P, device="cuda")[:, None]
        s = torch.arange(S, device="cuda")[None, :]
        row, col = (t // 4) * 4 + s // (S // 4), (s % (S // 4)) * 4 + t % 4
        # [pages, heads, P, S] in token order: each (t, s) read from where the swizzle put it.
        unswizzled = v_sf.permute(0, 2, 1, 3)[:, :, row, col]
        self.assertFalse(torch.equal(v_sf, lv_sf))
        self.assertTrue(torch.equal(unswizzled, lv_sf.permute(0, 2, 1, 3)))

        kd, vd = nvfp4_dequant(k, k_sf, k_scale), nvfp4_dequant(v, unswizzled.permute(0, 2, 1, 3), v_scale)

        rt = cubinrt.Runtime(torch.cuda.current_device(), bundle_path=os.environ["CUBINRT_TEST_HD512_BUNDLE"])
        plan = cubinrt.DecodePlan(rt, batch=B, num_q_heads=Hq, num_kv_heads=Hkv, head_dim=D, q_dtype="bf16", kv_storage="uint8",
                                  kv_declared="nvfp4", page_size=P, block_table_stride=table.shape[1], v_sf_order="interleaved4")
        self.assertIn("vsf_interleaved", plan.kernel)
        self.nvfp4_decode_matches(plan, q, k, v, k_sf, v_sf, table, lens, k_scale, v_scale, kd, vd,
                                  "NVFP4, V scales interleaved: decode after append")

    def test_typed_float8_storage_is_its_own_declaration(self):
        q, table, lens, pages = self.problem(q_dtype=torch.float16)
        cache = self.cache(pages, 16, 2, 128, None, True, False).view(torch.float8_e4m3fn)
        self.check(q, cache[:, 0], cache[:, 1], table, lens, "fp16", torch.float16, "fp8_e4m3", "fp8_e4m3")

    def test_vllm_backend_under_graph_capture_with_changing_lengths(self):
        from vllm_backend import CubinrtDecodeBackend
        self.assertIn(128, CubinrtDecodeBackend.get_supported_head_sizes())
        ok, why = CubinrtDecodeBackend.supports_combination(512, torch.bfloat16, "auto", 16)
        major = torch.cuda.get_device_capability()[0]
        if major != 10:
            self.assertFalse(ok)
            with self.assertRaises(cubinrt.Error) as e:
                CubinrtDecodeBackend(num_heads=16, head_size=512, num_kv_heads=2, dtype=torch.bfloat16)
            self.assertIn("head_dim=512 is built for sm_100a and sm_103a only", str(e.exception))
        ok, why = CubinrtDecodeBackend.supports_combination(128, torch.bfloat16, "nvfp4", 16)
        self.assertFalse(ok)
        self.assertIn("not served by this example backend", why)

        B, Hq, Hkv, D, P = 4, 32, 4, 128, 16
        backend = CubinrtDecodeBackend(num_heads=Hq, head_size=D, num_kv_heads=Hkv, kv_cache_dtype="fp8", block_size=P, dtype=torch.bfloat16)
        q, table, lens, pages = self.problem(B=B, Hq=Hq, Hkv=Hkv, lens=(5, 300, 1000, 2049))
        cache = self.cache(pages, P, Hkv, D, None, True, False)
        out = torch.empty(B, Hq, D, dtype=torch.bfloat16, device="cuda")
        plan, ws = backend.plan(B, table.shape[1])
        # Warm up eagerly, then capture one decode step, eager launch and the custom op both.
        backend.forward(q, cache, table, lens, "fp8", 0.5, 0.5, out=out)
        out_op = torch.empty_like(out)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                backend.forward(q, cache, table, lens, "fp8", 0.5, 0.5, out=out)
                torch.ops.cubinrt.paged_decode(q, cache[:, 0], cache[:, 1], table, lens, out_op, ws, plan.op_id, 0.5, 0.5, 0.0)
        torch.cuda.current_stream().wait_stream(stream)
        for step, new_lens in enumerate([(5, 300, 1000, 2049), (6, 301, 17, 2049), (1, 1, 1, 1), (64, 128, 999, 2000)]):
            lens.copy_(torch.tensor(new_lens, dtype=torch.int32))
            out.fill_(float("nan"))
            out_op.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            want, _ = reference(q, cache[:, 0], cache[:, 1], table, lens, torch.float8_e4m3fn, 0.5, 0.5)
            self.assertLessEqual(rel(out, want), tolerance(torch.bfloat16), f"replay {step} lengths {new_lens}")
            self.assertLessEqual(rel(out_op, want), tolerance(torch.bfloat16), f"replay {step} (custom op) lengths {new_lens}")

    def test_cupy_arrays_by_cuda_array_interface(self):
        """CuPy arrays (read through __cuda_array_interface__ in Python) on CuPy's stream."""
        try:
            import cupy
        except ImportError:
            self.skipTest("cupy is not installed")
        q, table, lens, pages = self.problem(q_dtype=torch.float16)
        cache = self.cache(pages, 16, 2, 128, None, True, False)  # uint8 FP8 codes
        plan = cubinrt.DecodePlan(self.rt, batch=3, num_q_heads=16, num_kv_heads=2, head_dim=128, q_dtype="fp16", kv_storage="uint8",
                                  kv_declared="fp8_e5m2", page_size=16, block_table_stride=table.shape[1])
        out = torch.full((3, 16, 128), float("nan"), dtype=torch.float16, device="cuda")
        torch.cuda.synchronize()
        as_cupy = cupy.from_dlpack
        plan.run(as_cupy(q), as_cupy(cache[:, 0]), as_cupy(cache[:, 1]), as_cupy(table), as_cupy(lens), as_cupy(out),
                 k_scale=0.5, v_scale=2.0, stream=cupy.cuda.get_current_stream().ptr)
        cupy.cuda.get_current_stream().synchronize()
        want, _ = reference(q, cache[:, 0], cache[:, 1], table, lens, torch.float8_e5m2, 0.5, 2.0)
        self.assertLessEqual(rel(out, want), tolerance(torch.float16))

    def test_custom_op_under_torch_compile(self):
        """torch.compile (fullgraph, aot_eager: fake-tensor tracing and functionalisation, no
        Triton) treats the op as one opaque call with its fake implementation."""
        B, Hq, Hkv, D, P = 2, 16, 2, 128, 16
        q, table, lens, pages = self.problem(B=B, Hq=Hq, Hkv=Hkv, lens=(70, 513))
        cache = self.cache(pages, P, Hkv, D, torch.bfloat16, False, False)
        plan = cubinrt.DecodePlan(self.rt, batch=B, num_q_heads=Hq, num_kv_heads=Hkv, head_dim=D, q_dtype="bf16", kv_storage="bf16",
                                  page_size=P, block_table_stride=table.shape[1])
        op_id = plan.op_id

        def step(q, cache, table, lens):
            out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
            torch.ops.cubinrt.paged_decode(q * 2, cache[:, 0], cache[:, 1], table, lens, out, None, op_id, 1.0, 1.0, 0.0)
            return out * 2

        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        got = compiled(q, cache, table, lens)
        torch.cuda.synchronize()
        want, _ = reference(q * 2, cache[:, 0], cache[:, 1], table, lens, None, 1.0, 1.0)
        self.assertLessEqual(rel(got / 2, want), tolerance(torch.bfloat16))

    def test_kv_append_op_under_torch_compile(self):
        """torch.ops.cubinrt.kv_append inside a compiled step (fullgraph, aot_eager): it writes the
        cache's views in place, as the same call does eagerly."""
        Hkv, D, P, pages, T = 2, 128, 16, 8, 20
        slots = torch.randperm(pages * P, generator=self.gen)[:T].to(torch.int64).to("cuda")
        new_k = (torch.rand(T, Hkv, D, generator=self.gen) * 8 - 4).to(torch.bfloat16).to("cuda")
        new_v = (torch.rand(T, Hkv, D, generator=self.gen) * 8 - 4).to(torch.bfloat16).to("cuda")
        w = cubinrt.KvAppendPlan(self.rt, num_kv_heads=Hkv, head_dim=D, in_dtype="bf16", cache_storage="uint8",
                                 cache_declared="fp8_e4m3", page_size=P)
        op_id = w.op_id

        def step(k, v, slots, cache):
            torch.ops.cubinrt.kv_append(k * 2, v, slots, cache[:, 0], cache[:, 1], None, None, op_id, 0.05, 0.025)
            return cache

        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        got = compiled(new_k, new_v, slots, torch.zeros(pages, 2, P, Hkv, D, dtype=torch.uint8, device="cuda"))
        want = torch.zeros(pages, 2, P, Hkv, D, dtype=torch.uint8, device="cuda")
        w.run(new_k * 2, new_v, slots, want[:, 0], want[:, 1], k_scale=0.05, v_scale=0.025)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(got, want))
        self.assertGreater(int(got.count_nonzero()), 0)

    def test_bad_tensors_raise(self):
        q, table, lens, pages = self.problem()
        cache = self.cache(pages, 16, 2, 128, torch.bfloat16, False, False)
        plan = cubinrt.DecodePlan(self.rt, batch=3, num_q_heads=16, num_kv_heads=2, head_dim=128, q_dtype="bf16", kv_storage="bf16",
                                  page_size=16, block_table_stride=table.shape[1])
        out = torch.empty(3, 16, 128, dtype=torch.bfloat16, device="cuda")
        with self.assertRaises(cubinrt.Error) as e:
            plan.run(q.cpu(), cache[:, 0], cache[:, 1], table, lens, out)
        self.assertIn("q is on DLPack device type 1 (CPU)", str(e.exception))
        with self.assertRaises(cubinrt.Error) as e:
            plan.run(q.to(torch.float16), cache[:, 0], cache[:, 1], table, lens, out)
        self.assertIn("q has dtype float16", str(e.exception))
        with self.assertRaises(cubinrt.Error) as e:
            plan.run(q, cache[:, 0], cache[:, 1], table.to(torch.int64), lens, out)
        self.assertIn("block_table has dtype int64 (DLPack code 0, 64 bits, 1 lanes); the plan takes int32", str(e.exception))

    @unittest.skipUnless(os.environ.get("CUBINRT_OVERHEAD"), "CUBINRT_OVERHEAD=<file> measures host overhead")
    def test_host_overhead_per_call(self):
        """Host microseconds per eager call at batch 1, 128 tokens: cubinrt's Python path, its C ABI
        path with prebuilt descriptors (the C++ launch plus one nanobind call), and a bare kernel
        launch through torch, in the same process."""
        q, table, lens, pages = self.problem(B=1, Hq=32, Hkv=8, lens=(128,))
        cache = self.cache(pages, 16, 8, 128, None, True, False)
        plan = cubinrt.DecodePlan(self.rt, batch=1, num_q_heads=32, num_kv_heads=8, head_dim=128, q_dtype="bf16", kv_storage="uint8",
                                  kv_declared="fp8_e4m3", page_size=16, block_table_stride=table.shape[1], max_seq_len=128)
        out = torch.empty(1, 32, 128, dtype=torch.bfloat16, device="cuda")
        ws = torch.zeros(max(plan.workspace_bytes, 1), dtype=torch.uint8, device="cuda")
        k, v = cache[:, 0], cache[:, 1]
        stream = torch._C._cuda_getCurrentRawStream(0)
        desc = [cubinrt._descriptor(t, "x") if t is not None else None for t in (q, k, v, None, None, table, lens, out)]
        small = torch.zeros(1, device="cuda")

        def timed(fn, n=2000):
            for _ in range(200):
                fn()
            torch.cuda.synchronize()
            best = float("inf")
            for _ in range(5):  # the best of 5 batches of n calls, each followed by one sync
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                best = min(best, (t1 - t0) / n * 1e6)
            return best

        py = timed(lambda: plan.run(q, k, v, table, lens, out, k_scale=0.5, v_scale=0.5, workspace=ws))
        c = timed(lambda: plan._plan.launch(*desc, None, 3, 0.5, 0.5, 0.0, ws.data_ptr(), plan.workspace_bytes, stream))
        cpp = min(plan._plan._time_launches(q, k, v, table, lens, out, 3, ws, 2000) for _ in range(5))
        bare = timed(lambda: small.add_(1.0))
        op = timed(lambda: torch.ops.cubinrt.paged_decode(q, k, v, table, lens, out, ws, plan.op_id, 0.5, 0.5, 0.0), n=500)
        exchange = cubinrt._cubinrt._has_exchange_api(q)
        text = (f"| path (batch 1, 128 tokens, FP8 D128, GQA 4) | host us per call |\n|---|---|\n"
                f"| plan.run (torch tensors{', DLPack C exchange API' if exchange else ', Python descriptors: torch has no DLPack C exchange API'}) | {py:.2f} |\n"
                f"| plan launch from prebuilt Python descriptors (one nanobind call) | {c:.2f} |\n"
                f"| cubinrt_decode_plan_launch in a C++ loop (the C ABI and C++ launch path) | {cpp:.2f} |\n"
                f"| bare kernel launch through torch (in-place add of one element) | {bare:.2f} |\n"
                f"| torch.ops.cubinrt.paged_decode (custom op, eager) | {op:.2f} |\n")
        print("\n" + text)
        with open(os.environ["CUBINRT_OVERHEAD"], "w") as f:
            f.write(text)


if __name__ == "__main__":
    unittest.main()
