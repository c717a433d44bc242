"""What each page shows, as plain data: one function per page, from the SkillBase and the
request's parameters to a JSON-ready dict. The app renders that dict with a template, or
returns it as JSON (``?format=json``): one code path for the page and its API.

Figures are not part of the data: ``figures`` builds them from it for the HTML page only.
"""

from __future__ import annotations

import difflib
import math
from typing import Any

from skillbase.api import SkillBase
from skillbase.errors import InvalidInput, NotFound
from skillbase.ui import plots

TASKS_PER_PAGE = 50
ATTEMPTS_PER_PAGE = 50
LESSONS_PER_PAGE = 20
LINEAGE_MAX = 300  # newest attempts drawn in a task's lineage and plots; the table pages through all


def paginate(fetch, number: Any, size: int) -> tuple[list, dict[str, int]]:
    """Page ``number`` (1-based) of ``fetch(offset, limit) -> (rows, total)``, and the
    pagination facts; a page past the end shows the last one."""
    try:
        n = max(1, int(number or 1))
    except (TypeError, ValueError):
        raise InvalidInput(f"page must be a whole number, got {number!r}") from None
    rows, total = fetch((n - 1) * size, size)
    pages = max(1, math.ceil(total / size))
    if n > pages:
        n = pages
        rows, total = fetch((n - 1) * size, size)
    return rows, {"number": n, "size": size, "total": total, "pages": pages}


def _dump(model) -> dict[str, Any]:
    return model.model_dump(mode="json")


# -- tasks ----------------------------------------------------------------------


def tasks(sb: SkillBase, params: dict[str, str]) -> dict[str, Any]:
    """Every task with family, best speedups, % of speed of light, attempts and last
    activity; filtered by family, GPU (hardware key), suite run and name, paginated."""
    filters = {k: params.get(k) or None for k in ("family", "gpu", "run", "q")}
    sort = params.get("sort") or "last"
    order = params.get("order") if params.get("order") in ("asc", "desc") else None
    view = sb.views
    rows, page = paginate(
        lambda offset, limit: view.task_rows(
            family=filters["family"],
            hardware=filters["gpu"],
            run=filters["run"],
            name=filters["q"],
            sort=sort,
            order=order,
            offset=offset,
            limit=limit,
        ),
        params.get("page"),
        TASKS_PER_PAGE,
    )
    return {
        "tasks": rows,
        "page": page,
        "filters": filters,
        "sort": sort,
        "order": order,
        "facets": view.facets(),
        "summary": summary(sb),
    }


def summary(sb: SkillBase) -> dict[str, Any]:
    """What the store holds at a glance: counts, the best speedups, the newest attempts, and the
    drafts waiting for a curator."""
    view = sb.views
    figures = view.summary(recent=5)
    best, _ = view.task_rows(sort="eager", limit=3)
    skills = sb.list_skills()
    return {
        **figures,
        "best": [r for r in best if r["best_vs_eager"] is not None],
        "approved": sum(1 for s in skills if s.status == "approved"),
        "drafts": sum(1 for s in skills if s.status == "draft"),
    }


def task(sb: SkillBase, name: str, params: dict[str, str]) -> dict[str, Any]:
    """One task: what it is, its attempts (paginated, newest first), the newest attempts
    for the lineage and the plots, and the lessons recorded on it."""
    view = sb.views
    record = view.task_row(name)
    attempts, page = paginate(
        lambda offset, limit: view.attempt_rows(task=name, offset=offset, limit=limit),
        params.get("page"),
        ATTEMPTS_PER_PAGE,
    )
    total = page["total"]
    drawn = view.newest_attempt_rows(task=name, limit=LINEAGE_MAX)
    lessons, lpage = paginate(
        lambda offset, limit: view.experience_rows(task=name, offset=offset, limit=limit),
        params.get("lessons_page"),
        LESSONS_PER_PAGE,
    )
    best = view.best_attempt_row(task=name)
    return {
        "task": record,
        "attempts": attempts,
        "page": page,
        "lineage": drawn,
        "lineage_note": (
            f"the newest {len(drawn)} of {total} attempts" if total > len(drawn) else f"all {total} attempts"
        ),
        "best": best,
        "lessons": lessons,
        "lessons_page": lpage,
    }


def task_figures(data: dict[str, Any], attempt_url: str) -> dict[str, Any]:
    """The task page's three figures, from its data."""
    rows = data["lineage"]
    return {
        "lineage": plots.lineage(rows, attempt_url),
        "speedup": plots.speedup_over_attempts(rows, attempt_url),
        "roofline": plots.roofline(rows, attempt_url),
    }


# -- attempts -------------------------------------------------------------------


def diff_lines(old: str, new: str, old_name: str, new_name: str) -> list[dict[str, str]]:
    """A unified diff as lines tagged add / del / hunk / ctx, for display."""
    out = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm="", n=3):
        kind = (
            "hunk"
            if line.startswith("@@")
            else "meta"
            if line.startswith(("---", "+++"))
            else "add"
            if line.startswith("+")
            else "del"
            if line.startswith("-")
            else "ctx"
        )
        out.append({"kind": kind, "text": line})
    return out


def attempt(sb: SkillBase, attempt_id: str) -> dict[str, Any]:
    """One attempt in full: its report (checks, timing with spread, baselines, roofline,
    profile notes), its source and the diff of its source against its parent's."""
    a = sb.get_attempt(attempt_id)
    parent = None
    if a.parent_id:
        try:
            parent = sb.get_attempt(a.parent_id)
        except NotFound:
            parent = None
    data = {"attempt": _dump(a), "parent": None, "diff": [], "lessons": []}
    if parent is not None:
        data["parent"] = {
            "id": parent.id,
            "verdict": parent.verdict,
            "median_ms": parent.median_ms,
            "techniques": parent.techniques,
        }
        data["diff"] = diff_lines(parent.source, a.source, parent.id, a.id)
        if (
            a.median_ms
            and parent.median_ms
            and a.verdict == parent.verdict == "correct"
            and a.hardware == parent.hardware
        ):
            data["gain_vs_parent"] = parent.median_ms / a.median_ms
    data["step_techniques"] = plots.step_techniques(
        {"techniques": a.techniques}, {"techniques": parent.techniques} if parent else None
    )
    return data


# -- skills ---------------------------------------------------------------------


def _gains(skill) -> dict[str, Any]:
    gains = [e.gain for e in skill.evidence if e.gain]
    return {
        "evidence": len(skill.evidence),
        "measured": len(gains),
        "geomean_gain": plots.geomean(gains),
        "best_gain": max(gains, default=None),
    }


def skills(sb: SkillBase, params: dict[str, str]) -> dict[str, Any]:
    """Every skill (or those of one status) with its evidence count and measured gains."""
    status = params.get("status") or None
    if status not in (None, "draft", "approved", "deprecated"):
        raise InvalidInput(f"unknown status {status!r}", hint="draft, approved or deprecated")
    rows = []
    for s in sorted(sb.list_skills(status), key=lambda s: s.name):
        gains = _gains(s)
        rows.append(
            {
                "name": s.name,
                "description": s.description,
                "status": s.status,
                "version": s.version,
                "techniques": s.techniques,
                "source": s.provenance.source,
                **gains,
                # approved on evidence that measured a slowdown: a curator should look again
                "below_1x": s.status == "approved"
                and gains["geomean_gain"] is not None
                and gains["geomean_gain"] < 1.0,
            }
        )
    return {"skills": rows, "status": status}


def skill(sb: SkillBase, name: str) -> dict[str, Any]:
    """One skill: its SKILL.md, evidence (linked to the attempts that exist here), and its
    version history with the diff each version made."""
    s = sb.get_skill(name)
    history = sb.skill_history(name)
    texts = {v.version: sb.skill_markdown(name, v.version) for v in history}
    versions = []
    for i, v in enumerate(history):
        prev = history[i - 1].version if i else None
        versions.append(
            {
                "version": v.version,
                "status": v.status,
                "author": v.author,
                "reason": v.reason,
                "created_at": v.created_at.isoformat(),
                "diff": diff_lines(texts[prev], texts[v.version], f"v{prev}", f"v{v.version}")
                if prev is not None
                else [],
            }
        )
    linked = sb.views.known_attempts([e.attempt_id for e in s.evidence if e.attempt_id])
    others = [o.name for o in sb.list_skills() if o.name != name]
    return {
        "skill": _dump(s),
        "markdown": texts[s.version],
        "gains": _gains(s),
        "versions": versions[::-1],
        "linked_attempts": sorted(linked),
        "other_skills": others,
    }


def review(sb: SkillBase) -> dict[str, Any]:
    """Drafts waiting for a curator (proposed by agents, distilled, or added), each with its
    lint findings (fast checks; approving also verifies the examples)."""
    drafts = sorted(sb.list_skills("draft"), key=lambda s: s.name)
    results = {r.skill: r for r in sb.lint_skills(drafts, verify_examples=False)} if drafts else {}
    similar = sb.similar_skills(drafts, limit=3) if drafts else {}
    rows = []
    for s in drafts:
        lint = results.get(s.name)
        near = [
            {"name": p.b if p.a == s.name else p.a, "score": p.score, "reasons": p.reasons}
            for p in similar.get(s.name, [])
        ]
        rows.append(
            {
                "name": s.name,
                "description": s.description,
                "version": s.version,
                "body": s.body,
                "source": s.provenance.source,
                "author": s.provenance.author,
                "from_experiences": s.provenance.from_experiences,
                "techniques": s.techniques,
                **_gains(s),
                "lint_passed": bool(lint and lint.passed),
                "lint": [_dump(i) for i in lint.issues] if lint else [],
                "near_duplicates": near,
            }
        )
    return {"drafts": rows}


# -- search ---------------------------------------------------------------------


def search(sb: SkillBase, params: dict[str, str]) -> dict[str, Any]:
    """Recall from a text, a task, or both: each item with its score, why it was chosen and
    its evidence; with a task, the techniques to try next."""
    q = (params.get("q") or "").strip()
    task_name = (params.get("task") or "").strip()
    data: dict[str, Any] = {"q": q, "task": task_name, "result": None}
    if q or task_name:
        try:
            k = int(params.get("k") or 10)
        except ValueError:
            raise InvalidInput(f"k must be a whole number, got {params.get('k')!r}") from None
        result = sb.recall(q or None, task=task_name or None, k=max(1, min(k, 50)))
        data["result"] = _dump(result)
        data["linked_attempts"] = sorted(
            sb.views.known_attempts([e.attempt_id for i in result.items for e in i.evidence if e.attempt_id])
        )
    return data
