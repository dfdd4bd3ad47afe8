"""The calling interface of simpler's qwen3_14b_decode orchestration, typed by hand.

Source: docs/upstream.md §8 (simpler 6ebaf7715, the generated
`decode_fwd_layers.cpp`): §8.3 the 20 orchestration tensors and their test shapes, §8.4 the
dimensions read at run time, §8.5 the allocations, views and carried bindings, §8.6/§8.7/§8.8 every
kernel function with its ordered tensor slots and scalars, §8.9 every submit site in program order
with its loops, flags, block counts and explicit deps, §6.7 the kernel_config.py keys. Nothing here
is derived from pgraph's code or output: `expected_run(layers)` walks §8.9's loops and writes out,
for each submit, what §8.6-8.8 says it passes. Tests compare a recorded run with it submit by submit.

Buffers are named symbolically: ("ext", k) is orchestration tensor k; ("alloc0", r) get_ref r of
the entry's `alloc_0`; ("alloc1", i, r) / ("alloc2", i, r) get_ref r of layer i's `alloc_1` /
`alloc_2`. The carried bindings (§8.5): `cur*` of layer i is alloc_0's cur for i = 0, else layer
i-1's next_hidden; `normed*` likewise with next_normed. Deps name submits by their label.
"""

from __future__ import annotations

import math

import attrs

# ---- §8.3: the test shapes ------------------------------------------------------------------------
BATCH = 16
HIDDEN = 5120
KV_HIDDEN = 1024
INTER = 17408
LAYERS = 40
MAX_SEQ = 5500
PAGES_PER_SEQ = 43                         # MAX_BLOCKS_PER_SEQ
NUM_PAGES = 688
CACHE_ROWS = NUM_PAGES * 8 * 128           # 704,512 rows per layer
HEAD_DIM = 128
HEADS = 40

#: DataType values (§8.12: FLOAT32 0, FLOAT16 1, INT32 2, INT16 3, INT8 4, UINT8 5, BFLOAT16 6, ...)
F32, I32, U8, BF16 = 0, 2, 5, 6

#: (name, DataType value, shape) of orchestration tensor k, k = 0..19 (§8.3)
EXTERNAL: list[tuple[str, int, tuple[int, ...]]] = [
    ("hidden_states", BF16, (BATCH, HIDDEN)),
    ("input_rms_weight", F32, (LAYERS, HIDDEN)),
    ("wq", BF16, (204800, HIDDEN)),
    ("wk", BF16, (204800, KV_HIDDEN)),
    ("wv", BF16, (204800, KV_HIDDEN)),
    ("q_norm_weight", F32, (LAYERS, HEAD_DIM)),
    ("k_norm_weight", F32, (LAYERS, HEAD_DIM)),
    ("seq_lens", I32, (BATCH,)),
    ("block_table", I32, (NUM_PAGES,)),
    ("slot_mapping", I32, (BATCH,)),
    ("rope_cos", F32, (MAX_SEQ, HEAD_DIM)),
    ("rope_sin", F32, (MAX_SEQ, HEAD_DIM)),
    ("k_cache", BF16, (28180480, HEAD_DIM)),
    ("v_cache", BF16, (28180480, HEAD_DIM)),
    ("wo", BF16, (204800, HIDDEN)),
    ("w_gate", BF16, (204800, INTER)),
    ("w_up", BF16, (204800, INTER)),
    ("w_down", BF16, (696320, HIDDEN)),
    ("post_rms_weight", F32, (LAYERS, HIDDEN)),
    ("out", BF16, (BATCH, HIDDEN)),
]
assert LAYERS * CACHE_ROWS == 28180480 and LAYERS * HIDDEN == 204800 and LAYERS * INTER == 696320

#: §8.5 alloc_0 and §8.5 alloc_1 / alloc_2: (name, DataType value, shape) in get_ref order
ALLOC0 = [("pa_metadata", U8, (27840,)), ("pa_workspace", U8, (66132544,)), ("cur", F32, (BATCH, HIDDEN)),
          ("normed", BF16, (BATCH, HIDDEN))]
ALLOC1 = [("next_hidden", F32, (BATCH, HIDDEN)), ("next_normed", BF16, (BATCH, HIDDEN)),
          ("inv_rms_states", F32, (BATCH, 1)), ("q_proj", F32, (BATCH, HIDDEN)), ("k_proj", F32, (BATCH, KV_HIDDEN)),
          ("v_proj", F32, (BATCH, KV_HIDDEN)), ("q_tnd_flat", BF16, (640, HEAD_DIM)), ("attn_out", BF16, (BATCH, HIDDEN))]
ALLOC2 = [("down_acc_all", F32, (BATCH, HIDDEN)), ("gate_acc_all", F32, (BATCH, INTER)),
          ("up_acc_all", F32, (BATCH, INTER)), ("attn_proj_fp32", F32, (BATCH, HIDDEN)),
          ("post_norm_partial", F32, (BATCH, HIDDEN)), ("mlp_norm_in", BF16, (BATCH, HIDDEN)),
          ("inv_rms_tile", F32, (BATCH, 1)), ("mlp_tile", BF16, (BATCH, INTER))]
ELEMENT_BYTES = {F32: 4, I32: 4, U8: 1, BF16: 2}


def table_bytes(table: list[tuple[str, int, tuple[int, ...]]]) -> int:
    """Bytes of an allocation table (elements x element size)."""
    return sum(math.prod(shape) * ELEMENT_BYTES[d] for _, d, shape in table)


# the totals the reference states (§8.5, §8.5): a check of the tables above as typed
assert (table_bytes(ALLOC0), table_bytes(ALLOC1), table_bytes(ALLOC2)) == (66_651_904, 1_278_016, 3_932_224)

Buffer = tuple[object, ...]

# ---- §8.5: buffers of each name -----------------------------------------------------------------------


def ext(k: int) -> Buffer:
    return ("ext", k)


def a0(name: str) -> Buffer:
    return ("alloc0", [n for n, _, _ in ALLOC0].index(name))


def a1(i: int, name: str) -> Buffer:
    return ("alloc1", i, [n for n, _, _ in ALLOC1].index(name))


def a2(i: int, name: str) -> Buffer:
    return ("alloc2", i, [n for n, _, _ in ALLOC2].index(name))


def cur(i: int) -> Buffer:
    """`cur*` of layer i (§8.5): alloc_0's cur, then the previous layer's next_hidden."""
    return a0("cur") if i == 0 else a1(i - 1, "next_hidden")


def normed(i: int) -> Buffer:
    """`normed*` of layer i (§8.5)."""
    return a0("normed") if i == 0 else a1(i - 1, "next_normed")


def buffer_shape(b: Buffer) -> tuple[int, ...]:
    table = {"ext": EXTERNAL, "alloc0": ALLOC0, "alloc1": ALLOC1, "alloc2": ALLOC2}[str(b[0])]
    return table[int(b[-1])][2]  # type: ignore[call-overload]


def buffer_dtype(b: Buffer) -> int:
    table = {"ext": EXTERNAL, "alloc0": ALLOC0, "alloc1": ALLOC1, "alloc2": ALLOC2}[str(b[0])]
    return table[int(b[-1])][1]  # type: ignore[call-overload]


@attrs.frozen
class Slot:
    """One tensor argument: runtime tag, buffer, start offset in elements, shape (whole: the buffer's)."""

    tag: str
    buffer: Buffer
    offset: int = 0
    shape: tuple[int, ...] | None = None

    @property
    def full_shape(self) -> tuple[int, ...]:
        return self.shape if self.shape is not None else buffer_shape(self.buffer)


def IN(b: Buffer, offset: int = 0, shape: tuple[int, ...] | None = None) -> Slot:  # noqa: N802
    return Slot("INPUT", b, offset, shape)


def INOUT(b: Buffer, offset: int = 0, shape: tuple[int, ...] | None = None) -> Slot:  # noqa: N802
    return Slot("INOUT", b, offset, shape)


def OUT(b: Buffer) -> Slot:  # noqa: N802
    return Slot("OUTPUT_EXISTING", b)   # §8.2: every add_output passes an existing tensor


@attrs.frozen
class Submit:
    """One submit site instance (§8.9): label, kind (aic / aiv / mix / dummy), func ids, block_num,
    early-resolve, sync_start, tensor slots, scalar values, explicit deps (labels, append order)."""

    label: str
    kind: str
    fids: tuple[int, int, int]
    block_num: int
    early: bool
    sync: bool
    tensors: tuple[Slot, ...]
    scalars: tuple[int, ...]
    deps: tuple[str, ...]


def task(label: str, kind: str, fid: int, tensors: list[Slot], scalars: list[int] | None = None, bn: int = 1,
         early: bool = False, deps: list[str] | None = None, sync: bool = False) -> Submit:
    fids = {"aic": (fid, -1, -1), "aiv": (-1, fid, -1), "mix": (11, 12, 12)}[kind]   # §8.2 submit kinds, §8.8
    return Submit(label, kind, fids, bn, early, sync, tuple(tensors), tuple(scalars or ()), tuple(deps or ()))


def dummy(label: str, deps: list[str] | None = None) -> Submit:
    return Submit(label, "dummy", (-1, -1, -1), 0, False, False, (), (), tuple(deps or ()))


@attrs.frozen
class Alloc:
    """One alloc_tensors call: which (alloc0 / alloc1 / alloc2), its layer (None for alloc_0)."""

    which: str
    layer: int | None


# ---- §8.9: the submits, with §8.7's arguments -----------------------------------------------------------


def expected_run(layers: int = LAYERS) -> list[Submit | Alloc]:
    """Every alloc_tensors call and submit of decode_fwd_layers in program order (§8.5, §8.9)."""
    out: list[Submit | Alloc] = [Alloc("alloc0", None)]
    # E1 pa_tiling, fid 0: s0 = dim0(block_table) / 16, s1 = dim0(k_cache) / (40 * 1024) (§8.4)
    out.append(task("pa_tiling", "aiv", 0, [IN(ext(7)), OUT(a0("pa_metadata"))],
                    [NUM_PAGES // 16, 28180480 // (40 * 1024)], early=True))
    out.append(dummy("barrier0"))                                                             # E2
    out.append(task("copy_hidden", "aiv", 1, [OUT(a0("cur")), IN(ext(0))], [0]))              # E3, cb0 = 0
    out.append(task("x_gamma0", "aiv", 2, [OUT(a0("normed")), IN(a0("cur")), IN(ext(1))], bn=5, early=True,
                    deps=["copy_hidden"]))                                                    # E4
    for i in range(layers):
        out.extend(layer(i))
    out.append(task("copy_out", "aiv", 36, [OUT(ext(19)), IN(cur(layers))], [0]))             # T1, ob0 = 0
    return out


def layer(i: int) -> list[Submit | Alloc]:
    """The submits of layer i (§8.9 L1..L44) with the arguments of §8.7 / §8.8."""
    L = f"@{i}"  # noqa: N806 - label suffix
    prev = "x_gamma0" if i == 0 else f"dcr_xgamma@{i - 1}"   # prev_normed_tid[0] (§8.10)
    base = i * HIDDEN                                          # layer_hidden_base (§8.4)
    out: list[Submit | Alloc] = [Alloc("alloc1", i), Alloc("alloc2", i)]
    out.append(dummy("seed_dummy" + L))                                                                    # L1
    out.append(task("attn_out_seed" + L, "aiv", 3, [IN(a1(i, "attn_out"))], early=True))                 # L2
    out.append(task("rms_recip" + L, "aiv", 4, [IN(cur(i)), INOUT(a1(i, "inv_rms_states"))], early=True,
                    deps=[prev, "seed_dummy" + L]))                                                      # L3
    out.append(task("q_seed" + L, "aiv", 5, [INOUT(a1(i, "q_proj"))], early=True))                       # L4
    out.append(task("q_proj" + L, "aic", 6, [INOUT(a1(i, "q_proj")), IN(normed(i)), IN(ext(2))], [base], bn=50,
                    early=True, deps=[prev, "q_seed" + L]))                                              # L5
    out.append(task("kv_seed" + L, "aiv", 7, [INOUT(a1(i, "k_proj")), INOUT(a1(i, "v_proj"))],
                    deps=[prev, "seed_dummy" + L]))                                                      # L6 (no E)
    out.append(task("mlp_out_seed" + L, "aiv", 8, [INOUT(a2(i, n)) for n in ("down_acc_all", "gate_acc_all",
                                                                              "up_acc_all", "attn_proj_fp32")],
                    early=True, deps=[prev, "seed_dummy" + L]))                                          # L7
    out.append(task("k_proj" + L, "aic", 9, [INOUT(a1(i, "k_proj")), IN(normed(i)), IN(ext(3))], [base], bn=10,
                    early=True, deps=["kv_seed" + L]))                                                   # L8
    out.append(task("v_proj" + L, "aic", 10, [INOUT(a1(i, "v_proj")), IN(normed(i)), IN(ext(4))], [base], bn=10,
                    early=True, deps=["kv_seed" + L]))                                                   # L9
    # L10, §8.8: 17 tensors, s0 = layer_cache_base = i * (dim0(k_cache) / 40)
    tnd = (BATCH, HEADS, HEAD_DIM)
    out.append(task("attention" + L, "mix", 11, [
        INOUT(a1(i, "attn_out"), 0, tnd), INOUT(a1(i, "q_tnd_flat"), 0, tnd), INOUT(ext(12)), INOUT(ext(13)),
        IN(ext(8)), INOUT(a0("pa_workspace")), INOUT(a0("pa_metadata")), IN(a1(i, "q_proj")), IN(a1(i, "k_proj")),
        IN(a1(i, "v_proj")), IN(ext(5), i * HEAD_DIM, (1, HEAD_DIM)), IN(ext(6), i * HEAD_DIM, (1, HEAD_DIM)),
        IN(ext(10)), IN(ext(11)), IN(a1(i, "inv_rms_states")), IN(ext(9)), IN(ext(7))],
        [i * (28180480 // 40)], bn=24, early=True, sync=True,
        deps=["q_proj" + L, "k_proj" + L, "v_proj" + L, "rms_recip" + L, "pa_tiling", "attn_out_seed" + L,
              "mlp_out_seed" + L]))
    out.append(dummy("out_proj_dummy" + L, ["attention" + L]))                                            # L11
    attn2d = IN(a1(i, "attn_out"))                      # attn_out2d: the [16, 5120] reshape back (§8.5)
    out_tiles: list[str] = []
    for t in range(26):                                                                                  # L12
        out.append(task(f"out_proj[{t}]" + L, "aic", 13, [attn2d, IN(ext(14)), INOUT(a2(i, "attn_proj_fp32"))],
                        [(t % 5) * 1024, base, (t // 5) * 512], deps=["out_proj_dummy" + L]))
        out_tiles.append(f"out_proj[{t}]" + L)
    out.append(task("out_proj_0" + L, "aic", 14, [attn2d, IN(ext(14)), INOUT(a2(i, "attn_proj_fp32"))], [26, base],
                    bn=24, deps=["attention" + L]))                                                      # L13
    out_tiles += ["out_proj_0" + L] * 24                # out_tids[26..49] hold the direct wave's id
    cast_args = [INOUT(a2(i, "mlp_norm_in")), INOUT(a2(i, "post_norm_partial")), IN(a2(i, "attn_proj_fp32")),
                 IN(cur(i)), IN(ext(18))]
    for k in range(5):                                                                                   # L14..L18
        out.append(task(f"cast[{k}]" + L, "aiv", 15 + k, cast_args, [k * 1024, i], early=True,
                        deps=out_tiles[10 * k:10 * k + 10]))
    out.append(task("post_rms_reduce" + L, "aiv", 20, [IN(a2(i, "attn_proj_fp32")), IN(cur(i)),
                                                        INOUT(a2(i, "inv_rms_tile"))], deps=out_tiles))   # L19
    gate = [IN(a2(i, "mlp_norm_in")), IN(ext(15)), INOUT(a2(i, "gate_acc_all"))]
    up = [IN(a2(i, "mlp_norm_in")), IN(ext(16)), INOUT(a2(i, "up_acc_all"))]
    gate_tids: dict[tuple[int, int], str] = {}
    up_tids: dict[tuple[int, int], str] = {}
    for c in range(5):                                                                                   # L20..L39
        out.append(dummy(f"gate_late[{c}]" + L, [f"cast[{c}]" + L]))
        out.append(dummy(f"up_late[{c}]" + L, [f"cast[{c}]" + L]))
        out.append(task(f"gate_spmd[{c}]" + L, "aic", 21 + 2 * c, gate, [1024 * c, base], bn=6, deps=[f"cast[{c}]" + L]))
        out.append(task(f"up_spmd[{c}]" + L, "aic", 22 + 2 * c, up, [1024 * c, base], bn=6, deps=[f"cast[{c}]" + L]))
        for n in range(6):
            gate_tids[(n, c)] = f"gate_spmd[{c}]" + L
            up_tids[(n, c)] = f"up_spmd[{c}]" + L
    for n in range(6, 17):                                                                               # L40, L41
        for k in range(5):
            out.append(task(f"gate_late_tile[{n},{k}]" + L, "aic", 31, gate, [k * 1024, base, n * 1024],
                            deps=[f"gate_late[{k}]" + L]))
            out.append(task(f"up_late_tile[{n},{k}]" + L, "aic", 32, up, [k * 1024, base, n * 1024],
                            deps=[f"up_late[{k}]" + L]))
            gate_tids[(n, k)] = f"gate_late_tile[{n},{k}]" + L
            up_tids[(n, k)] = f"up_late_tile[{n},{k}]" + L
    for n in range(17):                                                                                  # L42
        out.append(task(f"silu[{n}]" + L, "aiv", 33, [IN(a2(i, "inv_rms_tile")), INOUT(a2(i, "mlp_tile")),
                                                      IN(a2(i, "gate_acc_all")), IN(a2(i, "up_acc_all"))],
                        [n * 1024], deps=["post_rms_reduce" + L, *(gate_tids[(n, c)] for c in range(5)),
                                          *(up_tids[(n, c)] for c in range(5))]))
    down: list[str] = []
    for n in range(5):                                                                                   # L43
        for k in range(17):
            out.append(task(f"down[{n},{k}]" + L, "aic", 34, [IN(a2(i, "mlp_tile")), IN(ext(17)),
                                                               INOUT(a2(i, "down_acc_all"))],
                            [k * 1024, i * INTER, n * 1024], early=True, deps=[f"silu[{k}]" + L]))
            down.append(f"down[{n},{k}]" + L)
    out.append(task(f"dcr_xgamma@{i}", "aiv", 35, [IN(a2(i, "down_acc_all")), IN(a2(i, "post_norm_partial")),
                                                   INOUT(a1(i, "next_hidden")), IN(ext(1)),
                                                   INOUT(a1(i, "next_normed"))],
                    [min(i + 1, LAYERS - 1)], bn=5, early=True, deps=down))                               # L44
    return out


# ---- §8.6 and §6.7: kernel_config.py --------------------------------------------------------------------

#: fid -> (kernel_config name, core_type, source relative to the example's kernels/ folder, external,
#: signature of the tensor parameters) (§8.6; the signature column; §6.7 "name" for the MIX parts)
KERNEL_TABLE: dict[int, tuple[str, str, str, bool, list[str]]] = {
    0: ("paged_attention_tiling_cce", "aiv", "vendor/paged_attention_cce/tiling/entry.cpp", True, ["IN", "OUT"]),
    1: ("copy_hidden", "aiv", "aiv/copy_hidden.cpp", False, ["OUT", "IN"]),
    2: ("x_gamma0", "aiv", "aiv/x_gamma0.cpp", False, ["OUT", "IN", "IN"]),
    3: ("attn_out_seed", "aiv", "aiv/attn_out_seed.cpp", False, ["IN"]),
    4: ("rms_recip", "aiv", "aiv/rms_recip.cpp", False, ["IN", "INOUT"]),
    5: ("q_seed", "aiv", "aiv/q_seed.cpp", False, ["INOUT"]),
    6: ("q_proj", "aic", "aic/q_proj.cpp", False, ["INOUT", "IN", "IN"]),
    7: ("kv_seed", "aiv", "aiv/kv_seed.cpp", False, ["INOUT", "INOUT"]),
    8: ("mlp_out_seed", "aiv", "aiv/mlp_out_seed.cpp", False, ["INOUT"] * 4),
    9: ("k_proj", "aic", "aic/k_proj.cpp", False, ["INOUT", "IN", "IN"]),
    10: ("v_proj", "aic", "aic/v_proj.cpp", False, ["INOUT", "IN", "IN"]),
    11: ("paged_attention_rope_cce_aic", "aic", "vendor/paged_attention_cce/attention_rope/entry.cpp", True,
         ["INOUT"] * 4 + ["IN"] + ["INOUT"] * 2 + ["IN"] * 10),
    12: ("paged_attention_rope_cce_aiv", "aiv", "vendor/paged_attention_cce/attention_rope/entry.cpp", True,
         ["INOUT"] * 4 + ["IN"] + ["INOUT"] * 2 + ["IN"] * 10),
    13: ("out_proj", "aic", "aic/out_proj.cpp", False, ["IN", "IN", "INOUT"]),
    14: ("out_proj_0", "aic", "aic/out_proj_0.cpp", False, ["IN", "IN", "INOUT"]),
    15: ("residual_rms_cast", "aiv", "aiv/residual_rms_cast.cpp", False, ["INOUT", "INOUT", "IN", "IN", "IN"]),
    16: ("residual_rms_cast_0", "aiv", "aiv/residual_rms_cast_0.cpp", False, ["INOUT", "INOUT", "IN", "IN", "IN"]),
    17: ("residual_rms_cast_1", "aiv", "aiv/residual_rms_cast_1.cpp", False, ["INOUT", "INOUT", "IN", "IN", "IN"]),
    18: ("residual_rms_cast_2", "aiv", "aiv/residual_rms_cast_2.cpp", False, ["INOUT", "INOUT", "IN", "IN", "IN"]),
    19: ("residual_rms_cast_3", "aiv", "aiv/residual_rms_cast_3.cpp", False, ["INOUT", "INOUT", "IN", "IN", "IN"]),
    20: ("post_rms_reduce", "aiv", "aiv/post_rms_reduce.cpp", False, ["IN", "IN", "INOUT"]),
    21: ("gate_proj", "aic", "aic/gate_proj.cpp", False, ["IN", "IN", "INOUT"]),
    22: ("up_proj", "aic", "aic/up_proj.cpp", False, ["IN", "IN", "INOUT"]),
    23: ("gate_proj_0", "aic", "aic/gate_proj_0.cpp", False, ["IN", "IN", "INOUT"]),
    24: ("up_proj_0", "aic", "aic/up_proj_0.cpp", False, ["IN", "IN", "INOUT"]),
    25: ("gate_proj_1", "aic", "aic/gate_proj_1.cpp", False, ["IN", "IN", "INOUT"]),
    26: ("up_proj_1", "aic", "aic/up_proj_1.cpp", False, ["IN", "IN", "INOUT"]),
    27: ("gate_proj_2", "aic", "aic/gate_proj_2.cpp", False, ["IN", "IN", "INOUT"]),
    28: ("up_proj_2", "aic", "aic/up_proj_2.cpp", False, ["IN", "IN", "INOUT"]),
    29: ("gate_proj_3", "aic", "aic/gate_proj_3.cpp", False, ["IN", "IN", "INOUT"]),
    30: ("up_proj_3", "aic", "aic/up_proj_3.cpp", False, ["IN", "IN", "INOUT"]),
    31: ("gate_proj_4", "aic", "aic/gate_proj_4.cpp", False, ["IN", "IN", "INOUT"]),
    32: ("up_proj_4", "aic", "aic/up_proj_4.cpp", False, ["IN", "IN", "INOUT"]),
    33: ("silu", "aiv", "aiv/silu.cpp", False, ["IN", "INOUT", "IN", "IN"]),
    34: ("down_proj", "aic", "aic/down_proj.cpp", False, ["IN", "IN", "INOUT"]),
    35: ("dcr_xgamma", "aiv", "aiv/dcr_xgamma.cpp", False, ["IN", "IN", "INOUT", "IN", "INOUT"]),
    36: ("copy_out", "aiv", "aiv/copy_out.cpp", False, ["OUT", "IN"]),
}

#: ORCHESTRATION signature per orchestration tensor (§6.7 writes IN for 0..18 and OUT for 19 from
#: pypto-lib's declarations; §8.3 and §8.11: the attention writes k_cache and v_cache, and the test
#: CALLABLE marks them INOUT so that simpler copies both pools back. A build that must keep the
#: updated caches takes the CALLABLE's directions.)
ORCH_SIGNATURE = ["IN"] * 12 + ["INOUT", "INOUT"] + ["IN"] * 5 + ["OUT"]
