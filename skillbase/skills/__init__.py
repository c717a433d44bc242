"""The skill library: SKILL.md I/O, lint, curation with versioned history, dedupe, and Agent Skills export/import.

A skill is a ``skillbase.models.Skill``: frontmatter fields, a markdown body
and its example files. The Store's ledger holds every version; these modules
read, check and change skills through it. The API layer (``skillbase.api``)
wires them to the CLI and the MCP server.

Markdown (``skillbase.skills.markdown``)
    parse_skill_md(text, *, source, max_bytes=None) -> Skill
    render_skill_md(skill) -> str
    read_skill_file(path, *, max_bytes) -> Skill
    read_skill_dir(folder, *, max_bytes, missing_ok=False) -> Skill   # SKILL.md + example files
    write_skill_dir(skill, folder, *, overwrite=False) -> Path

Lint (``skillbase.skills.lint``)
    lint(target, *, settings=None, store=None, toolchain=None, verify_examples=True) -> list[LintIssue]
    lint_many(targets, **same) -> list[LintResult];  lint_dir(root, **same) -> list[LintResult]
    errors(issues) -> list[LintIssue]

Curation (``skillbase.skills.curation``; every change is a ledger version with author and reason)
    list_skills(store, status=None) / show_skill(store, name, version=None) / skill_history(store, name)
    add_skill(store, source, *, author, reason="added", approve=False, check=True) -> Skill
    edit_skill(store, name, changes, *, author, reason) -> Skill
    approve_skill(store, name, *, curator, reason, check=True, toolchain=None) -> Skill
    deprecate_skill(store, name, *, author, reason, superseded_by=None) -> Skill
    rollback_skill(store, name, version, *, author, reason=None) -> Skill
    merge_skills(store, a, b, *, into, author, reason, description=None, body=None) -> MergeResult
    propose_skill(store, skill, *, agent, from_experiences=(), reason=..., policy=None) -> Proposal
    import_skills(store, path, *, author, reason="imported", approve=False, replace=False, check=True) -> list[Skill]
    evaluate_policy(store, skill, policy) -> PolicyDecision

Dedupe (``skillbase.skills.dedupe``)
    find_duplicates(store, *, include_deprecated=False, limit=50) -> list[DuplicateProposal]
    find_similar(store, skill, *, limit=5) -> list[DuplicateProposal]
    find_similar_many(store, skills, *, limit=5) -> {name: [DuplicateProposal]}  (one embedding pass)

Agent Skills (``skillbase.skills.agent_skills``)
    export_agent_skills(skills, out_dir, *, overwrite=False, max_bytes=256_000) -> ExportResult
    validate_agent_skill_dir(path, *, max_bytes=256_000) -> list[str]
    read_agent_skills(path, *, max_bytes) -> list[Skill]

Seeding (``skillbase.skills.seeding``)
    seed_skills(store, seeds_dir=None, *, author="skillbase-seeds") -> SeedReport

Everything is importable from this package; submodules load on first use, so
``import skillbase.skills`` costs nothing until a name is touched.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "markdown": (
        "SkillFormatError",
        "parse_skill_md",
        "render_skill_md",
        "read_skill_file",
        "read_skill_dir",
        "write_skill_dir",
    ),
    "lint": ("LintIssue", "LintResult", "errors", "lint", "lint_dir", "lint_many"),
    "curation": (
        "AutoApprovePolicy",
        "MergeResult",
        "PolicyDecision",
        "Proposal",
        "add_skill",
        "approve_skill",
        "deprecate_skill",
        "edit_skill",
        "evaluate_policy",
        "import_skills",
        "list_skills",
        "merge_skills",
        "propose_skill",
        "rollback_skill",
        "show_skill",
        "skill_history",
    ),
    "dedupe": ("DuplicateProposal", "find_duplicates", "find_similar", "find_similar_many"),
    "agent_skills": ("ExportResult", "export_agent_skills", "read_agent_skills", "validate_agent_skill_dir"),
    "seeding": ("SEED_AUTHOR", "SeedReport", "seed_skills"),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'skillbase.skills' has no attribute {name!r}")
    return getattr(import_module(f"skillbase.skills.{module}"), name)
