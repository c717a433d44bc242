"""Task understanding: per-op FLOPs and bytes against hand counts, families from traced forwards,
fusion headroom, the regime, the fallbacks for forwards that do not trace on meta, and the cache."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from skillbase.config import Settings
from skillbase.toolchain import opgraph, tasks, understand
from skillbase.toolchain.cache import JsonCache

MAX = 256_000
F32 = 4


class Stub:
    """A task module built in the test: Model, get_inputs, get_init_inputs."""

    def __init__(self, model_cls, inputs, init=()):
        self.Model, self._inputs, self._init = model_cls, inputs, init
        self.path, self.shape, self.module = Path("stub.py"), {}, None

    def get_inputs(self):
        return [f() for f in self._inputs]

    def get_init_inputs(self):
        return list(self._init)


def fn_model(fn):
    class M(nn.Module):
        def forward(self, *xs):
            return fn(*xs)
    return M


def graph_of(fn, *shapes):
    return opgraph.trace(Stub(fn_model(fn), [lambda s=s: torch.randn(*s) for s in shapes]))


def module_graph(module_cls, init, *shapes):
    return opgraph.trace(Stub(module_cls, [lambda s=s: torch.randn(*s) for s in shapes], init))


def only(g, base):
    ops = [o for o in g.ops if o.base == base]
    assert len(ops) == 1, [o.name for o in g.ops]
    return ops[0]


# -- a dozen ops counted by hand ------------------------------------------------


@pytest.mark.parametrize("name, build, base, flops, trans, nbytes", [
    ("mm", lambda: graph_of(torch.mm, (64, 32), (32, 16)), "mm",
     2 * 64 * 16 * 32, 0, F32 * (64 * 32 + 32 * 16 + 64 * 16)),
    ("linear", lambda: module_graph(nn.Linear, (32, 16), (64, 32)), "addmm",
     2 * 64 * 16 * 32 + 64 * 16, 0, F32 * (64 * 32 + 16 * 32 + 16 + 64 * 16)),
    ("bmm", lambda: graph_of(torch.bmm, (8, 16, 32), (8, 32, 24)), "bmm",
     2 * 8 * 16 * 24 * 32, 0, F32 * (8 * 16 * 32 + 8 * 32 * 24 + 8 * 16 * 24)),
    ("conv2d", lambda: module_graph(nn.Conv2d, (3, 4, 3, 1, 0, 1, 1, False), (2, 3, 10, 10)), "convolution",
     2 * 2 * 4 * 8 * 8 * 3 * 9, 0, F32 * (2 * 3 * 100 + 4 * 3 * 9 + 2 * 4 * 64)),
    ("conv_transpose2d", lambda: module_graph(nn.ConvTranspose2d, (4, 2, 3, 1, 0, 0, 1, False), (1, 4, 5, 5)),
     "convolution", 2 * 1 * 4 * 25 * 2 * 9, 0, F32 * (4 * 25 + 4 * 2 * 9 + 2 * 49)),
    ("relu", lambda: graph_of(torch.relu, (1000,)), "relu", 1000, 0, F32 * 2000),
    ("sigmoid", lambda: graph_of(torch.sigmoid, (1000,)), "sigmoid", 3000, 1000, F32 * 2000),
    ("gelu", lambda: graph_of(F.gelu, (100,)), "gelu", 500, 100, F32 * 200),
    ("gelu_tanh", lambda: graph_of(lambda x: F.gelu(x, approximate="tanh"), (100,)), "gelu", 900, 100, F32 * 200),
    ("pow3", lambda: graph_of(lambda x: x ** 3, (50,)), "pow", 100, 0, F32 * 100),
    ("softmax", lambda: graph_of(lambda x: torch.softmax(x, -1), (4, 256)), "_softmax",
     5 * 1024, 1024, F32 * 2048),
    ("layer_norm", lambda: module_graph(nn.LayerNorm, (64,), (8, 64)), "native_layer_norm",
     8 * 512, 8, F32 * (512 + 64 + 64 + 512 + 8 + 8)),
    ("sum", lambda: graph_of(lambda x: x.sum(1), (16, 32)), "sum", 512, 0, F32 * (512 + 16)),
    ("max_pool2d", lambda: graph_of(lambda x: F.max_pool2d(x, 2), (1, 1, 8, 8)), "max_pool2d_with_indices",
     16 * 4, 0, F32 * (64 + 16) + 8 * 16),
    ("cumsum", lambda: graph_of(lambda x: torch.cumsum(x, 1), (10, 10)), "cumsum", 100, 0, F32 * 200),
    ("mse_loss", lambda: graph_of(F.mse_loss, (100,), (100,)), "mse_loss", 300, 0, F32 * (200 + 1)),
    ("logsumexp", lambda: graph_of(lambda x: torch.logsumexp(x, 1), (4, 8)), "logsumexp",
     4 * 32 + 4, 32 + 4, F32 * (32 + 4)),
])
def test_op_costs_match_hand_counts(name, build, base, flops, trans, nbytes):
    op = only(build(), base)
    assert (op.flops, op.transcendentals, op.bytes) == (flops, trans, nbytes), name


def test_sdpa_is_one_attention_op_or_its_products_and_softmax():
    g = graph_of(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (2, 4, 64, 16), (2, 4, 64, 16),
                 (2, 4, 64, 16))
    u = understand.understand(g)
    assert u.family == "attention"
    # Whichever way torch runs it here, both products are counted: 2 * B*H*S*S * (D + Dv).
    products = 2 * 2 * 4 * 64 * 64 * (16 + 16)
    assert products <= u.flops <= products * 1.25


# -- families ---------------------------------------------------------------------


class GemmRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 32)

    def forward(self, x):
        return torch.relu(self.fc(x))


class ConvGroupNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(8, 8, 3)
        self.norm = nn.GroupNorm(2, 8)

    def forward(self, x):
        return self.norm(self.conv(x)) * 2.0


@pytest.mark.parametrize("build, family, also", [
    (lambda: graph_of(lambda x: torch.exp(x - x.amax(1, keepdim=True)) / torch.exp(
        x - x.amax(1, keepdim=True)).sum(1, keepdim=True), (8, 64)), "softmax", []),
    (lambda: graph_of(lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), (8, 64)), "norm",
     ["rms_norm"]),
    (lambda: graph_of(lambda x: x / x.abs().sum(1, keepdim=True), (8, 64)), "norm", ["l1_norm"]),
    (lambda: module_graph(GemmRelu, (), (16, 64)), "matmul_epilogue", ["matmul", "elementwise"]),
    (lambda: module_graph(ConvGroupNorm, (), (2, 8, 12, 12)), "conv_epilogue",
     ["conv", "matmul_epilogue", "conv_transpose", "norm", "group_norm"]),
    (lambda: module_graph(nn.Conv2d, (8, 8, 3, 1, 1, 1, 8), (2, 8, 12, 12)), "depthwise_conv", ["conv"]),
    (lambda: graph_of(torch.matmul, (256, 128), (128, 1)), "gemv", ["matmul"]),
    (lambda: graph_of(torch.bmm, (4, 16, 8), (4, 8, 16)), "batched_matmul", ["matmul"]),
    (lambda: graph_of(lambda x: torch.triu(x @ x), (32, 32)), "matmul", []),
    (lambda: graph_of(lambda x: x * torch.sigmoid(x), (1024,)), "fused_elementwise", ["elementwise"]),
    (lambda: graph_of(lambda x: torch.argmax(x, 1), (16, 64)), "argreduce", ["reduction"]),
    (lambda: graph_of(lambda x: (x * x).sum(1), (16, 64)), "fused_reduction", ["reduction", "elementwise"]),
    (lambda: graph_of(lambda a, b: torch.mean(torch.clamp(1 - a * b, min=0)), (64,), (64,)), "loss", []),
    (lambda: graph_of(lambda x: F.cross_entropy(x, torch.zeros(8, dtype=torch.long)), (8, 10)), "loss",
     ["softmax", "log_softmax"]),
    (lambda: graph_of(lambda x: x.transpose(0, 1).contiguous(), (64, 32)), "layout", []),
    (lambda: graph_of(lambda x: torch.cumsum(x * 2, 1), (8, 64)), "scan", []),
])
def test_families_from_traced_forwards(build, family, also):
    primary, families = understand.classify(build())
    assert primary == family and families[0] == family
    assert all(f in families for f in also), families


def test_builtin_tasks_trace_to_the_family_their_meta_declares():
    names = tasks.builtin_names()
    assert len(names) >= 15
    for name in names:
        path, builtin = tasks.resolve_task_path(name)
        info = tasks.describe(path, builtin=builtin, max_bytes=MAX)
        assert info.understanding.family == info.family, (name, info.understanding.families)
        assert info.understanding.traced == "meta", name
        assert info.understanding.flops > 0 or info.family == "layout", name


# -- fusion, floor and regime ------------------------------------------------------------


def test_fusion_headroom_of_an_elementwise_chain():
    u = understand.understand(graph_of(lambda x: torch.relu(x) * 2.0, (1000,)))
    f = u.fusion
    assert (f.eager_kernels, f.eager_bytes, f.min_bytes, f.intermediate_bytes, f.removable_bytes) == (
        2, 4 * F32 * 1000, 2 * F32 * 1000, F32 * 1000, 2 * F32 * 1000)
    assert u.bytes == f.min_bytes and u.flops == 2000 and u.intensity == 0.25


def test_regime_reads_the_roofline():
    roof = understand.DEFAULT_ROOF
    assert understand.regime_of(1000, 10_000, "fp32", "elementwise", roof)[0] == "launch"
    assert understand.regime_of(10**9, 10**9, "fp32", "elementwise", roof)[0] == "memory"
    assert understand.regime_of(2 * 8192**3, 3 * 8192**2 * 2, "fp16", "matmul", roof)[0] == "compute"
    # fp32 products stay on CUDA cores (KernelBench's 1e-4 tolerance rules TF32 out): compute-bound sooner.
    assert understand.regime_of(8 * 10**9, 2 * 10**8, "fp32", "matmul", roof)[0] == "compute"
    assert understand.regime_of(8 * 10**9, 2 * 10**8, "fp16", "matmul", roof)[0] == "memory"
    slow = understand.Roof("slow", 100.0, 1.0, {})
    u = understand.understand(graph_of(torch.relu, (10**6,)))
    assert understand.with_roof(u, "fp32", slow).device == "slow"


# -- forwards that do not trace on meta ---------------------------------------------------


def write_task(tmp_path, name: str, body: str) -> Path:
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(body))
    return p


def test_item_in_init_builds_on_cpu_then_traces_on_meta(tmp_path):
    p = write_task(tmp_path, "item_init", """
        import torch, torch.nn as nn
        batch_size = 4
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = float(torch.linspace(0, 1, 5)[2].item())
                self.fc = nn.Linear(16, 8)
            def forward(self, x):
                return self.fc(x) * self.scale
        def get_inputs():
            return [torch.randn(batch_size, 16)]
        def get_init_inputs():
            return []
    """)
    info = tasks.describe(p, builtin=False, max_bytes=MAX)
    assert info.understanding.traced == "meta_after_cpu_init" and info.family == "matmul_epilogue"
    assert "item" in info.understanding.summary


def test_item_in_forward_traces_real_tensors_at_batch_one_and_scales_back(tmp_path):
    p = write_task(tmp_path, "item_forward", """
        import torch, torch.nn as nn
        batch_size = 8
        class Model(nn.Module):
            def forward(self, x):
                k = int(x.shape[1] // 2 + 0 * x.sum().item())
                return torch.softmax(x[:, :k], dim=1)
        def get_inputs():
            return [torch.randn(batch_size, 64)]
        def get_init_inputs():
            return []
    """)
    info = tasks.describe(p, builtin=False, max_bytes=MAX)
    u = info.understanding
    assert u.traced == "cpu_shrunk" and info.family == "softmax"
    assert only_info(u, "aten._softmax").flops == 5 * 8 * 32  # scaled x8 from batch_size=1
    assert info.input_shapes == [[8, 64]] and "batch_size=1" in u.summary


def only_info(u, name):
    ops = [o for o in u.ops if o.op == name]
    assert len(ops) == 1
    return ops[0]


def test_a_forward_that_never_traces_is_family_other_with_the_reason(tmp_path):
    p = write_task(tmp_path, "broken_forward", """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                raise RuntimeError("this reference is broken on purpose")
        def get_inputs():
            return [torch.randn(16, 4)]
        def get_init_inputs():
            return []
    """)
    info = tasks.describe(p, builtin=False, max_bytes=MAX)
    assert info.family == "other" and info.understanding.traced == "failed"
    assert "broken on purpose" in info.understanding.summary
    assert info.input_shapes == [[16, 4]] and info.bytes_moved == 16 * 4 * F32 and info.flops == 0
    assert info.tolerance.atol == 1e-4
    exits = write_task(tmp_path, "exiting_forward", p.read_text().replace(
        'raise RuntimeError("this reference is broken on purpose")', 'import sys; sys.exit(3)'))
    assert tasks.describe(exits, builtin=False, max_bytes=MAX).family == "other"


def test_a_missing_module_names_the_module(tmp_path):
    p = write_task(tmp_path, "needs_module", """
        import torch
        import no_such_module_for_skillbase_tests
    """)
    with pytest.raises(Exception, match="no_such_module_for_skillbase_tests"):
        tasks.describe(p, builtin=False, max_bytes=MAX)


# -- the cache -------------------------------------------------------------------------------


def test_descriptions_are_cached_by_content_hash(tmp_path, monkeypatch):
    from skillbase.toolchain.facade import Toolchain

    p = write_task(tmp_path, "cached_task", """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=1)
        def get_inputs():
            return [torch.randn(32, 64)]
        def get_init_inputs():
            return []
    """)
    calls = []
    real = opgraph.trace
    monkeypatch.setattr(opgraph, "trace", lambda *a, **k: calls.append(1) or real(*a, **k))
    settings = Settings(home=tmp_path / "home")
    with Toolchain(settings) as tc:
        first = tc.load_task(str(p))
        again = tc.load_task(str(p))
    assert len(calls) == 1 and first == again and first.family == "softmax"
    with Toolchain(settings) as tc:  # a new process reads the traced part from disk
        assert tc.load_task(str(p)).understanding == first.understanding
    assert len(calls) == 1
    p.write_text(p.read_text().replace("softmax(x, dim=1)", "relu(x)"))
    with Toolchain(settings) as tc:
        assert tc.load_task(str(p)).family == "elementwise"
    assert len(calls) == 2
    assert list(JsonCache(settings.cache_dir, "tasks").dir.rglob("*.json"))


def test_an_untraceable_reference_is_still_benchmarked(tmp_path, toolchain):
    from skillbase.models import Candidate

    from .conftest import FIXTURES

    p = write_task(tmp_path, "untraceable_scale", """
        import torch, torch.nn as nn
        batch_size, dim = 64, 257
        class Model(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.w = nn.Parameter(torch.randn(dim))
            def forward(self, x):
                # Neither on meta nor at batch 1, the two ways it could be traced.
                if x.is_meta or x.shape[0] < 2:
                    raise RuntimeError("no tracing, please")
                return x * self.w
        def get_inputs():
            return [torch.randn(batch_size, dim)]
        def get_init_inputs():
            return [dim]
    """)
    info = toolchain.load_task(str(p))
    assert info.family == "other" and "no tracing, please" in info.understanding.summary
    source = (FIXTURES / "scale_triton.py").read_text()
    report = toolchain.benchmark(info, Candidate(source=source), "cpu", use_cache=False)
    assert report.verdict == "correct", report.message


def test_a_tag_this_torch_lacks_reads_as_absent():
    """torch 2.11 (the GPU machines') has no ``Tag.inplace``; every task traced as family 'other' there."""
    assert opgraph._has_tag(torch.ops.aten.add_.Tensor, "a_tag_no_torch_defines") is False
    assert opgraph._has_tag(torch.ops.aten.add.Tensor, "pointwise") is True
