"""specs/qwen3_14b.pgl holds every integer constant of reference §1, with its value.

The expected values are typed from the reference tables (docs/upstream.md §7.2),
not read from pgraph; derived constants are checked against the table's number.
"""

from __future__ import annotations

import pytest

from pgraph.pipeline import Options, plan_program
from tests.conftest import HEAD_SPEC

REFERENCE = {
    # §1.1 model
    "BATCH_PAD": 16, "NUM_HEADS": 40, "NUM_KV_HEADS": 8, "HEAD_DIM": 128, "HIDDEN": 5120, "KV_HIDDEN": 1024,
    "INTERMEDIATE": 17408, "VOCAB": 152064, "REAL_VOCAB": 151936, "NUM_LAYERS": 40, "MAX_SEQ": 4096,
    "HALF_DIM": 64, "Q_PER_KV": 5, "Q_HEAD_BATCH": 5, "Q_HEAD_PAD": 16, "Q_GROUPS": 1, "TOTAL_Q_GROUPS": 8,
    "SAMPLED_IDS_PAD": 8, "SEQ_TILE": 128, "BLOCK_SIZE": 128, "INT8_SCALE_MAX": 127,
    # §1.2 decode tiling
    "RMSNORM_K_CHUNK": 256, "XG_BLOCKS": 5, "TM": 16, "TN": 256, "TK": 256, "QKV_N_TILE": 512, "N_SUB": 2,
    "Q_ON": 10, "KV_ON": 2, "QKV_OK": 5, "QKV_K_SLICE": 1024, "QKV_K_CHUNKS": 4,
    "DECODE_MAX_BLOCKS_PER_SEQ": 32, "NUM_PAGES": 512, "CACHE_ROWS": 524288, "ROPE_CORES": 32,
    "ROPE_ITEMS_PER_CORE": 4, "K_RED_ROWS": 8, "PA_DEFAULT_BLOCK_DIM": 24,
    "N_SPLITS_OUT": 10, "K_SPLITS_OUT": 5, "OUT_TN": 512, "OUT_TK": 1024, "OUT_INNER_TK": 64, "OUT_N_SUB_K": 16,
    "N_OUT_DIRECT_BLOCKS": 24, "K_CHUNK": 256, "MLP_TN": 1024, "K_SPLITS_MLP": 5, "MLP_K_SLICE": 1024,
    "MLP_INNER_TK": 64, "MLP_N_SUB_K": 16, "MLP_ON": 17, "GATE_UP_SPMD_N": 6, "MLP_OUT_CHUNK": 256,
    "SILU_INNER_CHUNKS": 4, "DOWN_TN": 1024, "DOWN_TK": 64, "N_SUB_K": 16, "DOWN_ON": 5, "K_SPLITS": 17,
    "N_PER_CAST_K": 2, "CHUNK_NLAYERS": 8, "EMBED_HIDDEN_CHUNK": 256, "SAMPLE_VOCAB_CHUNK": 512,
    "SAMPLE_CHUNK_PAD": 512, "SAMPLE_TOPK": 16, "SAMPLE_NUM_VOCAB_CHUNKS": 297,
    "SAMPLE_REAL_NUM_FULL_CHUNKS": 296, "SAMPLE_REAL_VOCAB_TAIL": 384, "SAMPLE_REAL_NUM_CHUNKS": 297,
    # §1.3 attention extern and LM head
    "METADATA_BATCH_SLOTS": 16, "TILING_BYTES": 2488, "KV_LENGTHS_OFFSET": 2616, "METADATA_PREFIX_BYTES": 2744,
    "BARRIER_SLOT_BYTES": 512, "BARRIER_PHYSICAL_LANES": 48, "METADATA_BYTES": 27840, "WORKSPACE_BYTES": 66_132_544,
    "K_PLANNING_CORE_NUM": 24, "K_MAX_CORE_NUM": 26, "BATCH_TILE": 16, "FINAL_RMS_K_CHUNK": 128,
    "LM_HEAD_K_CHUNK": 512, "LM_VOCAB_CHUNK": 192, "LM_VOCAB_CHUNKS": 792, "LM_HEAD_CORES": 24,
    "LM_CHUNKS_PER_CORE": 33,
}


@pytest.fixture(scope="module")
def consts() -> dict[str, int]:
    plan, bag = plan_program(HEAD_SPEC, Options())
    assert plan is not None and not bag.has_errors
    return plan.program.consts


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_constant_matches_the_reference(consts: dict[str, int], name: str) -> None:
    assert consts.get(name) == REFERENCE[name], name


def test_every_geometry_assert_fires_when_broken() -> None:
    # the §1.2 geometry asserts guard the tiling: break one invariant at a time
    for define, fragment in ((("DOWN_TN", 1536),), "DOWN_ON"), ((("OUT_TN", 640),), "OUT_TN"), \
            ((("GATE_UP_SPMD_N", 17),), "GATE_UP_SPMD_N"), ((("ROPE_CORES", 48),), "ROPE_CORES"):
        plan, bag = plan_program(HEAD_SPEC, Options(defines=define))
        failed = [d for d in bag.items if d.code == "PG008"]
        assert failed, define
        assert any(fragment in d.message for d in failed), [d.message for d in failed]
