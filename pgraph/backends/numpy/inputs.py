"""Seeded inputs of the decode layer (pypto-lib golden fixture `random_inputs`, reference §5).

Distributions (qwen3_14b_decode_layer.md §5): hidden N(0,1) bf16; input/post RMS weights
N(1,0.1) f32; q/k norm weights N(1,0.1) f32; wq, wk, wv, w_gate, w_up N(0,0.02) bf16;
wo N(0,0.0006) bf16; w_down N(0,0.0004) bf16; k_cache N(0,0.01) bf16; v_cache N(0.3,0.02)
bf16; seq_lens uniform in [1, MAX_SEQ]; identity paging (block_table = arange, slot =
(b*MAX_BLOCKS_PER_SEQ + pos//BLOCK_SIZE)*BLOCK_SIZE + pos%BLOCK_SIZE with pos = seq_len-1);
NeoX RoPE tables with theta 1e4 and duplicated halves.

Dynamic batch (HEAD #841): rows >= batch are pad rows: hidden 0, seq_len 0, slot -1.
Per-layer tensors (weights, norms, caches) are either distinct per layer or, as the real
harness does for N-layer stacks, the layer-0 data replicated (`replicated=True`), which
keeps 40 full-size layers in the memory of one.
"""

from __future__ import annotations

import attrs
import numpy as np

from pgraph.backends.numpy.storage import NP_DTYPES
from pgraph.ir.program import Program
from pgraph.kinds import Storage as Placement

#: External tensors stacked per layer along dim 0, with their distribution (mean, std).
LAYERED: dict[str, tuple[float, float]] = {
    "input_rms_weight": (1.0, 0.1),
    "post_rms_weight": (1.0, 0.1),
    "q_norm_weight": (1.0, 0.1),
    "k_norm_weight": (1.0, 0.1),
    "wq": (0.0, 0.02),
    "wk": (0.0, 0.02),
    "wv": (0.0, 0.02),
    "wo": (0.0, 0.0006),
    "w_gate": (0.0, 0.02),
    "w_up": (0.0, 0.02),
    "w_down": (0.0, 0.0004),
    "k_cache": (0.0, 0.01),
    "v_cache": (0.3, 0.02),
}

#: Weight bytes above which per-layer tensors are replicated by default (`replicated=None`).
REPLICATE_ABOVE_BYTES = 2 << 30

ROPE_THETA = 10000.0


@attrs.frozen
class Geometry:
    """Model sizes of one run, read from the folded spec constants."""

    batch_pad: int
    hidden: int
    intermediate: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    layers: int
    max_seq: int
    block_size: int
    max_blocks_per_seq: int
    cache_rows: int

    @classmethod
    def from_consts(cls, c: dict[str, int]) -> Geometry:
        """Geometry from a Program's `consts` (ValueError naming the first missing constant)."""
        names = ("BATCH_PAD", "HIDDEN", "INTERMEDIATE", "NUM_HEADS", "NUM_KV_HEADS", "HEAD_DIM", "NUM_LAYERS",
                 "MAX_SEQ", "BLOCK_SIZE", "MAX_BLOCKS_PER_SEQ", "CACHE_ROWS")
        missing = [n for n in names if n not in c]
        if missing:
            raise ValueError(f"the NumPy backend runs the Qwen3 decode specs; this spec has no constant {missing[0]}")
        return cls(c["BATCH_PAD"], c["HIDDEN"], c["INTERMEDIATE"], c["NUM_HEADS"], c["NUM_KV_HEADS"],
                   c["HEAD_DIM"], c["NUM_LAYERS"], c["MAX_SEQ"], c["BLOCK_SIZE"], c["MAX_BLOCKS_PER_SEQ"],
                   c["CACHE_ROWS"])


@attrs.define
class Inputs:
    """External tensor data of one run.

    `arrays[name]` is the full tensor for unlayered names and, for LAYERED names, either
    the full stacked tensor (`replicated` False) or the layer-0 period only (True).
    `period[name]` is the number of dim-0 rows per layer of a LAYERED tensor.
    """

    geometry: Geometry
    seed: int
    batch: int
    replicated: bool
    arrays: dict[str, np.ndarray]
    period: dict[str, int]

    def layer(self, name: str, layer: int) -> np.ndarray:
        """The rows of layer `layer` of a LAYERED tensor (a view; shape [period, ...])."""
        p = self.period[name]
        a = self.arrays[name]
        if self.replicated:
            return a
        return a[layer * p:(layer + 1) * p]

    @property
    def scalars(self) -> dict[str, int]:
        """Orchestration scalars: the live batch."""
        return {"batch": self.batch}


def _normal(rng: np.random.Generator, shape: tuple[int, ...], mean: float, std: float, dtype: np.dtype) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    step = 1 << 24
    for lo in range(0, flat.shape[0], step):
        n = min(step, flat.shape[0] - lo)
        chunk = rng.standard_normal(n, dtype=np.float32)
        chunk *= np.float32(std)
        chunk += np.float32(mean)
        flat[lo:lo + n] = chunk.astype(dtype)
    return out


def rope_tables(max_seq: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """NeoX cos/sin tables [max_seq, head_dim] f32 with duplicated halves (theta 1e4)."""
    inv_freq = 1.0 / (ROPE_THETA ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    freqs = np.outer(np.arange(max_seq, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=1)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def make_inputs(program: Program, seed: int = 1234, batch: int | None = None,
                replicated: bool | None = None) -> Inputs:
    """Generate the inputs of `program` (a decode_fwd_layers spec) for `batch` live rows.

    `batch` defaults to BATCH_PAD; ValueError outside 1..BATCH_PAD. `replicated` None picks
    replication when the distinct per-layer weights would exceed REPLICATE_ABOVE_BYTES.
    """
    g = Geometry.from_consts(program.consts)
    batch = g.batch_pad if batch is None else batch
    if not 1 <= batch <= g.batch_pad:
        raise ValueError(f"batch must be in 1..{g.batch_pad}, got {batch}")
    if replicated is None:
        total = sum(program.tensors[n].nbytes for n in LAYERED if n in program.tensors)
        replicated = total > REPLICATE_ABOVE_BYTES
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    period: dict[str, int] = {}
    for name in (*LAYERED, "hidden", "seq_lens", "block_table", "slot_mapping", "rope_cos", "rope_sin"):
        if name not in program.tensors or program.tensors[name].storage is not Placement.EXTERNAL:
            raise ValueError(f"the NumPy backend runs the Qwen3 decode specs; this spec has no external tensor '{name}'")
    for name, (mean, std) in LAYERED.items():
        t = program.tensors[name]
        p = t.shape[0] // g.layers
        period[name] = p
        shape = (p, *t.shape[1:]) if replicated else t.shape
        arrays[name] = _normal(rng, shape, mean, std, NP_DTYPES[t.dtype])
    hidden = np.zeros((g.batch_pad, g.hidden), dtype=NP_DTYPES["bf16"])
    hidden[:batch] = _normal(rng, (batch, g.hidden), 0.0, 1.0, NP_DTYPES["bf16"])
    arrays["hidden"] = hidden
    seq_lens = np.zeros(g.batch_pad, dtype=np.int32)
    seq_lens[:batch] = rng.integers(1, g.max_seq, size=batch, endpoint=True)
    arrays["seq_lens"] = seq_lens
    block_table = np.arange(g.batch_pad * g.max_blocks_per_seq, dtype=np.int32).reshape(g.batch_pad, -1)
    arrays["block_table"] = block_table
    slot = np.full(g.batch_pad, -1, dtype=np.int32)
    pos = seq_lens[:batch].astype(np.int64) - 1
    slot[:batch] = block_table[np.arange(batch), pos // g.block_size] * g.block_size + pos % g.block_size
    arrays["slot_mapping"] = slot
    arrays["rope_cos"], arrays["rope_sin"] = rope_tables(g.max_seq, g.head_dim)
    return Inputs(g, seed, batch, replicated, arrays, period)
