"""NumPy kernels against values worked out by hand (reference §2.2, §2.6, §5)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from pgraph.backends.numpy import attention as att
from pgraph.backends.numpy import kernels as k
from pgraph.backends.numpy.storage import DenseStorage, GuardedTensor, KernelFault, OverlayStorage, RowAccess, poisoned

BF16 = np.dtype(ml_dtypes.bfloat16)
CTX = k.BlockContext(0, 1, "test")


def test_rms_recip_by_hand() -> None:
    x = np.full((2, 512), 2.0, dtype=np.float32)
    x[1] = 0.0
    inv = np.empty((2, 1), dtype=np.float32)
    k.rms_recip(CTX, x, inv)
    # mean(x^2) = 4 -> 1/sqrt(4 + 1e-6); a zero row gives 1/sqrt(1e-6) = 1000
    assert inv[0, 0] == pytest.approx(1 / math.sqrt(4 + 1e-6), rel=1e-6)
    assert inv[1, 0] == pytest.approx(1000.0, rel=1e-5)


def test_x_gamma0_rounds_to_bf16_in_its_block_columns() -> None:
    # HIDDEN = 10: block 1 of 5 covers columns 2..3 (docs/upstream.md §8.7 fid 2), gamma row 0
    x = np.full((1, 10), 1.0 / 3.0, dtype=np.float32)
    gamma = np.ones((2, 10), dtype=np.float32)
    gamma[1] = 7.0                                   # another layer's row: never read
    out = np.full((1, 10), np.nan, dtype=BF16)
    k.x_gamma0(k.BlockContext(1, 5, "test"), out, x, gamma)
    # 1/3 = 0x3EAAAAAB in f32; bf16 keeps 7 mantissa bits, round to nearest: 0x3EAB = 0.333984375
    assert out.view(np.uint16)[0, 2] == 0x3EAB and float(out[0, 3]) == 0.333984375
    assert np.isnan(out[0, :2].astype(np.float32)).all() and np.isnan(out[0, 4:].astype(np.float32)).all()


def test_silu_by_hand() -> None:
    # INTERMEDIATE = 34: 17 tiles of 2 columns; n0 = 2 is the second tile
    gate = np.zeros((1, 34), dtype=np.float32)
    up = np.zeros((1, 34), dtype=np.float32)
    gate[0, 2:4] = [1.0, -2.0]
    up[0, 2:4] = [2.0, 2.0]
    inv = np.array([[1.0]], dtype=np.float32)
    out = np.full((1, 34), np.nan, dtype=BF16)
    k.silu(CTX, inv, out, gate, up, 2)
    # silu(1)*2 = 2/(1+e^-1) = 1.46211716 -> bf16 step 2^-7 in [1,2): 187 * 2^-7 = 1.4609375
    assert float(out[0, 2]) == 1.4609375
    # silu(-2)*2 = -4/(1+e^2) = -0.47681168 -> bf16 step 2^-9 in [0.25,0.5): -244 * 2^-9 = -0.4765625
    assert float(out[0, 3]) == -0.4765625
    assert np.isnan(out[0, :2].astype(np.float32)).all() and np.isnan(out[0, 4:].astype(np.float32)).all()
    # the deferred post-norm scale multiplies gate and up before the activation
    gate[0, 2], up[0, 2] = 2.0, 4.0
    k.silu(CTX, np.array([[0.5]], dtype=np.float32), out, gate, up, 2)
    assert float(out[0, 2]) == 1.4609375


def test_q_proj_block_takes_its_k_slice_and_n_tile() -> None:
    # HIDDEN = 10: K slices of 2; 50 blocks = 10 N tiles of 1 column x 5 K slices; 2 layers of weights
    normed = np.arange(10, dtype=np.float32).reshape(1, 10).astype(BF16)
    w = np.zeros((20, 10), dtype=BF16)
    w[10 + 4:10 + 6, 7] = 1.0                        # layer 1, rows k0..k0+1 of K slice 2, column 7
    acc = np.ones((1, 10), dtype=np.float32)
    block = 2 + 5 * 7                                # b mod 5 = 2 (k0 = 4), b div 5 = 7 (n0 = 7)
    k.q_proj(k.BlockContext(block, 50, "test"), acc, normed, w, 10)
    k.q_proj(k.BlockContext(block, 50, "test"), acc, normed, w, 10)
    # acc[0, 7] += normed[4] + normed[5] twice: 1 + 2 * 9 = 19; every other column untouched
    assert acc[0, 7] == 19.0 and (np.delete(acc[0], 7) == 1.0).all()


def test_residual_and_dcr() -> None:
    # HIDDEN = 10: the slice from k_base = 4 covers columns 4..5; gamma row `layer` = 1
    a = np.zeros((1, 10), dtype=np.float32)
    x = np.zeros((1, 10), dtype=np.float32)
    a[0, 4:6], x[0, 4:6] = 0.25, [1.0, -1.0]
    gamma = np.ones((2, 10), dtype=np.float32)
    gamma[1, 4:6] = 2.0
    h1 = np.zeros((1, 10), dtype=np.float32)
    mlp_in = np.zeros((1, 10), dtype=BF16)
    k.residual_rms_cast(CTX, mlp_in, h1, a, x, gamma, 4, 1)
    assert h1[0, 4:6].tolist() == [1.25, -0.75] and [float(v) for v in mlp_in[0, 4:6]] == [2.5, -1.5]
    assert (h1[0, :4] == 0).all() and (h1[0, 6:] == 0).all()
    # dcr_xgamma block 2 of 5 covers columns 4..5; the next layer's gamma row 0
    down = np.zeros((1, 10), dtype=np.float32)
    down[0, 4:6] = 0.5
    g2 = np.ones((2, 10), dtype=np.float32)
    g2[0, 4:6] = [1.0, 4.0]
    out = np.zeros((1, 10), dtype=np.float32)
    normed = np.zeros((1, 10), dtype=BF16)
    k.dcr_xgamma(k.BlockContext(2, 5, "test"), down, h1, out, g2, normed, 0)
    assert out[0, 4:6].tolist() == [1.75, -0.25] and [float(v) for v in normed[0, 4:6]] == [1.75, -1.0]


def test_guarded_tensor_poisons_reads_and_refuses_writes_outside_the_declared_boxes() -> None:
    st = DenseStorage(np.arange(12, dtype=np.float32).reshape(3, 4))
    g = GuardedTensor(st, (3, 4), ((0, 3), (0, 4)), "t", "x", [((1, 2), (0, 4))], [((2, 3), (1, 3))], "test")
    assert g[1, :].tolist() == [4.0, 5.0, 6.0, 7.0]               # a declared read
    assert np.isnan(g[0, 1]) and np.isnan(np.asarray(g)[2]).all()  # outside it: poison
    assert g[np.array([1, 1]), np.array([0, 3])].tolist() == [4.0, 7.0]
    g[2, 1:3] = 9.0
    assert st.array[2].tolist() == [8.0, 9.0, 9.0, 11.0]
    with pytest.raises(KernelFault, match="outside the regions the spec declares"):
        g[2, 0:2] = 1.0
    assert st.array[2, 0] == 8.0


def test_zero_pad_rows_only_pad_rows() -> None:
    st = DenseStorage(poisoned((4, 2), BF16))
    acc = RowAccess(st, (4, 2), ((0, 4), (0, 2)), "attn_out", [], [((0, 4), (0, 2))])
    k.zero_pad_rows(CTX, acc, 3)
    assert np.isnan(st.array[:3].astype(np.float32)).all()
    assert (st.array[3].astype(np.float32) == 0).all()


def test_rope_rotates_each_pair_by_the_table_angle() -> None:
    # head_dim 4: pairs (0, 2) and (1, 3); (x, y) = (1, 0) rotates to (cos t, sin t)
    t = np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    theta = 0.3
    cos = np.array([[math.cos(theta), 1.0, math.cos(theta), 1.0]], dtype=np.float32)
    sin = np.array([[math.sin(theta), 0.0, math.sin(theta), 0.0]], dtype=np.float32)
    r = att._rope(t, cos, sin)
    assert r[0] == pytest.approx([math.cos(theta), 0.0, math.sin(theta), 0.0], abs=1e-7)


def test_rope_tables_neox() -> None:
    from pgraph.backends.numpy.inputs import rope_tables

    cos, sin = rope_tables(8, 128)
    # frequency i = 1e4^(-2i/128); column j and j+64 share it; position 3, i = 1: 3 * 1e4^(-1/64)
    angle = 3 * 10000 ** (-2 / 128)
    assert cos[3, 1] == pytest.approx(math.cos(angle), abs=1e-7)
    assert cos[3, 65] == cos[3, 1] and sin[3, 65] == sin[3, 1]
    assert (cos[0] == 1).all() and (sin[0] == 0).all()


def test_qk_norm_cancels_inv_rms_but_v_keeps_it() -> None:
    rng = np.random.default_rng(0)
    d, group = 8, 2
    q = rng.standard_normal((1, group * d)).astype(np.float32)
    kp = rng.standard_normal((1, d)).astype(np.float32)
    v = rng.standard_normal((1, d)).astype(np.float32)
    ones = np.ones(d, dtype=np.float32)
    cos, sin = np.ones((1, d), dtype=np.float32), np.zeros((1, d), dtype=np.float32)
    rows, heads = np.array([0]), np.array([0])
    a = att.rope_items(rows, heads, q, kp, v, np.array([1.0], np.float32), ones, ones, cos, sin)
    b = att.rope_items(rows, heads, q, kp, v, np.array([4.0], np.float32), ones, ones, cos, sin)
    np.testing.assert_array_equal(a[1].astype(np.float32), b[1].astype(np.float32))   # k: cancels
    np.testing.assert_array_equal(4 * a[2].astype(np.float32), b[2].astype(np.float32))  # v: scaled
    # with unit weights and no rotation the normalised k has mean square 1
    assert float(np.mean(a[1].astype(np.float32) ** 2)) == pytest.approx(1.0, rel=1e-2)


def _cache(rows: int, d: int, fill: np.ndarray | None = None) -> RowAccess:
    arr = np.zeros((rows, d), dtype=BF16) if fill is None else fill.astype(BF16)
    st = DenseStorage(arr)
    box = ((0, rows), (0, d))
    return RowAccess(st, (rows, d), box, "cache", [box], [box])


def test_paged_decode_matches_direct_softmax(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    d, heads, kvh, bs = 8, 2, 1, att.BLOCK_SIZE
    pages = 3
    kv = rng.standard_normal((pages * bs * kvh, d)).astype(np.float32)
    vv = rng.standard_normal((pages * bs * kvh, d)).astype(np.float32)
    q = rng.standard_normal((1, heads, d)).astype(BF16)
    table = np.array([[2, 0, 1]], dtype=np.int32)      # logical page p lives in physical page table[p]
    seq = 200                                        # page 0 full, page 1 holds 72 tokens
    ws = np.zeros(1 << 16, dtype=np.uint8)
    t = np.arange(seq)
    rows = table[0, t // bs] * bs + t % bs
    keys = kv.astype(BF16).astype(np.float32)[rows]
    vals = vv.astype(BF16).astype(np.float32)[rows]
    s = q.astype(np.float32)[0] @ keys.T / math.sqrt(d)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    expect = (p / p.sum(axis=1, keepdims=True)) @ vals
    out = att.paged_decode(q, _cache(len(kv), d, kv), _cache(len(vv), d, vv), table, np.array([seq]), ws, kvh)
    np.testing.assert_allclose(out[0], expect, atol=2e-6)
    # FAI rounds P to bf16 before P@V: relative error of each weight at most 2^-9
    monkeypatch.setattr(att, "P_BF16", True)
    out = att.paged_decode(q, _cache(len(kv), d, kv), _cache(len(vv), d, vv), table, np.array([seq]), ws, kvh)
    np.testing.assert_allclose(out[0], expect, atol=4e-3)
    assert np.abs(out[0] - expect).max() > 1e-6


def test_paged_decode_single_token_is_v() -> None:
    d = 4
    vv = np.arange(2 * att.BLOCK_SIZE * d, dtype=np.float32).reshape(-1, d) / 100
    kc = _cache(len(vv), d)
    q = np.ones((1, 4, d), dtype=BF16)
    out = att.paged_decode(q, kc, _cache(len(vv), d, vv), np.array([[0]], dtype=np.int32), np.array([1]),
                           np.zeros(4096, dtype=np.uint8), 2)
    # seq_len 1: softmax weight 1 on token 0; heads 0,1 read kv head 0 (row 0), heads 2,3 kv head 1 (row 1)
    v_bf = vv.astype(BF16).astype(np.float32)
    np.testing.assert_array_equal(out[0, :2], np.stack([v_bf[0]] * 2))
    np.testing.assert_array_equal(out[0, 2:], np.stack([v_bf[1]] * 2))


def test_tiling_metadata_layout_and_poison() -> None:
    md = np.full(27840, 0xA5, dtype=np.uint8)
    with pytest.raises(KernelFault, match="not written"):
        att.read_metadata(md)
    seq = np.array([5, 130, 1] + [0] * 13, dtype=np.int32)
    att.paged_attention_tiling_cce(CTX, seq, md, 32, 512)
    w = md[:64].view(np.int32)
    assert w[2] == 3 and w[3] == 32 and w[4] == 512 and w[5] == 128
    assert w[7] == 1 + 2 + 1  # pages: ceil(5/128) + ceil(130/128) + ceil(1/128)
    batch, kv = att.read_metadata(md)
    assert batch == 3 and kv.tolist() == [5, 130, 1]
    with pytest.raises(KernelFault, match="live rows"):
        att.paged_attention_tiling_cce(CTX, np.array([5, 0, 7] + [0] * 13, dtype=np.int32), md, 32, 512)


def test_row_access_bounds() -> None:
    st = DenseStorage(np.zeros((10, 2), dtype=np.float32))
    acc = RowAccess(st, (10, 2), ((4, 8), (0, 2)), "t", [((4, 8), (0, 2))], [((4, 6), (0, 2))])
    assert acc.take([0, 3]).shape == (2, 2)
    with pytest.raises(KernelFault, match="outside the region"):
        acc.take([4])
    with pytest.raises(KernelFault, match="outside the region"):
        acc.take([-1])
    acc.put([1], np.ones((1, 2)))
    assert st.array[5].tolist() == [1.0, 1.0]
    with pytest.raises(KernelFault, match="declares"):
        acc.put([3], np.ones((1, 2)))


def test_overlay_keeps_source_intact() -> None:
    src = DenseStorage(np.arange(12, dtype=np.float32).reshape(6, 2))
    ov = OverlayStorage(src)
    ov.put((6, 2), np.array([2]), np.array([[9.0, 9.0]]))
    assert ov.take((6, 2), np.array([1, 2])).tolist() == [[2.0, 3.0], [9.0, 9.0]]
    assert src.array[2].tolist() == [4.0, 5.0]
