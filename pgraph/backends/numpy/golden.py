"""Dense straight-line reference of N stacked Qwen3-14B decode layers (no tiling, no tasks).

Independent of the executor's kernels (it imports none of them): whole-tensor f32 `@`
matmuls, explicit bf16 rounding points as in the pypto-lib golden (reference §5):

1. normed = bf16(x * gamma_in[L]); q/k/v = normed @ W (f32).
2. q, k, v scaled by inv_rms = 1/sqrt(mean(x^2) + eps), then per-head QK-norm (q/k norm
   weights), NeoX RoPE at pos = seq_len - 1; q, k_cur, v_cur rounded to bf16 (§2.6, §7.7).
3. The paged cache of each row is gathered through block_table, position pos replaced by
   the current k/v; exact f32 softmax with scale 1/sqrt(head_dim) over all seq_len tokens;
   GQA head h reads kv head h // (heads per kv head); attn_out = bf16.
4. h1 = x + attn_out @ wo (f32, no rounding); post_inv = 1/sqrt(mean(h1^2) + eps);
   mlp_in = bf16(h1 * gamma_post); sg = (mlp_in @ Wg) * post_inv, su = (mlp_in @ Wu) * post_inv;
   mlp = bf16(sg * sigmoid(sg) * su); x = h1 + mlp @ Wd (the f32 carry to the next layer).
5. out = bf16(x) after the last layer. Pad rows (>= batch) carry zeros and skip attention.
"""

from __future__ import annotations

import attrs
import ml_dtypes
import numpy as np

from pgraph import records
from pgraph.backends.numpy.inputs import Inputs

EPS = 1e-6
F32 = np.float32
BF16 = np.dtype(ml_dtypes.bfloat16)


def _bf16(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=F32).astype(BF16)


def _f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(F32)


@records.shared_repr
@attrs.define(repr=False)
class GoldenLayer:
    """Intermediates of one reference layer (f32 unless noted; rows = BATCH_PAD)."""

    inv_rms: np.ndarray
    attn_out: np.ndarray      # bf16 [B, HIDDEN]
    h1: np.ndarray
    post_inv: np.ndarray
    mlp: np.ndarray           # bf16 [B, INTERMEDIATE]
    layer_out: np.ndarray
    k_cur: np.ndarray         # bf16 [batch, KV_HEADS, HEAD_DIM], after norm + RoPE
    v_cur: np.ndarray         # bf16 [batch, KV_HEADS, HEAD_DIM]


@records.shared_repr
@attrs.define(repr=False)
class GoldenResult:
    """Reference output: `out` bf16 [B, HIDDEN], the final f32 residual, per-layer data."""

    out: np.ndarray
    residual: np.ndarray
    layers: list[GoldenLayer]


def _rotate_half(t: np.ndarray) -> np.ndarray:
    half = t.shape[-1] // 2
    return np.concatenate([-t[..., half:], t[..., :half]], axis=-1)


def _qk_norm(t: np.ndarray, weight: np.ndarray) -> np.ndarray:
    var = np.mean(t * t, axis=-1, keepdims=True)
    return t / np.sqrt(var + EPS) * weight


def _attention(inp: Inputs, layer: int, q: np.ndarray, k: np.ndarray, v: np.ndarray, inv: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = inp.geometry
    n, heads, kvh, d = inp.batch, g.num_heads, g.num_kv_heads, g.head_dim
    group = heads // kvh
    seq = inp.arrays["seq_lens"][:n].astype(np.int64)
    pos = seq - 1
    cos = inp.arrays["rope_cos"][pos][:, None, :]
    sin = inp.arrays["rope_sin"][pos][:, None, :]
    qh = (q[:n] * inv[:n]).reshape(n, heads, d)
    kh = (k[:n] * inv[:n]).reshape(n, kvh, d)
    vh = (v[:n] * inv[:n]).reshape(n, kvh, d)
    qh = _qk_norm(qh, inp.layer("q_norm_weight", layer)[0])
    kh = _qk_norm(kh, inp.layer("k_norm_weight", layer)[0])
    q_b = _bf16(qh * cos + _rotate_half(qh) * sin)
    k_b = _bf16(kh * cos + _rotate_half(kh) * sin)
    v_b = _bf16(vh)
    k_cache = inp.layer("k_cache", layer)
    v_cache = inp.layer("v_cache", layer)
    scale = 1.0 / np.sqrt(d)
    out = np.zeros((g.batch_pad, heads * d), dtype=BF16)
    for b in range(n):
        t = np.arange(seq[b])
        slots = inp.arrays["block_table"][b, t // g.block_size].astype(np.int64) * g.block_size + t % g.block_size
        rows = slots[:, None] * kvh + np.arange(kvh)[None, :]
        keys = _f32(k_cache[rows])                      # [S, kvh, d]
        vals = _f32(v_cache[rows])
        keys[-1] = _f32(k_b[b])
        vals[-1] = _f32(v_b[b])
        keys = np.repeat(keys, group, axis=1)           # [S, heads, d]
        vals = np.repeat(vals, group, axis=1)
        scores = np.einsum("hd,shd->hs", _f32(q_b[b]), keys) * F32(scale)
        scores = scores - scores.max(axis=1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=1, keepdims=True)
        o = np.einsum("hs,shd->hd", p, vals)
        out[b] = _bf16(o.reshape(-1))
    return out, k_b, v_b


def golden_decode(inp: Inputs, keep_layers: bool = False, wide: bool = False) -> GoldenResult:
    """Run the dense reference for every layer of `inp` (Inputs from make_inputs).

    Returns the bf16 output, the final f32 residual and, with `keep_layers`, every layer's
    intermediates (GoldenLayer). Memory: one f32 copy of the largest weight at a time.
    `wide` does the seven projections in f64 (rounded back to f32): the same math with a
    different summation error, used to measure the noise floor of the comparison.
    """
    if wide:
        def mm(a: np.ndarray, w: np.ndarray) -> np.ndarray:
            return (np.asarray(a, dtype=np.float64) @ np.asarray(w).astype(np.float64)).astype(F32)
    else:
        def mm(a: np.ndarray, w: np.ndarray) -> np.ndarray:
            return a @ _f32(w)
    g = inp.geometry
    x = _f32(inp.arrays["hidden"])
    layers: list[GoldenLayer] = []
    for layer in range(g.layers):
        gamma_in = inp.layer("input_rms_weight", layer)[0]
        normed = _f32(_bf16(x * gamma_in))
        inv = 1.0 / np.sqrt(np.mean(x * x, axis=1, keepdims=True, dtype=F32) + F32(EPS))
        q = mm(normed, inp.layer("wq", layer))
        k = mm(normed, inp.layer("wk", layer))
        v = mm(normed, inp.layer("wv", layer))
        attn_out, k_b, v_b = _attention(inp, layer, q, k, v, inv)
        h1 = x + mm(_f32(attn_out), inp.layer("wo", layer))
        post_inv = 1.0 / np.sqrt(np.mean(h1 * h1, axis=1, keepdims=True, dtype=F32) + F32(EPS))
        mlp_in = _f32(_bf16(h1 * inp.layer("post_rms_weight", layer)[0]))
        sg = mm(mlp_in, inp.layer("w_gate", layer)) * post_inv
        su = mm(mlp_in, inp.layer("w_up", layer)) * post_inv
        mlp = _bf16(sg / (1.0 + np.exp(-sg)) * su)
        x = h1 + mm(_f32(mlp), inp.layer("w_down", layer))
        if keep_layers:
            layers.append(GoldenLayer(inv.astype(F32), attn_out, h1, post_inv.astype(F32), mlp, x, k_b, v_b))
    return GoldenResult(_bf16(x), x, layers)
