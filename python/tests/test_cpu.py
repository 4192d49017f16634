"""The Python package without a GPU: run with a stand-in libcuda.so.1 (an emulated H200, the
build's tests/fake_libcuda) first on LD_LIBRARY_PATH, as scripts/test.sh does. Launches are
checked and recorded there, not run; the numbers are checked on the H200 (test_gpu.py)."""
import ctypes
import os
import unittest

import numpy as np

import cubinrt

FAKE = "fake_libcuda" in os.environ.get("LD_LIBRARY_PATH", "")
try:
    ctypes.CDLL("libcuda.so.1")
    DRIVER = True
except OSError:
    DRIVER = False


class FakeCudaArray:
    """A tensor by __cuda_array_interface__ (as CuPy and Numba give them), over host bytes: the
    stand-in driver never dereferences a launch's pointers."""

    _keep = []

    def __init__(self, shape, typestr, strides=None, device_id=0, offset=0):
        itemsize = int(typestr[2:])
        count = 1
        for s in shape:
            count *= s
        buf = ctypes.create_string_buffer(count * itemsize * 4 + 512)
        FakeCudaArray._keep.append(buf)
        base = (ctypes.addressof(buf) + 255) // 256 * 256 + offset
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (base, False), "version": 3,
            "strides": None if strides is None else tuple(s * itemsize for s in strides),
        }
        self.device = type("Device", (), {"id": device_id})()


class NoDriver(unittest.TestCase):
    @unittest.skipIf(DRIVER, "a libcuda.so.1 (real or the stand-in) is found")
    def test_runtime_without_a_driver_raises_the_library_sentence(self):
        with self.assertRaises(cubinrt.Error) as e:
            cubinrt.Runtime()
        self.assertEqual(e.exception.status, "CUBINRT_ERROR_NO_DRIVER")
        self.assertIn("no CUDA driver: cannot open libcuda.so.1", str(e.exception))


@unittest.skipUnless(FAKE, "needs the stand-in libcuda.so.1 on LD_LIBRARY_PATH (build/tests/fake_libcuda)")
class OnTheStandInDriver(unittest.TestCase):
    B, HQ, HKV, D, P, PAGES, ROW = 2, 8, 2, 128, 16, 8, 4

    @classmethod
    def setUpClass(cls):
        cls.rt = cubinrt.Runtime(required=[(128, "fp16", "fp8_e4m3", 16)])

    def plan(self, **kw):
        args = dict(batch=self.B, num_q_heads=self.HQ, num_kv_heads=self.HKV, head_dim=self.D, q_dtype="fp16", kv_storage="uint8",
                    kv_declared="fp8_e4m3", page_size=self.P, block_table_stride=self.ROW)
        args.update(kw)
        return cubinrt.DecodePlan(self.rt, **args)

    def tensors(self):
        """q as a view of a fused QKV projection; K and V as views of vLLM's one-tensor cache."""
        B, HQ, HKV, D, P, PAGES, ROW = self.B, self.HQ, self.HKV, self.D, self.P, self.PAGES, self.ROW
        q = FakeCudaArray((B, HQ, D), "<f2", strides=((HQ + 2 * HKV) * D, D, 1))
        k = FakeCudaArray((PAGES, P, HKV, D), "|u1", strides=(2 * P * HKV * D, HKV * D, D, 1))
        v = FakeCudaArray((PAGES, P, HKV, D), "|u1", strides=(2 * P * HKV * D, HKV * D, D, 1), offset=P * HKV * D)
        table = FakeCudaArray((B, ROW), "<i4")
        lens = FakeCudaArray((B,), "<i4")
        out = FakeCudaArray((B, HQ, D), "<f2")
        return q, k, v, table, lens, out

    def test_runtime_reports_device_bundle_and_support(self):
        self.assertEqual(self.rt.device["sm"], 90)
        self.assertEqual(self.rt.device["name"], "NVIDIA H200")
        self.assertGreater(self.rt.bundle["entries"], 0)
        ok, why = self.rt.supports(128, "bf16", "fp8_e4m3", 16)
        self.assertTrue(ok, why)
        ok, why = self.rt.supports(512, "bf16", "bf16", 16)
        self.assertFalse(ok)
        self.assertIn("head_dim=512 is built for sm_100a and sm_103a only", why)
        self.assertIn((128, "bf16", "fp8_e4m3", 16), self.rt.available())
        self.assertNotIn(512, {k[0] for k in self.rt.available()})

    def test_plan_mirrors_the_cpp_one(self):
        p = self.plan()
        self.assertEqual(p.kernel, "paged_decode.sm_90.hd128.fp16.fp8_e4m3.p16")
        self.assertEqual((p.num_splits, p.workspace_bytes), (1, 0))
        self.assertTrue(p.overlaps_previous_kernel)  # an sm_90 kernel waits for the kernel before it
        self.assertFalse(self.plan(overlap=False).overlaps_previous_kernel)
        forced = self.plan(num_splits=3, merge="workspace", block_table_stride=32)
        self.assertEqual(forced.num_splits, 3)
        self.assertGreater(forced.workspace_bytes, 0)

    def test_strided_views_launch(self):
        q, k, v, table, lens, out = self.tensors()
        self.plan().run(q, k, v, table, lens, out, k_scale=0.5, v_scale=0.25)

    def test_kv_append_plan_and_launch(self):
        """The cache writer on vLLM's one-tensor cache (K and V views), NVFP4 with its scales."""
        HKV, D, P, PAGES, T = self.HKV, self.D, self.P, self.PAGES, 5
        w = cubinrt.KvAppendPlan(self.rt, num_kv_heads=HKV, head_dim=D, in_dtype="fp16", cache_storage="uint8",
                                 cache_declared="nvfp4", page_size=P)
        k = FakeCudaArray((T, HKV, D), "<f2")
        v = FakeCudaArray((T, HKV, D), "<f2")
        slots = FakeCudaArray((T,), "<i8")
        row = D // 2 + D // 16  # vLLM's NVFP4 row: data, then scales, in one uint8 page
        k_cache = FakeCudaArray((PAGES, P, HKV, D // 2), "|u1", strides=(2 * P * HKV * row, HKV * D // 2, D // 2, 1))
        v_cache = FakeCudaArray((PAGES, P, HKV, D // 2), "|u1", strides=(2 * P * HKV * row, HKV * D // 2, D // 2, 1))
        k_sf = FakeCudaArray((PAGES, P, HKV, D // 16), "|u1", strides=(2 * P * HKV * row, HKV * D // 16, D // 16, 1))
        v_sf = FakeCudaArray((PAGES, P, HKV, D // 16), "|u1", strides=(2 * P * HKV * row, HKV * D // 16, D // 16, 1))
        w.run(k, v, slots, k_cache, v_cache, k_sf=k_sf, v_sf=v_sf, k_scale=0.01, v_scale=0.02)
        with self.assertRaises(cubinrt.Error) as e:
            w.run(k, v, slots, k_cache, v_cache, k_scale=0.01, v_scale=0.02)
        self.assertIn("k_sf is missing", str(e.exception))
        with self.assertRaises(cubinrt.Error) as e:
            cubinrt.KvAppendPlan(self.rt, num_kv_heads=HKV, head_dim=D, in_dtype="fp16", cache_storage="uint8", page_size=P)
        self.assertIn("cubinrt never infers the encoding from storage", str(e.exception))

    def test_interleaved_nvfp4_v_scales(self):
        """TensorRT-LLM's V-scale order: written on any GPU, read by SM100-only kernels (this is an
        emulated H200), and only for NVFP4."""
        HKV, D, P = self.HKV, self.D, self.P
        cubinrt.KvAppendPlan(self.rt, num_kv_heads=HKV, head_dim=D, in_dtype="fp16", cache_storage="uint8", cache_declared="nvfp4",
                             page_size=P, v_sf_order="interleaved4")
        with self.assertRaises(cubinrt.Error) as e:
            self.plan(kv_declared="nvfp4", v_sf_order="interleaved4")
        self.assertEqual(e.exception.status, "CUBINRT_ERROR_UNSUPPORTED")
        self.assertIn("the paged_decode_vsf_interleaved family is built for sm_100a and sm_103a only", str(e.exception))
        with self.assertRaises(cubinrt.Error) as e:
            self.plan(v_sf_order="interleaved4")
        self.assertIn("v_sf_order interleaved4 orders NVFP4's V block scales", str(e.exception))
        with self.assertRaises(cubinrt.Error) as e:
            self.plan(kv_declared="nvfp4", v_sf_order="swizzled")
        self.assertIn("v_sf_order is 'swizzled': one of linear, interleaved4", str(e.exception))

    def test_undeclared_uint8_kv_is_refused_at_plan(self):
        with self.assertRaises(cubinrt.Error) as e:
            self.plan(kv_declared=None)
        self.assertEqual(e.exception.status, "CUBINRT_ERROR_INVALID_ARGUMENT")
        self.assertIn("cubinrt never infers the encoding from storage", str(e.exception))

    def test_every_bad_tensor_raises_the_library_message(self):
        p = self.plan()
        q, k, v, table, lens, out = self.tensors()

        def message(**changes):
            args = dict(q=q, k=k, v=v, block_table=table, seq_lens=lens, out=out)
            args.update(changes)
            with self.assertRaises(cubinrt.Error) as e:
                p.run(args.pop("q"), args.pop("k"), args.pop("v"), args.pop("block_table"), args.pop("seq_lens"), args.pop("out"))
            return str(e.exception)

        host = np.zeros((self.B, self.HQ, self.D), dtype=np.float16)
        self.assertIn("q is on DLPack device type 1 (CPU), not CUDA", message(q=host))
        self.assertEqual(message(out=FakeCudaArray((self.B, self.HQ, self.D), "<f4")),
                         "paged decode launch: out has dtype float32 (DLPack code 2, 32 bits, 1 lanes); the plan takes float16")
        self.assertEqual(message(out=FakeCudaArray((self.B, self.HQ, self.D), "<f2", device_id=1)),
                         "paged decode launch: out is on CUDA device 1, but this runtime runs on device 0")
        self.assertIn("q has head stride 132 elements (264 bytes), not a multiple of 16 bytes",
                      message(q=FakeCudaArray((self.B, self.HQ, self.D), "<f2", strides=(self.HQ * 132, 132, 1))))
        self.assertIn("K's strides (page 8192, token 256, head 128) differ from V's (page 4096",
                      message(v=FakeCudaArray((self.PAGES, self.P, self.HKV, self.D), "|u1")))
        self.assertEqual(message(q=FakeCudaArray((self.B, self.HQ, 64), "<f2")),
                         "paged decode launch: q has shape [2, 8, 64]; the plan takes [2, 8, 128]")
        self.assertIn("is a str, not a tensor", message(seq_lens="lengths"))

    def test_a_split_plan_without_its_workspace_is_refused(self):
        p = self.plan(num_splits=2, merge="workspace")
        q, k, v, table, lens, out = self.tensors()
        with self.assertRaises(cubinrt.Error) as e:
            p.run(q, k, v, table, lens, out)
        self.assertIn("needs a 16-byte aligned workspace of", str(e.exception))

    def test_selfcheck_runs_its_static_steps(self):
        passed, no_gpu, ms, report = cubinrt.selfcheck(known_answer=False)
        self.assertIn("static", report)
        self.assertGreater(ms, 0)


if __name__ == "__main__":
    unittest.main()
