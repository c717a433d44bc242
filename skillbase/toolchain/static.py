"""Static (AST) checks of a solution's source, run before any of its code executes.

They catch what a runtime check sees only when the bad path is taken: an
exception handler that quietly computes the answer with PyTorch, and code that
reaches for the reference ``Model``. Each finding names the line it is on.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from skillbase import pyast

# torch calls that allocate, describe or configure but compute nothing.
_NON_COMPUTE = {
    "empty",
    "empty_like",
    "empty_strided",
    "zeros",
    "zeros_like",
    "ones",
    "ones_like",
    "full",
    "full_like",
    "tensor",
    "as_tensor",
    "from_numpy",
    "arange",
    "device",
    "dtype",
    "Size",
    "is_tensor",
    "is_floating_point",
    "get_default_dtype",
    "manual_seed",
    "no_grad",
    "inference_mode",
    "enable_grad",
    "set_grad_enabled",
    "is_available",
    "current_device",
    "current_stream",
    "synchronize",
    "get_device_properties",
    "get_device_name",
    "device_count",
    "finfo",
    "iinfo",
    "numel",
    "Generator",
    "compile",
}

# Tensor methods and functional names that do the arithmetic of a task.
_COMPUTE_METHODS = {
    "matmul",
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "einsum",
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose2d",
    "softmax",
    "log_softmax",
    "relu",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "sum",
    "mean",
    "max",
    "min",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "prod",
    "cumsum",
    "norm",
    "var",
    "std",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
    "cross_entropy",
    "nll_loss",
    "dropout",
    "scaled_dot_product_attention",
    "max_pool2d",
    "avg_pool2d",
    "adaptive_avg_pool2d",
    "leaky_relu",
    "elu",
    "softplus",
    "hardtanh",
    "mish",
    "clamp",
    "pow",
    "sqrt",
    "rsqrt",
    "abs",
    "add",
    "mul",
    "sub",
    "div",
    "transpose",
    "permute",
    "contiguous",
    "forward",
}


@dataclass(frozen=True)
class Finding:
    """One static finding: which check it belongs to, what and where."""

    check: str
    message: str
    line: int


def _torch_aliases(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Names bound to torch modules (torch, F, nn, ...) and names imported from them."""
    modules, functions = {"torch"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "torch" or a.name.startswith("torch."):
                    modules.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "torch":
            for a in node.names:
                name = a.asname or a.name
                # `from torch import nn` binds a module; `from torch.nn.functional import gelu` a function.
                (
                    modules
                    if a.name[:1].islower() and a.name in {"nn", "functional", "cuda", "linalg", "special", "fft"}
                    else functions
                ).add(name)
    return modules, functions


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    if isinstance(node, ast.Call):
        return _root_name(node.func)
    return node.id if isinstance(node, ast.Name) else None


def _is_torch_compute(node: ast.AST, modules: set[str], functions: set[str]) -> bool:
    """True when ``node`` (anywhere inside) calls PyTorch to compute something."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.MatMult):
            return True
        if not isinstance(sub, ast.Call):
            continue
        func = sub.func
        if isinstance(func, ast.Name):
            if func.id in functions and func.id not in _NON_COMPUTE:
                return True
            if func.id in {"Model"}:
                return True
        elif isinstance(func, ast.Attribute):
            root = _root_name(func)
            if root in modules:
                if func.attr not in _NON_COMPUTE:
                    return True
            elif func.attr in _COMPUTE_METHODS:
                return True
    return False


def find_fallbacks(tree: ast.AST) -> list[Finding]:
    """Exception handlers (and ``finally`` blocks) that compute with PyTorch."""
    modules, functions = _torch_aliases(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try) and type(node).__name__ != "TryStar":
            continue
        blocks = [h.body for h in node.handlers] + [node.finalbody]
        for body in blocks:
            for stmt in body:
                if _is_torch_compute(stmt, modules, functions):
                    out.append(
                        Finding(
                            "no_pytorch_fallback",
                            f"line {stmt.lineno}: an exception handler computes with PyTorch; "
                            "a kernel that fails must fail, not fall back",
                            stmt.lineno,
                        )
                    )
                    break
    return out


def find_reference_use(tree: ast.AST) -> list[Finding]:
    """Uses of the reference ``Model`` (name, attribute, base class) or imports of the task module."""
    out = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name) and node.id == "Model":
            out.append(Finding("no_reference_call", f"line {line}: refers to the reference `Model`", line))
        elif isinstance(node, ast.Attribute) and node.attr == "Model":
            out.append(Finding("no_reference_call", f"line {line}: refers to `.Model` (the reference)", line))
        elif isinstance(node, ast.ImportFrom) and any(a.name == "Model" for a in node.names):
            out.append(Finding("no_reference_call", f"line {line}: imports the reference `Model`", line))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith("task.py"):
            out.append(Finding("no_reference_call", f"line {line}: names a task file ({node.value!r})", line))
    return out


def analyze(source: str) -> tuple[list[Finding], str | None]:
    """All static findings of a solution, and the syntax error if it does not parse."""
    try:
        tree = pyast.parse(source)
    except SyntaxError as e:
        return [], f"line {e.lineno}: {e.msg}"
    return find_fallbacks(tree) + find_reference_use(tree), None


def precheck(source: str) -> str | None:
    """Why a solution cannot run at all, found without running it: it does not parse, or it plainly defines
    no ``ModelNew`` (no class, assignment or import of that name, and no ``import *``). None otherwise."""
    try:
        tree = pyast.parse(source)
    except SyntaxError as e:
        return f"solution does not parse: line {e.lineno}: {e.msg}"
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return None
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in targets):
                return None
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            a.name == "*" or (a.asname or a.name.split(".")[-1]) == "ModelNew" for a in node.names
        ):
            return None
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("globals", "setattr", "exec"):
            return None  # defined some other way: the worker decides
    return "solution defines no `ModelNew` class"


def kernel_names(source: str) -> set[str]:
    """Names of the kernels a solution defines: @triton.jit functions and CUDA ``__global__`` functions."""
    import re

    bounds = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    names = set(re.findall(rf"__global__\s+{bounds}void\s+{bounds}(\w+)", source))
    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                text = ast.unparse(dec)
                if "jit" in text or "autotune" in text or "heuristics" in text:
                    names.add(node.name)
    return names
