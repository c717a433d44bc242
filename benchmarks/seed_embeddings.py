"""Build seeds/embeddings.npz: the embeddings of everything `skillbase init` indexes from the seeds.

    python benchmarks/seed_embeddings.py [--out seeds/embeddings.npz]

Runs `init` into a fresh store once per embedding precision (int8, the default, and fp32), then
writes both stores' embedding caches into one file (keys address the model's vectors by name,
`all-MiniLM-L6-v2@int8` or `all-MiniLM-L6-v2`, the token limit and the text). `init` loads the
file into a new store's cache first, so seeding indexes without running the model; a seed whose
text changed since the file was built misses the cache and is embedded as before. Run it again after changing seeds/ (last, after
benchmarks/seed_experiences.py and benchmarks/campaign/seed_campaign.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from skillbase import SkillBase, seeds  # noqa: E402
from skillbase.config import Settings  # noqa: E402
from skillbase.memory.embeddings import EmbeddingCache  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=seeds.EMBEDDINGS_FILE)
    args = ap.parse_args(argv)
    saved, seeds.EMBEDDINGS_FILE = seeds.EMBEDDINGS_FILE, Path("/nonexistent")  # compute every vector afresh
    try:
        with tempfile.TemporaryDirectory() as tmp:
            both = EmbeddingCache(Path(tmp) / "both.sqlite3")
            for precision in ("int8", "fp32"):
                with SkillBase(Settings.from_env(home=Path(tmp) / precision, embedding_precision=precision)) as sb:
                    sb.init()
                    sb.memory.embedder.cache.export_npz(Path(tmp) / f"{precision}.npz")
                both.import_npz(Path(tmp) / f"{precision}.npz")
            n = both.export_npz(args.out)
            both.close()
    finally:
        seeds.EMBEDDINGS_FILE = saved
    print(f"{n} embeddings -> {args.out} ({args.out.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
