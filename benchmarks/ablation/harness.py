"""The memory ablation's harness: workspaces and stores, lockstep rounds, records.

    python -m benchmarks.ablation.harness prepare --set A --kernelbench KB --root DIR
    python -m benchmarks.ablation.harness prompt  --root DIR --round R [--arm on|off]   # one line per agent
    python -m benchmarks.ablation.harness collect --root DIR --round R                  # the round's run directory
    python -m benchmarks.ablation.harness record  --root DIR --round R --results TGZ    # GPU results -> stores, records
    python -m benchmarks.ablation.harness status  --root DIR

The protocol is README.md beside this file. ``DIR`` holds, outside the repository, one workspace and one
store per problem and arm (``ws/<id>``, ``stores/<id>``), the agents' call logs (``logs/<id>.jsonl``,
written by each workspace's ``./sb``) and the rounds' run directories (``runs/<set>-r<R>``). What the
score is computed from goes to ``records/<set>/`` in this folder: nothing in DIR is needed to score.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records"
BRIEF = HERE / "brief.md"
ROUNDS = 4
ARMS = ("on", "off")

# The held-out sets, fixed before any run (README.md): level -> problem numbers.
SETS: dict[str, dict[int, list[int]]] = {
    "A": {2: list(range(21, 98, 4)), 3: list(range(1, 47, 5))},
    "B": {2: list(range(23, 100, 4)), 3: list(range(3, 49, 5))},
}
SUBMISSION_KEYS = {"parent", "techniques", "used", "why"}


@dataclass
class Workspace:
    """One problem in one arm: where its agent works and what its store is."""

    id: str
    set: str
    arm: str
    level: int
    problem: int
    problem_file: str  # the file's name, as KernelBench spells it (the agent sees it as is)

    def ws(self, root: Path) -> Path:
        return root / "ws" / self.id

    def store(self, root: Path) -> Path:
        return root / "stores" / self.id

    def log(self, root: Path) -> Path:
        return root / "logs" / f"{self.id}.jsonl"

    @property
    def task_spec(self) -> str:
        return f"kb:{self.level}/{self.problem}"


def workspace_id(salt: str, set_name: str, arm: str, level: int, problem: int) -> str:
    """An opaque, stable name: the arm cannot be read off it."""
    return hashlib.sha256(f"{salt}:{set_name}:{arm}:{level}:{problem}".encode()).hexdigest()[:10]


def load_workspaces(root: Path) -> list[Workspace]:
    data = json.loads((root / "assignments.json").read_text())
    return [Workspace(**w) for w in data["workspaces"]]


def problem_files(kb: Path, set_name: str) -> dict[tuple[int, int], Path]:
    """The set's problem files in a KernelBench checkout."""
    from skillbase.suite.discover import kernelbench_task

    return {(lv, p): kernelbench_task(kb, lv, p) for lv, nums in SETS[set_name].items() for p in nums}


# ---------------------------------------------------------------------------
# prepare
# ---------------------------------------------------------------------------

WRAPPER = """#!/usr/bin/env bash
# skillbase's command line on this workspace's own store. Every call is logged.
export SKILLBASE_HOME={store} HF_HUB_OFFLINE=1 COLUMNS=${{COLUMNS:-160}}
exec {python} {script} --log {log} --round-file {round_file} -- "$@"
"""


def prepare(args) -> int:
    """Workspaces and stores for every problem of a set in both arms."""
    root: Path = args.root.resolve()
    if (root / "assignments.json").exists():
        print(f"{root} is prepared already (assignments.json); remove it to start over", file=sys.stderr)
        return 2
    files = problem_files(args.kernelbench, args.set)
    salt = os.urandom(8).hex()
    template = root / "template-on"
    _init_store(template)
    workspaces = []
    for (level, problem), path in sorted(files.items()):
        for arm in ARMS:
            w = Workspace(workspace_id(salt, args.set, arm, level, problem), args.set, arm, level, problem, path.name)
            ws = w.ws(root)
            (ws / "submit").mkdir(parents=True)
            shutil.copyfile(path, ws / path.name)
            shutil.copyfile(BRIEF, ws / "BRIEF.md")
            if arm == "on":
                shutil.copytree(template, w.store(root))
            else:
                w.store(root).mkdir(parents=True)
            w.log(root).parent.mkdir(parents=True, exist_ok=True)
            workspaces.append(w)
    (root / "assignments.json").write_text(json.dumps(
        {"set": args.set, "kernelbench": str(args.kernelbench.resolve()), "repo": str(HERE.parents[1]),
         "workspaces": [asdict(w) for w in workspaces]}, indent=1))
    write_wrappers(root, args.python or Path(sys.executable))
    (root / "round").write_text("0")
    rec = RECORDS / args.set
    rec.mkdir(parents=True, exist_ok=True)
    problems = [{"level": lv, "problem": p, "file": f.name} for (lv, p), f in sorted(files.items())]
    _write_json(rec / "problems.json", {"set": args.set, "problems": problems, "dropped": []})
    print(f"prepared {len(workspaces)} workspaces ({len(files)} problems x {len(ARMS)} arms) in {root}")
    return 0


def write_wrappers(root: Path, python: Path) -> None:
    """Each workspace's ``./sb``, running the product installed with ``python`` (the agents' frozen copy:
    the product does not change under them while a run is under way) beside its ``logged_cli.py``."""
    script = root / "logged_cli.py"  # a copy, frozen with the run like the product
    if not script.is_file():
        shutil.copyfile(HERE / "logged_cli.py", script)
    for w in load_workspaces(root):
        sb = w.ws(root) / "sb"
        sb.write_text(WRAPPER.format(store=shlex.quote(str(w.store(root))), python=shlex.quote(str(python)),
                                     script=shlex.quote(str(script)), log=shlex.quote(str(w.log(root))),
                                     round_file=shlex.quote(str(root / "round"))))
        sb.chmod(0o755)


def wrap(args) -> int:
    write_wrappers(args.root.resolve(), args.python)
    print(f"wrappers now run {args.python}")
    return 0


def _init_store(home: Path) -> None:
    """``skillbase init`` into ``home``: the memory-on arm's store, copied once per problem."""
    from skillbase.api import SkillBase

    with SkillBase(home=home) as sb:
        sb.init()


# ---------------------------------------------------------------------------
# prompt
# ---------------------------------------------------------------------------


def prompt_for(root: Path, w: Workspace, round_no: int) -> str:
    """What an agent is given: the brief (a copy of brief.md in its workspace, the same in both arms),
    its workspace and its round."""
    return (f"Read {w.ws(root) / 'BRIEF.md'} and do what it says. Your workspace is {w.ws(root)}. "
            f"This is round {round_no} of {ROUNDS}.")


def prompt(args) -> int:
    root = args.root.resolve()
    (root / "round").write_text(str(args.round))
    for w in load_workspaces(root):
        if args.arm and w.arm != args.arm:
            continue
        if (w.ws(root) / "submit" / f"round{args.round}.py").exists():
            continue  # already submitted
        print(json.dumps({"id": w.id, "level": w.level, "problem": w.problem,
                          "prompt": prompt_for(root, w, args.round)}))
    return 0


# ---------------------------------------------------------------------------
# collect
# ---------------------------------------------------------------------------


def read_submission(ws: Path, round_no: int) -> tuple[str, dict] | None:
    """The round's candidate and its notes; None when the agent submitted nothing."""
    src = ws / "submit" / f"round{round_no}.py"
    if not src.is_file():
        return None
    meta_path = src.with_suffix(".json")
    try:
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    except ValueError as e:
        meta = {"why": f"(submission notes unreadable: {e})"}
    if not isinstance(meta, dict):
        meta = {}
    meta = {k: meta.get(k) for k in SUBMISSION_KEYS}
    meta["techniques"] = [t for t in (meta["techniques"] or []) if isinstance(t, str)]
    meta["used"] = [u for u in (meta["used"] or []) if isinstance(u, str)]
    return src.read_text(), meta


ROUND0_TAIL = """

# Round 0: the reference, its output passed through one Triton copy, so that the toolchain measures the
# task's baselines (it skips them for a candidate with no kernel of its own).
import triton
import triton.language as tl


@triton.jit
def _round0_copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def _round0_through_triton(t):
    if not isinstance(t, torch.Tensor):
        return type(t)(_round0_through_triton(x) for x in t)
    t = t.contiguous()
    out = torch.empty_like(t)
    _round0_copy[(triton.cdiv(t.numel(), 1024),)](t, out, t.numel(), BLOCK=1024)
    return out


class ModelNew(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.inner = _Round0Reference(*args, **kwargs)

    def forward(self, *args):
        return _round0_through_triton(self.inner(*args))
"""


def reference_candidate(problem_file: Path) -> str:
    """Round 0's candidate: the problem's reference (renamed) with its output copied by one Triton kernel.
    It shows that the reference runs on the GPU machine and has the baselines measured; whatever the
    toolchain's verdict on it, it is no agent's kernel and is never scored."""
    return re.sub(r"\bModel\b", "_Round0Reference", problem_file.read_text()) + ROUND0_TAIL


def run_dir(root: Path, set_name: str, round_no: int) -> Path:
    return root / "runs" / f"{set_name}-r{round_no}"


def collect(args) -> int:
    """Write the round's run directory: every submitted candidate, the arms interleaved."""
    root = args.root.resolve()
    data = json.loads((root / "assignments.json").read_text())
    workspaces = load_workspaces(root)
    out = run_dir(root, data["set"], args.round)
    out.mkdir(parents=True, exist_ok=True)
    rows, missing = [], []
    if args.round == 0:
        kb = Path(data["kernelbench"])
        for w in workspaces:
            if w.arm != ARMS[0]:
                continue
            name = f"ref-l{w.level}-p{w.problem}"
            (out / f"{name}.py").write_text(reference_candidate(w.ws(root) / w.problem_file))
            rows.append({"name": name, "file": f"{name}.py", "task": w.task_spec})
        del kb
    else:
        for w in sorted(workspaces, key=lambda w: (w.level, w.problem, w.arm)):
            got = read_submission(w.ws(root), args.round)
            if got is None:
                missing.append(w.id)
                continue
            name = f"{w.id}-r{args.round}"
            (out / f"{name}.py").write_text(got[0])
            rows.append({"name": name, "file": f"{name}.py", "task": w.task_spec})
    _write_json(out / "manifest.json", {"candidates": rows})
    print(f"{out}: {len(rows)} candidates" + (f"; no submission from {len(missing)}: {' '.join(missing)}"
                                              if missing else ""))
    return 0


# ---------------------------------------------------------------------------
# record
# ---------------------------------------------------------------------------


def unpack_results(tgz: Path, dest: Path) -> None:
    """The GPU call's ``.skillbase/results`` into the round's run directory (nothing else is taken)."""
    with tarfile.open(tgz) as tar:
        for m in tar.getmembers():
            parts = Path(m.name).parts
            if ".skillbase" not in parts or not m.isfile() or not m.name.endswith(".json") or ".." in parts:
                continue
            rel = Path(*parts[parts.index(".skillbase"):])
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(tar.extractfile(m).read())


def attempt_row(w: Workspace, round_no: int, report, attempt_id: str | None, meta: dict, source_hash: str) -> dict:
    """One GPU-timed candidate as the score reads it."""
    t = report.timing.median_ms if report.timing else None
    base = {k: v.median_ms for k, v in report.baselines.items()}
    failed = None
    if report.correctness is not None:
        failed = next((c.name for c in report.correctness.checks if not c.passed), None)
    return {"set": w.set, "arm": w.arm, "level": w.level, "problem": w.problem, "round": round_no,
            "workspace": w.id, "attempt": attempt_id, "parent": meta.get("parent"),
            "techniques": meta.get("techniques", []), "used": meta.get("used", []), "why": meta.get("why"),
            "verdict": report.verdict, "failed_check": failed, "message": report.message[:300],
            "median_ms": t, "eager_ms": base.get("eager"), "compile_ms": base.get("torch_compile"),
            "device": report.hardware.name, "source": source_hash}


def record(args) -> int:
    """Record the round's GPU results into each problem's store and append them to the records."""
    from skillbase.api import SkillBase
    from skillbase.errors import SkillbaseError
    from skillbase.models import content_hash
    from skillbase.suite.runner import saved_outcomes

    root = args.root.resolve()
    data = json.loads((root / "assignments.json").read_text())
    set_name = data["set"]
    out = run_dir(root, set_name, args.round)
    if args.results:
        unpack_results(args.results, out)
    outcomes = saved_outcomes(out)
    rec = RECORDS / set_name
    if args.round == 0:
        return _record_references(rec, out, outcomes)
    done = {(r["workspace"], r["round"]) for r in _read_jsonl(rec / "attempts.jsonl")}
    rows, lacking = [], []
    for w in load_workspaces(root):
        name = f"{w.id}-r{args.round}"
        if (w.id, args.round) in done or not (out / f"{name}.py").is_file():
            continue
        if name not in outcomes:
            lacking.append(name)
            continue
        report, finished_at = outcomes[name]
        source = (out / f"{name}.py").read_text()
        _, meta = read_submission(w.ws(root), args.round) or ("", {})
        parent = meta.get("parent") if isinstance(meta.get("parent"), str) else None
        with SkillBase(home=w.store(root)) as sb:
            techniques = _known_techniques(sb, meta.get("techniques", []))
            try:
                att = sb.record_evaluation(str(w.ws(root) / w.problem_file), report, source=source,
                                           parent_id=parent, techniques=techniques, session=f"round{args.round}",
                                           agent="ablation", run=out.name, notes=str(meta.get("why") or "")[:2000])
            except SkillbaseError as e:  # an unknown parent id: record without it, say so
                att = sb.record_evaluation(str(w.ws(root) / w.problem_file), report, source=source,
                                           techniques=techniques, session=f"round{args.round}", agent="ablation",
                                           run=out.name, notes=f"(parent not recorded: {e.message}) "
                                                               + str(meta.get("why") or "")[:2000])
        h = content_hash(source)
        (rec / "sources").mkdir(parents=True, exist_ok=True)
        (rec / "sources" / f"{h}.py").write_text(source)
        rows.append(attempt_row(w, args.round, report, att.id, meta, h))
    _append_jsonl(rec / "attempts.jsonl", rows)
    # A round may be timed in parts (a device call can take only some problems): each part appends the
    # calls of the workspaces it recorded, so no call is appended twice.
    recorded = {r["workspace"] for r in rows}
    calls = [c for c in _round_calls(root, args.round) if c["workspace"] in recorded]
    _append_jsonl(rec / "calls.jsonl", calls)
    print(f"round {args.round}: {len(rows)} recorded, {len(calls)} ./sb calls"
          + (f"; {len(lacking)} without a GPU result yet: {' '.join(lacking)}" if lacking else ""))
    return 1 if lacking else 0


def _known_techniques(sb, names: list[str]) -> list[str]:
    out = []
    for n in names:
        try:
            out.append(sb.memory.canonical_technique(n))
        except Exception:  # not in the vocabulary: kept in the records, not in the store
            continue
    return out


def _record_references(rec: Path, out: Path, outcomes: dict) -> int:
    """Round 0: which references ran, and their baselines."""
    problems = json.loads((rec / "problems.json").read_text())
    dropped = {(d["level"], d["problem"]): d for d in problems.get("dropped", [])}
    for p in problems["problems"]:
        got = outcomes.get(f"ref-l{p['level']}-p{p['problem']}")
        if got is None:
            continue
        report = got[0]
        base = {k: v.median_ms for k, v in report.baselines.items()}
        p.update(eager_ms=base.get("eager"), compile_ms=base.get("torch_compile"), device=report.hardware.name)
        if base.get("eager") is None:
            dropped[(p["level"], p["problem"])] = {"level": p["level"], "problem": p["problem"],
                                                   "reason": report.message[:500]}
    problems["dropped"] = sorted(dropped.values(), key=lambda d: (d["level"], d["problem"]))
    _write_json(rec / "problems.json", problems)
    ran = sum(1 for p in problems["problems"] if p.get("eager_ms") is not None)
    print(f"round 0: {ran} references ran and have baselines; dropped {len(problems['dropped'])}")
    return 0


def _round_calls(root: Path, round_no: int) -> list[dict]:
    rows = []
    for w in load_workspaces(root):
        for r in _read_jsonl(w.log(root)):
            if r.get("round") == round_no:
                rows.append({"set": w.set, "arm": w.arm, "level": w.level, "problem": w.problem,
                             "workspace": w.id, **r})
    return rows


def reset(args) -> int:
    """Start a workspace's round 1 again from nothing (its agent was stopped before it submitted): the
    workspace back to its problem, brief and ``./sb``, the store back to the arm's start, its calls dropped."""
    root = args.root.resolve()
    by_id = {w.id: w for w in load_workspaces(root)}
    for wid in args.ids:
        w = by_id[wid]
        if any((w.ws(root) / "submit").glob("round*.py")):
            print(f"{wid} has submitted a round: not reset", file=sys.stderr)
            return 2
        ws = w.ws(root)
        for entry in ws.iterdir():
            if entry.name not in (w.problem_file, "BRIEF.md", "sb", "submit"):
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        shutil.rmtree(w.store(root))
        if w.arm == "on":
            shutil.copytree(root / "template-on", w.store(root))
        else:
            w.store(root).mkdir()
        w.log(root).write_text("")
        print(f"{wid} reset")
    return 0


def status(args) -> int:
    """Who has submitted which round."""
    root = args.root.resolve()
    for w in load_workspaces(root):
        subs = sorted(p.stem for p in (w.ws(root) / "submit").glob("round*.py"))
        print(f"{w.id} {w.arm:3} L{w.level} P{w.problem:<3} {' '.join(subs)}")
    return 0


# ---------------------------------------------------------------------------


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _append_jsonl(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--set", choices=sorted(SETS), required=True)
    p.add_argument("--kernelbench", type=Path, required=True)
    p.add_argument("--root", type=Path, required=True)
    p.add_argument("--python", type=Path, help="the agents' interpreter (default: this one)")
    wp = sub.add_parser("wrap")
    wp.add_argument("--root", type=Path, required=True)
    wp.add_argument("--python", type=Path, required=True)
    for name in ("prompt", "collect", "record"):
        q = sub.add_parser(name)
        q.add_argument("--root", type=Path, required=True)
        q.add_argument("--round", type=int, required=True, choices=range(0, ROUNDS + 1))
        if name == "prompt":
            q.add_argument("--arm", choices=ARMS)
        if name == "record":
            q.add_argument("--results", type=Path, help="the GPU call's ablation_run.tgz")
    r = sub.add_parser("reset")
    r.add_argument("--root", type=Path, required=True)
    r.add_argument("ids", nargs="+")
    s = sub.add_parser("status")
    s.add_argument("--root", type=Path, required=True)
    args = ap.parse_args(argv)
    return {"prepare": prepare, "wrap": wrap, "prompt": prompt, "collect": collect, "record": record, "reset": reset,
            "status": status}[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
