"""The server's instructions and the ``optimize-kernel`` prompt: the loop, in words an agent follows."""

from __future__ import annotations

INSTRUCTIONS = (
    "skillbase compiles, verifies and benchmarks GPU kernels (Triton or CUDA C++) against PyTorch references, "
    "remembers every attempt and lesson, and recalls the skills and experiences that made similar kernels faster. "
    "The loop: load_task -> recall -> write a candidate -> compile_kernel -> benchmark_kernel (with parent_id and "
    "techniques) -> record_lesson -> suggest_next, and again. A failing candidate is a verdict in the benchmark "
    "report, not an error. Without a GPU, benchmarks verify correctness only and say so."
)


def optimize_kernel_prompt(task: str, rounds: str = "3") -> str:
    """Optimize one task for a few rounds, using and feeding the shared memory."""
    return f"""Optimize the GPU kernel task `{task}` with the skillbase tools, for up to {rounds} rounds.

1. `load_task` with task="{task}". Read the reference source, the shapes and dtype, and the floor time and
   baselines if they are known. Note the best attempt so far, if any.
2. `recall` with task="{task}". Read why each skill and experience was chosen; open the most relevant skill
   with `get_skill` before writing code. Keep the ids of the items you use.
3. Write a candidate: a Python module defining `ModelNew` with the same constructor and forward as the
   reference `Model`, doing the work in its own Triton (or CUDA C++ via load_inline) kernels. No calls to the
   reference, no PyTorch fallback for the main work, no caching between calls.
4. `compile_kernel` it. Fix compile errors and large register spills before benchmarking.
5. `benchmark_kernel` it with `parent_id` (the attempt it improves on, none for the first), `techniques` (what
   you changed) and `used` (the ids of the recalled items that shaped it). Read the verdict first: anything but
   `correct` means fix it. Then read the median time, speedups, percent of the floor and the bottleneck.
6. `record_lesson` with after_attempt=<the attempt id>: what worked or failed and why, in a few sentences
   another agent can act on. Record failures too.
7. `suggest_next` with task="{task}" and `recall` with attempt_id=<the attempt id> to choose the next change,
   then go back to step 3. Stop when the candidate is near the floor or the rounds are spent.

Finish with `attempt_history` for the task and a short summary: the best attempt id, its time and speedup,
and what you learned. If a lesson holds beyond this task, `propose_skill` it, citing the experiences."""
