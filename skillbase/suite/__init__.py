"""Whole-run evaluation: every candidate of a run directory against its task, spread
over every GPU of the host, resumable, with a KernelBench-style report (fast_p,
geometric-mean speedups, rejections by check) and every candidate recorded as an
attempt.

A driver above ``skillbase.api`` (like the agent): ``skillbase suite run RUN_DIR``.
Evaluation alone (``--no-record``) needs only the toolchain (torch, triton,
pydantic), so a GPU box without the store can evaluate and ``skillbase suite
record RUN_DIR`` records the results where the store lives.
"""
