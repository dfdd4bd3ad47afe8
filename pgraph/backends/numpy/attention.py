"""Attention kernels: tiling metadata, QK-norm + NeoX RoPE + paged KV append, paged GQA decode.

Math: docs/upstream.md §7.8. Per live row b and kv head ki: the projections are
scaled by the deferred input inv_rms[b] (it cancels inside QK-norm apart from eps, and
survives on v); k and the ki-th group of q heads get RMS QK-norm with the layer's norm
weights and NeoX half-split RoPE at pos = seq_len - 1; k and v are appended to the paged
cache at row cache_row_offset + slot*NUM_KV_HEADS + ki, q goes to q_tnd[b, head] (bf16).
The caches arrive whole, as the real extern takes them (docs/upstream.md §8.8: the kernel adds
cache_row_offset * HEAD_DIM to the caches' base addresses), so the layer's base is applied
here, once; an access outside the layer's slab the task declares is a KernelFault.
The block table arrives flat ([BATCH_PAD * pages per sequence], §1.2).
Pad rows (seq_len 0) are not in the tiling's batch: the fused attention writes zeros to their
rows of the output. That is our model of the kernel (the harvest runs a static batch of 16, so
the reference never sees a pad row); it keeps `pgraph run --batch N` meaningful now that
attn_out_seed has an empty body.
Attention: scores over t < seq_len (the current token included) scaled by 1/sqrt(head_dim),
online softmax over 128-token pages (flash-decode: per-page partials (max, sum, P@V) in the
workspace, then merged), attn_out bf16. The FAI kernel rounds P to bf16 before P@V; that is
`P_BF16` (off by default, see its comment).

The metadata layout is ours (the real FAI tiling struct is CANN's): int32 words
  [0] MAGIC, [1] VERSION, [2] batch (live rows), [3] max_blocks_per_seq, [4] num_blocks,
  [5] block_size, [6] core count, [7] total pages, [8:8+S] kv_lengths,
  [8+S:9+2S] cumulative pages per row (S+1), [9+2S:...] page-work split per core (cores+1)
with S = METADATA_BATCH_SLOTS = 16 (paged_attention_cce.py; kMaxBatch in the tiler).
"""

from __future__ import annotations

import numpy as np

from pgraph.backends.numpy.kernels import EPS, BlockContext, bf16, f32, kernel, rows_get, rows_set
from pgraph.backends.numpy.storage import KernelFault, RowAccess

MAGIC = 0x44_4D_47_50          # "PGMD" little-endian
VERSION = 1
BATCH_SLOTS = 16               # METADATA_BATCH_SLOTS = kMaxBatch (paged_attention_cce.py)
BLOCK_SIZE = 128               # seq_tile = BLOCK_SIZE (FAI page size)
CORE_NUM = 24                  # tiler kPlanningCoreNum
Q_PER_KV = 5                   # query heads per KV head (Qwen3-14B: 40 / 8; the small config keeps it)
F32 = np.float32
#: Round P to bf16 before P@V as the FAI kernel does (§2.6). Off by default: the dense
#: reference does not model it (§5), and with it a full-size layer's output pass rate drops
#: from 99.96 % to 99.84 %, below the 1-layer tier of 99.9 % (docs/backend_numpy.md).
P_BF16 = False

_HEADER = 8
_KV = _HEADER
_CUM = _KV + BATCH_SLOTS
_SPLIT = _CUM + BATCH_SLOTS + 1
_WORDS = _SPLIT + CORE_NUM + 1


def _words(metadata: np.ndarray) -> np.ndarray:
    if metadata.dtype != np.uint8 or metadata.size < _WORDS * 4:
        raise KernelFault(f"metadata must be at least {_WORDS * 4} bytes of u8")
    return np.asarray(metadata)[:_WORDS * 4].view(np.int32)


@kernel("paged_attention_tiling_cce")
def paged_attention_tiling_cce(ctx: BlockContext, seq_lens: np.ndarray, metadata: np.ndarray,
                               max_blocks_per_seq: int, num_blocks: int) -> None:
    """Write the tiling metadata for the live rows of `seq_lens` (leading rows with seq_len > 0)."""
    seq = np.asarray(seq_lens, dtype=np.int64)
    if seq.size > BATCH_SLOTS:
        raise KernelFault(f"tiling: {seq.size} rows exceed the {BATCH_SLOTS} metadata batch slots")
    live = seq > 0
    batch = int(np.argmin(live)) if not live.all() else seq.size
    if live[batch:].any():
        raise KernelFault("tiling: live rows (seq_len > 0) must come first")
    if (seq > max_blocks_per_seq * BLOCK_SIZE).any():
        raise KernelFault(f"tiling: a seq_len exceeds max_blocks_per_seq * {BLOCK_SIZE}")
    pages = -(-seq[:batch] // BLOCK_SIZE)
    cum = np.zeros(BATCH_SLOTS + 1, dtype=np.int64)
    cum[1:batch + 1] = np.cumsum(pages)
    cum[batch + 1:] = cum[batch]
    total = int(cum[batch])
    split = (np.arange(CORE_NUM + 1, dtype=np.int64) * total) // CORE_NUM
    metadata[...] = 0
    w = metadata[:_WORDS * 4].view(np.int32)
    w[:_HEADER] = [MAGIC, VERSION, batch, max_blocks_per_seq, num_blocks, BLOCK_SIZE, CORE_NUM, total]
    w[_KV:_KV + seq.size] = seq
    w[_CUM:_CUM + BATCH_SLOTS + 1] = cum
    w[_SPLIT:_SPLIT + CORE_NUM + 1] = split


def read_metadata(metadata: np.ndarray) -> tuple[int, np.ndarray]:
    """(batch, kv_lengths[:batch]) from metadata; KernelFault when it was never written."""
    w = _words(metadata)
    if int(w[0]) != MAGIC or int(w[1]) != VERSION:
        raise KernelFault("attention read tiling metadata that pa_tiling has not written (poisoned bytes)")
    batch = int(w[2])
    if not 0 <= batch <= BATCH_SLOTS or int(w[5]) != BLOCK_SIZE:
        raise KernelFault("tiling metadata is corrupt")
    return batch, w[_KV:_KV + batch].astype(np.int64)


# ---- phase 0: QK-norm + RoPE + KV append -------------------------------------------------------------
def _rms_norm(t: np.ndarray, weight: np.ndarray) -> np.ndarray:
    mean = np.mean(t * t, axis=-1, keepdims=True, dtype=F32)
    return (t * (F32(1.0) / np.sqrt(mean + F32(EPS))) * weight).astype(F32)


def _rope(t: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """NeoX half split: lo' = lo*c[:h] - hi*s[:h], hi' = hi*c[h:] + lo*s[h:] (§2.6 step 3)."""
    h = t.shape[-1] // 2
    lo, hi = t[..., :h], t[..., h:]
    return np.concatenate([lo * cos[..., :h] - hi * sin[..., :h], hi * cos[..., h:] + lo * sin[..., h:]], axis=-1)


def rope_items(rows: np.ndarray, kv_heads: np.ndarray, q_proj: np.ndarray, k_proj: np.ndarray,
               v_proj: np.ndarray, inv_rms: np.ndarray, q_norm_w: np.ndarray, k_norm_w: np.ndarray,
               cos: np.ndarray, sin: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Phase 0 for items (row b, kv head ki): returns bf16 q [n, group, D], k [n, D], v [n, D].

    `cos`/`sin` are the table rows at each item's pos, shape [n, D]; q/k/v_proj are rows
    `rows` of the f32 accumulators; inv_rms is [n] (the item's row).
    """
    d = q_norm_w.shape[0]
    n = rows.shape[0]
    group = q_proj.shape[1] // k_proj.shape[1]
    inv = inv_rms.reshape(n, 1).astype(F32)
    kcols = kv_heads[:, None] * d + np.arange(d)[None, :]
    k = k_proj[rows[:, None], kcols] * inv
    v = v_proj[rows[:, None], kcols] * inv
    qcols = (kv_heads[:, None] * group * d + np.arange(group * d)[None, :])
    q = (q_proj[rows[:, None], qcols] * inv).reshape(n, group, d)
    k_rot = _rope(_rms_norm(k, k_norm_w), cos, sin)
    q_rot = _rope(_rms_norm(q, q_norm_w), cos[:, None, :], sin[:, None, :])
    return bf16(q_rot), bf16(k_rot), bf16(v)


@kernel("rope_qkv")
def rope_qkv(ctx: BlockContext, q_proj: np.ndarray, k_proj: np.ndarray, v_proj: np.ndarray, inv_rms: np.ndarray,
             q_norm_w: np.ndarray, k_norm_w: np.ndarray, rope_cos: np.ndarray | RowAccess,
             rope_sin: np.ndarray | RowAccess, seq_lens: np.ndarray, slot_mapping: np.ndarray,
             key_cache: np.ndarray | RowAccess, value_cache: np.ndarray | RowAccess, q_tnd: np.ndarray) -> None:
    """#762 rope_qkv block c: items g = c + block_num*it, ki = g // BATCH_PAD, b = g % BATCH_PAD.

    Pad rows (seq_len <= 0) are skipped; q goes to q_tnd rows b*NUM_HEADS + ki*group + j.
    """
    if ctx.block_idx is None:
        raise KernelFault("rope_qkv runs per block")
    batch_pad = seq_lens.shape[0]
    kvh = k_proj.shape[1] // q_norm_w.shape[0]
    group = q_proj.shape[1] // k_proj.shape[1]
    items = (kvh * batch_pad) // ctx.block_num
    for it in range(items):
        g = ctx.block_idx + ctx.block_num * it
        ki, b = divmod(g, batch_pad)
        seq = int(seq_lens[b])
        if seq <= 0:
            continue
        pos = np.array([seq - 1])
        cos = rows_get(rope_cos, pos).astype(F32)
        sin = rows_get(rope_sin, pos).astype(F32)
        q, k, v = rope_items(np.array([b]), np.array([ki]), q_proj, k_proj, v_proj, inv_rms[b], q_norm_w,
                             k_norm_w, cos, sin)
        row = int(slot_mapping[b]) * kvh + ki
        rows_set(key_cache, np.array([row]), k)
        rows_set(value_cache, np.array([row]), v)
        heads = q_tnd.shape[0] // batch_pad
        first = b * heads + ki * group
        q_tnd[first:first + group] = q[0]


# ---- paged GQA decode attention -----------------------------------------------------------------------
def paged_decode(query: np.ndarray, key_cache: np.ndarray | RowAccess, value_cache: np.ndarray | RowAccess,
                 block_table: np.ndarray, kv_len: np.ndarray, workspace: np.ndarray, kv_heads: int,
                 base: int = 0) -> np.ndarray:
    """Decode attention of `n = len(kv_len)` rows: query bf16 [n, H, D] → f32 [n, H, D].

    Cache rows are base + (page*BLOCK_SIZE + t)*kv_heads + ki with page =
    block_table[b, t // BLOCK_SIZE]; head h reads kv head h // (H / kv_heads). Page partials
    (P@V, max, sum) go to the workspace (f32 [n, H, pages, D+2]) and are merged with the
    online-softmax update m' = max(m, m_p), l = l*e^(m-m') + l_p*e^(m_p-m'),
    o = o*e^(m-m') + o_p*e^(m_p-m'); the result is o / l.
    """
    n, heads, d = query.shape
    group = heads // kv_heads
    pages = -(-kv_len // BLOCK_SIZE)
    max_pages = int(pages.max()) if n else 0
    need = n * heads * max_pages * (d + 2)
    ws = np.asarray(workspace).view(F32)
    if need > ws.size:
        raise KernelFault(f"workspace holds {ws.size} f32, the page partials need {need}")
    part = ws[:need].reshape(n, heads, max_pages, d + 2)
    q = f32(query).reshape(n, kv_heads, group, d)
    scale = F32(1.0 / np.sqrt(d))
    tok = np.arange(BLOCK_SIZE)
    for p in range(max_pages):
        live = np.flatnonzero(pages > p)
        page = block_table[live, p].astype(np.int64)
        rows = base + (page[:, None] * BLOCK_SIZE + tok[None, :])[:, :, None] * kv_heads + np.arange(kv_heads)[None, None, :]
        k = f32(rows_get(key_cache, rows)).reshape(live.size, BLOCK_SIZE, kv_heads, d)
        v = f32(rows_get(value_cache, rows)).reshape(live.size, BLOCK_SIZE, kv_heads, d)
        s = np.einsum("bkgd,btkd->bkgt", q[live], k) * scale
        valid = (p * BLOCK_SIZE + tok)[None, :] < kv_len[live][:, None]
        s = np.where(valid[:, None, None, :], s, -np.inf)
        m = s.max(axis=-1)
        e = np.exp(s - m[..., None])
        o = np.einsum("bkgt,btkd->bkgd", f32(bf16(e)) if P_BF16 else e, v)
        slot = np.empty((live.size, heads, d + 2), dtype=F32)
        slot[..., :d] = o.reshape(live.size, heads, d)
        slot[..., d] = m.reshape(live.size, heads)
        slot[..., d + 1] = e.sum(axis=-1).reshape(live.size, heads)
        part[live, :, p] = slot
    m_run = np.full((n, heads), -np.inf, dtype=F32)
    l_run = np.zeros((n, heads), dtype=F32)
    o_run = np.zeros((n, heads, d), dtype=F32)
    for p in range(max_pages):
        live = np.flatnonzero(pages > p)
        cur = part[live, :, p]
        m_new = np.maximum(m_run[live], cur[..., d])
        alpha = np.exp(m_run[live] - m_new)
        beta = np.exp(cur[..., d] - m_new)
        l_run[live] = l_run[live] * alpha + cur[..., d + 1] * beta
        o_run[live] = o_run[live] * alpha[..., None] + cur[..., :d] * beta[..., None]
        m_run[live] = m_new
    return o_run / l_run[..., None]


def _attend(query: np.ndarray, out: np.ndarray | RowAccess, key_cache: np.ndarray | RowAccess,
            value_cache: np.ndarray | RowAccess, tables: np.ndarray, workspace: np.ndarray,
            batch: int, kv_len: np.ndarray, kv_heads: int, base: int) -> None:
    """Attention of the `batch` live rows into `out` ([B, H, D] or [B, H*D]); pad rows get zeros."""
    heads, d = query.shape[1], query.shape[2]
    pad = out.shape[0]
    if batch:
        o = paged_decode(np.asarray(query[:batch]), key_cache, value_cache, tables, kv_len, workspace, kv_heads, base)
        rows_set(out, np.arange(batch), bf16(o.reshape(batch, *out.shape[1:])))
    if batch < pad:
        rows_set(out, np.arange(batch, pad), np.zeros((pad - batch, *out.shape[1:]), dtype=F32))
    del heads, d


def _tables(block_table: np.ndarray, batch_pad: int) -> np.ndarray:
    """The flat block table ([BATCH_PAD * pages per sequence]) as [BATCH_PAD, pages per sequence]."""
    flat = np.asarray(block_table).reshape(-1)
    if flat.size % batch_pad:
        raise KernelFault(f"block table of {flat.size} entries is not {batch_pad} rows of pages")
    return flat.reshape(batch_pad, -1)


@kernel("paged_attention_cce")
def paged_attention_cce(ctx: BlockContext, out: np.ndarray | RowAccess, query: np.ndarray,
                        key_cache: np.ndarray | RowAccess, value_cache: np.ndarray | RowAccess,
                        block_table: np.ndarray, workspace: np.ndarray, metadata: np.ndarray,
                        cache_row_offset: int) -> None:
    """#762 attention-only extern: q_tnd and the caches already hold the current token (rope_qkv)."""
    batch, kv_len = read_metadata(np.asarray(metadata))
    heads, d = query.shape[1], query.shape[2]
    tables = _tables(block_table, query.shape[0])
    kv_heads = _kv_heads(key_cache, tables, d, heads)
    _attend(query, out, key_cache, value_cache, tables, workspace, batch, kv_len, kv_heads, cache_row_offset)


def _kv_heads(key_cache: np.ndarray | RowAccess, tables: np.ndarray, d: int, heads: int) -> int:
    """KV heads: HEADS / Q_PER_KV (the GQA group the FAI kernel is compiled for); the whole cache
    must hold a whole number of layers of pages * BLOCK_SIZE * kv_heads rows."""
    kvh = heads // Q_PER_KV
    per_layer = tables.size * BLOCK_SIZE * kvh
    if kvh == 0 or heads % Q_PER_KV or key_cache.shape[0] % per_layer:
        raise KernelFault(f"cache of {key_cache.shape[0]} rows is not layers of {tables.size} pages x {BLOCK_SIZE} "
                          f"tokens x {kvh} kv heads")
    return kvh


@kernel("paged_attention_rope_cce")
def paged_attention_rope_cce(ctx: BlockContext, out: np.ndarray | RowAccess, query: np.ndarray,
                             key_cache: np.ndarray | RowAccess, value_cache: np.ndarray | RowAccess,
                             block_table: np.ndarray, workspace: np.ndarray, metadata: np.ndarray,
                             q_proj: np.ndarray, k_proj: np.ndarray, v_proj: np.ndarray, q_norm_w: np.ndarray,
                             k_norm_w: np.ndarray, rope_cos: np.ndarray, rope_sin: np.ndarray,
                             inv_rms: np.ndarray, slot_mapping: np.ndarray, seq_lens: np.ndarray,
                             cache_row_offset: int) -> None:
    """HEAD fa_fused (#796), fids 11 + 12: phase 0 (QK-norm, RoPE, KV append at the layer's rows,
    q_tnd), barrier, attention. Runs as one unit for the whole sync_start grid; the live rows come
    from the tiling metadata. `out` is attn_out seen as [BATCH_PAD, HEADS, HEAD_DIM]."""
    batch, kv_len = read_metadata(np.asarray(metadata))
    qn = np.asarray(q_norm_w).reshape(-1)
    kn = np.asarray(k_norm_w).reshape(-1)
    d = qn.shape[0]
    kv_heads = k_proj.shape[1] // d
    group = q_proj.shape[1] // k_proj.shape[1]
    if key_cache.shape[0] < cache_row_offset:
        raise KernelFault(f"cache_row_offset {cache_row_offset} beyond the cache's {key_cache.shape[0]} rows")
    if batch:
        rows = np.repeat(np.arange(batch), kv_heads)
        kis = np.tile(np.arange(kv_heads), batch)
        pos = np.asarray(seq_lens)[rows].astype(np.int64) - 1
        if (pos < 0).any():
            raise KernelFault("paged_attention_rope_cce: a live row has seq_len <= 0")
        cos, sin = np.asarray(rope_cos)[pos], np.asarray(rope_sin)[pos]
        q, k, v = rope_items(rows, kis, q_proj, k_proj, v_proj, np.asarray(inv_rms)[rows, 0], qn, kn, cos, sin)
        cache_rows = cache_row_offset + np.asarray(slot_mapping)[rows].astype(np.int64) * kv_heads + kis
        rows_set(key_cache, cache_rows, k)
        rows_set(value_cache, cache_rows, v)
        query[:batch] = q.reshape(batch, kv_heads * group, d)
    tables = _tables(block_table, query.shape[0])
    _attend(query, out, key_cache, value_cache, tables, workspace, batch, kv_len, kv_heads, cache_row_offset)
