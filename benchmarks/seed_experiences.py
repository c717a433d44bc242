"""Build seeds/experiences.jsonl from measured GPU results and the tasks' lineages.

Each built-in task's ``lineage.yaml`` lists optimization steps (parent solution ->
child solution, techniques, the hypothesis, the lesson). This script takes the
benchmark reports that ``benchmarks/toolchain_bench.py`` measured on a GPU and
kept in its JSON output, records one attempt per measured solution (lineage
parents first) and one experience per step in a fresh store, and writes the
store's own JSONL export of those records. No number is typed in: every gain,
time and roofline figure comes from a report, and a report whose solution hash
no longer matches the file on disk is refused (the measurement would not be of
this code).

It then writes each seed skill's ``evidence`` (in its SKILL.md frontmatter, the
rest of the file untouched): the seeded steps that applied the skill's main
(first) technique to a kernel family the skill is written for, in a language it
covers; the steps that changed the least besides the skill's techniques first,
then the larger gains; at most ``EVIDENCE_PER_SKILL``. Steps that made a kernel
slower are evidence too: they say where a technique does not pay. A skill whose
main technique no seeded step used stays without evidence.

    python benchmarks/seed_experiences.py benchmarks/data/h100-2026-11-23/bench_part*.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]

from skillbase.memory.store import Store  # noqa: E402
from skillbase.seeds import EXPERIENCES_FILE, SKILLS_DIR, TASKS_DIR  # noqa: E402
from skillbase.config import Settings  # noqa: E402
from skillbase.models import BenchReport, Evidence, Experience, content_hash  # noqa: E402

SESSION = "seed-measurements"
AGENT = "skillbase-seeds"
KEEP = ("task", "attempt", "experience")
EVIDENCE_PER_SKILL = 4


def load_reports(paths: list[Path]) -> dict[tuple[str, str], BenchReport]:
    """(task, solution) -> the warm report measured for it."""
    reports = {}
    for p in paths:
        for row in json.loads(p.read_text())["rows"]:
            if row.get("report"):
                reports[(row["task"], row["solution"])] = BenchReport(**row["report"])
    return reports


def measured_at(paths: list[Path]) -> datetime | None:
    """When the measurement ran, from the env.txt the GPU suite writes beside the results."""
    env = paths[0].parent / "env.txt"
    if env.is_file():
        return datetime.fromisoformat(env.read_text().splitlines()[0].replace("Z", "+00:00"))
    return None


def lesson_text(step: dict, parent: BenchReport, child: BenchReport, gain: float) -> str:
    roof = child.roofline
    where = f" ({roof.pct_sol:.0f}% of speed of light, {roof.bound}-bound)" if roof and roof.pct_sol else ""
    return (f"{step['lesson'].strip()} Predicted: {step['hypothesis'].strip()} "
            f"Measured with skillbase bench on {child.hardware.name}: {step['parent']} "
            f"{parent.timing.median_ms * 1e3:.1f} µs -> {step['child']} {child.timing.median_ms * 1e3:.1f} µs, "
            f"{gain:.2f}x{where}.")


def seed_id(prefix: str, *parts: str) -> str:
    """An id fixed by what a seed record is: rebuilding the file keeps the ids of unchanged
    solutions and steps, so `skillbase init` on a store seeded from an older file adds only
    what changed instead of a second copy of everything."""
    h = content_hash(*parts)
    return f"{prefix}_{h[:12]}_{h[12:16]}0000"


def build(store: Store, reports: dict, when: datetime | None) -> tuple[int, int]:
    """Record every measured solution of every lineage, then one experience per step."""
    n_att = n_exp = 0
    for lineage_file in sorted(TASKS_DIR.glob("*/lineage.yaml")):
        task = lineage_file.parent.name
        steps = yaml.safe_load(lineage_file.read_text())
        ids: dict[str, str] = {}
        # Parents before children: a step's parent is recorded when first seen.
        for step in steps:
            for role in ("parent", "child"):
                sol = step[role]
                if sol in ids or (task, sol) not in reports:
                    continue
                report = reports[(task, sol)]
                source = (lineage_file.parent / f"{sol}.py").read_text()
                if content_hash(source) != report.solution_hash:
                    raise SystemExit(f"{task}/{sol}.py changed since it was measured: re-run the GPU suite")
                parent_id = ids.get(step["parent"]) if role == "child" else None
                techniques = step["techniques"] if role == "child" else []
                attempt = store.attempt_from_report(report, source=source, parent_id=parent_id, techniques=techniques,
                                                    session=SESSION, agent=AGENT, notes=f"built-in solution {task}/{sol}")
                attempt = attempt.model_copy(update={
                    "id": seed_id("att", task, sol, report.solution_hash, parent_id or ""),
                    **({"created_at": when} if when else {})})
                ids[sol] = store.record_attempt(attempt).id
                n_att += 1
        for step in steps:
            parent, child = reports.get((task, step["parent"])), reports.get((task, step["child"]))
            if not (parent and child and parent.timing and child.timing):
                continue
            gain = parent.timing.median_ms / child.timing.median_ms
            lesson = lesson_text(step, parent, child, gain)
            exp = Experience(
                id=seed_id("exp", ids[step["parent"]], ids[step["child"]], lesson),
                title=f"{task}: {step['parent']} -> {step['child']} ({', '.join(step['techniques'])})",
                lesson=lesson, task=task, task_signature=child.task_signature,
                family=child.task_signature.split(":")[0], dtype=child.task_signature.split(":")[1],
                before_attempt=ids[step["parent"]], after_attempt=ids[step["child"]],
                techniques=step["techniques"], gain=gain, bottleneck=parent.bottleneck, arch=child.hardware.arch,
                hardware=child.hardware.key, conditions=f"built-in task {task} at its default shape",
                source="measured", session=SESSION, agent=AGENT, **({"created_at": when} if when else {}))
            store.record_experience(exp)
            n_exp += 1
    return n_att, n_exp


def evidence_for(skill, experiences: list[dict], languages: dict[str, str]) -> list[Evidence]:
    """The seeded steps backing ``skill`` (see the module docstring), as evidence entries."""
    fams = set(skill.applies_when.families)
    main = skill.techniques[0] if skill.techniques else None
    ranked = []
    for e in experiences:
        if main not in e["techniques"] or (fams and e["family"] not in fams):
            continue
        if languages[e["after_attempt"]] not in skill.languages:
            continue
        # Purity: the share of the step's techniques that are the skill's (a step that changed
        # five things at once says less about any one of them), then the gain.
        purity = len(set(e["techniques"]) & set(skill.techniques)) / len(e["techniques"])
        ranked.append(((purity, e["gain"]), e))
    ranked.sort(key=lambda r: r[0], reverse=True)
    return [Evidence(experience_id=e["id"], attempt_id=e["after_attempt"], task=e["task"], gain=round(e["gain"], 3),
                     hardware=e["hardware"], note=e["title"]) for _, e in ranked[:EVIDENCE_PER_SKILL]]


def write_skill_evidence(experiences_file: Path, skills_dir: Path) -> dict[str, int]:
    """Rewrite the ``evidence`` entry of every SKILL.md under ``skills_dir``; returns skill -> entries."""
    from skillbase.skills.markdown import FRONTMATTER_KEYS, emit_key, read_skill_dir

    records = [json.loads(line) for line in experiences_file.read_text().splitlines() if line.strip()]
    experiences = [r["record"] for r in records if r.get("kind") == "experience"]
    languages = {r["record"]["id"]: r["record"]["language"] for r in records if r.get("kind") == "attempt"}
    after = FRONTMATTER_KEYS[FRONTMATTER_KEYS.index("evidence") + 1]
    from skillbase.seeds import CAMPAIGN_FILE

    campaign = {json.loads(line)["record"]["id"] for line in CAMPAIGN_FILE.read_text().splitlines()[1:]
                if line.strip()} if CAMPAIGN_FILE.is_file() else set()
    counts = {}
    for folder in sorted(p.parent for p in skills_dir.glob("*/SKILL.md")):
        skill = read_skill_dir(folder, max_bytes=1 << 20)
        if skill.evidence and all(e.experience_id in campaign for e in skill.evidence):
            continue  # the KernelBench campaign's skills: benchmarks/campaign/seed_campaign.py writes their evidence
        evidence = [e.model_dump(mode="json", exclude_none=True) for e in evidence_for(skill, experiences, languages)]
        path = folder / "SKILL.md"
        text = path.read_text()
        start, end = text.index("\nevidence:") + 1, text.index(f"\n{after}:") + 1
        path.write_text(text[:start] + emit_key("evidence", evidence) + text[end:])
        if read_skill_dir(folder, max_bytes=1 << 20).evidence != [Evidence(**e) for e in evidence]:
            raise SystemExit(f"{path}: the evidence written does not read back")
        counts[skill.name] = len(evidence)
    return counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", type=Path, help="toolchain_bench.json files of one GPU")
    ap.add_argument("--out", type=Path, default=EXPERIENCES_FILE)
    ap.add_argument("--skills", type=Path, default=SKILLS_DIR, help="seed skills whose evidence to rewrite")
    ap.add_argument("--no-skills", action="store_true", help="write the experiences only")
    args = ap.parse_args(argv)
    reports = load_reports(args.results)
    with tempfile.TemporaryDirectory() as home:
        store = Store.open(Settings.from_env(env={}, home=Path(home)))
        try:
            n_att, n_exp = build(store, reports, measured_at(args.results))
            export = Path(home) / "export.jsonl"
            store.export_jsonl(export)
        finally:
            store.close()
        lines = export.read_text().splitlines()
    kept = [lines[0]] + [line for line in lines[1:] if json.loads(line)["kind"] in KEEP]
    args.out.write_text("\n".join(kept) + "\n")
    print(f"{n_att} attempts and {n_exp} experiences over {len({k[0] for k in reports})} tasks -> {args.out}")
    if not args.no_skills:
        counts = write_skill_evidence(args.out, args.skills)
        print(f"evidence on {sum(1 for n in counts.values() if n)}/{len(counts)} skills "
              f"({sum(counts.values())} entries) -> {args.skills}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
