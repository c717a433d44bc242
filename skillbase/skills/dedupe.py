"""Near-duplicate skills: find them, explain why, and let a person decide.

Two skills are proposed for merging when their descriptions and bodies embed
close together (the mean of the two cosine similarities) and they share a
technique, or when the text alone is nearly the same. ``find_duplicates``
only proposes; ``curation.merge_skills`` merges when a curator confirms.

    for p in find_duplicates(store):
        print(p.a, p.b, f"{p.score:.2f}", p.reasons)
    merge_skills(store, p.a, p.b, into=p.suggested_into, author="ana", reason="duplicates")
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np

from skillbase.models import Record, Skill

if TYPE_CHECKING:
    from skillbase.memory.store import Store

# Mean of description and body cosine similarity (all-MiniLM-L6-v2). Measured on the 40 distinct seed
# skills: at most 0.75 for any pair; a reworded copy of a seed with the same body: 0.87-0.88.
MIN_SIMILARITY = 0.82
STRONG_SIMILARITY = 0.92  # this close, shared techniques are not needed
SIMILARITY_WEIGHT = 0.75


class DuplicateProposal(Record):
    """Two skills that look like one, with the evidence for it. Nothing is merged until a curator does."""

    a: str
    b: str
    score: float
    similarity: float
    technique_overlap: float
    shared_techniques: list[str]
    suggested_into: str
    reasons: list[str]


def _vectors(store: "Store", skills: list[Skill]) -> tuple[np.ndarray, np.ndarray]:
    """Unit embeddings of the descriptions and of the bodies (the store's embedding cache keeps them)."""
    from skillbase.memory.documents import TEXT_MAX_TOKENS

    d = store.embedder.embed([s.description for s in skills], max_tokens=TEXT_MAX_TOKENS)
    b = store.embedder.embed([s.body or s.description for s in skills], max_tokens=TEXT_MAX_TOKENS)
    return d, b


def _keeper(x: Skill, y: Skill) -> str:
    rank = {"approved": 0, "draft": 1, "deprecated": 2}
    return min((x, y), key=lambda s: (rank[s.status], -len(s.evidence), s.name)).name


def _proposal(x: Skill, y: Skill, sim: float, model: str) -> DuplicateProposal | None:
    tx, ty = set(x.techniques), set(y.techniques)
    shared = sorted(tx & ty)
    overlap = len(shared) / len(tx | ty) if tx | ty else 0.0
    if not ((sim >= MIN_SIMILARITY and shared) or sim >= STRONG_SIMILARITY):
        return None
    reasons = [f"descriptions and bodies have mean cosine similarity {sim:.2f} ({model} embeddings)"]
    if shared:
        reasons.append(f"they share techniques {', '.join(shared)} (Jaccard {overlap:.2f})")
    fams = sorted(set(x.applies_when.families) & set(y.applies_when.families))
    if fams:
        reasons.append(f"both apply to {', '.join(fams)}")
    for s in (x, y):
        if s.status == "draft":
            reasons.append(f"{s.name} is a draft proposed by {s.provenance.author}")
    score = SIMILARITY_WEIGHT * sim + (1 - SIMILARITY_WEIGHT) * overlap
    return DuplicateProposal(
        a=x.name,
        b=y.name,
        score=round(score, 4),
        similarity=round(sim, 4),
        technique_overlap=round(overlap, 4),
        shared_techniques=shared,
        suggested_into=_keeper(x, y),
        reasons=reasons,
    )


def find_duplicates(store: "Store", *, include_deprecated: bool = False, limit: int = 50) -> list[DuplicateProposal]:
    """Pairs of near-duplicate skills in the store, best first (at most ``limit``).

    A pair qualifies when the mean cosine similarity of their descriptions and
    bodies is at least MIN_SIMILARITY and they share a technique, or at least
    STRONG_SIMILARITY regardless. ``score`` = 0.75 x similarity + 0.25 x
    technique Jaccard. Deprecated skills are left out unless asked for.
    """
    skills = [s for s in store.list_skills() if include_deprecated or s.status != "deprecated"]
    if len(skills) < 2:
        return []
    d, b = _vectors(store, skills)
    sims = (d @ d.T + b @ b.T) / 2
    found = [
        p
        for i, j in combinations(range(len(skills)), 2)
        if (p := _proposal(skills[i], skills[j], float(sims[i, j]), store.embedder.name))
    ]
    return sorted(found, key=lambda p: -p.score)[:limit]


def find_similar(store: "Store", skill: Skill, *, limit: int = 5) -> list[DuplicateProposal]:
    """Stored skills that ``skill`` (for example an agent's proposal, stored or not) would duplicate."""
    others = [s for s in store.list_skills() if s.name != skill.name and s.status != "deprecated"]
    if not others:
        return []
    d, b = _vectors(store, [skill, *others])
    sims = (d[1:] @ d[0] + b[1:] @ b[0]) / 2
    found = [p for s, sim in zip(others, sims) if (p := _proposal(skill, s, float(sim), store.embedder.name))]
    return sorted(found, key=lambda p: -p.score)[:limit]


def find_similar_many(store: "Store", skills: list[Skill], *, limit: int = 5) -> dict[str, list[DuplicateProposal]]:
    """``find_similar`` for several skills at once (a review queue): every text is embedded once."""
    stored = [s for s in store.list_skills() if s.status != "deprecated"]
    given = {s.name for s in skills}
    pool = skills + [s for s in stored if s.name not in given]
    if len(pool) < 2:
        return {s.name: [] for s in skills}
    d, b = _vectors(store, pool)
    sims = (d @ d.T + b @ b.T) / 2
    out = {}
    for i, skill in enumerate(skills):
        found = [
            p
            for j, other in enumerate(pool)
            if j != i
            if (p := _proposal(skill, other, float(sims[i, j]), store.embedder.name))
        ]
        out[skill.name] = sorted(found, key=lambda p: -p.score)[:limit]
    return out
