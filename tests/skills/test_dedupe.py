"""Dedupe: a planted near-duplicate is proposed (never merged by itself); distinct skills are not."""

from skillbase.skills.curation import add_skill, merge_skills, propose_skill, show_skill
from skillbase.skills.dedupe import MIN_SIMILARITY, find_duplicates, find_similar, find_similar_many

from .factories import make_skill

CLOSE_SEEDS = ("online-softmax-one-pass", "looped-softmax-for-wide-rows", "cross-entropy-fused-logsumexp",
               "row-per-program-reductions", "hopper-tma-bulk-copies", "shared-memory-tiling")


def _reworded(skill):
    # What an agent re-proposing a known technique writes: new name and description, much the same body.
    description = ("Single-pass logsumexp: track a running maximum and rescale the running sum of exponentials "
                   "whenever the maximum increases, so the softmax normalizer needs only one read of each row. Use "
                   "it when a kernel makes two or three passes over long rows just to find the max and then the "
                   "sum, as in cross-entropy, attention or chunked softmax.")
    body = skill.body.replace("Keep a running max", "Maintain a running maximum").replace(
        "## Limits", "## Limits\nThe looped softmax skill uses the same statistic.\n\n## Notes")
    return skill.model_copy(update={"name": "single-pass-logsumexp", "description": description, "body": body})


def test_the_seed_library_has_no_near_duplicates(seeded_store):
    assert find_duplicates(seeded_store) == []


def test_a_planted_near_duplicate_is_proposed_and_merged_only_on_confirmation(open_store, seed_skills_list):
    store = open_store()
    seeds = {s.name: s for s in seed_skills_list}
    for name in CLOSE_SEEDS:  # evidence left out: this store holds no seeded experiences to check it against
        add_skill(store, seeds[name].model_copy(update={"evidence": []}), author="curator", approve=True)
    planted = propose_skill(store, _reworded(seeds["online-softmax-one-pass"]), agent="agent-3").skill
    propose_skill(store, make_skill(), agent="agent-4")  # unrelated draft
    [p] = find_duplicates(store)
    assert {p.a, p.b} == {"online-softmax-one-pass", "single-pass-logsumexp"}
    assert p.similarity >= MIN_SIMILARITY and p.shared_techniques == ["online-softmax"]
    assert p.suggested_into == "online-softmax-one-pass" and p.score > 0.8
    assert any("draft proposed by agent-3" in r for r in p.reasons)
    assert show_skill(store, planted.name).status == "draft"  # proposing merges nothing
    similar = find_similar(store, planted)
    assert [s.b for s in similar] == ["online-softmax-one-pass"]
    # the review queue's form: several drafts, one embedding pass, the same answers
    many = find_similar_many(store, [planted, make_skill()])
    assert many[planted.name] == similar and many[make_skill().name] == []
    merged = merge_skills(store, p.suggested_into, planted.name, into=p.suggested_into, author="curator",
                          reason="dedupe proposal confirmed")
    assert merged.merged.provenance.merged_from == ["single-pass-logsumexp"]
    assert find_duplicates(store) == [] and len(find_duplicates(store, include_deprecated=True)) == 1
