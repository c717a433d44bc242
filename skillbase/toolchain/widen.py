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
        params = [
            p
            for p in inspect.signature(model_cls.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ][1:]
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params]
    return [names[i] if i < len(names) else f"arg{i}" for i in range(n)]


CHUNK = 1 << 26  # elements widened at a time: the masks and temporaries of a 16 GiB input stay at 256 MB


def _fold_(c, lo, hi) -> None:
    """Map sign-symmetric values ``c`` into [lo, hi] (either end may be None), in place, keeping their spread."""
    if lo is not None and hi is not None:
        c.sigmoid_().mul_(hi - lo).add_(lo)
    elif lo is not None:
        c.abs_().add_(lo)
    elif hi is not None:
        c.abs_().neg_().add_(hi)


def widen(
    torch, inputs: list, names: list[str], domain: dict[str, Any] | None, seed: int
) -> tuple[list, dict[str, str], float]:
    """The widened copy of ``inputs``; per widened input, the distribution it was drawn from; and
    how many times larger the widened magnitudes are than the drawn ones (at least 1). Each widened
    entry of ``inputs`` is released from that list as it is replaced (multi-GB inputs are not held
    twice); the masks work through the draw a chunk at a time.

    Rounding errors grow with the magnitude of what is computed, so the comparison's absolute
    tolerance is scaled by that ratio: a dropped branch is wrong by about the value itself, far
    beyond it, while rounding at larger magnitudes stays within it."""
    domain = domain or {}
    out, drawn, ratio = [], {}, 1.0
    for i, (name, x) in enumerate(zip(names, inputs)):
        rule = domain.get(name)
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0 or rule == "as_drawn":
            out.append(x)
            continue
        lo_hi = torch.aminmax(x.detach())  # a reduction: no temporary the input's size
        peak = max(abs(float(lo_hi.min)), abs(float(lo_hi.max)))
        scale = SCALE * max(1.0, peak)
        device, dtype, shape = x.device, x.dtype, x.shape
        inputs[i] = x = None  # the task's draw is not needed past its peak: a 16 GiB input is never held twice
        # Drawn on the input's device: a CPU draw of a multi-GB input takes minutes.
        gen = torch.Generator(device=device).manual_seed(seed + len(out))
        w = torch.randn(shape, generator=gen, dtype=torch.float32, device=device)
        lo, hi = rule if isinstance(rule, (list, tuple)) and len(rule) == 2 else (None, None)
        top = torch.zeros((), dtype=torch.float32, device=device)
        flat = w.view(-1)
        for s in range(0, flat.numel(), CHUNK):
            c = flat[s : s + CHUNK]
            # The draw itself picks which elements become zeros and ties (|z| small has a known
            # probability), so no second tensor of the input's size is needed.
            a = c.abs()
            zeros = a < _Q_ZEROS
            ties = (a < _Q_TIES) & ~zeros
            large = a > _Q_LARGE
            del a
            c.mul_(scale)
            c[large] *= LARGE
            c[zeros] = 0.0
            c[ties] = 0.5 * scale
            del zeros, ties, large
            _fold_(c, lo, hi)
            top = torch.maximum(top, c.abs().max())
        ratio = max(ratio, float(top) / max(peak, 1e-30))
        out.append(w if dtype == torch.float32 else w.to(dtype=dtype))
        del w, flat
        where = "" if lo is None and hi is None else f" folded into [{lo}, {hi}]"
        drawn[name] = (
            f"N(0, {scale:g}^2) with its 1% tails x{LARGE:g} (up to about ±{scale * LARGE * 4:g}), "
            f"{ZEROS:.0%} exact zeros and {TIES:.0%} exact ties{where}"
        )
    return out, drawn, ratio
