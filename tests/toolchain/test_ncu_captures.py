"""The parser and the diagnosis on real Nsight Compute captures: raw CSVs (``--csv --page raw
--print-units base``) of ncu 2025.3.1 on an NVIDIA H100 80GB HBM3, taken by the GPU suite's
`profile` part on 2026-11-25 (benchmarks/results/h100-2026-11-25/profile_csv/). The fixtures are
the six deliberately flawed kernels and four built-in naive solutions, copied unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillbase.toolchain import diagnose, ncu

FIXTURES = Path(__file__).parent / "fixtures" / "ncu"
FLAWED = {"uncoalesced": "uncoalesced", "bank_conflicts": "bank-conflicts", "register_spills": "register-spills",
          "low_occupancy": "low-occupancy", "tail_effect": "tail-effect", "unfused_dram": "dram-bound"}
# Which identity columns the captures carry besides the metrics (ncu adds two NVTX columns with --nvtx).
NVTX_COLUMNS = ("thread Domain:Push/Pop_Range", "Id:Domain:Start/Stop_Range")


def _kernels(name: str):
    text = (FIXTURES / f"{name}.csv").read_text()
    parsed = ncu.parse_csv(text)
    assert parsed, f"{name}: no kernel parsed"
    return parsed, [ncu.kernel_profile(p) for p in parsed]


CAPTURES = sorted(p.stem for p in FIXTURES.glob("*.csv"))


def test_the_fixtures_cover_every_flaw_and_stay_small():
    assert {f"flawed__{n}" for n in FLAWED} <= set(CAPTURES)
    assert len([c for c in CAPTURES if not c.startswith("flawed__")]) >= 3
    assert sum(p.stat().st_size for p in FIXTURES.glob("*.csv")) <= 200_000


@pytest.mark.parametrize("name", CAPTURES)
def test_every_metric_of_the_fixed_set_is_a_column_with_a_value(name):
    """ncu 2025.3.1 on sm_90 accepted every name we ask for, under that name (none refused, none
    renamed): each is a column of the capture and every kernel has a number in it."""
    text = (FIXTURES / f"{name}.csv").read_text()
    parsed, _ = _kernels(name)
    for want in ncu.metric_names():
        if want in ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",):
            continue  # the fallback name of tensor_pct: asked for, and only used when the first is absent
        assert f'"{want}"' in text, f"{want} missing from {name}"
        for k in parsed:
            assert k["values"][want][0] is not None, f"{want} has no value for {k['name']} in {name}"
    for k in parsed:
        assert not any(any(c.startswith(p) for p in NVTX_COLUMNS) and v[0] is not None
                       for c, v in k["values"].items()), "an NVTX identity column read as a number"


@pytest.mark.parametrize("name", CAPTURES)
def test_every_record_field_is_parsed_or_missing_with_a_reason(name):
    _, records = _kernels(name)
    for rec in records:
        # Only the efficiencies may be withheld, each with why (cp.async/TMA loads, one-value stores).
        assert set(rec.missing) <= {"ld_efficiency_pct", "st_efficiency_pct"}, rec.missing
        assert all("says nothing about coalescing" in why for why in rec.missing.values())
        assert rec.duration_us and rec.duration_us > 0
        for field in ("dram_pct", "l2_pct", "sm_pct", "tensor_pct", "achieved_occupancy_pct",
                      "theoretical_occupancy_pct", "l1_hit_pct", "l2_hit_pct"):
            v = getattr(rec, field)
            assert v is not None and 0.0 <= v <= 100.5, (field, v)
        assert rec.occupancy_limiter in ("registers", "shared_memory", "block_size", "blocks")
        assert rec.registers and rec.registers > 0
        assert rec.ld_sectors_per_request and rec.ld_sectors_per_request >= 1.0
        assert rec.local_bytes is not None and rec.waves is not None and rec.tail_idle_pct is not None
        assert rec.stalls and abs(sum(s.share_pct for s in rec.stalls) - 100) < 60  # top 4 of 17 reasons


def test_a_missing_metric_is_reported_with_its_reason():
    """The same capture with one metric column dropped and one value blanked: both fields are None,
    each with the ncu name and why."""
    text = (FIXTURES / "flawed__uncoalesced.csv").read_text()
    parsed = ncu.parse_csv(text)[0]
    parsed["values"].pop("dram__throughput.avg.pct_of_peak_sustained_elapsed")
    parsed["values"]["lts__t_sector_hit_rate.pct"] = (None, "%")
    rec = ncu.kernel_profile(parsed)
    assert rec.dram_pct is None and "not in ncu's output" in rec.missing["dram_pct"]
    assert rec.l2_hit_pct is None and "n/a" in rec.missing["l2_hit_pct"]


def test_units_and_shapes_of_known_captures():
    (k,), = [_kernels("flawed__uncoalesced")[1]]
    assert k.name == "scale_shift_colmajor_kernel" and k.grid == "(8192, 32, 1)" and k.block == "(128, 1, 1)"
    assert k.duration_us == pytest.approx(1544.576)  # ncu reports ns with --print-units base
    assert (k.ld_sectors_per_request, k.ld_efficiency_pct) == (32.0, 12.5)
    _, spills = _kernels("flawed__register_spills")
    assert spills[0].local_bytes > 1e9  # sectors x 32 bytes of local loads and stores
    _, three = _kernels("flawed__unfused_dram")
    assert [k.name for k in three] == ["scale_kernel", "shift_kernel", "relu_kernel"]


@pytest.mark.parametrize("flaw,state", sorted(FLAWED.items()))
def test_each_flawed_kernel_is_diagnosed_with_its_flaw(flaw, state):
    _, kernels = _kernels(f"flawed__{flaw}")
    findings, got = diagnose.diagnose(kernels, "elementwise")
    assert state in {f.problem for f in findings}
    text = diagnose.summary(findings, got)
    assert text
    if flaw != "low_occupancy":
        assert got == state, (got, [(f.problem, f.severity) for f in findings])
    else:
        # At 86% of peak DRAM the kernel is at its limit despite 12% occupancy: the counters say
        # dram-bound, and the finding says that occupancy is low but not what limits it.
        assert got == "dram-bound"
        low = next(f for f in findings if f.problem == "low-occupancy")
        assert "limited by registers" in low.summary and "would gain little" in low.summary


def test_built_in_naive_solutions_get_their_known_problem():
    """matmul/naive: Triton's tl.dot loads are cp.async copies, which the SASS bytes-per-sector metric
    does not count (it reads 0%); the counters show L2 at its limit (small tiles, B streamed through
    L2). rmsnorm/naive and layernorm/naive read each row two and three times: memory-heavy, with a
    spill too light (8 bytes) to be the state. cross_entropy/naive: a one-scalar-per-row store is not
    uncoalesced, and the 5 µs mean kernel's problems come after the main kernel's."""
    _, mm = _kernels("matmul__naive")
    assert mm[0].ld_efficiency_pct is None and "cp.async" in mm[0].missing["ld_efficiency_pct"]
    assert mm[0].ld_sectors_per_request == 16.0  # the sectors are counted: only the SASS bytes metric is blind
    assert "ld_efficiency_pct" not in mm[0].metrics()  # so no skill gate on it opens
    findings, state = diagnose.diagnose(mm, "matmul")
    assert "uncoalesced" not in {f.problem for f in findings} and state == "l2-bound"
    assert "program-swizzle" in diagnose.techniques_of(findings, state)[:3]
    for task in ("rmsnorm__naive", "layernorm__naive"):
        findings, state = diagnose.diagnose(_kernels(task)[1], "norm")
        assert state == "dram-bound", (task, state)
    # With the compile report's 8 spilled bytes per thread (ptxas) merged in, as the profile does:
    # a light finding, not the state.
    ln = [k.model_copy(update={"spill_bytes": 8}) for k in _kernels("layernorm__naive")[1]]
    findings, state = diagnose.diagnose(ln, "norm")
    spill = next(f for f in findings if f.problem == "register-spills")
    assert spill.severity < diagnose.MIN_STATE_SEVERITY and state == "dram-bound"
    _, ce = _kernels("cross_entropy__naive")
    findings, state = diagnose.diagnose(ce, "reduction")
    assert "uncoalesced" not in {f.problem for f in findings}
    assert state == "dram-bound" and findings[0].kernel == "row_loss_kernel"


def test_a_kernel_busy_only_on_l2_is_not_latency_bound():
    """matmul_bias_gelu/naive's GEMM on the H100: DRAM 27%, SMs 31%, L2 99% of peak."""
    k = _kernels("matmul__naive")[1][0].model_copy(update={"dram_pct": 26.92, "sm_pct": 30.84, "l2_pct": 99.09})
    findings, state = diagnose.diagnose([k], "matmul_epilogue")
    assert state == "l2-bound" and "latency-bound" not in {f.problem for f in findings}


def test_a_saved_report_is_diagnosed_again_with_the_current_rules():
    from skillbase.models import ProfileReport
    from skillbase.toolchain.profile import rediagnose

    _, kernels = _kernels("flawed__tail_effect")
    old = ProfileReport(task="tail_effect", task_signature="reduction:fp32:medium", solution_hash="h", device="cuda:0",
                        available=True, kernels=kernels, state="uncoalesced", diagnosis="stale")
    new = rediagnose(old)
    assert new.state == "tail-effect" and "1.14 waves" in new.diagnosis
    assert kernels[0].st_efficiency_pct is None and kernels[0].ld_efficiency_pct == 100.0  # one value per row
    stale = kernels[0].model_copy(update={"st_efficiency_pct": 12.5, "missing": {}})
    again = rediagnose(old.model_copy(update={"kernels": [stale], "metrics": stale.metrics()}))
    assert again.kernels[0].st_efficiency_pct is None and "st_efficiency_pct" not in again.metrics
    assert "uncoalesced" not in {f.problem for f in new.findings}


def test_replay_passes_are_read_from_the_raw_page():
    """ncu 2025.3.1 with --csv prints no '==PROF== Profiling ... N passes' line; the raw page's
    profiler__replayer_passes column has the count (16 for the fixed metric set on the H100)."""
    text = (FIXTURES / "flawed__unfused_dram.csv").read_text()
    assert "passes" not in "".join(ln for ln in text.splitlines() if ln.startswith("=="))
    assert ncu.passes(text) == [16, 16, 16]
    assert ncu.passes('==PROF== Profiling "k": 0%....50%....100% - 11 passes') == [11]


def test_every_state_has_techniques_of_the_seed_vocabulary():
    from skillbase import seeds
    from skillbase.memory.techniques import Vocabulary, load_seed_techniques
    from skillbase.models import PROFILE_STATES

    assert set(diagnose.TECHNIQUES) == set(PROFILE_STATES)
    vocab = Vocabulary(load_seed_techniques(seeds.TECHNIQUES_FILE))
    for state, techs in diagnose.TECHNIQUES.items():
        assert [vocab.canonical(t) for t in techs] == techs, state
