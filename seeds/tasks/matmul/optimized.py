"""fp16 GEMM, optimized: persistent kernel, TMA tensor descriptors, grouped tile order, autotuned.

- Persistent grid: one program per SM loops over output tiles (stride
  NUM_SMS), so there is no tail wave of half-empty SMs and the loop over tiles
  and K-steps is one flat pipelined loop (flatten=True): the next tile's first
  loads overlap the current tile's last MMAs and its epilogue.
- TMA: A, B and C are read and written through tensor descriptors built on the device.
  One thread issues a bulk copy of a whole tile into shared memory (already in
  the swizzled layout wgmma wants) instead of every thread computing
  addresses; out-of-bounds parts of edge tiles are zero-filled on load and
  clipped on store, so there are no masks.
- Grouped tile order (GROUP_M rows of tiles advance together) keeps the
  panels of A and B that concurrent programs need in L2.
- Epilogue subtiling stores C in two halves, halving the shared memory the
  epilogue needs so the pipeline can keep one more stage.
- TMA needs 16-byte aligned row strides: K and N must be multiples of 8.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _keep_one_config_off_gpu(configs, named_args, **kwargs):
    """Off the GPU (the Triton interpreter) configs cannot be timed: keep the first."""
    on_gpu = named_args["a_ptr"].is_cuda
    return configs if on_gpu else configs[:1]



def _configs():
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "EPILOGUE_SUBTILE": sub},
                      num_warps=w, num_stages=s)
        for (bm, bn, bk, w, s, sub) in [
            (128, 256, 64, 8, 3, True),
            (128, 256, 64, 8, 4, True),
            (128, 128, 64, 8, 4, False),
            (128, 128, 64, 4, 4, False),
            (128, 128, 128, 8, 3, True),
            (128, 64, 64, 4, 4, False),
        ]
    ]


@triton.jit
def _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    # Grouped ordering: GROUP_M rows of tiles advance through the columns together.
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (tile_id // num_pid_in_group) * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % num_pid_in_group) % group_size_m
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.autotune(
    configs=_configs(),
    key=["M", "N", "K"],
    prune_configs_by={"early_config_prune": _keep_one_config_off_gpu},
)
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  EPILOGUE_SUBTILE: tl.constexpr, NUM_SMS: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # Descriptors built on the device with constexpr tile shapes: no autotuner pre_hook has to reshape
    # host descriptors per config, so Triton caches the tuned config on disk like any other kernel.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    if EPILOGUE_SUBTILE:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N // 2])
    else:
        c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    dtype = c_ptr.dtype.element_ty

    # The epilogue takes its tile coordinates from a counter of its own, so
    # the flattened pipeline never carries the loads' coordinates into the
    # stores (as in Triton's persistent matmul tutorial).
    tile_id_c = tl.program_id(axis=0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(axis=0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M
        offs_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_K
            a = a_desc.load([offs_m, offs_k])
            b = b_desc.load([offs_k, offs_n])
            acc = tl.dot(a, b, acc)

        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile_coords(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        offs_m = pid_m * BLOCK_M
        offs_n = pid_n * BLOCK_N
        if EPILOGUE_SUBTILE:
            # [BM, BN] -> two [BM, BN/2] halves, stored one after the other.
            acc = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            c_desc.store([offs_m, offs_n], acc0.to(dtype))
            c_desc.store([offs_m, offs_n + BLOCK_N // 2], acc1.to(dtype))
        else:
            c_desc.store([offs_m, offs_n], acc.to(dtype))


def _use_scratch_on(device: torch.device) -> None:
    # Device-built descriptors live in a small global scratch buffer that Triton asks for at launch.
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device=device, dtype=torch.int8))


def _num_sms(device: torch.device) -> int:
    # Off the GPU a small count still runs several tiles per program.
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        M, K = a.shape
        K2, N = b.shape
        assert K == K2, "inner dimensions differ"
        if K % 8 or N % 8:
            raise ValueError(f"TMA needs 16-byte aligned rows: K={K} and N={N} must be multiples of 8 for fp16")
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        _use_scratch_on(a.device)
        num_sms = _num_sms(a.device)
        grid = lambda meta: (min(num_sms, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)
        matmul_kernel[grid](a, b, c, M, N, K, NUM_SMS=num_sms)
        return c
