"""Machine-checkable gating: each rule, with its reason."""

from __future__ import annotations

from retriever_factories import skill, task_info
from skillbase.retrievers.gate import gate
from skillbase.retrievers.query import TechniqueMatcher, build_query
from skillbase.models import Technique

SOFTMAX_SRC = '''import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n + cols, e / tl.sum(e, axis=0), mask=cols < n)
'''


def _q(**kw):
    kw.setdefault("task", task_info("softmax_x", "softmax"))
    return build_query(**kw)


def test_a_skill_for_this_kernel_passes_with_what_matched():
    g = gate(skill("s", ["online-softmax"], families=["softmax"], bottlenecks=["memory"], dtypes=["fp32"],
                   min_arch="sm_80"), _q(arch="sm_90"))
    assert g.verdict == "pass" and g.factor == 1.0 and g.specific
    assert {"family softmax", "memory-bound", "dtype fp32", "sm_90 >= sm_80"} <= set(g.matched)


def test_too_old_a_gpu_filters_with_the_reason():
    g = gate(skill("s", ["tma"], min_arch="sm_90"), _q(arch="sm_80"))
    assert g.verdict == "filter" and g.factor == 0 and "needs sm_90" in g.reasons[0]


def test_unknown_conditions_are_not_held_against_a_skill():
    g = gate(skill("s", ["tma"], min_arch="sm_90", requires=["k_loop"]), _q())  # no arch, no source
    assert g.verdict == "pass"


def test_other_family_dtype_and_bottleneck_demote_each_with_a_reason():
    q = _q(arch="sm_90")
    fam = gate(skill("s", ["im2col"], families=["conv"]), q)
    dt = gate(skill("s", ["quantization"], dtypes=["int8"]), q)
    bn = gate(skill("s", ["tensor-cores"], bottlenecks=["compute"]), q)
    both = gate(skill("s", ["im2col"], families=["conv"], bottlenecks=["compute"]), q)
    for g, word in ((fam, "written for conv"), (dt, "int8"), (bn, "compute-bound")):
        assert g.verdict == "demote" and 0 < g.factor < 1 and word in " ".join(g.reasons)
    assert both.factor < min(fam.factor, bn.factor)


def test_a_family_guessed_from_words_costs_less_than_a_known_one():
    known = gate(skill("s", ["im2col"], families=["conv"]), _q())
    guessed = gate(skill("s", ["im2col"], families=["conv"]), build_query(text="a softmax over rows"))
    assert guessed.verdict == "demote" and known.factor < guessed.factor < 1


def test_code_features_the_candidate_already_has_filter_and_missing_ones_demote():
    q = _q(source=SOFTMAX_SRC)
    done = gate(skill("s", ["vectorized-access"], excludes=["reduction"]), q)
    needs = gate(skill("s", ["online-softmax"], requires=["k_loop"]), q)
    assert done.verdict == "filter" and "already does this" in done.reasons[0]
    assert needs.verdict == "demote" and "k_loop" in needs.reasons[0]


def test_asking_for_a_technique_the_code_has_only_demotes():
    vocab = TechniqueMatcher([Technique(name="online-softmax", title="Online softmax", category="reduction",
                                        description="one pass", aliases=["single-pass softmax"])])
    q = build_query(text="would a single-pass softmax help?", source=SOFTMAX_SRC, matcher=vocab)
    assert q.techniques == ("online-softmax",)
    g = gate(skill("s", ["online-softmax"], excludes=["reduction"]), q)
    assert g.verdict == "demote" and "seems to do this already" in g.reasons[0]


def test_status_and_language():
    q = _q(source=SOFTMAX_SRC)
    assert gate(skill("s", ["masking"], status="deprecated"), q).verdict == "filter"
    draft = gate(skill("s", ["masking"], status="draft"), q)
    assert draft.verdict == "demote" and "draft" in draft.reasons[0]
    cuda = gate(skill("s", ["block-reduction"], languages=["cuda"]), q)
    assert cuda.verdict == "demote" and "written for cuda" in cuda.reasons[0]
