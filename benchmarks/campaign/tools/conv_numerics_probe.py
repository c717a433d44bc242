"""Which arithmetic does the reference convolution use on this GPU: fp32, TF32 rounded to nearest, or TF32 truncated?

An exact fp32 convolution and a TF32 one differ by more than KernelBench's
1e-4 tolerance, so a candidate can only match the reference if it rounds the
way the reference does. This probe runs each problem's reference module on
the GPU at a small batch and compares its output with three float64
simulations of the same convolution: exact operands, operands rounded to
TF32 (nearest, ties to even) and operands truncated to TF32. It prints, per
hypothesis, the share of outputs beyond atol = rtol = 1e-4 and the largest
absolute difference; the hypothesis with 0% is the reference's arithmetic.

    python benchmarks/campaign/tools/conv_numerics_probe.py --kernelbench KB_DIR 50 54 55
"""

import argparse
import importlib.util
from pathlib import Path

import torch
import torch.nn.functional as F


def _tf32(t: torch.Tensor, nearest: bool) -> torch.Tensor:
    bits = t.float().contiguous().view(torch.int32)
    if nearest:
        bits = bits + 0xFFF + ((bits >> 13) & 1)
    return (bits & -8192).view(torch.float32)


def _load(path: Path, batch: int):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.batch_size = batch
    return mod


def probe(path: Path, batch: int = 2, device: str = "cuda") -> list[tuple[str, float, float]]:
    """(hypothesis, % of outputs beyond tolerance, max |difference|) for one problem file."""
    mod = _load(path, batch)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).to(device)
    conv = next(m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d)))
    x = mod.get_inputs()[0].to(device)
    with torch.no_grad():
        ref = model(x).double()
    fn = F.conv2d if isinstance(conv, torch.nn.Conv2d) else F.conv3d
    kw = dict(stride=conv.stride, padding=conv.padding, dilation=conv.dilation, groups=conv.groups)
    bias = None if conv.bias is None else conv.bias.double()
    rows = []
    for name, cast in [("fp32 (exact)", lambda t: t.float()), ("TF32 nearest-even", lambda t: _tf32(t, True)),
                       ("TF32 truncated", lambda t: _tf32(t, False))]:
        with torch.no_grad():
            sim = fn(cast(x).double(), cast(conv.weight).double(), bias, **kw)
        diff = (ref - sim).abs()
        bad = (diff > 1e-4 + 1e-4 * sim.abs()).double().mean().item() * 100
        rows.append((name, bad, diff.max().item()))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernelbench", required=True, type=Path, help="KernelBench checkout (holds KernelBench/level1)")
    ap.add_argument("--batch", type=int, default=2, help="batch size to run the reference at")
    ap.add_argument("--device", default="cuda", help="where the reference runs (cpu shows plain fp32)")
    ap.add_argument("problems", nargs="+", type=int, help="level-1 problem numbers")
    args = ap.parse_args()
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else args.device
    print(f"torch {torch.__version__}, cudnn {torch.backends.cudnn.version()}, "
          f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, {where}")
    for number in args.problems:
        path = next((args.kernelbench / "KernelBench" / "level1").glob(f"{number}_*.py"))
        for name, bad, worst in probe(path, args.batch, args.device):
            print(f"kb:1/{number:<4d} {name:18s} beyond tolerance: {bad:6.2f}% of outputs   max |diff| {worst:.2e}")


if __name__ == "__main__":
    main()
