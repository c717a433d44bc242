"""What one ATen op costs: its kind, its FLOPs and its transcendental evaluations.

The cost of an op is counted as its defining formula, per output element for
pointwise ops and per input element for reductions, with each transcendental
function (exp, log, sqrt, rsqrt, tanh, erf, sin, cos, and pow to a non-integer
power) counted as one FLOP *and* once in ``transcendentals`` (on NVIDIA GPUs
they run on the special-function units, a quarter of the FMA rate or less, so
a kernel full of them can be bound by those units before memory). A
multiply-add is two FLOPs. The table, per element:

==============================================  ======  ===============
op                                              FLOPs   transcendentals
==============================================  ======  ===============
add sub mul div neg abs relu min max where ...  1       0
clamp hardtanh leaky_relu addcmul addcdiv       2       0
exp log sqrt rsqrt tanh erf sin cos ...         1       1
sigmoid  1/(1+exp(-x))                          3       1
silu  x*sigmoid(x)                              4       1
gelu  x/2*(1+erf(x/sqrt2)); tanh form           5; 9    1
elu / selu  x>0 ? x : a*(exp(x)-1) (*scale)     4       1
softplus  log1p(exp(x)) past a threshold        3       2
mish  x*tanh(softplus(x))                       6       3
hardsigmoid / hardswish                         4 / 5   0
pow x**2 / x**3 / x**0.5 / x**p                 1/2/1/2  0/0/1/2
casts, copies, views, gathers, padding          0       0
random fills (bernoulli, dropout masks)         2       0
sum mean prod amax amin argmax any (per input)  1       0
var std (per input)                             3       0
vector norm p=1,2,inf / other p (+ a root)      2 / 4   0 / 2
logsumexp (per input; + a log per output)       4       1
softmax: max, sub, exp, sum, div (per input)    5       1
log_softmax (+ a log per row)                   5       1
layer/group/batch norm, training (per input)    8       0 (+ an rsqrt per group)
batch norm, inference (per input)               4       0 (+ an rsqrt per channel)
rms norm (per input)                            4       0 (+ rsqrt per row)
cumsum cumprod cummax (per input)               1       0
logcumsumexp (per input)                        4       2
max pool (per output, per window element)       1       0
avg pool (per output: window adds + a divide)   k+1     0
mse / l1 loss (per input)                       3       0
smooth_l1 / huber loss (per input)              5       0
binary cross-entropy (with logits)              7 (8)   2
nll loss (per target)                           2       0
==============================================  ======  ===============

Matrix products: ``2*M*N*K`` (+ ``M*N`` when a bias or input is added: addmm,
baddbmm); ``bmm`` times the batch. Convolutions: ``2 * N * C_out * prod(out
spatial) * C_in/groups * prod(kernel)`` (+ the output size with a bias); a
transposed convolution scatters every input element:
``2 * N * C_in * prod(in spatial) * C_out/groups * prod(kernel)``. Fused
attention: ``2*B*H*Sq*Sk*(D + Dv)`` for the two products plus 5 per score for
the softmax (one exp), halved when causal. An op with no rule costs 0 FLOPs
and is listed as such in the description's summary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Ops that only reinterpret a tensor's metadata: no kernel, no bytes.
VIEWS = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "unsqueeze",
        "squeeze",
        "slice",
        "select",
        "as_strided",
        "alias",
        "detach",
        "narrow",
        "unbind",
        "split",
        "split_with_sizes",
        "chunk",
        "unsafe_split",
        "unsafe_split_with_sizes",
        "unsafe_chunk",
        "view_as",
        "unflatten",
        "flatten",
        "lift_fresh",
        "_reshape_alias",
        "diagonal",
        "movedim",
        "swapaxes",
        "real",
        "imag",
        "view_as_real",
        "view_as_complex",
        "_nested_view_from_buffer",
        "unfold",
        "numpy_T",
        "mT",
        "mH",
        "adjoint",
        "conj",
        "_conj",
        "resolve_conj",
        "resolve_neg",
        "set_",
        "resize_",
        "_local_scalar_dense",
        "item",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "is_same_size",
        "_has_compatible_shallow_copy_type",
        "_to_dense",
    }
)
# Factories that allocate without writing.
EMPTY = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"})
FACTORIES = frozenset(
    {
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_full",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "scalar_tensor",
        "tensor",
        "rand",
        "rand_like",
        "randn",
        "randn_like",
        "randint",
        "randint_like",
        "randperm",
        "zero",
        "fill",
        "normal",
        "uniform",
        "bernoulli",
        "tril_indices",
        "triu_indices",
    }
)

MATMUL = frozenset(
    {
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "mv",
        "addmv",
        "dot",
        "vdot",
        "addbmm",
        "_int_mm",
        "_scaled_mm",
        "addr",
        "outer",
        "ger",
        "matmul",
        "linear",
    }
)
CONV = frozenset(
    {
        "convolution",
        "_convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "cudnn_convolution",
        "cudnn_convolution_transpose",
        "mkldnn_convolution",
        "_slow_conv2d_forward",
        "slow_conv3d_forward",
        "slow_conv_transpose2d",
        "slow_conv_transpose3d",
        "slow_conv_dilated2d",
        "slow_conv_dilated3d",
        "_conv_depthwise2d",
        "conv_depthwise3d",
        "convolution_overrideable",
    }
)
ATTENTION = frozenset(
    {
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_fused_attention_overrideable",
        "_flash_attention_forward",
        "_efficient_attention_forward",
    }
)
SOFTMAX = frozenset({"_softmax", "_log_softmax", "_safe_softmax", "softmax", "log_softmax"})
NORMS = frozenset(
    {
        "native_layer_norm",
        "native_group_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "_native_batch_norm_legit_functional",
        "_batch_norm_with_update",
        "_batch_norm_no_update",
        "batch_norm",
        "layer_norm",
        "group_norm",
        "instance_norm",
        "rms_norm",
        "_fused_rms_norm",
        "cudnn_batch_norm",
        "miopen_batch_norm",
    }
)
POOLING = frozenset(
    {
        "max_pool1d",
        "max_pool2d",
        "max_pool3d",
        "max_pool2d_with_indices",
        "max_pool3d_with_indices",
        "avg_pool1d",
        "avg_pool2d",
        "avg_pool3d",
        "adaptive_avg_pool1d",
        "adaptive_avg_pool2d",
        "adaptive_avg_pool3d",
        "_adaptive_avg_pool2d",
        "_adaptive_avg_pool3d",
        "adaptive_max_pool1d",
        "adaptive_max_pool2d",
        "adaptive_max_pool3d",
        "max_pool1d_with_indices",
        "fractional_max_pool2d",
        "fractional_max_pool3d",
        "lp_pool1d",
        "lp_pool2d",
        "mkldnn_max_pool2d",
    }
)
ARGREDUCE = frozenset({"argmax", "argmin"})
SCAN = frozenset(
    {"cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "_logcumsumexp", "_cummax_helper", "_cummin_helper"}
)
LOSS = {  # per input element (FLOPs, transcendentals); nll per target row
    "mse_loss": (3, 0),
    "l1_loss": (3, 0),
    "smooth_l1_loss": (5, 0),
    "huber_loss": (5, 0),
    "binary_cross_entropy": (7, 2),
    "binary_cross_entropy_with_logits": (8, 2),
    "soft_margin_loss": (4, 2),
    "kl_div": (4, 1),
    "multi_margin_loss": (4, 0),
    "multilabel_margin_loss_forward": (4, 0),
    "nll_loss_forward": (2, 0),
    "nll_loss2d_forward": (2, 0),
    "nll_loss": (2, 0),
    "nll_loss_nd": (2, 0),
    "cross_entropy_loss": (7, 1),
    "poisson_nll_loss": (4, 1),
    "hinge_embedding_loss": (3, 0),
    "margin_ranking_loss": (3, 0),
    "cosine_embedding_loss": (6, 1),
    "triplet_margin_loss": (8, 2),
    "ctc_loss": (8, 2),
    "_ctc_loss": (8, 2),
}
REDUCTIONS = {  # per input element (FLOPs, transcendentals)
    "sum": (1, 0),
    "mean": (1, 0),
    "nansum": (2, 0),
    "nanmean": (2, 0),
    "prod": (1, 0),
    "amax": (1, 0),
    "amin": (1, 0),
    "max": (1, 0),
    "min": (1, 0),
    "aminmax": (2, 0),
    "any": (1, 0),
    "all": (1, 0),
    "count_nonzero": (1, 0),
    "var": (3, 0),
    "std": (3, 0),
    "var_mean": (4, 0),
    "std_mean": (4, 0),
    "logsumexp": (4, 1),
    "median": (1, 0),
    "nanmedian": (1, 0),
    "mode": (1, 0),
    "kthvalue": (1, 0),
    "topk": (1, 0),
    "sort": (1, 0),
    "argsort": (1, 0),
    "_aminmax": (2, 0),
    "trace": (1, 0),
}
# Elementwise ops, per output element (FLOPs, transcendentals).
POINTWISE: dict[str, tuple[int, int]] = {
    **{
        n: (1, 0)
        for n in (
            "add",
            "sub",
            "rsub",
            "mul",
            "div",
            "true_divide",
            "floor_divide",
            "neg",
            "abs",
            "relu",
            "relu6",
            "threshold",
            "maximum",
            "minimum",
            "fmax",
            "fmin",
            "clamp_min",
            "clamp_max",
            "where",
            "masked_fill",
            "eq",
            "ne",
            "lt",
            "le",
            "gt",
            "ge",
            "sign",
            "sgn",
            "signbit",
            "floor",
            "ceil",
            "round",
            "trunc",
            "frac",
            "reciprocal",
            "square",
            "copysign",
            "fmod",
            "remainder",
            "bitwise_and",
            "bitwise_or",
            "bitwise_xor",
            "bitwise_not",
            "logical_and",
            "logical_or",
            "logical_xor",
            "logical_not",
            "isnan",
            "isinf",
            "isfinite",
            "nan_to_num",
            "heaviside",
            "positive",
            "tril",
            "triu",
            "glu",
            "prelu",
            "_prelu_kernel",
            "masked_scatter",
            "deg2rad",
            "rad2deg",
        )
    },
    **{
        n: (2, 0)
        for n in (
            "clamp",
            "hardtanh",
            "leaky_relu",
            "addcmul",
            "addcdiv",
            "rrelu",
            "hardshrink",
            "softshrink",
            "threshold_backward",
            "bernoulli",
            "native_dropout",
            "dropout",
            "rand_like",
            "uniform",
            "normal",
        )
    },
    **{
        n: (1, 1)
        for n in (
            "exp",
            "exp2",
            "expm1",
            "log",
            "log2",
            "log10",
            "log1p",
            "sqrt",
            "rsqrt",
            "sin",
            "cos",
            "tan",
            "tanh",
            "erf",
            "erfc",
            "erfinv",
            "asin",
            "acos",
            "atan",
            "sinh",
            "cosh",
            "asinh",
            "acosh",
            "atanh",
            "atan2",
            "lgamma",
            "digamma",
            "sinc",
            "i0",
            "special_erfcx",
            "logit",
        )
    },
    "sigmoid": (3, 1),
    "silu": (4, 1),
    "gelu": (5, 1),
    "elu": (4, 1),
    "selu": (4, 1),
    "celu": (4, 1),
    "softplus": (3, 2),
    "mish": (6, 3),
    "hardsigmoid": (4, 0),
    "hardswish": (5, 0),
    "log_sigmoid_forward": (4, 2),
    "logsigmoid": (4, 2),
    "xlogy": (2, 1),
    "lerp": (3, 0),
    "hypot": (3, 1),
    "logaddexp": (4, 2),
    "logaddexp2": (4, 2),
    "_to_copy": (0, 0),
}
# Copies and data movement without arithmetic.
LAYOUT = frozenset(
    {
        "clone",
        "copy",
        "contiguous",
        "cat",
        "stack",
        "constant_pad_nd",
        "pad",
        "reflection_pad1d",
        "reflection_pad2d",
        "reflection_pad3d",
        "replication_pad1d",
        "replication_pad2d",
        "replication_pad3d",
        "flip",
        "roll",
        "repeat",
        "repeat_interleave",
        "index_select",
        "gather",
        "scatter",
        "scatter_add",
        "scatter_reduce",
        "index",
        "index_put",
        "index_add",
        "index_copy",
        "index_fill",
        "embedding",
        "masked_select",
        "take",
        "nonzero",
        "narrow_copy",
        "permute_copy",
        "transpose_copy",
        "view_copy",
        "expand_copy",
        "unfold_copy",
        "im2col",
        "col2im",
        "pixel_shuffle",
        "pixel_unshuffle",
        "channel_shuffle",
        "upsample_nearest1d",
        "upsample_nearest2d",
        "upsample_nearest3d",
        "_upsample_nearest_exact2d",
        "diag",
        "diag_embed",
        "tile",
        "unfold_backward",
        "_unsafe_index",
        "grid_sampler_2d",
        "upsample_bilinear2d",
        "upsample_bicubic2d",
        "upsample_linear1d",
        "upsample_trilinear3d",
        "slice_scatter",
        "select_scatter",
        "diagonal_scatter",
        "as_strided_scatter",
        "_index_put_impl_",
        "lift",
    }
)


def numel(shape: Sequence[int]) -> int:
    """Elements of a tensor of ``shape`` (1 for a scalar)."""
    return math.prod(int(d) for d in shape)


def pow_cost(exponent) -> tuple[int, int]:
    """x**p: a product for small integer powers, exp(p*log x) otherwise."""
    if isinstance(exponent, (int, float)) and float(exponent).is_integer() and 0 <= exponent <= 4:
        return max(1, int(exponent) - 1), 0
    if exponent == 0.5:
        return 1, 1
    return 2, 2


def matmul_flops(name: str, shapes: list[list[int]], out: list[int]) -> int:
    """2*M*N*K (times the batch) plus M*N when an input matrix is added (addmm, baddbmm, addmv)."""
    if name in ("mm", "_int_mm", "_scaled_mm"):
        (m, k), n = shapes[0][-2:], shapes[1][-1]
        return 2 * m * n * k
    if name in ("addmm", "addbmm"):
        a, b = shapes[1], shapes[2]
        mnk = 2 * a[-2] * b[-1] * a[-1] * (a[0] if name == "addbmm" else 1)
        return mnk + numel(out)
    if name == "bmm":
        bsz, m, k = shapes[0]
        return 2 * bsz * m * k * shapes[1][-1]
    if name == "baddbmm":
        bsz, m, k = shapes[1]
        return 2 * bsz * m * k * shapes[2][-1] + numel(out)
    if name == "mv":
        return 2 * numel(shapes[0])
    if name == "addmv":
        return 2 * numel(shapes[1]) + numel(out)
    if name in ("dot", "vdot"):
        return 2 * numel(shapes[0])
    if name in ("addr", "outer", "ger"):
        return 2 * numel(out)
    # Composite names seen only when not decomposed: a generic product.
    if len(shapes) >= 2 and shapes[0] and shapes[1]:
        k = shapes[0][-1]
        return 2 * numel(out) * k
    return 0


def conv_flops(x: list[int], w: list[int], out: list[int], transposed: bool, groups: int, bias: bool) -> int:
    """Multiply-adds of a (transposed) convolution, two FLOPs each, plus the bias adds."""
    kernel = numel(w[2:])
    if transposed:
        n, c_in = x[0], x[1]
        c_out_per_group = w[1]
        macs = n * c_in * numel(x[2:]) * c_out_per_group * kernel
    else:
        n, c_out = out[0], out[1]
        c_in_per_group = w[1]
        macs = n * c_out * numel(out[2:]) * c_in_per_group * kernel
    del groups  # already in the weight's shape
    return 2 * macs + (numel(out) if bias else 0)


def attention_flops(q: list[int], k: list[int], v: list[int], causal: bool) -> tuple[int, int]:
    """QK^T and PV products plus the softmax over the scores; (FLOPs, exps)."""
    batch = numel(q[:-2])
    sq, d = q[-2], q[-1]
    sk, dv = k[-2], v[-1]
    scores = batch * sq * sk
    if causal:
        scores //= 2
    return 2 * scores * (d + dv) + 5 * scores, scores
