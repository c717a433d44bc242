"""Build seeds/embeddings.npz: the embeddings of everything `skillbase init` indexes from the seeds.

    python benchmarks/seed_embeddings.py [--out seeds/embeddings.npz]

Runs `init` into a fresh store, then writes that store's embedding cache (keys address the model,
the token limit and the text). `init` loads the file into a new store's cache first, so seeding
indexes without running the model; a seed whose text changed since the file was built misses the
cache and is embedded as before. Run it again after changing seeds/ (last, after
benchmarks/seed_experiences.py and benchmarks/campaign/seed_campaign.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from skillbase import SkillBase, seeds  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=seeds.EMBEDDINGS_FILE)
    args = ap.parse_args(argv)
    saved, seeds.EMBEDDINGS_FILE = seeds.EMBEDDINGS_FILE, Path("/nonexistent")  # compute every vector afresh
    try:
        with tempfile.TemporaryDirectory() as home, SkillBase(home=home) as sb:
            sb.init()
            n = sb.memory.embedder.cache.export_npz(args.out)
    finally:
        seeds.EMBEDDINGS_FILE = saved
    print(f"{n} embeddings -> {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
