"""Softmax at KernelBench size, optimized: each row split over cooperating programs that hold it in registers.

A 393216-value row (1.5 MiB) fits no single program, so a one-program-per-row
kernel reads it twice (statistics, then normalization) and the second read
comes mostly from DRAM: three passes of traffic against the two a softmax needs.
Here a row is cut into BLOCK-wide chunks, one per program, and the programs of
a row cooperate:
- each program loads its chunk once, keeps exp2(x - chunk max) in registers and
  publishes (chunk max, chunk sum) to a small global table;
- a counter per row, bumped with release semantics, tells the row's programs
  when every chunk has published; each then combines the partial statistics
  (max, then sum rescaled to the row max) and writes its chunk from registers.
DRAM traffic is one read and one write, the floor.
- The grid is persistent: as many programs as fit on the GPU at once (computed
  from the compiled kernel's registers), in groups of one row's chunk count,
  each group walking rows with a stride. Every program a group waits for is
  resident, so the wait cannot deadlock.
- Launch, measured (benchmarks/tune_memory_bound.py --tasks softmax_kb, H100):
  32768-value chunks over 16 warps, 64 values and 97 registers a thread, one
  program per SM: 12 programs a row, 11 rows in flight on 132 SMs. Smaller
  chunks leave SMs idle when 132 is not a multiple of the row's chunk count;
  loading the next row's chunk before the wait (PREFETCH) doubles the registers
  and only pays for small chunks.
- Off the GPU (the Triton interpreter runs programs one after another, so
  programs cannot wait on each other) and for rows wider than the resident
  programs can hold, the streaming two-pass kernel of step 2 runs instead; rows
  that fit one program's registers take the one-read row kernel.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_IN_REGISTERS = 32768
# The cooperative kernel's launch, chosen by benchmarks/tune_memory_bound.py --tasks softmax_kb on an H100.
COOP_BLOCK, COOP_WARPS, COOP_PREFETCH = 32768, 16, False


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    on_gpu = any(isinstance(a, torch.Tensor) and a.is_cuda for a in named_args.values())
    return configs if on_gpu else configs[:1]


@triton.autotune(
    configs=[triton.Config({}, num_warps=w) for w in (8, 4, 16, 32)],
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    # BLOCK_SIZE is a power of two >= n_cols: lanes past the row read -inf.
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=float("-inf"),
                eviction_policy="evict_first")
    e = tl.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)
    tl.store(y_ptr + row * y_row_stride + cols, e * (1.0 / tl.sum(e, axis=0)), mask=mask)


@triton.jit
def softmax_coop_kernel(x_ptr, y_ptr, stats_ptr, count_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                        BLOCK: tl.constexpr, MAX_CHUNKS: tl.constexpr, PREFETCH: tl.constexpr):
    n_chunks = tl.cdiv(n_cols, BLOCK)
    groups = tl.num_programs(axis=0) // n_chunks
    group = tl.program_id(axis=0) // n_chunks
    chunk = tl.program_id(axis=0) % n_chunks
    cols = chunk * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    k = tl.arange(0, MAX_CHUNKS)
    # stats_ptr: [2, n_rows, MAX_CHUNKS] fp32, chunk maxima then chunk sums.
    sums_ptr = stats_ptr + n_rows.to(tl.int64) * MAX_CHUNKS
    if PREFETCH:
        # group < n_rows: the launch never has more groups than rows.
        x_next = tl.load(x_ptr + group.to(tl.int64) * x_row_stride + cols, mask=mask, other=float("-inf"),
                         eviction_policy="evict_first")
    for i in range(0, tl.cdiv(n_rows - group, groups)):
        row = group + i * groups
        r = row.to(tl.int64)
        if PREFETCH:
            x = x_next
            x_next = tl.load(x_ptr + (r + groups) * x_row_stride + cols,
                             mask=cols < tl.where(row + groups < n_rows, n_cols, 0), other=float("-inf"),
                             eviction_policy="evict_first")
        else:
            x = tl.load(x_ptr + r * x_row_stride + cols, mask=mask, other=float("-inf"),
                        eviction_policy="evict_first")
        # Chunk statistics. The max is floored at float32's lowest finite value so that a chunk of -inf
        # values gets sum 0 instead of exp2(-inf - -inf) = nan (a larger floor such as -1e30 would give a
        # row masked with the lowest value sum 0). The max is taken off before scaling to the log2
        # domain: x * log2(e) - m rounds x * log2(e) first, an error that grows with |x| (1e-4 relative
        # at |x| ~ 1600), while x - m is exact where it matters.
        m = tl.maximum(tl.max(x, axis=0), -3.4028234663852886e38)
        e = tl.exp2((x - m) * 1.4426950408889634)
        tl.store(stats_ptr + r * MAX_CHUNKS + chunk, m)
        tl.store(sums_ptr + r * MAX_CHUNKS + chunk, tl.sum(e, axis=0))
        # Every thread's stores precede the release below; the acquire orders the table reads after it.
        tl.debug_barrier()
        arrived = tl.atomic_add(count_ptr + row, 1, sem="acq_rel", scope="gpu") + 1
        while arrived < n_chunks:
            arrived = tl.atomic_add(count_ptr + row, 0, sem="acquire", scope="gpu")
        ms = tl.load(stats_ptr + r * MAX_CHUNKS + k, mask=k < n_chunks, other=-3.4028234663852886e38,
                     cache_modifier=".cg")
        ss = tl.load(sums_ptr + r * MAX_CHUNKS + k, mask=k < n_chunks, other=0.0, cache_modifier=".cg")
        row_max = tl.max(ms, axis=0)
        scale = tl.exp2((m - row_max) * 1.4426950408889634) / \
            tl.sum(ss * tl.exp2((ms - row_max) * 1.4426950408889634), axis=0)
        tl.store(y_ptr + r * y_row_stride + cols, e * scale, mask=mask, cache_modifier=".cs")


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 4096}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 8192}, num_warps=16),
        triton.Config({"BLOCK_SIZE": 8192}, num_warps=32),
        triton.Config({"BLOCK_SIZE": 16384}, num_warps=32),
        triton.Config({"BLOCK_SIZE": 2048}, num_warps=8),
    ],
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def softmax_wide_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(axis=0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    # Pass 1, lane-wise online statistics (see step2_lanewise.py); maxima kept in x's own domain and
    # differences scaled to log2 after the subtraction (exact), not before (an error growing with |x|).
    m = tl.full([BLOCK_SIZE], -3.4028234663852886e38, tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        d = x - m
        e = tl.exp2(-tl.abs(d) * 1.4426950408889634)
        s = tl.where(d > 0, s * e + 1.0, s + e)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    inv_sum = 1.0 / tl.sum(s * tl.exp2((m - row_max) * 1.4426950408889634), axis=0)
    # Pass 2, last chunk first, to reuse what pass 1 left in L2.
    last = tl.cdiv(n_cols, BLOCK_SIZE) - 1
    for i in range(0, last + 1):
        start = (last - i) * BLOCK_SIZE
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"), eviction_policy="evict_first")
        tl.store(y_row + start + cols, tl.exp2((x - row_max) * 1.4426950408889634) * inv_sum, mask=mask,
                 cache_modifier=".cs")


_RESIDENT: dict = {}


def resident_programs(kernel, device: torch.device, num_warps: int) -> int:
    """How many programs of a compiled kernel an idle GPU runs at once (registers, warps, shared memory)."""
    key = (device.index, kernel.n_regs, kernel.metadata.shared, num_warps)
    if key not in _RESIDENT:
        props = torch.cuda.get_device_properties(device)
        regs_per_warp = -(-max(kernel.n_regs, 1) * 32 // 256) * 256  # allocated per warp in units of 256
        smem = getattr(props, "shared_memory_per_multiprocessor", 228 * 1024)
        regs = getattr(props, "regs_per_multiprocessor", 65536)
        per_sm = min(regs // (regs_per_warp * num_warps),
                     props.max_threads_per_multi_processor // (32 * num_warps),
                     smem // (kernel.metadata.shared + 1024), 32)
        _RESIDENT[key] = per_sm * props.multi_processor_count
    return _RESIDENT[key]


def cooperative_plan(x2: torch.Tensor, y: torch.Tensor, block: int = COOP_BLOCK, num_warps: int = COOP_WARPS,
                     prefetch: bool = COOP_PREFETCH):
    """The cooperative kernel's arguments, options, program count (0: it does not fit) and compiled kernel."""
    n_rows, n_cols = x2.shape
    n_chunks = triton.cdiv(n_cols, block)
    max_chunks = triton.next_power_of_2(n_chunks)
    stats = torch.empty((2, n_rows, max_chunks), device=x2.device, dtype=torch.float32)
    count = torch.zeros(n_rows, device=x2.device, dtype=torch.int32)
    args = (x2, y, stats, count, n_rows, n_cols, x2.stride(0), y.stride(0))
    meta = dict(BLOCK=block, MAX_CHUNKS=max_chunks, PREFETCH=prefetch, num_warps=num_warps)
    kernel = softmax_coop_kernel.warmup(*args, grid=(1,), **meta)
    kernel._init_handles()  # loads the module, which fills in n_regs
    groups = min(resident_programs(kernel, x2.device, num_warps) // n_chunks, n_rows)
    return args, meta, groups * n_chunks, kernel


def softmax_cooperative(x2: torch.Tensor, y: torch.Tensor, block: int = COOP_BLOCK, num_warps: int = COOP_WARPS,
                        prefetch: bool = COOP_PREFETCH) -> bool:
    """Run the cooperative kernel on a CUDA matrix; False (nothing launched) where it does not fit."""
    args, meta, programs, _ = cooperative_plan(x2, y, block, num_warps, prefetch)
    if programs:
        softmax_coop_kernel[(programs,)](*args, **meta)
    return programs > 0


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.empty_like(x2)
        n_rows, n_cols = x2.shape
        if n_cols <= MAX_ROW_IN_REGISTERS:
            softmax_row_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0),
                                          BLOCK_SIZE=triton.next_power_of_2(n_cols))
        elif not (x2.is_cuda and softmax_cooperative(x2, y)):
            softmax_wide_kernel[(n_rows,)](x2, y, n_cols, x2.stride(0), y.stride(0))
        return y.view(x.shape)
