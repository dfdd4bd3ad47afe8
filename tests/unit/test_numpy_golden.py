"""The dense reference against independent derivations, and the executor's intermediates against it."""

from __future__ import annotations

import math

import attrs
import ml_dtypes
import numpy as np
import pytest

from pgraph.backends.numpy.compare import TIER_3E3, compare
from pgraph.backends.numpy.golden import golden_decode
from pgraph.backends.numpy.inputs import make_inputs
from pgraph.pipeline import Options
from tests.conftest import HEAD_SPEC, numpy_session, plan_ok

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(scope="module")
def small_program():
    return plan_ok(HEAD_SPEC, config="small", layers=1).program


def _bf(a):
    return np.asarray(a, dtype=np.float32).astype(BF16).astype(np.float32)


def test_zero_output_weights_give_the_input_back(small_program) -> None:
    inp = make_inputs(small_program, seed=3)
    inp.materialize("wo")[...] = 0
    inp.materialize("w_down")[...] = 0
    # x + 0 @ wo + 0 @ w_down = x: out = bf16(f32(hidden)) = hidden exactly
    out = golden_decode(inp).out
    np.testing.assert_array_equal(out.view(np.uint16), inp.arrays["hidden"].view(np.uint16))


def test_single_token_attention_returns_scaled_v(small_program) -> None:
    inp = make_inputs(small_program, seed=5, batch=3)
    g = inp.geometry
    inp.arrays["seq_lens"][:3] = 1
    inp.arrays["slot_mapping"][:3] = inp.arrays["block_table"][:3, 0] * g.block_size
    res = golden_decode(inp, keep_layers=True)
    x = inp.arrays["hidden"].astype(np.float32)
    normed = _bf(x * inp.layer("input_rms_weight", 0)[0])
    inv = 1 / np.sqrt((x * x).mean(axis=1) + 1e-6)
    v = normed @ inp.layer("wv", 0).astype(np.float32)
    group = g.num_heads // g.num_kv_heads
    for b in range(3):
        for h in range(g.num_heads):
            kv = h // group
            want = _bf(v[b, kv * 128:(kv + 1) * 128] * inv[b])      # softmax over one token = 1
            got = res.layers[0].attn_out[b, h * 128:(h + 1) * 128].astype(np.float32)
            np.testing.assert_allclose(got, want, atol=1e-2, rtol=1e-2)
    assert (res.layers[0].attn_out[3:].astype(np.float32) == 0).all()


def test_attention_of_one_row_by_explicit_loops(small_program) -> None:
    """Row 0, every head, token by token through the page table (no vectorised gather)."""
    inp = make_inputs(small_program, seed=11, batch=2)
    g = inp.geometry
    res = golden_decode(inp, keep_layers=True)
    lay = res.layers[0]
    b = 0
    seq = int(inp.arrays["seq_lens"][b])
    kc, vc = inp.layer("k_cache", 0), inp.layer("v_cache", 0)
    x = inp.arrays["hidden"].astype(np.float32)
    normed = _bf(x * inp.layer("input_rms_weight", 0)[0])
    inv = 1 / math.sqrt(float((x[b] * x[b]).mean()) + 1e-6)
    q = normed[b] @ inp.layer("wq", 0).astype(np.float32) * inv
    group = g.num_heads // g.num_kv_heads
    pos = seq - 1
    cos, sin = inp.arrays["rope_cos"][pos], inp.arrays["rope_sin"][pos]
    for h in range(g.num_heads):
        kv = h // group
        qh = q[h * 128:(h + 1) * 128]
        qh = qh / math.sqrt(float((qh * qh).mean()) + 1e-6) * inp.layer("q_norm_weight", 0)[0]
        rot = np.empty(128, dtype=np.float32)
        for i in range(64):   # NeoX: pair (i, i + 64) rotated by the angle of column i
            rot[i] = qh[i] * cos[i] - qh[i + 64] * sin[i]
            rot[i + 64] = qh[i + 64] * cos[i + 64] + qh[i] * sin[i + 64]
        qb = _bf(rot)
        scores, values = [], []
        for t in range(seq):
            if t == pos:
                key, val = lay.k_cur[b, kv].astype(np.float32), lay.v_cur[b, kv].astype(np.float32)
            else:
                page = int(inp.arrays["block_table"][b, t // 128])
                row = (page * 128 + t % 128) * g.num_kv_heads + kv
                key, val = kc[row].astype(np.float32), vc[row].astype(np.float32)
            scores.append(float(qb @ key) / math.sqrt(128))
            values.append(val)
        w = np.exp(np.array(scores) - max(scores))
        want = (w / w.sum()) @ np.array(values)
        got = lay.attn_out[b, h * 128:(h + 1) * 128].astype(np.float32)
        np.testing.assert_allclose(got, _bf(want), atol=4e-3)


def test_executor_intermediates_match_the_reference() -> None:
    session = numpy_session(HEAD_SPEC, Options(config="small", layers=2), seed=21, batch=11)
    ex = session.execute("random", seed=3, keep_buffers=True)
    assert ex.ok, ex.comparison
    buf = ex.buffers
    assert buf is not None
    for layer, ref in enumerate(session.golden.layers):
        checks = {
            "inv_rms": (buf[("inv_rms", (layer,))].array, ref.inv_rms),
            "attn_out": (buf[("attn_out", (layer,))].array, ref.attn_out),
            "h1": (buf[("h1", (layer,))].array, ref.h1),
            "inv_rms_tile": (buf[("inv_rms_tile", (layer,))].array, ref.post_inv),
            "mlp_tile": (buf[("mlp_tile", (layer,))].array, ref.mlp),
            "layer_out": (buf[("layer_out", (layer,))].array, ref.layer_out),
        }
        for name, (got, want) in checks.items():
            c = compare(got, want, 11, [TIER_3E3])
            assert c.ok, (layer, name, c.render())


def test_replicated_inputs_equal_distinct_ones_for_one_layer(small_program) -> None:
    a = make_inputs(small_program, seed=2, weights="replicated")
    b = make_inputs(small_program, seed=2, weights="distinct")
    assert a.replicated and not b.replicated
    np.testing.assert_array_equal(a.layer("w_gate", 0).view(np.uint16), b.layer("w_gate", 0).view(np.uint16))
    ra, rb = golden_decode(a).out, golden_decode(attrs.evolve(b)).out
    np.testing.assert_array_equal(ra.view(np.uint16), rb.view(np.uint16))
