"""The widened draw: chunking changes nothing, the task's draw is released as it is replaced."""

import torch

from skillbase.toolchain import widen


def _draw():
    g = torch.Generator().manual_seed(1)
    return [torch.rand(3, 1000, generator=g), torch.randint(0, 9, (5,), generator=g), torch.rand(77, generator=g).half()]


def test_chunked_widening_gives_the_same_values_and_releases_the_draw(monkeypatch):
    names = ["x", "idx", "y"]
    whole_in = _draw()
    whole, how, ratio = widen.widen(torch, whole_in, names, {"y": [0, None]}, seed=5)
    assert whole_in[0] is None and whole_in[2] is None  # released as they were widened
    assert whole_in[1] is not None and torch.equal(whole[1], _draw()[1])  # integers keep the task's own values
    monkeypatch.setattr(widen, "CHUNK", 7)
    chunked, how2, ratio2 = widen.widen(torch, _draw(), names, {"y": [0, None]}, seed=5)
    assert all(torch.equal(a, b) for a, b in zip(whole, chunked))
    assert (how, ratio) == (how2, ratio2) and set(how) == {"x", "y"}
    x, y = whole[0], whole[2]
    assert x.dtype == torch.float32 and y.dtype == torch.float16
    assert bool((x < 0).any()) and bool((x == 0).any()) and float(x.abs().max()) > 4 * 25  # sign, zeros, tails
    assert bool((y >= 0).all())  # folded into the declared domain
    assert ratio > 4


def test_a_bounded_domain_is_kept():
    out, how, _ = widen.widen(torch, [torch.rand(5000)], ["p"], {"p": [0.25, 0.75]}, seed=3)
    assert 0.25 <= float(out[0].min()) and float(out[0].max()) <= 0.75
    assert "folded into [0.25, 0.75]" in how["p"]
