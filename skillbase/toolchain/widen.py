"""Inputs drawn more widely than a task's ``get_inputs`` draws them.

Many tasks draw with ``torch.rand`` (all non-negative): a kernel that drops a
branch those inputs never reach (the negative side of an activation, the lower
clamp of a clamp, the stable path of a softplus) computes another function, yet
passes every ordinary trial. The widened draw is sign-symmetric, several times
larger in magnitude than what the task draws (its 1% tails far larger still,
reaching overflow and saturation paths), and sprinkled with exact zeros and
exact ties (equal values, which decide max/argmax and sort order). Only floating
inputs are widened; integer and boolean inputs (indices, targets, masks) keep
the task's own values.

A task states an input's valid domain in ``META['domain']`` by the name of its
``forward`` parameter: ``{"x": [0, None]}`` keeps ``x`` non-negative (its
widened values are folded into the domain), ``{"p": "as_drawn"}`` keeps the
task's own draw for ``p``.
"""

from __future__ import annotations

import inspect
from typing import Any

SCALE = 4.0  # widened magnitude relative to the largest value the task draws (at least 1)
ZEROS = 0.01  # share of elements set to exactly 0
TIES = 0.01  # share of elements set to one repeated value
LARGE = 25.0  # the tail values (1%) are multiplied by this: overflow and saturation paths get exercised
# |z| < q holds for a standard normal z with probability 2 * Phi(q) - 1: these give 1% and 2%,
# and |z| > _Q_LARGE holds with probability 1%.
_Q_ZEROS, _Q_TIES, _Q_LARGE = 0.012533, 0.025069, 2.575829


def forward_names(model_cls: type, n: int) -> list[str]:
    """The names of ``forward``'s first ``n`` parameters (``arg{i}`` where it takes *args)."""
    try:
        params = [p for p in inspect.signature(model_cls.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][1:]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params]
    return [names[i] if i < len(names) else f"arg{i}" for i in range(n)]


def _fold(torch, w, lo, hi):
    """Map sign-symmetric values ``w`` into [lo, hi] (either end may be None), keeping their spread."""
    if lo is not None and hi is not None:
        return lo + (hi - lo) * torch.sigmoid(w)
    if lo is not None:
        return lo + w.abs()
    if hi is not None:
        return hi - w.abs()
    return w


def widen(torch, inputs: list, names: list[str], domain: dict[str, Any] | None, seed: int
          ) -> tuple[list, dict[str, str], float]:
    """The widened copy of ``inputs``; per widened input, the distribution it was drawn from; and
    how many times larger the widened magnitudes are than the drawn ones (at least 1).

    Rounding errors grow with the magnitude of what is computed, so the comparison's absolute
    tolerance is scaled by that ratio: a dropped branch is wrong by about the value itself, far
    beyond it, while rounding at larger magnitudes stays within it."""
    domain = domain or {}
    out, drawn, ratio = [], {}, 1.0
    for name, x in zip(names, inputs):
        rule = domain.get(name)
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0 or rule == "as_drawn":
            out.append(x)
            continue
        peak = float(x.detach().abs().max())
        scale = SCALE * max(1.0, peak)
        # Drawn on the input's device: a CPU draw of a multi-GB input takes minutes.
        gen = torch.Generator(device=x.device).manual_seed(seed + len(out))
        z = torch.randn(x.shape, generator=gen, dtype=torch.float32, device=x.device)
        # The draw itself picks which elements become zeros and ties (|z| small has a known
        # probability), so no second tensor of the input's size is needed.
        zeros = z.abs() < _Q_ZEROS
        ties = (z.abs() < _Q_TIES) & ~zeros
        large = z.abs() > _Q_LARGE
        w = z.mul_(scale)
        w[large] *= LARGE
        del large
        w[zeros] = 0.0
        w[ties] = 0.5 * scale
        del zeros, ties, z
        lo, hi = (rule if isinstance(rule, (list, tuple)) and len(rule) == 2 else (None, None))
        w = _fold(torch, w, lo, hi)
        ratio = max(ratio, float(w.abs().max()) / max(peak, 1e-30))
        out.append(w.to(device=x.device, dtype=x.dtype))
        where = "" if lo is None and hi is None else f" folded into [{lo}, {hi}]"
        drawn[name] = (f"N(0, {scale:g}^2) with its 1% tails x{LARGE:g} (up to about ±{scale * LARGE * 4:g}), "
                       f"{ZEROS:.0%} exact zeros and {TIES:.0%} exact ties{where}")
    return out, drawn, ratio
