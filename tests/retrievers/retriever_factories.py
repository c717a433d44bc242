"""Constructed records for the retriever tests: skills, lineages and lessons
whose right answers are known."""

from __future__ import annotations

from skillbase.models import AppliesWhen, Attempt, Experience, Skill, TaskInfo, Tolerance, content_hash

H100_KEY = "NVIDIA H100 80GB HBM3|sm_90"

NAIVE = '''import torch
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''


def skill(name: str, techniques: list[str], *, families: list[str] = (), bottlenecks: list[str] = (),
          dtypes: list[str] = (), min_arch: str | None = None, requires: list[str] = (), excludes: list[str] = (),
          status: str = "approved", description: str | None = None, languages: list[str] = ()) -> Skill:
    """An approved skill with the given applies_when."""
    return Skill(
        name=name, description=description or f"Use {', '.join(techniques)} when it fits the kernel.",
        techniques=list(techniques), status=status, languages=list(languages),
        applies_when=AppliesWhen(families=list(families), bottlenecks=list(bottlenecks), dtypes=list(dtypes),
                                 min_arch=min_arch, requires_features=list(requires),
                                 excludes_features=list(excludes)),
        body=f"# {name}\n\nApply {', '.join(techniques)}.",
    )


def task_info(name: str, family: str, dtype: str = "fp32", regime: str = "large") -> TaskInfo:
    """A TaskInfo of a memory-bound kernel (one flop per 8 bytes)."""
    return TaskInfo(name=name, path="", family=family, dtype=dtype, regime=regime, bytes_moved=1 << 28,
                    flops=1 << 25, tolerance=Tolerance(atol=1e-5, rtol=1e-5))


def lineage(info: TaskInfo, steps: list[tuple[list[str], float | None, str]], *, start_ms: float = 1.0,
            prefix: str = "") -> list[Attempt]:
    """A naive attempt, then one child per step: (techniques applied, ms or
    None, verdict). Each child's parent is the fastest correct attempt so far."""
    made = [_attempt(info, f"{prefix}{info.name}_0", None, [], start_ms, "correct")]
    best = made[0]
    for i, (techs, ms, verdict) in enumerate(steps, 1):
        a = _attempt(info, f"{prefix}{info.name}_{i}", best, sorted(set(best.techniques) | set(techs)), ms, verdict)
        made.append(a)
        if verdict == "correct" and ms is not None and ms < best.median_ms:
            best = a
    return made


def _attempt(info: TaskInfo, ident: str, parent: Attempt | None, techs: list[str], ms: float | None,
             verdict: str) -> Attempt:
    source = NAIVE + f"\n# {ident}\n"
    ok = verdict == "correct"
    return Attempt(
        id=f"att_{ident}", task=info.name, task_signature=info.signature, family=info.family, dtype=info.dtype,
        source=source, source_hash=content_hash(source), language="triton", parent_id=parent.id if parent else None,
        techniques=techs, verdict=verdict, median_ms=ms if ok else None, speedup_vs_eager=1.0 / ms if ok and ms else None,
        bottleneck="memory", hardware=H100_KEY, arch="sm_90", agent="test-agent",
    )


def lesson(ident: str, text: str, *, techniques: list[str], family: str, gain: float | None = None,
           task: str | None = None, signature: str | None = None) -> Experience:
    return Experience(id=ident, title=text[:60], lesson=text, task=task, task_signature=signature, family=family,
                      dtype=signature.split(":")[1] if signature else None, techniques=techniques, gain=gain, bottleneck="memory", arch="sm_90",
                      source="curated", agent="test-agent")
