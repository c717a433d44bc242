"""CUDA C++ source surgery for fast register reports without a GPU or torch's headers.

A load_inline CUDA source mixes device code with host code written against
torch (``torch::Tensor``, pybind11). Parsing torch's headers costs nvcc about
40 s; the device code needs none of them. ``blank_host_code`` keeps the device
code, the types, macros and host *templates* that only launch kernels, blanks
everything else with spaces (so line numbers do not move), and instantiates the
kernel templates that the removed host code instantiated. When that view cannot
stand alone (``needs_full``), the caller compiles the full unit instead.
"""

from __future__ import annotations

import re
import shutil
import subprocess

_TORCH_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](torch|ATen|c10|pybind11|THC)/.*$', re.MULTILINE)


def source_start_line(solution: str, snippet: str) -> int | None:
    """Line of the solution file on which ``snippet``'s first line sits (for #line directives)."""
    lines = snippet.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return None
    target = lines[first].strip()
    for n, ln in enumerate(solution.splitlines(), start=1):
        if ln.strip() == target or ln.strip().endswith(target):
            return n - first
    return None


def blank_host_code(src: str) -> str:
    """Device-only view of a CUDA source: torch includes and host-only top-level code blanked out.

    Kept: ``__global__``/``__device__``/``__constant__`` code, types, macros, plain
    declarations, and host *templates* that only launch kernels (no torch in
    them). Kernel templates that host code instantiates (``launch<float4>(...)``,
    ``kernel<float, true><<<...>>>``) are instantiated explicitly at the end by
    taking their address, so ptxas sees them. Newlines are kept so line numbers
    still match the original.
    """
    src = _TORCH_INCLUDE.sub(lambda m: " " * len(m.group(0)), src)
    out = list(src)
    templates, blanked = set(), []
    for start, end, header in _top_level_items(src):
        item = src[start:end]
        if _is_host_item(header, item):
            blanked.append(item)
            for i in range(start, end):
                if out[i] != "\n":
                    out[i] = " "
        else:
            plain = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", _strip_comments(header))
            m = re.match(r"\s*template\s*<.*?>[\w:<>,\s\*&]*?\b(\w+)\s*\(", plain, re.DOTALL)
            if m:
                templates.add(m.group(1))
    return "".join(out) + _instantiations(templates, "\n".join(blanked))


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.DOTALL)


def _instantiations(templates: set[str], host_code: str) -> str:
    """Address-of expressions forcing the template instantiations that (removed) host code makes."""
    seen: dict[str, None] = {}
    for name in sorted(templates):
        for args in re.findall(rf"\b{re.escape(name)}\s*<([^;{{}}()]*?)>\s*(?:\(|<<<)", host_code):
            if not re.search(r"\bscalar_t\b|\bindex_t\b|::|\bauto\b", args):
                seen.setdefault(f"{name}<{' '.join(args.split())}>")
    lines = [f"static const void* skillbase_instantiate_{i} = (const void*)&{e};" for i, e in enumerate(seen)]
    return ("\n" + "\n".join(lines) + "\n") if lines else ""


def _is_host_item(header: str, item: str = "") -> bool:
    h = _strip_comments(header)
    h = " ".join(h.split())
    if any(k in h for k in ("__global__", "__device__", "__constant__", "__shared__")):
        return False
    if re.search(r"\b(torch|at|c10|pybind11|py)::|\bTORCH_|\bAT_|PYBIND11|\busing namespace (torch|at)\b", h):
        return True
    if (
        h.startswith("template")
        and "<<<" in item
        and not re.search(r"\b(torch|at|c10|pybind11)::|\bTORCH_|\bAT_|\bC10_", _strip_comments(item))
    ):
        return False  # a host template that only launches kernels: kept so its kernels can be instantiated
    if re.match(r"^(template\s*<[^>]*>\s*)?(struct|class|union|enum|namespace|typedef|using)\b", h):
        return False
    if h.startswith("#"):
        return False
    # A top-level function definition with a body and no device qualifier runs on the host.
    return "(" in h and h.rstrip().endswith("{")


def _top_level_items(src: str):
    """(start, end, header) of top-level statements and blocks, skipping comments, strings and directives."""
    i, n, depth, start = 0, len(src), 0, 0
    header_end = None
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            i = src.find("\n", i)
            i = n if i < 0 else i
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            continue
        if c == "#" and depth == 0 and src[start:i].strip() == "":
            j = i
            while True:
                j = src.find("\n", j)
                if j < 0 or src[j - 1] != "\\":
                    break
                j += 1
            i = n if j < 0 else j
            start = i
            continue
        if c == "{":
            if depth == 0:
                header_end = i + 1
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                end = i + 1
                if src[end:].lstrip().startswith(";"):
                    end = src.index(";", end) + 1
                yield start, end, src[start:header_end]
                start = end
        elif c == ";" and depth == 0:
            yield start, i + 1, src[start : i + 1]
            start = i + 1
        i += 1


def needs_full(output: str, src: str) -> bool:
    """Did the device-only pass fail only because host code or torch headers were blanked out?

    An undefined identifier that is torch's, or that the source defines somewhere
    (in code the device-only pass removed), needs the full translation unit; an
    identifier the source never defines is the candidate's own error.
    """
    errors = [ln for ln in output.splitlines() if "error" in ln]
    if any(re.search(r"\b(at|torch|c10|pybind11|scalar_t|AT_\w+|TORCH_\w+|C10_\w+)\b", ln) for ln in errors):
        return True
    for name in re.findall(r'identifier "([^"]+)" is undefined', output):
        if len(re.findall(rf"\b{re.escape(name)}\b", src)) > 1:
            return True
    return False


def cxxfilt(names: list[str]) -> dict[str, str]:
    """Demangled C++ names (with template arguments) via c++filt / cu++filt, when available."""
    tool = shutil.which("cu++filt") or shutil.which("c++filt")
    if not names or tool is None:
        return {}
    try:
        proc = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = proc.stdout.splitlines()
    return dict(zip(names, lines)) if len(lines) == len(names) else {}


def demangle(name: str) -> str:
    m = re.match(r"_Z(?:N\d*)?(\d+)", name)
    if not m:
        return name
    n = int(m.group(1))
    start = m.end()
    return name[start : start + n]
