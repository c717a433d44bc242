"""Correctness primitives: compare outputs, fingerprint inputs, poison memory, find aliases.

Every element of every output is checked, in chunks so that multi-gigabyte
outputs do not need multi-gigabyte temporaries. Non-finite outputs never pass
where the reference is finite. An element still holding the poison pattern was
never written by the candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CHUNK = 1 << 24  # elements per comparison chunk
# GPU tensors of at least this many elements are checked by the one-pass Triton kernels of
# verify_kernels.py (same definitions; a tensor's size alone picks the path, so a tensor is always
# fingerprinted the same way); smaller ones, CPU tensors and other dtypes by the PyTorch forms below.
FAST_MIN_NUMEL = 1 << 20
_fast_broken: list[str] = []  # set once the kernels fail to build or run here: the PyTorch forms take over


def _fast(torch, t) -> object | None:
    """The kernels' module when they should check ``t``, else None."""
    if _fast_broken or not t.is_cuda or t.numel() < FAST_MIN_NUMEL:
        return None
    try:
        from skillbase.toolchain import verify_kernels
    except Exception as e:  # noqa: BLE001 - no Triton: the PyTorch forms
        _fast_broken.append(f"{type(e).__name__}: {e}")
        return None
    return verify_kernels if verify_kernels.supports(torch, t) else None


def fast_path_status() -> str:
    """'' while the kernels work; otherwise why the PyTorch forms took over."""
    return _fast_broken[0] if _fast_broken else ""


# Bytes that unwritten memory holds: the GPU worker fills freed allocator blocks
# with 0xFF (NaN in every float format); on CPU glibc's MALLOC_PERTURB_=128
# makes fresh allocations 0x7F bytes (3.39e38 in fp32, NaN in fp16).
GPU_POISON_BYTE = 0xFF
CPU_POISON_BYTE = 0x7F
CPU_MALLOC_PERTURB = "128"


@dataclass
class Comparison:
    """The outcome of comparing one output tensor with the reference's."""

    ok: bool
    problem: str = ""
    max_abs: float = 0.0
    rel_norm: float = 0.0
    mismatched: int = 0
    nonfinite: int = 0
    unwritten: int = 0
    numel: int = 0
    worst_index: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _int_view(torch, t):
    size = t.element_size()
    kind = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(size)
    return t.view(kind) if kind is not None else None


def _poison_value(torch, size: int, byte: int) -> int:
    raw = int.from_bytes(bytes([byte]) * size, "little", signed=True)
    return raw if size > 1 else byte


def compare(torch, out, ref, atol: float, rtol: float, poison_byte: int | None) -> Comparison:
    """Check ``out`` against ``ref`` elementwise: shape, dtype, finiteness, poison and tolerance."""
    if not isinstance(out, torch.Tensor):
        return Comparison(False, f"returned {type(out).__name__}, expected a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(False, f"wrong output shape: expected {tuple(ref.shape)}, got {tuple(out.shape)}")
    if out.dtype != ref.dtype:
        return Comparison(False, f"wrong output dtype: expected {ref.dtype}, got {out.dtype}")
    if out.device != ref.device:
        return Comparison(False, f"output on {out.device}, expected {ref.device}")
    o_all = out.detach().reshape(-1)
    r_all = ref.detach().reshape(-1)
    n = o_all.numel()
    c = Comparison(True, numel=n)
    exact = not ref.is_floating_point() and not ref.is_complex()
    poison = None
    if poison_byte is not None and ref.element_size() in (2, 4, 8):
        poison = _poison_value(torch, ref.element_size(), poison_byte)
    fast = _fast(torch, ref)
    if fast is not None:
        try:
            st = fast.compare_stats(
                torch, o_all.contiguous(), r_all.contiguous(), lambda t: _int_view(torch, t), atol, rtol, poison, exact
            )
        except Exception as e:  # noqa: BLE001 - a kernel that cannot build here: the PyTorch form
            _fast_broken.append(f"{type(e).__name__}: {str(e)[:300]}")
        else:
            c.unwritten, c.nonfinite, c.mismatched = st["unwritten"], st["nonfinite"], st["mismatched"]
            c.max_abs = st["max_abs"]
            c.worst_index = st["first_bad"] if exact else st["worst_index"]
            sq_diff, sq_ref = st["sq_diff"], st["sq_ref"]
            return _conclude(c, n, atol, rtol, sq_diff, sq_ref)
    sq_diff = sq_ref = 0.0
    worst = -1.0
    for s in range(0, n, CHUNK):
        o, r = o_all[s : s + CHUNK], r_all[s : s + CHUNK]
        if poison is not None:
            oi, ri = _int_view(torch, o.contiguous()), _int_view(torch, r.contiguous())
            c.unwritten += int(((oi == poison) & (ri != poison)).sum().item())
        if exact:
            bad = o != r
            c.mismatched += int(bad.sum().item())
            if c.mismatched and c.worst_index is None:
                c.worst_index = s + int(bad.nonzero()[0].item())
            continue
        of, rf = o.double(), r.double()
        rfin, ofin = torch.isfinite(rf), torch.isfinite(of)
        c.nonfinite += int((~ofin & rfin).sum().item())
        # Where the reference itself is non-finite the candidate must match it exactly.
        both_nan = torch.isnan(of) & torch.isnan(rf)
        c.mismatched += int((~rfin & ~both_nan & (of != rf)).sum().item())
        diff = torch.where(rfin & ofin, (of - rf).abs(), torch.zeros_like(of))
        tol = atol + rtol * rf.abs()
        bad = (diff > torch.where(rfin, tol, torch.zeros_like(tol))) | (~ofin & rfin)
        c.mismatched += int(bad.sum().item())
        m = float(diff.max().item()) if diff.numel() else 0.0
        if m > worst:
            worst = m
            c.worst_index = s + int(diff.argmax().item())
        c.max_abs = max(c.max_abs, m)
        sq_diff += float((diff * diff).sum().item())
        sq_ref += float(torch.where(rfin, rf * rf, torch.zeros_like(rf)).sum().item())
    return _conclude(c, n, atol, rtol, sq_diff, sq_ref)


def _conclude(c: Comparison, n: int, atol: float, rtol: float, sq_diff: float, sq_ref: float) -> Comparison:
    c.rel_norm = (sq_diff**0.5) / (sq_ref**0.5) if sq_ref > 0 else (0.0 if sq_diff == 0 else float("inf"))
    if c.unwritten:
        c.ok, c.problem = (
            False,
            f"{c.unwritten} of {n} elements were never written (they still hold the poison pattern)",
        )
    elif c.nonfinite:
        c.ok, c.problem = False, f"{c.nonfinite} of {n} elements are NaN/Inf where the reference is finite"
    elif c.mismatched:
        c.ok = False
        c.problem = (
            f"{c.mismatched} of {n} elements differ beyond atol={atol:g}, rtol={rtol:g} "
            f"(max abs error {c.max_abs:.3g} at flat index {c.worst_index})"
        )
    return c


def fingerprint(torch, t) -> tuple:
    """A cheap content hash of a tensor (position-weighted sum of its bits), with shape and strides."""
    if not isinstance(t, torch.Tensor):
        return ("obj", repr(t)[:200])
    flat = t.detach().reshape(-1)
    if flat.numel() == 0:
        return (tuple(t.shape), str(t.dtype), 0)
    bits = _int_view(torch, flat.contiguous())
    if bits is None:
        bits = flat.contiguous().view(torch.uint8)
    fast = _fast(torch, bits)
    if fast is not None:
        try:
            return (tuple(t.shape), tuple(t.stride()), str(t.dtype), fast.fingerprint_sum(torch, bits))
        except Exception as e:  # noqa: BLE001 - the PyTorch form below
            _fast_broken.append(f"{type(e).__name__}: {str(e)[:300]}")
    total = 0
    for s in range(0, bits.numel(), CHUNK):
        chunk = bits[s : s + CHUNK].to(torch.int64)
        w = torch.arange(s, s + chunk.numel(), device=chunk.device, dtype=torch.int64) % 1_000_003 + 1
        total = (total + int((chunk * w).sum().item())) & ((1 << 64) - 1)
    return (tuple(t.shape), tuple(t.stride()), str(t.dtype), total)


def storage_range(torch, t) -> tuple[int, int] | None:
    """[start, end) byte addresses of a tensor's storage."""
    if not isinstance(t, torch.Tensor) or t.device.type == "meta":
        return None
    st = t.untyped_storage()
    start = st.data_ptr()
    return (start, start + st.nbytes())


def aliases(torch, outs: list, ins: list) -> list[tuple[int, int]]:
    """(output index, input index) pairs whose storages overlap."""
    pairs = []
    for i, o in enumerate(outs):
        ro = storage_range(torch, o)
        if ro is None or ro[0] == ro[1]:
            continue
        for j, x in enumerate(ins):
            rx = storage_range(torch, x)
            if rx is not None and rx[0] < ro[1] and ro[0] < rx[1]:
                pairs.append((i, j))
    return pairs


def poison_allocator(torch, device, sizes: list[int], max_blocks: int = 16) -> None:
    """Fill every free caching-allocator block that could hold an output with 0xFF, then free them all,
    so that an output the candidate allocates but does not fully write shows NaN (CUDA only).

    Only blocks the allocator already caches can hand a stale result to the candidate, so
    poisoning stops once the cache has no free bytes left for another block of that size
    (taking fresh device memory would only cost memory: with multi-GB outputs it ran out).
    """
    blocks = []
    for nbytes in sizes:
        if nbytes <= 0:
            continue
        for _ in range(max_blocks):
            cached_free = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
            if cached_free < nbytes:
                break
            reserved = torch.cuda.memory_reserved(device)
            try:
                b = torch.empty(nbytes, dtype=torch.uint8, device=device)
            except torch.cuda.OutOfMemoryError:
                break
            b.fill_(GPU_POISON_BYTE)
            blocks.append(b)
            if torch.cuda.memory_reserved(device) > reserved:
                break
    del blocks
