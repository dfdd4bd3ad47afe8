"""Per-block NumPy kernels of the decode layer: seeds, copies, norms, split-K matmuls, SwiGLU.

A kernel is `fn(ctx, *args)` with the arguments of the real kernel, in its order (docs/upstream.md
§8.7): what the orchestration passes (mostly whole tensors), then the
scalars as ints. Like the real kernel it works out its block's part from `ctx.block_idx` and the
scalars; the executor hands it a NumPy view when the argument is exactly what the block touches,
a `GuardedTensor` when the argument is wider than the task body declares (reads outside the
declared regions see poison, writes outside them fault), and a `RowAccess` for index-addressed
regions. An `atomic_add` part is accumulated with `+=` (the f32 atomic add of the split-K
matmuls). Tile widths follow from the shapes and the split counts the real kernels compile in
(5 K slices, 10 out_proj N tiles, 17 MLP N tiles), so the scaled-down `small` config runs the
same code. Semantics and rounding points follow docs/upstream.md §7.4, §7.11, §7.13. A kernel
is registered under the name of the body it implements: an alias (`kernel v_proj = k_proj`)
runs its base's implementation. The attention kernels live in `pgraph.backends.numpy.attention`.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import numpy as np

from pgraph import records
from pgraph.backends.numpy.storage import NP_DTYPES, GuardedTensor, KernelFault, RowAccess

#: RMSNorm epsilon (pypto-lib constants.py EPS, every RMSNorm including QK-norm).
EPS = 1e-6
#: Column chunk of rms_recip / post_rms_reduce sums (decode_fwd RMSNORM_K_CHUNK = K_CHUNK = 256).
NORM_CHUNK = 256
#: Split counts compiled into the real kernels (docs/upstream.md §8.7): q/k/v_proj and out_proj block
#: or tile b takes K slice b mod 5 and N tile b div 5; x_gamma0, residual_rms_cast and dcr_xgamma
#: cover HIDDEN / 5 columns; out_proj has 10 N tiles; gate/up/silu/down use INTERMEDIATE / 17.
K_SLICES = 5
OUT_N_TILES = 10
MLP_TILES = 17
#: Rows copy_hidden / copy_out move per trip (pl.parallel(0, 16, 16)).
COPY_ROWS = 16

F32 = np.float32
BF16 = NP_DTYPES["bf16"]

Kernel = Callable[..., None]
#: What a kernel's tensor argument is: a NumPy view, or a GuardedTensor (the same indexing).
Tensor = np.ndarray | GuardedTensor
KERNELS: dict[str, Kernel] = {}


@records.value
@attrs.frozen(repr=False, eq=False)
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
def copy_hidden(ctx: BlockContext, cur: Tensor, hidden_states: Tensor, row0: int) -> None:
    """fid 1: cur[row0 : row0+16] = f32(hidden_states[row0 : row0+16]) (bf16 widened into the f32 stream)."""
    rows = slice(row0, row0 + COPY_ROWS)
    cur[rows, :] = f32(hidden_states[rows, :])


@kernel("x_gamma0")
def x_gamma0(ctx: BlockContext, normed: Tensor, cur: Tensor, input_rms_weight: Tensor) -> None:
    """fid 2, block b: normed = bf16(cur * gamma row 0) on columns [b*H/5, (b+1)*H/5) (inv_rms deferred)."""
    cols = _block_cols(ctx, normed.shape[1] // K_SLICES)
    normed[:, cols] = bf16(cur[:, cols] * input_rms_weight[0, cols])


@kernel("copy_out")
def copy_out(ctx: BlockContext, out: Tensor, cur: Tensor, row0: int) -> None:
    """fid 36: out[row0 : row0+16] = bf16(cur rows): the only bf16 rounding of the residual stream (§5.9)."""
    rows = slice(row0, row0 + COPY_ROWS)
    out[rows, :] = bf16(cur[rows, :])


# ---- seeds -----------------------------------------------------------------------------------
@kernel("attn_out_seed")
def attn_out_seed(ctx: BlockContext, attn_out: Tensor) -> None:
    """fid 3: the body is empty (no load, no store; docs/upstream.md §8.6)."""


@kernel("zero_pad_rows")
def zero_pad_rows(ctx: BlockContext, attn_out: np.ndarray | RowAccess, batch: int) -> None:
    """#762 attn_out_seed: attn_out[b, :] = 0 for pad rows b in [batch, BATCH_PAD)."""
    rows = attn_out.shape[0]
    if not 0 <= batch <= rows:
        raise KernelFault(f"zero_pad_rows: batch {batch} outside 0..{rows}")
    if batch == rows:
        return
    idx = np.arange(batch, rows)
    rows_set(attn_out, idx, np.zeros((idx.size, *attn_out.shape[1:]), dtype=F32))


@kernel("q_seed")
def q_seed(ctx: BlockContext, q_proj: Tensor) -> None:
    """fid 5: zero the f32 split-K accumulator of q_proj."""
    q_proj[...] = 0


@kernel("kv_seed")
def kv_seed(ctx: BlockContext, k_proj: Tensor, v_proj: Tensor) -> None:
    """fid 7: zero the k_proj and v_proj accumulators."""
    k_proj[...] = 0
    v_proj[...] = 0


@kernel("mlp_out_seed")
def mlp_out_seed(ctx: BlockContext, down: Tensor, gate: Tensor, up: Tensor, attn_proj: Tensor) -> None:
    """fid 8: zero every remaining f32 accumulator (down, gate, up, attn_proj)."""
    for a in (down, gate, up, attn_proj):
        a[...] = 0


# ---- norms -----------------------------------------------------------------------------------
@kernel("rms_recip")
def rms_recip(ctx: BlockContext, cur: Tensor, inv_rms: Tensor) -> None:
    """fid 4: inv_rms[b] = 1/sqrt(sum_k x[b,k]^2 / HIDDEN + eps), summed in 256-column chunks."""
    inv_rms[:, 0] = _recip_rms(np.asarray(cur))


@kernel("residual_rms_cast")
def residual_rms_cast(ctx: BlockContext, mlp_norm_in: Tensor, post_norm_partial: Tensor, attn_proj: Tensor,
                      cur: Tensor, post_rms_weight: Tensor, k_base: int, layer: int) -> None:
    """fids 15..19: on columns [k_base, k_base + H/5): h1 = attn_proj + cur (f32, post_norm_partial);
    mlp_norm_in = bf16(h1 * gamma_post[layer])."""
    cols = slice(k_base, k_base + mlp_norm_in.shape[1] // K_SLICES)
    h = attn_proj[:, cols] + cur[:, cols]
    post_norm_partial[:, cols] = h
    mlp_norm_in[:, cols] = bf16(h * post_rms_weight[layer, cols])


@kernel("post_rms_reduce")
def post_rms_reduce(ctx: BlockContext, attn_proj: Tensor, cur: Tensor, inv_rms_tile: Tensor) -> None:
    """fid 20: post_inv[b] = 1/sqrt(mean_k (attn_proj + cur)[b,k]^2 + eps): the deferred post-norm scale."""
    inv_rms_tile[:, 0] = _recip_rms(np.asarray(attn_proj) + np.asarray(cur))


@kernel("dcr_xgamma")
def dcr_xgamma(ctx: BlockContext, down: Tensor, post_norm_partial: Tensor, next_hidden: Tensor,
               input_rms_weight: Tensor, next_normed: Tensor, next_gamma_idx: int) -> None:
    """fid 35, block b, columns [b*H/5, (b+1)*H/5): next_hidden = down + h1 (the f32 layer output);
    next_normed = bf16(next_hidden * gamma_in[next_gamma_idx])."""
    cols = _block_cols(ctx, next_hidden.shape[1] // K_SLICES)
    o = down[:, cols] + post_norm_partial[:, cols]
    next_hidden[:, cols] = o
    next_normed[:, cols] = bf16(o * input_rms_weight[next_gamma_idx, cols])


# ---- split-K matmuls (f32 atomic add into a seeded accumulator) -----------------------------------
def _matmul_acc(acc: Tensor, cols: slice, x: np.ndarray, w: np.ndarray) -> None:
    acc[:, cols] += f32(x) @ f32(w)


@kernel("q_proj")
def q_proj(ctx: BlockContext, acc: Tensor, normed: Tensor, w: Tensor, layer_hidden_base: int) -> None:
    """fid 6 (and fids 9, 10: k_proj, v_proj), block b: k0 = (b mod 5) * K, n0 = (b div 5) * N;
    acc[:, n0:n0+N] += normed[:, k0:k0+K] @ w[layer_hidden_base + k0 : +K, n0 : n0+N]."""
    if ctx.block_idx is None:
        raise KernelFault("q/k/v_proj runs per block")
    k_width = normed.shape[1] // K_SLICES
    n_width = acc.shape[1] // (ctx.block_num // K_SLICES)
    k0 = (ctx.block_idx % K_SLICES) * k_width
    n0 = (ctx.block_idx // K_SLICES) * n_width
    rows = slice(layer_hidden_base + k0, layer_hidden_base + k0 + k_width)
    _matmul_acc(acc, slice(n0, n0 + n_width), normed[:, k0:k0 + k_width], w[rows, n0:n0 + n_width])


KERNELS["k_proj"] = q_proj


def _out_tile(attn_out: Tensor, wo: Tensor, attn_proj: Tensor, k_op: int, base: int, n_op: int) -> None:
    k_width = attn_out.shape[1] // K_SLICES
    n_width = attn_proj.shape[1] // OUT_N_TILES
    _matmul_acc(attn_proj, slice(n_op, n_op + n_width), attn_out[:, k_op:k_op + k_width],
                wo[base + k_op:base + k_op + k_width, n_op:n_op + n_width])


@kernel("out_proj")
def out_proj(ctx: BlockContext, attn_out: Tensor, wo: Tensor, attn_proj: Tensor, k_op: int, layer_hidden_base: int,
             n_op: int) -> None:
    """fid 13: one deferred out_proj tile: attn_proj[:, n_op:+N] += attn_out[:, k_op:+K] @ wo[base + k_op:, n_op:]."""
    _out_tile(attn_out, wo, attn_proj, k_op, layer_hidden_base, n_op)


@kernel("out_proj_0")
def out_proj_0(ctx: BlockContext, attn_out: Tensor, wo: Tensor, attn_proj: Tensor, first_tile: int,
               layer_hidden_base: int) -> None:
    """fid 14, block b: tile t = first_tile + b, n = (t div 5) * N, k = (t mod 5) * K; math as fid 13."""
    if ctx.block_idx is None:
        raise KernelFault("out_proj_0 runs per block")
    t = first_tile + ctx.block_idx
    k_width = attn_out.shape[1] // K_SLICES
    n_width = attn_proj.shape[1] // OUT_N_TILES
    _out_tile(attn_out, wo, attn_proj, (t % K_SLICES) * k_width, layer_hidden_base, (t // K_SLICES) * n_width)


def _mlp_tile(x: Tensor, w: Tensor, acc: Tensor, k0: int, base: int, n0: int) -> None:
    k_width = x.shape[1] // K_SLICES
    n_width = acc.shape[1] // MLP_TILES
    _matmul_acc(acc, slice(n0, n0 + n_width), x[:, k0:k0 + k_width], w[base + k0:base + k0 + k_width, n0:n0 + n_width])


@kernel("gate_proj")
def gate_proj(ctx: BlockContext, mlp_norm_in: Tensor, w: Tensor, acc: Tensor, k0: int, layer_hidden_base: int) -> None:
    """fids 21..30, block b: n0 = b * N; acc[:, n0:+N] += mlp_norm_in[:, k0:+K] @ w[base + k0:, n0:]."""
    if ctx.block_idx is None:
        raise KernelFault("gate/up SPMD runs per block")
    _mlp_tile(mlp_norm_in, w, acc, k0, layer_hidden_base, ctx.block_idx * (acc.shape[1] // MLP_TILES))


@kernel("gate_proj_4")
def gate_proj_4(ctx: BlockContext, mlp_norm_in: Tensor, w: Tensor, acc: Tensor, k0: int, layer_hidden_base: int,
                n0: int) -> None:
    """fids 31, 32: one late 16 x N gate/up tile at (k0, n0)."""
    _mlp_tile(mlp_norm_in, w, acc, k0, layer_hidden_base, n0)


@kernel("down_proj")
def down_proj(ctx: BlockContext, mlp_tile: Tensor, w_down: Tensor, down_acc: Tensor, k0: int, layer_inter_base: int,
              n0: int) -> None:
    """fid 34: down_acc[:, n0:+N] += mlp_tile[:, k0:+K] @ w_down[layer_inter_base + k0:, n0:], K = N = I/17."""
    width = mlp_tile.shape[1] // MLP_TILES
    _matmul_acc(down_acc, slice(n0, n0 + width), mlp_tile[:, k0:k0 + width],
                w_down[layer_inter_base + k0:layer_inter_base + k0 + width, n0:n0 + width])


@kernel("silu")
def silu(ctx: BlockContext, inv_rms_tile: Tensor, mlp_tile: Tensor, gate: Tensor, up: Tensor, n0: int) -> None:
    """fid 33, columns [n0, n0 + I/17): sg = gate*post_inv, su = up*post_inv;
    mlp_tile = bf16(sg * 1/(1+exp(-sg)) * su) (§2.2 row 18)."""
    cols = slice(n0, n0 + mlp_tile.shape[1] // MLP_TILES)
    inv = np.asarray(inv_rms_tile)
    sg = gate[:, cols] * inv
    su = up[:, cols] * inv
    with np.errstate(over="ignore"):
        mlp_tile[:, cols] = bf16(sg * (F32(1.0) / (F32(1.0) + np.exp(-sg))) * su)


def _block_cols(ctx: BlockContext, width: int) -> slice:
    if ctx.block_idx is None:
        raise KernelFault("this kernel runs per block")
    return slice(ctx.block_idx * width, (ctx.block_idx + 1) * width)
