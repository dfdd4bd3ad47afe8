"""Seeded inputs of the decode layer: two fixtures, per-layer tensors generated on demand.

Fixtures (`FIXTURES`, chosen with `pgraph run --inputs`):

- `current` (default): pypto-lib's golden fixture `random_inputs` (docs/upstream.md
  §7.11): hidden N(0,1) bf16; input/post RMS weights N(1,0.1) f32; q/k norm weights N(1,0.1) f32;
  wq, wk, wv, w_gate, w_up N(0,0.02) bf16; wo N(0,0.0006) bf16; w_down N(0,0.0004) bf16;
  k_cache N(0,0.01) bf16; v_cache N(0.3,0.02) bf16; seq_lens uniform in [1, MAX_SEQ].
- `tier`: the fixture of the tier harness (models/qwen3/14b/qwen3_14b_decode_full.py at
  f65513d5 / cd736c30, docs/upstream.md §10.1): hidden U(-0.5,0.5);
  input RMS weight U(-0.5,0.5); wq/wk/wv U(0,1)/sqrt(HIDDEN); wo, w_gate, w_up
  U(-0.5,0.5)/sqrt(HIDDEN); w_down U(-0.5,0.5)/sqrt(INTERMEDIATE); q/k norm and post norm
  weights all ones; k/v cache U(-0.5,0.5); seq_lens uniform in [1, 128]. (HIDDEN = 5120 and
  INTERMEDIATE = 17408 at full size, as that harness wrote them.) What is *not* taken over:
  its page size 256 (the spec's BLOCK_SIZE 128 stays), its "random RoPE tables" (no
  distribution is recorded; the NeoX tables stay), and its model, which rounded the residual
  to bf16 after every layer and P to bf16 in attention: the model is pgraph's (f32 residual
  carry, exact P), the same for both fixtures.

Both fixtures: identity paging (block_table = arange, slot = (b*MAX_BLOCKS_PER_SEQ +
pos//BLOCK_SIZE)*BLOCK_SIZE + pos%BLOCK_SIZE with pos = seq_len-1); NeoX RoPE tables with
theta 1e4 and duplicated halves. Dynamic batch (HEAD #841): rows >= batch are pad rows:
hidden 0, seq_len 0, slot -1.

Per-layer tensors (`LAYERED`: weights, norms, KV caches) are never generated as a whole
stack. Layer L of tensor T is drawn from its own stream, seeded by (seed, T, L), when first
asked for (`Inputs.layer`), and kept in a small per-tensor LRU (`LAYER_CACHE` layers), so the
executor and the dense reference regenerate identical data independently and 40 distinct
full-size layers (about 0.9 GB each) fit in a few GiB. Weight modes: `distinct` (every
layer its own draw, as the tier harness did) or `replicated` (every layer is layer 0's draw,
as upstream's `--validate-fwd` "replicating the layer-0 weights" does).
"""

from __future__ import annotations

import zlib
from collections import OrderedDict

import attrs
import numpy as np

from pgraph import records
from pgraph.backends.numpy.storage import NP_DTYPES
from pgraph.ir.program import Program
from pgraph.kinds import Storage as Placement


@records.value
@attrs.frozen(repr=False, eq=False)
class Dist:
    """A distribution: `normal` (a = mean, b = std), `uniform` on [a, b) or `const` a.

    `scale` names a constant (HIDDEN or INTERMEDIATE) whose inverse square root multiplies
    every draw (the tier harness's 1/sqrt(5120), 1/sqrt(17408)).
    """

    kind: str
    a: float
    b: float = 0.0
    scale: str | None = None


#: External tensors stacked per layer along dim 0.
LAYERED: tuple[str, ...] = ("input_rms_weight", "post_rms_weight", "q_norm_weight", "k_norm_weight", "wq", "wk",
                            "wv", "wo", "w_gate", "w_up", "w_down", "k_cache", "v_cache")

_ONES = Dist("const", 1.0)
_U = Dist("uniform", -0.5, 0.5)

#: Distribution of every per-layer tensor and of `hidden`, per fixture (sources: module doc).
FIXTURES: dict[str, dict[str, Dist]] = {
    "current": {
        "input_rms_weight": Dist("normal", 1.0, 0.1),
        "post_rms_weight": Dist("normal", 1.0, 0.1),
        "q_norm_weight": Dist("normal", 1.0, 0.1),
        "k_norm_weight": Dist("normal", 1.0, 0.1),
        "wq": Dist("normal", 0.0, 0.02),
        "wk": Dist("normal", 0.0, 0.02),
        "wv": Dist("normal", 0.0, 0.02),
        "wo": Dist("normal", 0.0, 0.0006),
        "w_gate": Dist("normal", 0.0, 0.02),
        "w_up": Dist("normal", 0.0, 0.02),
        "w_down": Dist("normal", 0.0, 0.0004),
        "k_cache": Dist("normal", 0.0, 0.01),
        "v_cache": Dist("normal", 0.3, 0.02),
        "hidden": Dist("normal", 0.0, 1.0),
    },
    "tier": {
        "input_rms_weight": _U,
        "post_rms_weight": _ONES,
        "q_norm_weight": _ONES,
        "k_norm_weight": _ONES,
        "wq": Dist("uniform", 0.0, 1.0, "HIDDEN"),
        "wk": Dist("uniform", 0.0, 1.0, "HIDDEN"),
        "wv": Dist("uniform", 0.0, 1.0, "HIDDEN"),
        "wo": Dist("uniform", -0.5, 0.5, "HIDDEN"),
        "w_gate": Dist("uniform", -0.5, 0.5, "HIDDEN"),
        "w_up": Dist("uniform", -0.5, 0.5, "HIDDEN"),
        "w_down": Dist("uniform", -0.5, 0.5, "INTERMEDIATE"),
        "k_cache": _U,
        "v_cache": _U,
        "hidden": _U,
    },
}

#: Longest sequence of the tier fixture (seq_lens uniform in [1, 128]).
TIER_MAX_SEQ = 128

WEIGHT_MODES = ("replicated", "distinct")

#: `weights="auto"` picks `distinct` when the per-layer tensors of all layers total at most
#: this many bytes, otherwise `replicated` (distinct full-size layers cost generation time:
#: about 0.9 GB of normal draws per layer, drawn once by the reference and once by the executor).
REPLICATE_ABOVE_BYTES = 2 << 30

#: Layers of one tensor kept generated (LRU). Every reader of layer L's tensors runs between
#: the previous layer's output and this layer's output in any legal order, so two suffice; a
#: miss regenerates the same data (counted in `Inputs.generated`).
LAYER_CACHE = 2

ROPE_THETA = 10000.0

_CHUNK = 1 << 22


@records.value
@attrs.frozen(repr=False, eq=False)
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


@records.value
@attrs.frozen(repr=False, eq=False)
class LayeredTensor:
    """A per-layer external tensor: the shape and dtype of one layer's rows, its distribution."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    dist: Dist


def stream(seed: int, name: str, layer: int | None = None) -> np.random.Generator:
    """The random stream of tensor `name` (of layer `layer` for per-layer tensors).

    SFC64 seeded by SeedSequence([seed, crc32(name)] (+ [layer])): independent of every other
    tensor and layer, so any side can regenerate one layer alone. (SFC64 rather than the
    default PCG64: its float32 normal draws are about 1.4x faster here, and full-size layers
    are ~0.9 GB of draws.)
    """
    key = [seed, zlib.crc32(name.encode())] + ([] if layer is None else [layer])
    return np.random.Generator(np.random.SFC64(np.random.SeedSequence(key)))


def draw(rng: np.random.Generator, shape: tuple[int, ...], dist: Dist, dtype: np.dtype,
         consts: dict[str, int] | None = None) -> np.ndarray:
    """Fill a new `shape`/`dtype` array from `dist` (draws in float32, in chunks, then cast).

    ValueError for an unknown distribution kind or a missing scale constant.
    """
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    if dist.kind == "const":
        flat[...] = dist.a
        return out
    factor = 1.0
    if dist.scale is not None:
        if consts is None or dist.scale not in consts:
            raise ValueError(f"distribution scaled by 1/sqrt({dist.scale}) needs that constant")
        factor = 1.0 / float(np.sqrt(consts[dist.scale]))
    buf = np.empty(min(_CHUNK, flat.shape[0]), dtype=np.float32)
    for lo in range(0, flat.shape[0], _CHUNK):
        n = min(_CHUNK, flat.shape[0] - lo)
        chunk = buf[:n]
        if dist.kind == "normal":
            rng.standard_normal(n, dtype=np.float32, out=chunk)
            chunk *= np.float32(dist.b * factor)
            chunk += np.float32(dist.a * factor)
        elif dist.kind == "uniform":
            rng.random(n, dtype=np.float32, out=chunk)
            chunk *= np.float32((dist.b - dist.a) * factor)
            chunk += np.float32(dist.a * factor)
        else:
            raise ValueError(f"unknown distribution kind '{dist.kind}'")
        flat[lo:lo + n] = chunk.astype(dtype)
    return out


@records.shared_repr
@attrs.define(repr=False)
class Inputs:
    """External tensor data of one run.

    `arrays[name]` holds the unlayered tensors (hidden, seq_lens, paging, RoPE tables) and any
    LAYERED tensor a caller has `materialize`d. Per-layer tensors are otherwise produced on
    demand by `layer` (see the module doc). `period[name]` is the number of dim-0 rows per
    layer of a LAYERED tensor. `generated` counts layer slices drawn so far (regenerations
    after an LRU eviction included).
    """

    geometry: Geometry
    seed: int
    batch: int
    arrays: dict[str, np.ndarray]
    fixture: str = "current"
    weights: str = "distinct"
    period: dict[str, int] = attrs.Factory(dict)
    layered: dict[str, LayeredTensor] = attrs.Factory(dict)
    consts: dict[str, int] = attrs.Factory(dict)
    generated: int = 0
    _cache: dict[str, OrderedDict[int, np.ndarray]] = attrs.Factory(dict)

    @property
    def replicated(self) -> bool:
        """Every layer sees layer 0's data."""
        return self.weights == "replicated"

    def _generate(self, name: str, layer: int) -> np.ndarray:
        t = self.layered[name]
        self.generated += 1
        a = draw(stream(self.seed, name, layer), t.shape, t.dist, t.dtype, self.consts)
        a.flags.writeable = False
        return a

    def layer(self, name: str, layer: int) -> np.ndarray:
        """The rows of layer `layer` of a LAYERED tensor, read-only, shape [period, ...].

        KeyError for a name that is not per-layer; IndexError for a layer outside the run.
        """
        if not 0 <= layer < self.geometry.layers:
            raise IndexError(f"layer {layer} of '{name}' is outside 0..{self.geometry.layers - 1}")
        src = 0 if self.replicated else layer
        pinned = self.arrays.get(name)
        if pinned is not None:
            p = self.period[name]
            v = pinned if self.replicated else pinned[src * p:(src + 1) * p]
            v = v.view()
            v.flags.writeable = False
            return v
        if name not in self.layered:
            raise KeyError(f"'{name}' is not a per-layer input tensor")
        lru = self._cache.setdefault(name, OrderedDict())
        got = lru.get(src)
        if got is not None:
            lru.move_to_end(src)
            return got
        while len(lru) >= LAYER_CACHE:      # free before drawing: at most LAYER_CACHE layers held
            lru.popitem(last=False)
        got = self._generate(name, src)
        lru[src] = got
        return got

    def materialize(self, name: str) -> np.ndarray:
        """Make LAYERED tensor `name` a plain writable array held in `arrays` (tests edit it).

        Distinct weights: the whole stack [layers*period, ...]; replicated: layer 0's rows,
        which every layer then sees. Later `layer` calls read it.
        """
        if name in self.arrays:
            return self.arrays[name]
        if self.replicated:
            full = np.array(self.layer(name, 0))
        else:
            full = np.concatenate([self.layer(name, i) for i in range(self.geometry.layers)])
        self._cache.pop(name, None)
        self.arrays[name] = full
        return full

    @property
    def scalars(self) -> dict[str, int]:
        """Orchestration scalars: the live batch."""
        return {"batch": self.batch}


def rope_tables(max_seq: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """NeoX cos/sin tables [max_seq, head_dim] f32 with duplicated halves (theta 1e4)."""
    inv_freq = 1.0 / (ROPE_THETA ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    freqs = np.outer(np.arange(max_seq, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=1)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def layered_bytes(program: Program) -> int:
    """Bytes of every per-layer tensor of `program`, all layers (what distinct weights would hold)."""
    return sum(program.tensors[n].nbytes for n in LAYERED if n in program.tensors)


def make_inputs(program: Program, seed: int = 1234, batch: int | None = None, fixture: str = "current",
                weights: str = "auto") -> Inputs:
    """The inputs of `program` (a decode_fwd_layers spec) for `batch` live rows.

    `fixture` is 'current' or 'tier' (FIXTURES); `weights` 'distinct', 'replicated' or 'auto'
    (distinct up to REPLICATE_ABOVE_BYTES of per-layer tensors). Nothing per-layer is drawn
    here. ValueError for a batch outside 1..BATCH_PAD, an unknown fixture or weight mode, or a
    spec without the decode tensors.
    """
    g = Geometry.from_consts(program.consts)
    batch = g.batch_pad if batch is None else batch
    if not 1 <= batch <= g.batch_pad:
        raise ValueError(f"batch must be in 1..{g.batch_pad}, got {batch}")
    if fixture not in FIXTURES:
        raise ValueError(f"unknown input fixture '{fixture}' (current or tier)")
    if weights == "auto":
        weights = "replicated" if layered_bytes(program) > REPLICATE_ABOVE_BYTES else "distinct"
    if weights not in WEIGHT_MODES:
        raise ValueError(f"unknown weight mode '{weights}' (replicated, distinct or auto)")
    for name in (*LAYERED, "hidden", "seq_lens", "block_table", "slot_mapping", "rope_cos", "rope_sin"):
        if name not in program.tensors or program.tensors[name].storage is not Placement.EXTERNAL:
            raise ValueError(f"the NumPy backend runs the Qwen3 decode specs; this spec has no external tensor '{name}'")
    dists = FIXTURES[fixture]
    consts = {"HIDDEN": g.hidden, "INTERMEDIATE": g.intermediate}
    period: dict[str, int] = {}
    layered: dict[str, LayeredTensor] = {}
    for name in LAYERED:
        t = program.tensors[name]
        p = t.shape[0] // g.layers
        period[name] = p
        layered[name] = LayeredTensor(name, (p, *t.shape[1:]), NP_DTYPES[t.dtype], dists[name])
    arrays: dict[str, np.ndarray] = {}
    hidden = np.zeros((g.batch_pad, g.hidden), dtype=NP_DTYPES["bf16"])
    hidden[:batch] = draw(stream(seed, "hidden"), (batch, g.hidden), dists["hidden"], NP_DTYPES["bf16"])
    arrays["hidden"] = hidden
    longest = min(g.max_seq, TIER_MAX_SEQ) if fixture == "tier" else g.max_seq
    seq_lens = np.zeros(g.batch_pad, dtype=np.int32)
    seq_lens[:batch] = stream(seed, "seq_lens").integers(1, longest, size=batch, endpoint=True)
    arrays["seq_lens"] = seq_lens
    block_table = np.arange(g.batch_pad * g.max_blocks_per_seq, dtype=np.int32).reshape(g.batch_pad, -1)
    arrays["block_table"] = block_table
    slot = np.full(g.batch_pad, -1, dtype=np.int32)
    pos = seq_lens[:batch].astype(np.int64) - 1
    slot[:batch] = block_table[np.arange(batch), pos // g.block_size] * g.block_size + pos % g.block_size
    arrays["slot_mapping"] = slot
    arrays["rope_cos"], arrays["rope_sin"] = rope_tables(g.max_seq, g.head_dim)
    return Inputs(g, seed, batch, arrays, fixture, weights, period, layered, consts)
