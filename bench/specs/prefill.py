"""Generator of prefill-shaped Qwen3-14B specs: the source of bench/specs/prefill_*.pgl.

The optimisation history (docs/upstream.md §10.2, "Task count is a first-order cost", #662)
reports a 40-layer prefill forward, batch 1 x 128 tokens, that emitted 351,050 tasks, and the
same forward regrouped into phases (RoPE/KV-cache, attention, projection, RMSNorm, MLP,
residual) with fewer, larger tasks: 31,706. It publishes the totals only; this generator
writes a spec of each shape from Qwen3-14B's dimensions and a tiling (`Config`), and
`expected_tasks` counts what the spec submits by formula, independently of pgraph.

One layer, per row tile t of TM tokens (R = 128 / TM tiles), in a manual scope:

- dequant: the layer's int8 weights into bf16 scratch, one task per projection tile (n, k);
- norm: the input RMSNorm of the rows; seed: zero-fills of the split-K f32 accumulators;
- projection: q/k/v as split-K tiles (n, k) with atomic adds into the seeded accumulators;
- rope: QK-norm + RoPE of the queries and keys, and the KV-cache append (`fine`: q per head,
  k/v per KV head; `phased`: one task per KV head for its 5 query heads and its K/V);
- attention: causal, over the KV-cache rows of every earlier row tile (per head or per KV head);
- projection: the output projection, split-K atomic adds over head chunks;
- residual + post-attention RMSNorm; MLP: gate/up split-K, SiLU, down split-K; residual.

Outside the layer loop: the RoPE tables and the embedding gather before, the final RMSNorm,
the LM head (vocab chunks) and greedy sampling after. Usage:

    python3 bench/specs/prefill.py            # rewrites bench/specs/prefill_351k.pgl and prefill_31k.pgl
    python3 bench/specs/prefill.py --check    # exit 1 if a committed file differs from the generator
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Qwen3-14B (pypto-lib constants.py QWEN3_14B; docs/upstream.md §7.2)
HIDDEN = 5120
NUM_HEADS = 40
NUM_KV_HEADS = 8
HEAD_DIM = 128
KV_HIDDEN = NUM_KV_HEADS * HEAD_DIM
INTERMEDIATE = 17408
REAL_VOCAB = 151936
TOKENS = 128            # batch 1 x 128 tokens (#662)
Q_PER_KV = NUM_HEADS // NUM_KV_HEADS


@dataclasses.dataclass(frozen=True)
class Config:
    """A prefill tiling. Widths are columns, `*_k` split-K counts; `fused` is the phased layer.

    fused=False: q RoPE per head, K/V append per KV head, attention per head (the fine layer);
    fused=True: one RoPE/KV-cache task and one attention task per KV head (its 5 query heads
    batched in one tile, as the history's attention rewrite did).
    """

    name: str
    tm: int                 # tokens per row tile
    qkv_tn: int             # q/k/v projection N tile
    qkv_k: int              # q/k/v split-K slices
    out_tn: int             # output projection N tile
    out_k: int              # output projection split-K slices
    mlp_tn: int             # gate/up N tile (= SiLU tile)
    mlp_k: int              # gate/up split-K slices
    down_tn: int            # down projection N tile
    down_k: int             # down projection split-K slices
    vocab_chunk: int        # LM head vocab columns per task
    fused: bool
    layers: int = 40
    tokens: int = TOKENS

    @property
    def rows(self) -> int:
        """R: row tiles."""
        return self.tokens // self.tm

    @property
    def vocab_chunks(self) -> int:
        """LM head tasks per row tile (the vocab padded up to whole chunks)."""
        return math.ceil(REAL_VOCAB / self.vocab_chunk)


#: Before #662: 16-token row tiles, per-head RoPE and attention, fine split-K tiles.
FINE = Config("prefill_351k", tm=16, qkv_tn=512, qkv_k=4, out_tn=512, out_k=4, mlp_tn=512, mlp_k=10,
              down_tn=512, down_k=8, vocab_chunk=960, fused=False)
#: #662: two 64-token row tiles, phases with one task per KV head, larger tiles.
PHASED = Config("prefill_31k", tm=64, qkv_tn=1024, qkv_k=5, out_tn=1024, out_k=5, mlp_tn=1024, mlp_k=4,
                down_tn=1024, down_k=8, vocab_chunk=3072, fused=True)
CONFIGS = {c.name: c for c in (FINE, PHASED)}


def check_config(c: Config) -> None:
    """ValueError unless every tile divides its dimension."""
    for what, dim, part in (("tokens", c.tokens, c.tm), ("q/k/v N", HIDDEN, c.qkv_tn), ("k/v N", KV_HIDDEN, c.qkv_tn),
                            ("q/k/v K", HIDDEN, c.qkv_k), ("out N", HIDDEN, c.out_tn), ("out K", HIDDEN, c.out_k),
                            ("gate/up N", INTERMEDIATE, c.mlp_tn), ("gate/up K", HIDDEN, c.mlp_k),
                            ("down N", HIDDEN, c.down_tn), ("down K", INTERMEDIATE, c.down_k)):
        if part <= 0 or dim % part:
            raise ValueError(f"{c.name}: {what} tile {part} does not divide {dim}")
    if c.qkv_tn % HEAD_DIM:
        raise ValueError(f"{c.name}: the q/k/v N tile must hold whole heads")


def projection_tiles(c: Config) -> int:
    """(n, k) tiles of the seven projections of one row tile (= the dequant tiles of a layer)."""
    q = HIDDEN // c.qkv_tn * c.qkv_k
    kv = 2 * (KV_HIDDEN // c.qkv_tn) * c.qkv_k
    out = HIDDEN // c.out_tn * c.out_k
    gate_up = 2 * (INTERMEDIATE // c.mlp_tn) * c.mlp_k
    down = HIDDEN // c.down_tn * c.down_k
    return q + kv + out + gate_up + down


def expected_tasks(c: Config) -> dict[str, int]:
    """Submitted tasks by formula (no dummies; alloc tasks are not tasks): per layer, entry, total."""
    per_row = projection_tiles(c)
    per_row += 1 + 4 + 1 + 1 + 1                       # rms, 4 seeds, residual1, post_norm, residual2
    per_row += INTERMEDIATE // c.mlp_tn                # silu
    per_row += 2 * NUM_KV_HEADS if c.fused else NUM_HEADS + NUM_KV_HEADS + NUM_HEADS  # rope/kv, attention
    layer = c.rows * per_row + projection_tiles(c)     # + dequant
    entry = 2 + c.rows * (1 + 1 + c.vocab_chunks)      # rope tables, sample; embed, final norm, LM head
    return {"per_layer": layer, "entry": entry, "total": c.layers * layer + entry}


def cover(lo: str, width: str, tile: str) -> str:
    """A dep selection of the `tile`-wide tiles covering columns [lo, lo + width)."""
    return f"({lo}) / {tile} .. (({lo}) + {width} - 1) / {tile} + 1"


def generate(c: Config) -> str:
    """The .pgl text of one config."""
    check_config(c)
    n = expected_tasks(c)
    rows = "t*TM +: TM"
    group = "g*GROUP_COLS +: GROUP_COLS"
    out: list[str] = []
    w = out.append
    w(f"# {c.name}: Qwen3-14B prefill forward, {c.layers} layers, batch 1 x {c.tokens} tokens.")
    w("# GENERATED by bench/specs/prefill.py from its Config; do not edit (edit the generator).")
    w(f"# Submits {n['total']:,} tasks: {c.layers} x {n['per_layer']:,} per layer + {n['entry']:,} outside the layer loop")
    w("# (summary tasks + dummy_tasks of `pgraph plan --format json`; alloc tasks are not counted).")
    w("")
    w("# ---- model --------------------------------------------------------------------------------")
    for name, value in (("NUM_LAYERS", c.layers), ("TOKENS", c.tokens), ("HIDDEN", HIDDEN), ("NUM_HEADS", NUM_HEADS),
                        ("NUM_KV_HEADS", NUM_KV_HEADS), ("HEAD_DIM", HEAD_DIM), ("INTERMEDIATE", INTERMEDIATE),
                        ("REAL_VOCAB", REAL_VOCAB)):
        w(f"const {name:<13} = {value}")
    w("const KV_HIDDEN     = NUM_KV_HEADS * HEAD_DIM")
    w("const Q_PER_KV      = NUM_HEADS / NUM_KV_HEADS")
    w("const GROUP_COLS    = Q_PER_KV * HEAD_DIM           # the query columns of one KV head")
    w("")
    w("# ---- tiling -------------------------------------------------------------------------------")
    for name, value, note in (
            ("TM", c.tm, "tokens per row tile"), ("QKV_TN", c.qkv_tn, "q/k/v N tile"), ("QKV_K", c.qkv_k, "q/k/v split-K"),
            ("OUT_TN", c.out_tn, "output projection N tile"), ("OUT_K", c.out_k, "output projection split-K"),
            ("MLP_TN", c.mlp_tn, "gate/up N tile = SiLU tile"), ("MLP_K", c.mlp_k, "gate/up split-K"),
            ("DOWN_TN", c.down_tn, "down N tile"), ("DOWN_K", c.down_k, "down split-K"),
            ("VOCAB_CHUNK", c.vocab_chunk, "LM head columns per task")):
        w(f"const {name:<12} = {value:<6} # {note}")
    w("const R           = TOKENS / TM")
    w("const Q_ON        = HIDDEN / QKV_TN")
    w("const KV_ON       = KV_HIDDEN / QKV_TN")
    w("const QKV_KC      = HIDDEN / QKV_K")
    w("const OUT_ON      = HIDDEN / OUT_TN")
    w("const OUT_KC      = HIDDEN / OUT_K")
    w("const MLP_ON      = INTERMEDIATE / MLP_TN")
    w("const MLP_KC      = HIDDEN / MLP_K")
    w("const DOWN_ON     = HIDDEN / DOWN_TN")
    w("const DOWN_KC     = INTERMEDIATE / DOWN_K")
    w("const VOCAB_TILES = ceildiv(REAL_VOCAB, VOCAB_CHUNK)")
    w("const VOCAB       = VOCAB_TILES * VOCAB_CHUNK        # padded to whole chunks")
    w("assert R * TM == TOKENS and Q_ON * QKV_TN == HIDDEN and KV_ON * QKV_TN == KV_HIDDEN")
    w("assert QKV_TN % HEAD_DIM == 0, \"q/k/v N tiles hold whole heads\"")
    w("assert OUT_ON * OUT_TN == HIDDEN and MLP_ON * MLP_TN == INTERMEDIATE and DOWN_ON * DOWN_TN == HIDDEN")
    w("assert QKV_K * QKV_KC == HIDDEN and OUT_K * OUT_KC == HIDDEN and MLP_K * MLP_KC == HIDDEN")
    w("assert DOWN_K * DOWN_KC == INTERMEDIATE")
    w("")
    w("# The history's 40-layer prefill passed with manual rings at task window 262144 and a 4 GiB heap;")
    w("# the per-layer dequantised weights (~660 MB) live on ring 2 beside the previous layer's.")
    w("target a2a3 {")
    w("  task_window = 262144")
    w("  heap        = 4 * 1024 * 1024 * 1024")
    w("  dep_pool    = 262144")
    w("}")
    w("")
    w("# ---- orchestration arguments --------------------------------------------------------------")
    for line in (
            "tensor token_ids   : i32[TOKENS]                            external",
            "tensor positions   : i32[TOKENS]                            external",
            "tensor embed_table : bf16[REAL_VOCAB, HIDDEN]               external",
            "tensor wq_i8       : i8[NUM_LAYERS * HIDDEN, HIDDEN]        external   # int8 weights, rows L*HIDDEN + k",
            "tensor wk_i8       : i8[NUM_LAYERS * HIDDEN, KV_HIDDEN]     external",
            "tensor wv_i8       : i8[NUM_LAYERS * HIDDEN, KV_HIDDEN]     external",
            "tensor wo_i8       : i8[NUM_LAYERS * HIDDEN, HIDDEN]        external",
            "tensor wg_i8       : i8[NUM_LAYERS * HIDDEN, INTERMEDIATE]  external",
            "tensor wu_i8       : i8[NUM_LAYERS * HIDDEN, INTERMEDIATE]  external",
            "tensor wd_i8       : i8[NUM_LAYERS * INTERMEDIATE, HIDDEN]  external",
            "tensor w_scale     : f32[NUM_LAYERS, 7]                     external   # per-matrix dequant scales",
            "tensor gamma_in    : f32[NUM_LAYERS, HIDDEN]                external",
            "tensor gamma_post  : f32[NUM_LAYERS, HIDDEN]                external",
            "tensor q_norm_w    : f32[NUM_LAYERS, HEAD_DIM]              external",
            "tensor k_norm_w    : f32[NUM_LAYERS, HEAD_DIM]              external",
            "tensor k_cache     : bf16[NUM_LAYERS * TOKENS, KV_HIDDEN]   external   # rows L*TOKENS + token",
            "tensor v_cache     : bf16[NUM_LAYERS * TOKENS, KV_HIDDEN]   external",
            "tensor gamma_final : f32[HIDDEN]                            external",
            "tensor lm_head_w   : bf16[HIDDEN, VOCAB]                    external",
            "tensor logits      : f32[TOKENS, VOCAB]                     external",
            "tensor next_ids    : i32[TOKENS]                            external"):
        w(line)
    w("")
    w("# ---- kernels ------------------------------------------------------------------------------")
    kernels = [
        "kernel rope_tables aiv (pos : in i32[TOKENS], cos : out f32[TOKENS, HEAD_DIM], sin : out f32[TOKENS, HEAD_DIM])",
        "kernel embed_rows aiv (ids : in i32[TM], table : in bf16, x : out f32[TM, HIDDEN])",
        "kernel dequant aiv (src : in i8, scale : in f32[1], dst : out bf16)",
        "kernel rms_norm aiv (x : in f32[TM, HIDDEN], gamma : in f32[HIDDEN], y : out bf16[TM, HIDDEN])",
        "kernel zero_qkv aiv (q : out f32[TM, HIDDEN], k : out f32[TM, KV_HIDDEN], v : out f32[TM, KV_HIDDEN])",
        "kernel zero_rows aiv (acc : out f32[TM, HIDDEN])",
        "kernel zero_mlp aiv (gate : out f32[TM, INTERMEDIATE], up : out f32[TM, INTERMEDIATE])",
        "kernel matmul aic (x : in bf16, w : in bf16, acc : atomic_add f32)",
    ]
    if c.fused:
        kernels.append("kernel rope_kv aiv (q : in f32[TM, GROUP_COLS], k : in f32[TM, HEAD_DIM], v : in f32[TM, HEAD_DIM],\n"
                       "                    qn : in f32[HEAD_DIM], kn : in f32[HEAD_DIM], cos : in f32[TM, HEAD_DIM],\n"
                       "                    sin : in f32[TM, HEAD_DIM], q_rot : out bf16[TM, GROUP_COLS],\n"
                       "                    k_out : out bf16[TM, HEAD_DIM], v_out : out bf16[TM, HEAD_DIM])")
        kernels.append("kernel attention mix (q : in bf16[TM, GROUP_COLS], k : in bf16, v : in bf16, o : out bf16[TM, GROUP_COLS])")
    else:
        kernels.append("kernel rope_q aiv (q : in f32[TM, HEAD_DIM], qn : in f32[HEAD_DIM], cos : in f32[TM, HEAD_DIM],\n"
                       "                   sin : in f32[TM, HEAD_DIM], q_rot : out bf16[TM, HEAD_DIM])")
        kernels.append("kernel kv_append aiv (k : in f32[TM, HEAD_DIM], v : in f32[TM, HEAD_DIM], kn : in f32[HEAD_DIM],\n"
                       "                      cos : in f32[TM, HEAD_DIM], sin : in f32[TM, HEAD_DIM],\n"
                       "                      k_out : out bf16[TM, HEAD_DIM], v_out : out bf16[TM, HEAD_DIM])")
        kernels.append("kernel attention mix (q : in bf16[TM, HEAD_DIM], k : in bf16, v : in bf16, o : out bf16[TM, HEAD_DIM])")
    kernels += [
        "kernel residual_add aiv (a : in f32[TM, HIDDEN], b : in f32[TM, HIDDEN], y : out f32[TM, HIDDEN])",
        "kernel silu_mul aiv (gate : in f32[TM, MLP_TN], up : in f32[TM, MLP_TN], y : out bf16[TM, MLP_TN])",
        "kernel lm_head aic (x : in bf16[TM, HIDDEN], w : in bf16[HIDDEN, VOCAB_CHUNK], y : out f32[TM, VOCAB_CHUNK])",
        "kernel sample aiv (logits : in f32[TOKENS, VOCAB], ids : out i32[TOKENS])",
    ]
    out.extend(kernels)
    w("")
    w("entry prefill_fwd {")
    w("  tensor x0        : f32[TOKENS, HIDDEN]            # embedded rows: `cur` before layer 0")
    w("  tensor rope_cos  : f32[TOKENS, HEAD_DIM]")
    w("  tensor rope_sin  : f32[TOKENS, HEAD_DIM]")
    w("  tensor x_final   : bf16[TOKENS, HIDDEN]")
    w("  taskids rope_setup                                # waited on inside the layers")
    w("  manual scope {")
    w("    phase setup {")
    w("      at rope_setup early { call rope_tables(positions, rope_cos, rope_sin) }")
    w(f"      parallel embed[t in 0..R] early {{ call embed_rows(token_ids[{rows}], embed_table indirect(token_ids), "
      f"x0[{rows}, :]) }}")
    w("    }")
    w("  }")
    w("  for L in 0..NUM_LAYERS")
    w("      carry prev = embed then residual2,            # every row tile of the previous layer")
    w("            cur  = x0    then h_out                 # the f32 residual stream")
    w("  {")
    w("    # per-layer buffers (ring 2): the dequantised weights and the activations")
    for line in ("tensor wq       : bf16[HIDDEN, HIDDEN]", "tensor wk       : bf16[HIDDEN, KV_HIDDEN]",
                 "tensor wv       : bf16[HIDDEN, KV_HIDDEN]", "tensor wo       : bf16[HIDDEN, HIDDEN]",
                 "tensor wg       : bf16[HIDDEN, INTERMEDIATE]", "tensor wu       : bf16[HIDDEN, INTERMEDIATE]",
                 "tensor wd       : bf16[INTERMEDIATE, HIDDEN]",
                 "tensor normed   : bf16[TOKENS, HIDDEN]", "tensor q_acc    : f32[TOKENS, HIDDEN]",
                 "tensor k_acc    : f32[TOKENS, KV_HIDDEN]", "tensor v_acc    : f32[TOKENS, KV_HIDDEN]",
                 "tensor q_rot    : bf16[TOKENS, HIDDEN]", "tensor attn_out : bf16[TOKENS, HIDDEN]",
                 "tensor o_acc    : f32[TOKENS, HIDDEN]", "tensor h1       : f32[TOKENS, HIDDEN]",
                 "tensor mlp_in   : bf16[TOKENS, HIDDEN]", "tensor gate_acc : f32[TOKENS, INTERMEDIATE]",
                 "tensor up_acc   : f32[TOKENS, INTERMEDIATE]", "tensor act      : bf16[TOKENS, INTERMEDIATE]",
                 "tensor down_acc : f32[TOKENS, HIDDEN]", "tensor h_out    : f32[TOKENS, HIDDEN]"):
        w("    " + line)
    w("    taskids residual2                               # the layer output: the carry and the final norm")
    w("    manual scope ring 3 {")
    w("      phase dequant {                               # int8 -> bf16, one task per projection tile")
    for name, src, dst, n_tiles, tn, kc, scale, rows_of in (
            ("deq_q", "wq_i8", "wq", "Q_ON", "QKV_TN", "QKV_KC", 0, "HIDDEN"),
            ("deq_k", "wk_i8", "wk", "KV_ON", "QKV_TN", "QKV_KC", 1, "HIDDEN"),
            ("deq_v", "wv_i8", "wv", "KV_ON", "QKV_TN", "QKV_KC", 2, "HIDDEN"),
            ("deq_o", "wo_i8", "wo", "OUT_ON", "OUT_TN", "OUT_KC", 3, "HIDDEN"),
            ("deq_g", "wg_i8", "wg", "MLP_ON", "MLP_TN", "MLP_KC", 4, "HIDDEN"),
            ("deq_u", "wu_i8", "wu", "MLP_ON", "MLP_TN", "MLP_KC", 5, "HIDDEN"),
            ("deq_d", "wd_i8", "wd", "DOWN_ON", "DOWN_TN", "DOWN_KC", 6, "INTERMEDIATE")):
        k_tiles = {"QKV_KC": "QKV_K", "OUT_KC": "OUT_K", "MLP_KC": "MLP_K", "DOWN_KC": "DOWN_K"}[kc]
        w(f"        parallel {name}[n in 0..{n_tiles}, k in 0..{k_tiles}] early {{")
        w(f"          call dequant({src}[L*{rows_of} + k*{kc} +: {kc}, n*{tn} +: {tn}], w_scale[L, {scale}:{scale + 1}],")
        w(f"                       {dst}[k*{kc} +: {kc}, n*{tn} +: {tn}])")
        w("        }")
    w("      }")
    w("      phase norm {")
    w(f"        parallel rms[t in 0..R] early deps(prev) {{ call rms_norm(cur[{rows}, :], gamma_in[L, :], normed[{rows}, :]) }}")
    w("      }")
    w("      phase seed {")
    w(f"        parallel seed_qkv[t in 0..R] early {{ call zero_qkv(q_acc[{rows}, :], k_acc[{rows}, :], v_acc[{rows}, :]) }}")
    w(f"        parallel seed_o[t in 0..R] early {{ call zero_rows(o_acc[{rows}, :]) }}")
    w(f"        parallel seed_mlp[t in 0..R] early {{ call zero_mlp(gate_acc[{rows}, :], up_acc[{rows}, :]) }}")
    w(f"        parallel seed_down[t in 0..R] early {{ call zero_rows(down_acc[{rows}, :]) }}")
    w("      }")
    w("      phase projection {")
    for name, wname, acc, n_tiles, deq in (("q_proj", "wq", "q_acc", "Q_ON", "deq_q"), ("k_proj", "wk", "k_acc", "KV_ON", "deq_k"),
                                           ("v_proj", "wv", "v_acc", "KV_ON", "deq_v")):
        w(f"        parallel {name}[t in 0..R, n in 0..{n_tiles}, k in 0..QKV_K] early deps(rms[t], seed_qkv[t], {deq}[n, k]) {{")
        w(f"          call matmul(normed[{rows}, k*QKV_KC +: QKV_KC], {wname}[k*QKV_KC +: QKV_KC, n*QKV_TN +: QKV_TN],")
        w(f"                      {acc}[{rows}, n*QKV_TN +: QKV_TN])")
        w("        }")
    w("      }")
    w("      phase rope {")
    if c.fused:
        w("        parallel rope_kv[t in 0..R, g in 0..NUM_KV_HEADS] early")
        w(f"            deps(q_proj[t, {cover('g*GROUP_COLS', 'GROUP_COLS', 'QKV_TN')}, *], k_proj[t, g*HEAD_DIM / QKV_TN, *],")
        w("                 v_proj[t, g*HEAD_DIM / QKV_TN, *], rope_setup) {")
        w(f"          call rope_kv(q_acc[{rows}, {group}], k_acc[{rows}, g*HEAD_DIM +: HEAD_DIM],")
        w(f"                       v_acc[{rows}, g*HEAD_DIM +: HEAD_DIM], q_norm_w[L, :], k_norm_w[L, :], rope_cos[{rows}, :],")
        w(f"                       rope_sin[{rows}, :], q_rot[{rows}, {group}],")
        w("                       k_cache[L*TOKENS + t*TM +: TM, g*HEAD_DIM +: HEAD_DIM],")
        w("                       v_cache[L*TOKENS + t*TM +: TM, g*HEAD_DIM +: HEAD_DIM])")
        w("        }")
    else:
        w("        parallel rope_q[t in 0..R, h in 0..NUM_HEADS] early deps(q_proj[t, h*HEAD_DIM / QKV_TN, *], rope_setup) {")
        w(f"          call rope_q(q_acc[{rows}, h*HEAD_DIM +: HEAD_DIM], q_norm_w[L, :], rope_cos[{rows}, :],")
        w(f"                      rope_sin[{rows}, :], q_rot[{rows}, h*HEAD_DIM +: HEAD_DIM])")
        w("        }")
        w("        parallel kv_append[t in 0..R, g in 0..NUM_KV_HEADS] early")
        w("            deps(k_proj[t, g*HEAD_DIM / QKV_TN, *], v_proj[t, g*HEAD_DIM / QKV_TN, *], rope_setup) {")
        w(f"          call kv_append(k_acc[{rows}, g*HEAD_DIM +: HEAD_DIM], v_acc[{rows}, g*HEAD_DIM +: HEAD_DIM],")
        w(f"                         k_norm_w[L, :], rope_cos[{rows}, :], rope_sin[{rows}, :],")
        w("                         k_cache[L*TOKENS + t*TM +: TM, g*HEAD_DIM +: HEAD_DIM],")
        w("                         v_cache[L*TOKENS + t*TM +: TM, g*HEAD_DIM +: HEAD_DIM])")
        w("        }")
    w("      }")
    w("      phase attention {                             # causal: the cache rows of this and every earlier tile")
    if c.fused:
        w("        parallel attn[t in 0..R, g in 0..NUM_KV_HEADS] early deps(rope_kv[0..t+1, g]) {")
        w(f"          call attention(q_rot[{rows}, {group}], k_cache[L*TOKENS +: (t+1)*TM, g*HEAD_DIM +: HEAD_DIM],")
        w(f"                         v_cache[L*TOKENS +: (t+1)*TM, g*HEAD_DIM +: HEAD_DIM], attn_out[{rows}, {group}])")
        w("        }")
        attn_cover = cover("k*OUT_KC", "OUT_KC", "GROUP_COLS")
    else:
        w("        parallel attn[t in 0..R, h in 0..NUM_HEADS] early deps(rope_q[t, h], kv_append[0..t+1, h / Q_PER_KV]) {")
        w(f"          call attention(q_rot[{rows}, h*HEAD_DIM +: HEAD_DIM],")
        w("                         k_cache[L*TOKENS +: (t+1)*TM, (h / Q_PER_KV)*HEAD_DIM +: HEAD_DIM],")
        w("                         v_cache[L*TOKENS +: (t+1)*TM, (h / Q_PER_KV)*HEAD_DIM +: HEAD_DIM],")
        w(f"                         attn_out[{rows}, h*HEAD_DIM +: HEAD_DIM])")
        w("        }")
        attn_cover = cover("k*OUT_KC", "OUT_KC", "HEAD_DIM")
    w("      }")
    w("      phase projection {")
    w(f"        parallel o_proj[t in 0..R, n in 0..OUT_ON, k in 0..OUT_K] early deps(attn[t, {attn_cover}], seed_o[t],")
    w("                                                                           deq_o[n, k]) {")
    w(f"          call matmul(attn_out[{rows}, k*OUT_KC +: OUT_KC], wo[k*OUT_KC +: OUT_KC, n*OUT_TN +: OUT_TN],")
    w(f"                      o_acc[{rows}, n*OUT_TN +: OUT_TN])")
    w("        }")
    w("      }")
    w("      phase residual {")
    w(f"        parallel residual1[t in 0..R] early deps(o_proj[t, *, *]) {{ call residual_add(o_acc[{rows}, :], cur[{rows}, :],")
    w(f"                                                                                     h1[{rows}, :]) }}")
    w("      }")
    w("      phase norm {")
    w(f"        parallel post_norm[t in 0..R] early deps(residual1[t]) {{ call rms_norm(h1[{rows}, :], gamma_post[L, :],")
    w(f"                                                                              mlp_in[{rows}, :]) }}")
    w("      }")
    w("      phase mlp {")
    for name, wname, acc, deq in (("gate", "wg", "gate_acc", "deq_g"), ("up", "wu", "up_acc", "deq_u")):
        w(f"        parallel {name}[t in 0..R, n in 0..MLP_ON, k in 0..MLP_K] early deps(post_norm[t], seed_mlp[t], {deq}[n, k]) {{")
        w(f"          call matmul(mlp_in[{rows}, k*MLP_KC +: MLP_KC], {wname}[k*MLP_KC +: MLP_KC, n*MLP_TN +: MLP_TN],")
        w(f"                      {acc}[{rows}, n*MLP_TN +: MLP_TN])")
        w("        }")
    w("        parallel silu[t in 0..R, n in 0..MLP_ON] early deps(gate[t, n, *], up[t, n, *]) {")
    w(f"          call silu_mul(gate_acc[{rows}, n*MLP_TN +: MLP_TN], up_acc[{rows}, n*MLP_TN +: MLP_TN],")
    w(f"                        act[{rows}, n*MLP_TN +: MLP_TN])")
    w("        }")
    w("        parallel down[t in 0..R, n in 0..DOWN_ON, k in 0..DOWN_K] early")
    w(f"            deps(silu[t, {cover('k*DOWN_KC', 'DOWN_KC', 'MLP_TN')}], seed_down[t], deq_d[n, k]) {{")
    w(f"          call matmul(act[{rows}, k*DOWN_KC +: DOWN_KC], wd[k*DOWN_KC +: DOWN_KC, n*DOWN_TN +: DOWN_TN],")
    w(f"                      down_acc[{rows}, n*DOWN_TN +: DOWN_TN])")
    w("        }")
    w("      }")
    w("      phase residual {")
    w(f"        parallel residual2[t in 0..R] early deps(down[t, *, *]) {{ call residual_add(down_acc[{rows}, :],")
    w(f"                                                                                 h1[{rows}, :], h_out[{rows}, :]) }}")
    w("      }")
    w("    }")
    w("  }")
    w("  manual scope {")
    w("    phase head {")
    w(f"      parallel final_norm[t in 0..R] early deps(prev) {{ call rms_norm(cur[{rows}, :], gamma_final, x_final[{rows}, :]) }}")
    w("      parallel lm_head_tile[t in 0..R, v in 0..VOCAB_TILES] early deps(final_norm[t]) {")
    w(f"        call lm_head(x_final[{rows}, :], lm_head_w[:, v*VOCAB_CHUNK +: VOCAB_CHUNK], logits[{rows}, v*VOCAB_CHUNK +: VOCAB_CHUNK])")
    w("      }")
    w("      at greedy deps(lm_head_tile) { call sample(logits, next_ids) }")
    w("    }")
    w("  }")
    w("}")
    return "\n".join(out) + "\n"


def path_of(c: Config) -> Path:
    """Where the generated spec of `c` is committed."""
    return HERE / f"{c.name}.pgl"


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check compare) every config's spec."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = ap.parse_args(argv)
    stale = []
    for c in CONFIGS.values():
        text = generate(c)
        p = path_of(c)
        if args.check:
            if not p.is_file() or p.read_text(encoding="utf-8") != text:
                stale.append(p.name)
            continue
        p.write_text(text, encoding="utf-8")
        n = expected_tasks(c)
        print(f"wrote {p.relative_to(HERE.parents[1])}: {n['total']:,} tasks ({c.layers} x {n['per_layer']:,} + {n['entry']:,})")
    if stale:
        print("stale (rerun bench/specs/prefill.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
