"""Turn exceptions and compiler logs into diagnostics an agent can act on.

The rule: the first real error, with the file and line in the candidate's own
source, trimmed of framework frames; the full text stays available separately.
Triton compile errors carry a line relative to the kernel's ``def``; CUDA
sources are compiled under ``#line`` directives that point into the solution
file; tracebacks are searched for the deepest frame in the candidate file.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path

from skillbase.models import Diagnostic, ErrorInfo

_FRAMEWORK = ("site-packages", "dist-packages", "/skillbase/toolchain/", "<frozen ", "/lib/python3")
_NVCC_LINE = re.compile(
    r"^(?P<file>[^\s:()][^:()]*)\((?P<line>\d+)\)(?:\s*\(col\.\s*(?P<col>\d+)\))?:\s*"
    r"(?P<sev>error|warning|remark)\s*(?:#\w+-\w+)?:?\s*(?P<msg>.*)$"
)
_GCC_LINE = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal )?(?P<sev>error|warning|note):\s*(?P<msg>.*)$"
)
_TRITON_AT = re.compile(r"^at (\d+):(\d+):")


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """Keep the head and the tail of a long log; returns (text, was_truncated)."""
    if len(text) <= limit:
        return text, False
    head = limit // 3
    tail = limit - head - 40
    return f"{text[:head]}\n... [{len(text) - head - tail} characters cut] ...\n{text[-tail:]}", True


def _root_cause(exc: BaseException) -> BaseException:
    seen = set()
    while (exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return exc


def _chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


def _all_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """Frames of the whole chain, outermost exception first, so the last frame is the deepest of the root cause."""
    frames: list[traceback.FrameSummary] = []
    for e in _chain(exc):
        frames += traceback.extract_tb(e.__traceback__)
    return frames


def candidate_frame(exc: BaseException, run_path: str) -> traceback.FrameSummary | None:
    """The deepest frame of the exception chain that runs candidate code."""
    own = [f for f in _all_frames(exc) if Path(f.filename).name == Path(run_path).name]
    return own[-1] if own else None


def _line_of(source_lines: list[str], line: int | None) -> str | None:
    if line and 0 < line <= len(source_lines):
        return source_lines[line - 1].rstrip()
    return None


def triton_compile_location(exc: BaseException, source: str) -> int | None:
    """Line in the solution file of a Triton CompilationError (its line is relative to the kernel's def)."""
    src = getattr(exc, "src", None)
    node = getattr(exc, "node", None)
    rel = getattr(node, "lineno", None)
    if not src or not rel:
        m = _TRITON_AT.match(str(exc))
        if not m or not src:
            return None
        rel = int(m.group(1))
    first = next((ln.strip() for ln in src.splitlines() if ln.strip()), "")
    lines = source.splitlines()
    starts = [i + 1 for i, ln in enumerate(lines) if ln.strip() == first]
    if len(starts) != 1:
        return None
    return starts[0] + rel - 1


def from_exception(
    exc: BaseException, *, source: str, run_path: str, display_path: str | None
) -> tuple[Diagnostic, ErrorInfo]:
    """A diagnostic pointing at the candidate's own line, and the error record with a trimmed traceback.

    ``run_path`` is where the candidate was imported from (a temp file);
    ``display_path`` is the name the user knows it by.
    """
    root = _root_cause(exc)
    shown = display_path or run_path
    lines = source.splitlines()
    line = None
    col = None
    compile_error = next((e for e in _chain(exc) if hasattr(e, "node") and hasattr(e, "src")), None)
    if compile_error is not None:
        line = triton_compile_location(compile_error, source)
        col = getattr(getattr(compile_error, "node", None), "col_offset", None)
        message = str(getattr(compile_error, "error_message", None) or str(compile_error).splitlines()[-1])
        if root is not compile_error:
            message = f"{message} ({type(root).__name__}: {str(root).strip()[:300]})"
        root = compile_error
    else:
        message = str(root).strip().splitlines()[0] if str(root).strip() else type(root).__name__
    if line is None:
        frame = candidate_frame(exc, run_path)
        if frame is not None:
            line = frame.lineno
    if isinstance(root, SyntaxError) and root.lineno and line is None:
        line, col = root.lineno, root.offset
    text = f"{type(root).__name__}: {message}"
    diag = Diagnostic(
        severity="error", message=text, file=shown, line=line, column=col, source_line=_line_of(lines, line)
    )
    info = ErrorInfo(
        type=type(root).__name__, message=message, file=shown, line=line, traceback=trim_traceback(exc, run_path, shown)
    )
    return diag, info


def trim_traceback(exc: BaseException, run_path: str, shown: str) -> str:
    """The traceback without framework frames; candidate frames renamed to the user's path."""
    out = []
    for f in _all_frames(exc):
        if Path(f.filename).name == Path(run_path).name:
            out.append(f'  File "{shown}", line {f.lineno}, in {f.name}\n    {(f.line or "").strip()}')
        elif not any(s in f.filename for s in _FRAMEWORK):
            out.append(f'  File "{f.filename}", line {f.lineno}, in {f.name}')
    root = _root_cause(exc)
    out.append(f"{type(root).__name__}: {str(root).strip()[:2000]}")
    return "\n".join(out)


def parse_compiler_log(
    log: str, *, source_lines: list[str] | None = None, file_map: dict[str, str] | None = None
) -> list[Diagnostic]:
    """nvcc / gcc / ptxas diagnostics from a log, errors first; ``file_map`` renames files."""
    diags: list[Diagnostic] = []
    file_map = file_map or {}
    for raw in log.splitlines():
        ln = raw.strip()
        m = _NVCC_LINE.match(ln) or _GCC_LINE.match(ln)
        if not m:
            if ln.startswith("ptxas") and ("error" in ln or "fatal" in ln):
                diags.append(Diagnostic(severity="error", message=ln))
            continue
        sev = {"remark": "note"}.get(m.group("sev"), m.group("sev"))
        file = file_map.get(m.group("file"), m.group("file"))
        line = int(m.group("line"))
        src = _line_of(source_lines, line) if source_lines is not None and file in file_map.values() else None
        diags.append(
            Diagnostic(
                severity=sev,
                message=m.group("msg").strip(),
                file=file,
                line=line,
                column=int(m.group("col")) if m.group("col") else None,
                source_line=src,
            )
        )
    diags.sort(key=lambda d: {"error": 0, "warning": 1, "note": 2}[d.severity])
    return diags


def first_build_error(log: str, source: str, display: str) -> Diagnostic | None:
    """The first compiler error of an extension build log, moved onto the solution file's line.

    The build compiles a copy of the CUDA source (with a few lines prepended),
    so its line numbers are off; nvcc and gcc print the offending code line
    after the error, and that text is looked up in the solution file instead.
    """
    lines = log.splitlines()
    for i, raw in enumerate(lines):
        m = _NVCC_LINE.match(raw.strip()) or _GCC_LINE.match(raw.strip())
        if not m or m.group("sev") != "error":
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        hits = [n for n, ln in enumerate(source.splitlines(), start=1) if code and ln.strip() == code]
        if len(hits) == 1:
            return Diagnostic(
                severity="error",
                message=m.group("msg").strip(),
                file=display,
                line=hits[0],
                source_line=source.splitlines()[hits[0] - 1].rstrip(),
            )
        return Diagnostic(
            severity="error", message=m.group("msg").strip(), file=m.group("file"), line=int(m.group("line"))
        )
    return None
