"""From per-kernel counters to a diagnosis in plain words, the matching techniques and one
discretised bottleneck state (a ``PROFILE_STATES`` key, in the spirit of KernelBlaster's states).

Each rule reads a few metrics of one kernel and, when they show a problem, gives a
``Finding``: what is wrong with the numbers that show it, a severity (0..1, roughly the
share of the kernel's time it costs) and the techniques (``seeds/techniques.yaml``) that
address it. The profile's state is the most severe finding of the kernel that takes the
most time (one of severity >= MIN_STATE_SEVERITY); with none it is the regime the counters show.
Findings are listed by severity times their kernel's share of the profiled time.
"""

from __future__ import annotations

from skillbase.models import Finding, KernelProfile

DRAM_SATURATED = 85.0  # % of peak: only fewer bytes help
COMPUTE_SATURATED = 80.0
UNCOALESCED_EFFICIENCY = 60.0  # % of each sector used
UNCOALESCED_RATIO = 2.0  # sectors per request over the coalesced expectation
BANK_CONFLICT_PCT = 20.0  # conflicts, % of shared wavefronts
LOW_OCCUPANCY = 30.0  # achieved, % of the SM's warps
TAIL_IDLE = 20.0  # % of the last wave idle
BUSY = 40.0  # below this on both DRAM and SM the kernel waits on latency
LOCAL_BYTES_PER_US = 1e6  # 1 MB of local traffic per µs of kernel time is heavy spilling
L2_SATURATED = 85.0  # % of peak L2 throughput with DRAM below its limit: the same bytes re-fetched from L2
MEMORY_HEAVY = 60.0  # % of peak DRAM, SMs under half as busy, warps waiting on memory: fewer bytes help
MIN_STATE_SEVERITY = 0.15  # a lighter finding is reported but does not set the profile's state
_MEMORY_STALLS = {"long_scoreboard", "lg_throttle", "drain"}

TECHNIQUES: dict[str, list[str]] = {
    "dram-bound": [
        "elementwise-fusion",
        "epilogue-fusion",
        "one-pass-row-reduction",
        "online-softmax",
        "roofline-stop",
    ],
    "uncoalesced": ["coalesced-access", "vectorized-access", "smem-transpose", "layout-change"],
    "bank-conflicts": ["bank-conflict-avoidance", "smem-transpose"],
    "register-spills": ["occupancy-tuning", "num-warps-tuning", "block-size-tuning"],
    "low-occupancy": ["occupancy-tuning", "num-warps-tuning", "block-size-tuning"],
    "tail-effect": ["persistent-kernel", "grid-stride-loop", "split-reduction", "block-size-tuning"],
    "compute-bound": ["tensor-cores", "mixed-precision", "fast-math", "algebraic-simplification"],
    "tensor-underused": ["tensor-cores", "mixed-precision", "software-pipelining"],
    "l2-bound": ["program-swizzle", "smem-tiling", "register-tiling", "block-size-tuning"],
    "latency-bound": ["vectorized-access", "software-pipelining", "num-warps-tuning", "block-size-tuning"],
    "balanced": ["autotuning"],
}
_TENSOR_FAMILIES = {"matmul", "matmul_epilogue", "attention", "conv", "batched_matmul", "conv_epilogue"}


def diagnose(kernels: list[KernelProfile], family: str | None = None) -> tuple[list[Finding], str | None]:
    """Findings over every kernel (most severe first) and the profile's state."""
    findings: list[Finding] = []
    for k in kernels:
        findings += kernel_findings(k, family)
    if not kernels:
        return findings, None
    # A finding matters as much as the time it costs the whole forward: a 5 µs helper kernel's
    # problem comes after the main kernel's, whatever its own severity.
    total = sum(k.duration_us or 0.0 for k in kernels)
    share = {k.name: (k.duration_us or 0.0) / total if total > 0 else 1.0 for k in kernels}
    findings.sort(key=lambda f: -f.severity * share.get(f.kernel, 1.0))
    main = max(kernels, key=lambda k: k.duration_us or 0.0)
    own = [f for f in findings if f.kernel == main.name and f.severity >= MIN_STATE_SEVERITY]
    own.sort(key=lambda f: -f.severity)
    return findings, (own[0].problem if own else regime(main))


def regime(k: KernelProfile) -> str:
    """The state of a kernel with no finding: which resource its counters show busy."""
    if (k.dram_pct or 0) >= DRAM_SATURATED:
        return "dram-bound"
    if (k.sm_pct or 0) >= COMPUTE_SATURATED:
        return "compute-bound"
    if (k.l2_pct or 0) >= L2_SATURATED:
        return "l2-bound"
    memory_stalls = not k.stalls or k.stalls[0].reason in _MEMORY_STALLS
    if (k.dram_pct or 0) >= MEMORY_HEAVY and (k.sm_pct or 0) < k.dram_pct / 2 and memory_stalls:
        # Below the DRAM limit, but nothing else is busy and warps wait on loads: the bytes are
        # what it costs (a row read twice, an unfused chain), so the same techniques as at the limit.
        return "dram-bound"
    if k.dram_pct is not None and k.sm_pct is not None and max(k.dram_pct, k.sm_pct, k.l2_pct or 0) < BUSY:
        return "latency-bound"
    return "balanced"


def kernel_findings(k: KernelProfile, family: str | None = None) -> list[Finding]:
    """Every problem one kernel's counters show."""
    out: list[Finding] = []

    def add(problem: str, summary: str, severity: float) -> None:
        out.append(
            Finding(
                kernel=k.name,
                problem=problem,
                summary=summary,
                severity=round(min(max(severity, 0.0), 1.0), 3),
                techniques=TECHNIQUES[problem],
            )
        )

    for kind, spr, eff in (
        ("loads", k.ld_sectors_per_request, k.ld_efficiency_pct),
        ("stores", k.st_sectors_per_request, k.st_efficiency_pct),
    ):
        # 0% used with sectors fetched: the SASS metric saw no plain LDG/STG (Triton's tl.dot loads
        # are cp.async / TMA copies, which it does not count), so it says nothing about coalescing.
        if eff is not None and 0 < eff < UNCOALESCED_EFFICIENCY:
            # A request cannot touch fewer than one sector: a warp storing one scalar uses 4 of
            # 32 bytes but is as coalesced as it can be.
            expected = max(spr * eff / 100, 1.0) if spr else None
            ratio = spr / expected if spr and expected else 100 / max(eff, 1.0)
            if ratio >= UNCOALESCED_RATIO:
                nums = (
                    f"{spr:.1f} sectors per request, {expected:.1f} expected"
                    if spr and expected
                    else f"{eff:.0f}% of each 32-byte sector used"
                )
                add(
                    "uncoalesced",
                    f"uncoalesced {kind} in {k.name}: {nums}; {100 - eff:.0f}% of the bytes fetched are wasted",
                    1 - eff / 100,
                )
    if k.smem_conflict_pct is not None and k.smem_conflict_pct >= BANK_CONFLICT_PCT:
        add(
            "bank-conflicts",
            f"shared-memory bank conflicts in {k.name}: {k.smem_conflict_pct:.0f}% of shared wavefronts are replays",
            k.smem_conflict_pct / 100,
        )
    spills = (k.spill_bytes or 0) > 0
    heavy_local = k.local_bytes is not None and k.duration_us and k.local_bytes / k.duration_us > LOCAL_BYTES_PER_US
    if spills or heavy_local:
        what = [f"{k.spill_bytes} bytes spilled per thread (ptxas)"] if spills else []
        if k.local_bytes:
            what.append(f"{k.local_bytes / 1e6:.1f} MB of local-memory traffic")
        regs = f" at {k.registers} registers per thread" if k.registers else ""
        # Light local traffic (a few bytes spilled outside the hot loop) costs little: below the state's bar.
        light = k.local_bytes is not None and k.duration_us and not heavy_local
        rate = k.local_bytes / k.duration_us / LOCAL_BYTES_PER_US if light else 0.0
        add(
            "register-spills",
            f"register spills in {k.name}{regs}: " + ", ".join(what),
            0.6 if heavy_local else (0.1 + 0.3 * rate if light else 0.4),
        )
    occ = k.achieved_occupancy_pct
    if occ is not None and occ < LOW_OCCUPANCY:
        theo = (
            f" (theoretical {k.theoretical_occupancy_pct:.0f}%"
            + (f", limited by {k.occupancy_limiter.replace('_', ' ')})" if k.occupancy_limiter else ")")
            if k.theoretical_occupancy_pct is not None
            else ""
        )
        busy = max(k.dram_pct or 0, k.sm_pct or 0)
        enough = (
            f"; yet DRAM runs at {k.dram_pct:.0f}% of peak, so more resident warps would gain little here"
            if (k.dram_pct or 0) >= DRAM_SATURATED
            else ""
        )
        add(
            "low-occupancy",
            f"low occupancy in {k.name}: {occ:.0f}% of the SM's warps resident{theo}{enough}",
            (1 - occ / LOW_OCCUPANCY) * 0.5 + (0.3 if busy < 60 else 0.0),
        )
    if k.tail_idle_pct is not None and k.tail_idle_pct >= TAIL_IDLE:
        waves = f"{k.waves:.2f} waves" if k.waves is not None else "the grid"
        add(
            "tail-effect",
            f"tail effect in {k.name}: {waves} leave {k.tail_idle_pct:.0f}% of the GPU's block "
            "slots idle in the last wave",
            k.tail_idle_pct / 100,
        )
    if (k.dram_pct or 0) >= DRAM_SATURATED:
        add(
            "dram-bound",
            f"{k.name} runs at {k.dram_pct:.0f}% of peak DRAM throughput: only moving fewer bytes "
            "(fusing with its neighbours, one pass instead of several) makes it faster, or stop here",
            0.35,
        )
    if family in _TENSOR_FAMILIES and (k.sm_pct or 0) >= 50 and k.tensor_pct is not None and k.tensor_pct < 10:
        add(
            "tensor-underused",
            f"{k.name} keeps the SMs {k.sm_pct:.0f}% busy with the tensor pipe at "
            f"{k.tensor_pct:.0f}%: the matrix product runs on CUDA cores",
            0.7,
        )
    elif (k.sm_pct or 0) >= COMPUTE_SATURATED:
        add(
            "compute-bound",
            f"{k.name} keeps the SMs {k.sm_pct:.0f}% busy: do less arithmetic per element or use faster units",
            0.3,
        )
    # L2 counts as busy too: a tile loop re-reading operands from L2 is not waiting on latency.
    if not out and k.dram_pct is not None and k.sm_pct is not None and max(k.dram_pct, k.sm_pct, k.l2_pct or 0) < BUSY:
        stall = (
            f"; warps mostly stall on {k.stalls[0].reason.replace('_', ' ')} ({k.stalls[0].share_pct:.0f}%)"
            if k.stalls
            else ""
        )
        add(
            "latency-bound",
            f"{k.name} keeps neither DRAM ({k.dram_pct:.0f}%) nor the SMs ({k.sm_pct:.0f}%) "
            f"busy{stall}: more independent work in flight per warp",
            0.3,
        )
    return out


def techniques_of(findings: list[Finding], state: str | None) -> list[str]:
    """The matching techniques, most relevant first (the state's, then the other findings')."""
    out: dict[str, None] = {}
    for t in TECHNIQUES.get(state or "", []):
        out.setdefault(t)
    for f in findings:
        for t in f.techniques:
            out.setdefault(t)
    return list(out)


def summary(findings: list[Finding], state: str | None, limit: int = 3) -> str:
    """A few plain sentences: the state, then the most severe findings."""
    if not findings:
        return f"No problem stands out in the counters (state: {state or 'unknown'})." if state else ""
    lines = [f.summary[0].upper() + f.summary[1:] + "." for f in findings[:limit]]
    techs = techniques_of(findings[:limit], state)[:4]
    if techs:
        lines.append("Try: " + ", ".join(techs) + ".")
    return " ".join(lines)
