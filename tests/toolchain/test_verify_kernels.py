"""The one-pass Triton verification kernels give exactly what the PyTorch forms give.

The kernels run under Triton's interpreter here (a subprocess, since the interpreter is chosen when
the kernels are defined); on a GPU the same comparison runs compiled (test_gpu.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Every case: both paths on the same tensors, over several programs' worth of elements (a program
# covers 16384), with NaN, Inf, poison, ties, first-index-of-the-largest-error and integer kinds.
SCRIPT = r"""
import json, math, torch
from skillbase.toolchain import verify, verify_kernels as vk

def fast(o, r, atol, rtol, poison_byte):
    saved = verify._fast
    verify._fast = lambda torch, t: vk if vk.supports(torch, t) else None
    try:
        return verify.compare(torch, o, r, atol, rtol, poison_byte)
    finally:
        verify._fast = saved

def slow(o, r, atol, rtol, poison_byte):
    saved = verify._fast
    verify._fast = lambda torch, t: None
    try:
        return verify.compare(torch, o, r, atol, rtol, poison_byte)
    finally:
        verify._fast = saved

def fields(c):
    return {"ok": c.ok, "problem": c.problem, "max_abs": c.max_abs, "rel_norm": round(c.rel_norm, 12),
            "mismatched": c.mismatched, "nonfinite": c.nonfinite, "unwritten": c.unwritten,
            "worst_index": c.worst_index}

g = torch.Generator().manual_seed(7)
n = 40_000
cases = {}
r = torch.randn(n, generator=g)
cases["equal"] = (r.clone(), r, 1e-5, 1e-5)
o = r + 1e-3 * torch.randn(n, generator=g)
cases["within"] = (o, r, 1e-2, 1e-2)
cases["beyond"] = (o, r, 1e-4, 0.0)
# An error just above atol, where float32 would round atol up to it: the tolerance is read in float64
# (the interpreter keeps Python floats in float64 either way; test_gpu.py checks it compiled).
edge = torch.zeros(n); edge_out = edge.clone(); edge_out[7] = 1e-5
d = float(edge_out[7]); ulp = float(torch.tensor(d).nextafter(torch.tensor(1.0)) - torch.tensor(d))
cases["tolerance_in_float64"] = (edge_out, edge, d - 0.4 * ulp, 0.0)
rt = r.clone(); rt[[5, 30_000]] = 0.0
tie = rt.clone(); tie[[5, 30_000]] = 0.5  # two equal largest errors: the first index wins
cases["ties"] = (tie, rt, 1e-3, 0.0)
nan = r.clone(); nan[[17, 25_000]] = float("nan")
cases["nan_out"] = (nan, r, 1e-3, 1e-3)
rnan = r.clone(); rnan[100] = float("nan"); rnan[200] = float("inf")
both = rnan.clone()
cases["ref_nonfinite_matched"] = (both, rnan, 1e-3, 1e-3)
wrong = rnan.clone(); wrong[200] = 1.0; wrong[100] = 2.0
cases["ref_nonfinite_missed"] = (wrong, rnan, 1e-3, 1e-3)
pois = r.clone(); pois.view(torch.int32)[[3, 33_000]] = -1
cases["poison"] = (pois, r, 1e-3, 1e-3)
h = torch.randn(n, generator=g).half()
cases["half"] = (h + torch.randn(n, generator=g).half() * 0.01, h, 1e-3, 1e-3)
b = torch.randn(n, generator=g).bfloat16()
cases["bf16"] = (b, b, 0.0, 0.0)
d = torch.randn(n, generator=g, dtype=torch.float64)
cases["f64"] = (d + 1e-9, d, 0.0, 0.0)
i = torch.randint(-5, 5, (n,), generator=g)
j = i.clone(); j[[9, 39_999]] += 1
cases["int64"] = (j, i, 0.0, 0.0)
cases["int32_equal"] = (i.int(), i.int(), 0.0, 0.0)
bo = torch.rand(n, generator=g) > 0.5
cases["bool"] = (~bo, bo, 0.0, 0.0)
cases["short"] = (r[:1000] * 1.5, r[:1000], 1e-3, 0.0)
out = {}
for name, (x, y, atol, rtol) in cases.items():
    for pb in (None, 0xFF):
        out[f"{name}/{pb}"] = [fields(fast(x, y, atol, rtol, pb)), fields(slow(x, y, atol, rtol, pb))]
fps = {}
for name, t in {"f32": r, "half": h, "bf16": b, "int64": i, "bool": bo, "int8": i.to(torch.int8),
                "uint8": (i + 5).to(torch.uint8), "f64": d, "2d": r.view(200, 200)}.items():
    bits = verify._int_view(torch, t.reshape(-1).contiguous())
    saved = verify._fast
    verify._fast = lambda torch, t: None
    slow_fp = verify.fingerprint(torch, t)
    verify._fast = saved
    fps[name] = [vk.fingerprint_sum(torch, bits), slow_fp[-1]]
print(json.dumps({"compare": out, "fingerprint": fps}))
"""


@pytest.fixture(scope="module")
def results():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_compare_kernel_matches_the_pytorch_form_on_every_case(results):
    for name, (fast, slow) in results["compare"].items():
        rel_fast, rel_slow = fast.pop("rel_norm"), slow.pop("rel_norm")
        assert fast == slow, name
        assert rel_fast == pytest.approx(rel_slow, rel=1e-9, abs=1e-15), name
    # The cases do what they say: the checks fire where they should.
    c = results["compare"]
    assert c["equal/None"][0]["ok"] and c["within/None"][0]["ok"]
    assert not c["beyond/None"][0]["ok"] and c["beyond/None"][0]["mismatched"] > 0
    assert c["ties/None"][0]["worst_index"] == 5
    assert c["tolerance_in_float64/None"][0]["mismatched"] == 1  # float32 would round atol up to the error
    assert c["nan_out/None"][0]["nonfinite"] == 2
    assert c["ref_nonfinite_matched/None"][0]["ok"]
    assert c["ref_nonfinite_missed/None"][0]["mismatched"] == 2
    assert c["poison/255"][0]["unwritten"] == 2 and c["poison/None"][0]["unwritten"] == 0
    assert c["int64/None"][0]["worst_index"] == 9 and c["int64/None"][0]["mismatched"] == 2
    assert not c["bool/None"][0]["ok"]


def test_fingerprint_kernel_matches_the_pytorch_form(results):
    for name, (fast, slow) in results["fingerprint"].items():
        assert fast == slow, name
    assert len({v[0] for v in results["fingerprint"].values()}) >= 8  # and it tells tensors apart
