"""Seed data shipped with skillbase: built-in tasks, skills, measured experiences
and the technique vocabulary."""

from pathlib import Path

SEEDS_DIR = Path(__file__).resolve().parent
TASKS_DIR = SEEDS_DIR / "tasks"
SKILLS_DIR = SEEDS_DIR / "skills"
TECHNIQUES_FILE = SEEDS_DIR / "techniques.yaml"
EXPERIENCES_FILE = SEEDS_DIR / "experiences.jsonl"
# The KernelBench campaign: its attempts, lessons and task descriptions, measured on an H100.
CAMPAIGN_FILE = SEEDS_DIR / "campaign.jsonl"
MEMORY_FILES = (EXPERIENCES_FILE, CAMPAIGN_FILE)
# Embeddings of the seed records and skills, computed once (benchmarks/seed_embeddings.py): init reads
# them instead of running the model; an entry whose text changed is simply recomputed.
EMBEDDINGS_FILE = SEEDS_DIR / "embeddings.npz"
