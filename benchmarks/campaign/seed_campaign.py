"""Build seeds/campaign.jsonl: the KernelBench campaign's measured steps and lessons as seed memory.

    python benchmarks/campaign/seed_campaign.py RUN_DIR --kernelbench KB \\
        [--campaign benchmarks/campaign] [--lessons benchmarks/campaign/lessons.yaml] [--out seeds/campaign.jsonl]

RUN_DIR is the suite run directory the campaign was timed in (``skillbase suite run RUN_DIR --manifest
... --no-record`` on the GPU), holding ``.skillbase/results/<key>.json`` per evaluated candidate; KB is a
KernelBench checkout, read only to trace each problem (nothing of its files is kept: a task record's path
becomes ``kb:LEVEL/NUMBER`` and its description the trace's own summary).

Everything goes through skillbase's own interface, into a fresh store:

1. the manifests (``manifest_*.json`` of the campaign folder) are merged; each candidate's newest result
   (by the time it finished) is recorded by ``suite record``'s ``record_run`` as an attempt with its
   lineage (parent, techniques) and the manifest's note (prediction and reason), plus the key of the
   result file it came from. A candidate whose file no longer matches the measured solution hash is left
   out (the measurement would not be of this code), and so are its children;
2. every task record keeps the traced description (families, bytes, FLOPs, regime), so a store without a
   KernelBench checkout still finds these steps by family;
3. each lesson of ``lessons.yaml`` is recorded by ``SkillBase.record_lesson`` on its candidate's attempt
   (the gain measured from the attempts, never typed in), followed by one generated sentence of the
   measured figures. A lesson says what outcome it was written for (``expect``); one the measurement
   contradicts stops the build (rewrite it) unless ``--allow-mismatch``;
4. the store's own JSONL export (tasks, attempts, experiences) is written to ``--out``, and the evidence
   of the campaign skills named in ``lessons.yaml`` (``skills:``) is written into their SKILL.md.

Ids are fixed by content (run, candidate, solution hash, finish time; lesson text), so rebuilding the
file keeps the ids of what did not change and ``skillbase init`` on an older store adds only the rest.
Afterwards, run ``python benchmarks/seed_embeddings.py`` so that init finds the new texts' vectors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from skillbase import SkillBase  # noqa: E402
from skillbase.models import BenchReport, Evidence, content_hash  # noqa: E402
from skillbase.seeds import CAMPAIGN_FILE, SKILLS_DIR  # noqa: E402
from skillbase.suite.discover import discover  # noqa: E402
from skillbase.suite.record import record_run  # noqa: E402
from skillbase.suite.runner import results_dir  # noqa: E402

KEEP = ("task", "attempt", "experience")
AGENT = "kernelbench-campaign"
EXPECT = ("first", "faster", "same", "slower", "failed", "any")
SAME = (0.98, 1.02)  # a step within this ratio of its parent changed nothing measurable
COMPILE_SAME = (0.97, 1.03)  # parity with torch.compile


def merged_manifest(campaign: Path, dest: Path) -> list[dict]:
    """Every candidate of the campaign's ``manifest_*.json`` in one manifest at ``dest`` (file paths
    made absolute, so the manifest may live anywhere)."""
    rows = []
    for part in sorted(campaign.glob("manifest_*.json")):
        for row in json.loads(part.read_text())["candidates"]:
            rows.append({**row, "file": str((campaign / row["file"]).resolve())})
    if not rows:
        raise SystemExit(f"no manifest_*.json under {campaign}")
    dest.write_text(json.dumps({"candidates": rows}))
    return rows


def newest_results(run_dir: Path) -> dict[str, tuple[BenchReport, str, str]]:
    """name -> (report, finished_at, result key) of each candidate's newest result, by when it finished
    (a run directory holds results of older toolchain versions too; file times do not survive a copy)."""
    found: dict[str, tuple[BenchReport, str, str]] = {}
    for path in results_dir(run_dir).glob("*.json"):
        data = json.loads(path.read_text())
        name, done = data["name"], data["finished_at"]
        if name not in found or datetime.fromisoformat(done) > datetime.fromisoformat(found[name][1]):
            found[name] = (BenchReport(**data["report"]), done, data["key"])
    return found


def measured_sentence(parent, child) -> str:
    """What the H100 measured for a step, from the reports alone."""
    rep = child.bench_report
    hw = rep.hardware.name
    if child.verdict != "correct":
        failed = [c.name for c in (rep.correctness.checks if rep.correctness else []) if not c.passed and not c.skipped]
        err = rep.correctness.max_abs_error if rep.correctness else None
        return (f"Measured with skillbase suite run on {hw}: {child.verdict}"
                + (f", failing {', '.join(failed)}" if failed else "")
                + (f" (max abs error {err:.3g})" if err is not None else "") + ".")
    us = rep.timing.median_ms * 1e3
    base = {k: v.median_ms * 1e3 for k, v in rep.baselines.items()}
    bits = [f"median {us:.1f} µs (CUDA events, L2 flushed)"]
    if parent is not None and parent.median_ms and parent.verdict == "correct":
        bits.append(f"parent {parent.median_ms * 1e3:.1f} µs, x{parent.median_ms / child.median_ms:.2f}")
    if "eager" in base:
        bits.append(f"eager {base['eager']:.1f} µs (x{base['eager'] / us:.2f})")
    if "torch_compile" in base:
        bits.append(f"torch.compile {base['torch_compile']:.1f} µs (x{base['torch_compile'] / us:.2f})")
    roof = rep.roofline
    if roof and roof.pct_sol:
        bits.append(f"{roof.pct_sol:.0f}% of speed of light ({roof.bound}-bound, {roof.achieved_gbps:.0f} GB/s"
                    + (f", {roof.achieved_tflops:.1f} TFLOP/s" if roof.achieved_tflops else "") + ")")
    return f"Measured with skillbase suite run on {hw}: " + "; ".join(bits) + "."


def outcome(parent, child) -> str:
    """first | faster | same | slower | failed: what a step did, measured."""
    if child.verdict != "correct":
        return "failed"
    if parent is None or parent.verdict != "correct" or not parent.median_ms:
        return "first"
    gain = parent.median_ms / child.median_ms
    return "faster" if gain > SAME[1] else "slower" if gain < SAME[0] else "same"


def versus_compile(att) -> str | None:
    """faster | same | slower than torch.compile, measured (None when not timed)."""
    rep = att.bench_report
    comp = rep.baselines.get("torch_compile") if rep and rep.baselines else None
    if att.verdict != "correct" or not att.median_ms or comp is None:
        return None
    ratio = comp.median_ms / att.median_ms
    return "faster" if ratio > COMPILE_SAME[1] else "slower" if ratio < COMPILE_SAME[0] else "same"


def contradictions(name: str, spec: dict, parent, att) -> list[str]:
    """What the measurement contradicts in a lesson's stated outcome (``expect``: the step against its
    parent; ``compile``: the candidate against torch.compile), each a list of outcomes it holds for."""
    out = []
    for key, got in (("expect", outcome(parent, att)), ("compile", versus_compile(att))):
        want = spec.get(key, "any")
        want = [want] if isinstance(want, str) else list(want)
        if bad := [w for w in want if w not in EXPECT]:
            raise SystemExit(f"lessons.yaml: {name}: {key} {bad} is not one of {EXPECT}")
        if "any" not in want and got not in want:
            out.append(f"{name}: {key} written for {'/'.join(want)}, measured {got}")
    return out


def clean_task(info):
    """The task record kept in the seeds: the trace, not the problem file (no path, no docstring)."""
    m = next((i for i in info.path.split("/") if i.startswith("level")), None)
    level = m[len("level"):] if m else "?"
    number = Path(info.path).name.split("_", 1)[0]
    summary = info.understanding.summary if info.understanding else ""
    return info.model_copy(update={"path": f"kb:{level}/{number}", "description": summary, "solutions": {}})


def build(sb: SkillBase, run_dir: Path, kb: Path, campaign: Path, lessons: dict, work: Path,
          allow_mismatch: bool) -> dict:
    """Record attempts and lessons into ``sb``'s store; returns what was done and what was left out."""
    manifest = work / "manifest.json"
    merged_manifest(campaign, manifest)
    items = discover(run_dir, kb, manifest=manifest)
    results = newest_results(run_dir)
    for item in items:
        if item.name in results:
            rep, _, key = results[item.name]
            item.note = (f"{item.note} [measured: {run_dir.name}/.skillbase/results/{key}.json, "
                         f"solution {rep.solution_hash}]").strip()
    outcomes = {n: (r, done) for n, (r, done, _) in results.items()}
    rec = record_run(sb, items, outcomes, run_dir.name, session=f"kernelbench-{run_dir.name}", agent=AGENT)
    store = sb.memory
    tasks = {}
    for item in items:
        if item.name in rec.attempts and str(item.task) not in tasks:
            info = sb.task(str(item.task))
            tasks[str(item.task)] = store.record_task(clean_task(info))
    by_name = {i.name: i for i in items}
    atts = {n: store.get_attempt(a) for n, a in rec.attempts.items()}
    written, missing, mismatched = [], [], []
    for name, att in atts.items():
        spec = (lessons.get("lessons") or {}).get(name)
        parent = atts.get(by_name[name].parent) if by_name[name].parent else None
        if spec is None:
            missing.append(name)
            continue
        problems = contradictions(name, spec, parent, att)
        if problems:
            mismatched.extend(problems)
            if not allow_mismatch:
                continue
        text = " ".join(str(spec["lesson"]).split()) + " " + measured_sentence(parent, att)
        title = spec.get("title") or f"{att.task}: {name}"
        exp = sb.record_lesson(
            text, after_attempt=att.id, before_attempt=parent.id if parent else None,
            techniques=att.techniques, title=title, session=f"kernelbench-{run_dir.name}", agent=AGENT,
            conditions=f"KernelBench {by_name[name].task.parent.name}/{by_name[name].problem} at its size, fp32",
            experience_id=seed_id("exp", run_dir.name, name, att.id, text), created_at=att.created_at)
        written.append((name, exp.id))
    return {"attempts": rec.attempts, "skipped": rec.skipped, "lessons": dict(written), "missing": missing,
            "mismatched": mismatched, "tasks": len(tasks)}


def seed_id(prefix: str, *parts: str) -> str:
    """An id fixed by what a seed record is (as benchmarks/seed_experiences.py makes them)."""
    h = content_hash(*parts)
    return f"{prefix}_{h[:12]}_{h[12:16]}0000"


def write_skill_evidence(sb: SkillBase, skills: dict[str, list[str]], done: dict, skills_dir: Path) -> dict:
    """The ``evidence`` of each campaign skill: the lessons of the candidates ``lessons.yaml`` names for it,
    with their measured gains; a candidate not recorded in this build is left out."""
    from skillbase.skills.markdown import FRONTMATTER_KEYS, emit_key, read_skill_dir

    after = FRONTMATTER_KEYS[FRONTMATTER_KEYS.index("evidence") + 1]
    counts = {}
    for skill_name, names in skills.items():
        folder = skills_dir / skill_name
        entries = []
        for name in names:
            if name not in done["lessons"]:
                continue
            exp = sb.get_experience(done["lessons"][name])
            entries.append(Evidence(experience_id=exp.id, attempt_id=exp.after_attempt, task=exp.task,
                                    gain=round(exp.gain, 3) if exp.gain else None, hardware=exp.hardware,
                                    note=f"{name}: {exp.title}"))
        path = folder / "SKILL.md"
        text = path.read_text()
        start, end = text.index("\nevidence:") + 1, text.index(f"\n{after}:") + 1
        dumped = [e.model_dump(mode="json", exclude_none=True) for e in entries]
        path.write_text(text[:start] + emit_key("evidence", dumped) + text[end:])
        if read_skill_dir(folder, max_bytes=1 << 20).evidence != entries:
            raise SystemExit(f"{path}: the evidence written does not read back")
        counts[skill_name] = len(entries)
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", type=Path, help="the suite run directory the campaign was timed in")
    ap.add_argument("--kernelbench", type=Path, required=True, help="a KernelBench checkout (read only)")
    ap.add_argument("--campaign", type=Path, default=HERE, help="folder of manifest_*.json and the kernels")
    ap.add_argument("--lessons", type=Path, default=HERE / "lessons.yaml")
    ap.add_argument("--out", type=Path, default=CAMPAIGN_FILE)
    ap.add_argument("--skills", type=Path, default=SKILLS_DIR, help="seed skills whose evidence to rewrite")
    ap.add_argument("--allow-mismatch", action="store_true",
                    help="record lessons whose expected outcome the measurement contradicts")
    args = ap.parse_args(argv)
    lessons = yaml.safe_load(args.lessons.read_text()) if args.lessons.is_file() else {}
    with tempfile.TemporaryDirectory() as home:
        with SkillBase(home=home) as sb:
            done = build(sb, args.run_dir.resolve(), args.kernelbench, args.campaign.resolve(), lessons,
                         Path(home), args.allow_mismatch)
            export = Path(home) / "export.jsonl"
            sb.memory.export_jsonl(export)
            counts = write_skill_evidence(sb, lessons.get("skills") or {}, done, args.skills)
        lines = export.read_text().splitlines()
    kept = [lines[0]] + [line for line in lines[1:] if json.loads(line)["kind"] in KEEP]
    args.out.write_text("\n".join(kept) + "\n")
    print(f"{len(done['attempts'])} attempts over {done['tasks']} problems, {len(done['lessons'])} lessons "
          f"-> {args.out}")
    for name, why in sorted(done["skipped"].items()):
        print(f"  not recorded: {name}: {why}")
    if done["missing"]:
        print(f"  no lesson written for {len(done['missing'])} step(s): {', '.join(sorted(done['missing']))}")
    for line in done["mismatched"]:
        print(f"  lesson contradicted by the measurement: {line}")
    for skill, n in counts.items():
        print(f"  skill {skill}: {n} evidence entries")
    return 1 if done["mismatched"] and not args.allow_mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
