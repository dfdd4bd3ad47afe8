"""Per-block NumPy kernels of the decode layer: seeds, copies, norms, split-K matmuls, SwiGLU.

A kernel is `fn(ctx, *args)` with the arguments in the kernel's parameter order: direct
regions as NumPy views shaped like the parameter (read-only for `in`), indirect regions as
`RowAccess`, scalars as ints. It writes only through its out/inout/atomic_add views; an
`atomic_add` view is accumulated with `+=` (the f32 atomic add of the split-K matmuls).
Semantics and rounding points follow qwen3_14b_decode_layer.md §2.2 (task table), §5, §7.
The attention kernels live in `pgraph.backends.numpy.attention`.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

from pgraph.backends.numpy.storage import NP_DTYPES, KernelFault, RowAccess

#: RMSNorm epsilon (pypto-lib constants.py EPS, every RMSNorm including QK-norm).
EPS = 1e-6
#: Column chunk of rms_recip / post_rms_reduce sums (decode_fwd RMSNORM_K_CHUNK = K_CHUNK = 256).
NORM_CHUNK = 256

F32 = np.float32
BF16 = NP_DTYPES["bf16"]

Kernel = Callable[..., None]
KERNELS: dict[str, Kernel] = {}


@attrs.frozen
class BlockContext:
    """What a kernel knows about its launch: block index (None = the whole sync_start grid)."""

    block_idx: int | None
    block_num: int
    label: str


def kernel(name: str) -> Callable[[Kernel], Kernel]:
    """Register `fn` as the implementation of the spec kernel `name`."""

    def register(fn: Kernel) -> Kernel:
        KERNELS[name] = fn
        return fn

    return register


def f32(a: np.ndarray) -> np.ndarray:
    """Values of `a` as float32 (bf16 widens exactly)."""
    return np.asarray(a).astype(F32)


def bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (round to nearest even)."""
    return np.asarray(a, dtype=F32).astype(BF16)


def rows_get(a: np.ndarray | RowAccess, rows: np.ndarray | int) -> np.ndarray:
    """Rows of a direct view or of an indirect region (RowAccess)."""
    if isinstance(a, RowAccess):
        return a.take(rows)
    return np.asarray(a)[rows]


def rows_set(a: np.ndarray | RowAccess, rows: np.ndarray | int | slice, values: np.ndarray) -> None:
    """Write rows of a direct view or of an indirect region (RowAccess)."""
    if isinstance(a, RowAccess):
        if isinstance(rows, slice):
            rows = np.arange(a.shape[0])[rows]
        a.put(rows, values)
        return
    a[rows] = values


def _sum_squares(x: np.ndarray) -> np.ndarray:
    acc = np.zeros(x.shape[0], dtype=F32)
    for lo in range(0, x.shape[1], NORM_CHUNK):
        c = x[:, lo:lo + NORM_CHUNK]
        acc += np.sum(c * c, axis=1, dtype=F32)
    return acc


def _recip_rms(x: np.ndarray) -> np.ndarray:
    mean = _sum_squares(x) * F32(1.0 / x.shape[1])
    return (F32(1.0) / np.sqrt(mean + F32(EPS))).astype(F32)


# ---- setup ----------------------------------------------------------------------------------
@kernel("copy_hidden")
def copy_hidden(ctx: BlockContext, src: np.ndarray, dst: np.ndarray) -> None:
    """dst = f32(src): the bf16 embedding rows widened into the f32 residual stream."""
    dst[...] = f32(src)


@kernel("x_gamma")
def x_gamma(ctx: BlockContext, x: np.ndarray, gamma: np.ndarray, normed: np.ndarray) -> None:
    """normed = bf16(x * gamma) (x_gamma0: the layer-0 input RMS weight, inv_rms deferred)."""
    normed[...] = bf16(x * gamma)


@kernel("copy_out")
def copy_out(ctx: BlockContext, src: np.ndarray, dst: np.ndarray) -> None:
    """dst = bf16(src): the only bf16 rounding of the residual stream (reference §5.9)."""
    dst[...] = bf16(src)


# ---- seeds -----------------------------------------------------------------------------------
@kernel("zero_pad_rows")
def zero_pad_rows(ctx: BlockContext, attn_out: np.ndarray | RowAccess, batch: int) -> None:
    """attn_out[b, :] = 0 for pad rows b in [batch, BATCH_PAD) (attn_out_seed, HEAD #841)."""
    rows = attn_out.shape[0]
    if not 0 <= batch <= rows:
        raise KernelFault(f"zero_pad_rows: batch {batch} outside 0..{rows}")
    if batch == rows:
        return
    idx = np.arange(batch, rows)
    rows_set(attn_out, idx, np.zeros((idx.size, *attn_out.shape[1:]), dtype=F32))


@kernel("zero_q")
def zero_q(ctx: BlockContext, acc: np.ndarray) -> None:
    """q_seed: zero the f32 split-K accumulator of q_proj."""
    acc[...] = 0


@kernel("zero_kv")
def zero_kv(ctx: BlockContext, k: np.ndarray, v: np.ndarray) -> None:
    """kv_seed: zero the k_proj and v_proj accumulators."""
    k[...] = 0
    v[...] = 0


@kernel("zero_mlp_out")
def zero_mlp_out(ctx: BlockContext, down: np.ndarray, gate: np.ndarray, up: np.ndarray, attn_proj: np.ndarray) -> None:
    """mlp_out_seed: zero every remaining f32 accumulator (down, gate, up, attn_proj)."""
    for a in (down, gate, up, attn_proj):
        a[...] = 0


# ---- norms -----------------------------------------------------------------------------------
@kernel("rms_recip")
def rms_recip(ctx: BlockContext, x: np.ndarray, inv_rms: np.ndarray) -> None:
    """inv_rms[b] = 1/sqrt(sum_k x[b,k]^2 / HIDDEN + eps), summed in 256-column chunks."""
    inv_rms[:, 0] = _recip_rms(x)


@kernel("residual_rms_cast")
def residual_rms_cast(ctx: BlockContext, attn_proj: np.ndarray, x: np.ndarray, gamma: np.ndarray,
                      h1: np.ndarray, mlp_in: np.ndarray) -> None:
    """h1 = attn_proj + x (f32, post_norm_partial); mlp_in = bf16(h1 * gamma_post)."""
    h = attn_proj + x
    h1[...] = h
    mlp_in[...] = bf16(h * gamma)


@kernel("post_rms_reduce")
def post_rms_reduce(ctx: BlockContext, attn_proj: np.ndarray, x: np.ndarray, inv_rms: np.ndarray) -> None:
    """post_inv[b] = 1/sqrt(mean_k (attn_proj + x)[b,k]^2 + eps): the deferred post-norm scale."""
    inv_rms[:, 0] = _recip_rms(attn_proj + x)


@kernel("dcr_xgamma")
def dcr_xgamma(ctx: BlockContext, down: np.ndarray, h1: np.ndarray, gamma: np.ndarray, out: np.ndarray,
               normed: np.ndarray) -> None:
    """out = down + h1 (the f32 layer output); normed = bf16(out * gamma_in[next layer])."""
    o = down + h1
    out[...] = o
    normed[...] = bf16(o * gamma)


# ---- split-K matmuls (f32 atomic add into a seeded accumulator) -----------------------------------
def _matmul_acc(x: np.ndarray, w: np.ndarray, acc: np.ndarray) -> None:
    acc += f32(x) @ f32(w)


@kernel("qkv_matmul")
def qkv_matmul(ctx: BlockContext, x: np.ndarray, w: np.ndarray, acc: np.ndarray) -> None:
    """acc += x @ w: one (N tile, K slice) of q/k/v_proj, bf16 inputs, f32 accumulate."""
    _matmul_acc(x, w, acc)


@kernel("out_matmul")
def out_matmul(ctx: BlockContext, x: np.ndarray, w: np.ndarray, acc: np.ndarray) -> None:
    """acc += attn_out @ wo for one out_proj tile (n, k)."""
    _matmul_acc(x, w, acc)


@kernel("mlp_matmul")
def mlp_matmul(ctx: BlockContext, x: np.ndarray, w: np.ndarray, acc: np.ndarray) -> None:
    """acc += mlp_norm_in @ W_gate|W_up for one gate/up tile (n, k), before the post-norm scale."""
    _matmul_acc(x, w, acc)


@kernel("down_matmul")
def down_matmul(ctx: BlockContext, x: np.ndarray, w: np.ndarray, acc: np.ndarray) -> None:
    """acc += mlp_tile @ w_down for one down_proj tile (n, k)."""
    _matmul_acc(x, w, acc)


@kernel("silu_mul")
def silu_mul(ctx: BlockContext, gate: np.ndarray, up: np.ndarray, inv_rms: np.ndarray, out: np.ndarray) -> None:
    """sg = gate*post_inv, su = up*post_inv; out = bf16(sg * 1/(1+exp(-sg)) * su) (§2.2 row 18)."""
    sg = gate * inv_rms
    su = up * inv_rms
    with np.errstate(over="ignore"):
        out[...] = bf16(sg * (F32(1.0) / (F32(1.0) + np.exp(-sg))) * su)

