"""The named correctness and anti-cheat checks of an evaluation, and what each guards against."""

from __future__ import annotations

from dataclasses import dataclass, field

from skillbase.models import Check

CHECKS: dict[str, str] = {
    "imports": "the solution imports and defines ModelNew",
    "output_shape_dtype": "every output has the reference's shape and dtype",
    "matches_reference": "every element of every output is within tolerance on every trial",
    "matches_reference_on_wider_inputs": "within tolerance also on inputs drawn sign-symmetric, larger, with zeros "
    "and ties (where the reference is finite)",
    "finite_outputs": "no NaN/Inf where the reference is finite",
    "output_fully_written": "no output element still holds the poison written into fresh memory",
    "inputs_unmodified": "the inputs are bit-identical before and after the call",
    "no_output_alias": "no output shares storage with an input",
    "fresh_result_each_call": "outputs follow the inputs: no result reused from an earlier call or a cache",
    "no_reference_call": "the reference Model is neither called nor inherited",
    "no_pytorch_fallback": "no exception handler computes with PyTorch; the forward does not replay the reference's operators",
    "own_kernel_launched": "the solution launches at least one kernel of its own",
    "no_side_stream_escape": "no work outlives the timed region on another stream",
    "torch_untouched": "torch, timers, builtins and the toolchain are not patched; global flags unchanged",
    "physically_possible": "the median is not below the floor set by measured bandwidth and FLOP rate",
}

# Failing one of these means the candidate is wrong; failing any other means it cheats.
CORRECTNESS_CHECKS = {
    "imports",
    "output_shape_dtype",
    "matches_reference",
    "matches_reference_on_wider_inputs",
    "finite_outputs",
}


@dataclass
class CheckBook:
    """Accumulates checks by name; a check fails once and stays failed."""

    checks: dict[str, Check] = field(default_factory=dict)

    def passed(self, name: str, detail: str = "") -> None:
        if name not in self.checks:
            self.checks[name] = Check(name=name, passed=True, detail=detail)

    def failed(self, name: str, detail: str) -> None:
        current = self.checks.get(name)
        if current is None or current.passed:
            self.checks[name] = Check(name=name, passed=False, detail=detail)

    def skipped(self, name: str, detail: str) -> None:
        if name not in self.checks:
            self.checks[name] = Check(name=name, passed=True, skipped=True, detail=detail)

    def first_failure(self) -> Check | None:
        """The first failed anti-cheat check, else the first failed correctness check."""
        failed = [c for c in self.checks.values() if not c.passed]
        cheats = [c for c in failed if c.name not in CORRECTNESS_CHECKS]
        return (cheats or failed or [None])[0]

    def as_list(self) -> list[Check]:
        order = list(CHECKS)
        return sorted(self.checks.values(), key=lambda c: order.index(c.name) if c.name in order else len(order))
