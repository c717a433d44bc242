"""Nsight Compute profiles without a GPU: the CSV parser (written against ncu's documented
``--csv --page raw`` and ``--page details`` formats; real captures from the GPU suite's
`profile` part can be added beside these), the diagnosis of each deliberately flawed pattern,
and the unavailable answers of the worker side (ncu missing, not permitted, hanging)."""

from __future__ import annotations

import os
import stat
import textwrap
import time

import pytest

from skillbase.models import KernelProfile, StallShare
from skillbase.toolchain import diagnose, ncu
from skillbase.toolchain.profile import profile_request

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC",')


def raw_csv(rows: list[dict[str, str]], units: dict[str, str]) -> str:
    """A CSV in ncu's raw-page layout: header, units row, one row per kernel (values quoted)."""
    names = list(units)
    lines = ["==PROF== Connected to process 4242 (/usr/bin/python3)",
             '==PROF== Profiling "k": 0%....50%....100% - 11 passes',
             HEADER + ",".join(f'"{n}"' for n in names),
             ",".join(['""'] * 11 + [f'"{units[n]}"' for n in names])]
    for i, r in enumerate(rows):
        ident = [str(i), "4242", "python3", "127.0.0.1", r["name"], "1", "7", r.get("block", "(128, 1, 1)"),
                 r.get("grid", "(65536, 1, 1)"), "0", "9.0"]
        lines.append(",".join(f'"{v}"' for v in ident + [r.get(n, "n/a") for n in names]))
    return "\n".join(lines) + "\n==PROF== Disconnected from process 4242\n"


UNITS = {
    "gpu__time_duration.sum": "nsecond", "dram__throughput.avg.pct_of_peak_sustained_elapsed": "%",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "%", "sm__throughput.avg.pct_of_peak_sustained_elapsed": "%",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "%", "sm__maximum_warps_per_active_cycle_pct": "%",
    "launch__occupancy_limit_registers": "block", "launch__occupancy_limit_shared_mem": "block",
    "launch__occupancy_limit_warps": "block", "launch__occupancy_limit_blocks": "block",
    "launch__registers_per_thread": "register/thread", "launch__waves_per_multiprocessor": "",
    "launch__grid_size": "", "device__attribute_multiprocessor_count": "",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "sector",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "request",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct": "%",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": "", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": "",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": "sector",
    ncu.STALL_METRIC.format("long_scoreboard"): "", ncu.STALL_METRIC.format("lg_throttle"): "",
    ncu.STALL_METRIC.format("selected"): "",
}

UNCOALESCED = {
    "name": "scale_shift_colmajor_kernel", "gpu__time_duration.sum": "1,532,416",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "38.2",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "71.5", "sm__throughput.avg.pct_of_peak_sustained_elapsed": "12.1",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "81.3", "sm__maximum_warps_per_active_cycle_pct": "100",
    "launch__occupancy_limit_registers": "16", "launch__occupancy_limit_shared_mem": "32",
    "launch__occupancy_limit_warps": "8", "launch__occupancy_limit_blocks": "32",
    "launch__registers_per_thread": "18", "launch__waves_per_multiprocessor": "62.06", "launch__grid_size": "262,144",
    "device__attribute_multiprocessor_count": "132",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "67,108,864",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "2,097,152",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct": "12.5",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum": "0", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum": "0",
    "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum": "0",
    ncu.STALL_METRIC.format("long_scoreboard"): "9.1", ncu.STALL_METRIC.format("lg_throttle"): "3.9",
    ncu.STALL_METRIC.format("selected"): "1",
}


def test_raw_page_is_parsed_into_typed_records_with_units_and_separators():
    text = raw_csv([UNCOALESCED, {"name": "other_kernel", "gpu__time_duration.sum": "2,000"}], UNITS)
    parsed = ncu.parse_csv(text)
    assert [p["name"] for p in parsed] == ["scale_shift_colmajor_kernel", "other_kernel"]
    k = ncu.kernel_profile(parsed[0])
    assert k.duration_us == pytest.approx(1532.416)  # nanoseconds in, µs out, thousands separators read
    assert k.ld_sectors_per_request == 32.0 and k.ld_efficiency_pct == 12.5
    assert k.occupancy_limiter == "block_size" and k.registers == 18
    assert k.smem_conflict_pct == 0.0 and k.local_bytes == 0.0
    assert k.grid == "(65536, 1, 1)" and k.waves == pytest.approx(62.06)
    assert k.tail_idle_pct == pytest.approx(100 * (63 - 62.06) / 63, abs=0.01)
    assert [s.reason for s in k.stalls] == ["long_scoreboard", "lg_throttle"]  # 'selected' is not a stall
    assert k.stalls[0].share_pct == pytest.approx(70.0, abs=0.1)
    # A metric ncu printed as n/a, and one it did not print at all: None, each with its reason.
    other = ncu.kernel_profile(parsed[1])
    assert other.duration_us == 2.0 and other.dram_pct is None
    assert "n/a" in other.missing["dram_pct"] and "not in ncu's output" in other.missing["tensor_pct"]
    assert ncu.passes(text) == [11]


def test_details_page_long_form_is_read_too():
    head = HEADER + '"Section Name","Metric Name","Metric Unit","Metric Value"'
    ident = '"0","1","python3","h","k(float*)","1","7","(256, 1, 1)","(100, 1, 1)","0","9.0","Command line profiler metrics"'
    text = "\n".join([head, f'{ident},"gpu__time_duration.sum","usecond","12.50"',
                      f'{ident},"dram__throughput.avg.pct_of_peak_sustained_elapsed","%","91.3"'])
    (k,) = [ncu.kernel_profile(p) for p in ncu.parse_csv(text)]
    assert k.duration_us == 12.5 and k.dram_pct == 91.3


def test_output_without_a_table_parses_to_nothing():
    assert ncu.parse_csv("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n") == []
    assert ncu.not_permitted("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                             "Performance Counters")


def test_command_profiles_own_kernels_unlocked_with_the_fixed_metric_set():
    cmd = ncu.command("ncu", ["python", "-m", "runner"], {"relu_kernel", "b"})
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--nvtx-include") + 1] == f"{ncu.NVTX_RANGE}/"
    assert cmd[cmd.index("-k") + 1] == "regex:b|relu_kernel"
    assert "gpu__time_duration.sum" in cmd[cmd.index("--metrics") + 1]
    assert cmd[-3:] == ["python", "-m", "runner"]


def _k(**kw) -> KernelProfile:
    base = dict(name="k", duration_us=500.0, dram_pct=50.0, sm_pct=30.0, achieved_occupancy_pct=70.0,
                theoretical_occupancy_pct=100.0, ld_efficiency_pct=100.0, ld_sectors_per_request=16.0,
                smem_conflict_pct=0.0, waves=20.0, tail_idle_pct=0.0, local_bytes=0.0)
    return KernelProfile(**{**base, **kw})


@pytest.mark.parametrize("kernel,state,words", [
    (_k(ld_efficiency_pct=12.5, ld_sectors_per_request=32.0), "uncoalesced", "32.0 sectors per request, 4.0 expected"),
    (_k(smem_conflict_pct=91.0), "bank-conflicts", "bank conflicts"),
    (_k(spill_bytes=2048, registers=255, local_bytes=4e9, achieved_occupancy_pct=12.0), "register-spills", "spill"),
    (_k(achieved_occupancy_pct=14.0, theoretical_occupancy_pct=18.75, occupancy_limiter="registers"), "low-occupancy",
     "limited by registers"),
    (_k(waves=1.14, tail_idle_pct=43.0), "tail-effect", "1.14 waves"),
    (_k(dram_pct=92.0), "dram-bound", "92% of peak DRAM"),
    (_k(dram_pct=20.0, sm_pct=15.0, stalls=[StallShare(reason="long_scoreboard", share_pct=70.0)]), "latency-bound",
     "long scoreboard"),
])
def test_diagnosis_names_each_flaw_in_plain_words(kernel, state, words):
    findings, got = diagnose.diagnose([kernel], "elementwise")
    assert got == state
    assert words in diagnose.summary(findings, got)
    assert set(diagnose.TECHNIQUES[state]) <= set(diagnose.techniques_of(findings, got))


def test_a_healthy_kernel_gets_its_regime_and_no_finding():
    findings, state = diagnose.diagnose([_k(dram_pct=70.0, sm_pct=45.0)])
    assert findings == [] and state == "balanced"


def test_tail_idle_share():
    assert ncu.tail_idle_pct(1.14, 300, 132) == pytest.approx(100 * 0.86 / 2)
    assert ncu.tail_idle_pct(0.2, 66, 132) == pytest.approx(50.0)  # half the SMs get no block
    assert ncu.tail_idle_pct(0.25, 132, 132) == pytest.approx(0.0)  # a persistent grid: one block per SM
    assert ncu.tail_idle_pct(None, None, None) is None


# ---------------------------------------------------------------------------
# Worker side: what the answer is when ncu cannot run (real subprocesses)
# ---------------------------------------------------------------------------

SOLUTION = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def _fake_ncu(tmp_path, body: str) -> str:
    exe = tmp_path / "ncu"
    exe.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def _request(tmp_path, **kw) -> dict:
    task = tmp_path / "task.py"
    task.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                    "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return profile_request({"task_path": str(task), "source": SOLUTION, **kw}, work, lambda f, m: None)


def test_unavailable_answers_are_typed_and_bounded(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLBASE_NCU", str(tmp_path / "absent"))
    out = _request(tmp_path)
    assert out["unavailable"] == "ncu_missing" and out["tool"] != "ncu"
    assert "torch_error" in out  # no GPU here: the torch profiler's fallback fails too, and says why

    monkeypatch.setenv("SKILLBASE_NCU", _fake_ncu(tmp_path, """
        echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters' >&2
        exit 1
    """))
    assert _request(tmp_path, no_fallback=True)["unavailable"] == "ncu_not_permitted"

    monkeypatch.setenv("SKILLBASE_NCU", _fake_ncu(tmp_path, "sleep 600 &\nwait\n"))
    start = time.perf_counter()
    out = _request(tmp_path, ncu_timeout_s=1.0, no_fallback=True)
    assert out["unavailable"] == "ncu_timeout" and out["ncu"]["exit_code"] is None
    assert time.perf_counter() - start < 60  # killed with its children, not waited for


def test_a_metric_ncu_does_not_know_is_dropped_and_the_run_retried(tmp_path, monkeypatch):
    from skillbase.models import Hardware, TaskInfo, Tolerance
    from skillbase.toolchain import profile as profiler

    monkeypatch.setattr(profiler, "_REJECTED", set())
    unknown = ncu.METRICS["tensor_pct"][0]
    csv_file = tmp_path / "capture.csv"
    csv_file.write_text(raw_csv([UNCOALESCED], UNITS))
    monkeypatch.setenv("SKILLBASE_NCU", _fake_ncu(tmp_path, f"""
        case "$*" in *{unknown}*) echo "==ERROR== Failed to find metric {unknown}" >&2; exit 1;; esac
        cat {csv_file}
    """))
    raw = _request(tmp_path, no_fallback=True)
    assert raw["tool"] == "ncu" and raw["dropped_metrics"] == [unknown] and raw["ncu"]["passes"] == [11]
    info = TaskInfo(name="strided", path=str(tmp_path / "task.py"), family="elementwise", dtype="fp32",
                    bytes_moved=2 * 4 * 8192 * 8192, flops=2 * 8192 * 8192, tolerance=Tolerance(atol=0, rtol=0))
    hw = Hardware(kind="cuda", name="NVIDIA H100 80GB HBM3", arch="sm_90", peak_gbps=2933.2)
    src = "@triton.jit\ndef scale_shift_colmajor_kernel(x):\n    pass\n"
    report = profiler.assemble(info, "h", "cuda:0", hw, raw, src, None)
    assert report.available and report.state == "uncoalesced" and report.kernels[0].tensor_pct is None
    assert "coalesced-access" in report.techniques and "dropped" in report.notes[-1]
    assert report.floor_us == pytest.approx(2 * 4 * 8192 * 8192 / 2933.2e9 * 1e6, rel=1e-3)


def test_flawed_kernels_are_correct_under_the_interpreter():
    """The deliberately flawed kernels are slow on purpose, never wrong: each Triton one matches its
    task's reference at the small shape under the Triton interpreter (a real subprocess)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "profile_flawed" / "check_cpu.py")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count(": ok") == 5
