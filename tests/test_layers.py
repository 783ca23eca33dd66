"""Every layer's hand-written backward against central differences in float64.

The error must be below 1e-7 relative to the largest entry of each gradient
(``max_rel_error``), on odd shapes and with a fully padded row where a mask is
involved.  Entry-by-entry relative error (CS231n's ``rel_error``) cannot be
used for tensors with near-zero entries, whose finite differences carry an
absolute rounding error of ~1e-11; it is asserted where entries are O(1).
"""
import numpy as np
import pytest

from minibert import ops as L
from minibert.gradcheck import max_rel_error, numerical_gradient, rel_error

TOL = 1e-7


def check(forward, backward, inputs, rng, names=None):
    """Compare ``backward(dout, cache)`` with numerical gradients of every input.

    forward(*inputs) -> (out, cache); backward returns one gradient per input
    (a tuple, or a single array for one input).
    """
    out, cache = forward(*inputs)
    dout = rng.standard_normal(np.shape(out))
    grads = backward(dout, cache)
    grads = grads if isinstance(grads, tuple) else (grads,)
    assert len(grads) == len(inputs)
    for i, (x, g) in enumerate(zip(inputs, grads)):
        num = numerical_gradient(lambda: forward(*inputs)[0], x, dout)
        err = max_rel_error(g, num)
        label = names[i] if names else f"input {i}"
        assert err < TOL, f"{label}: relative error {err:.2e}"
    return out


@pytest.mark.parametrize("shape", [(7, 5), (2, 3, 5), (1, 1, 1)])
@pytest.mark.parametrize("n_out", [1, 4])
def test_linear(rng, shape, n_out):
    x = rng.standard_normal(shape)
    W = rng.standard_normal((n_out, shape[-1]))
    b = rng.standard_normal(n_out)
    check(L.linear_forward, L.linear_backward, [x, W, b], rng, ["x", "W", "b"])


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 5), (1, 3)])
def test_layernorm(rng, shape):
    H = shape[-1]
    x = rng.standard_normal(shape) * 3 + 1
    g = rng.standard_normal(H)
    b = rng.standard_normal(H)
    fwd = lambda x, g, b: L.layernorm_forward(x, g, b, 1e-12)
    check(fwd, L.layernorm_backward, [x, g, b], rng, ["x", "gamma", "beta"])


def test_layernorm_normalises(rng):
    x = rng.standard_normal((5, 9)) * 4 + 2
    y, _ = L.layernorm_forward(x, np.ones(9), np.zeros(9), 1e-12)
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1, rtol=1e-10)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(rng, approximate):
    x = rng.standard_normal((3, 7)) * 3
    check(lambda x: L.gelu_forward(x, approximate), L.gelu_backward, [x], rng)


def test_gelu_values():
    # GELU(x) = x Phi(x): Phi(0) = 1/2, Phi(1) = 0.8413447460685429
    y, _ = L.gelu_forward(np.array([0.0, 1.0, -1.0]), "none")
    np.testing.assert_allclose(y, [0.0, 0.8413447460685429, -0.15865525393145707], rtol=1e-14)
    t, _ = L.gelu_forward(np.array([1.0]), "tanh")
    assert abs(t[0] - 0.8413447460685429) < 1e-3 and t[0] != y[1]  # close to exact, not equal


def test_tanh(rng):
    check(L.tanh_forward, L.tanh_backward, [rng.standard_normal((4, 5))], rng)


@pytest.mark.parametrize("shape,axis", [((4, 7), -1), ((2, 3, 5), 1), ((1, 1), -1)])
def test_softmax(rng, shape, axis):
    x = rng.standard_normal(shape) * 5
    out = check(lambda x: L.softmax_forward(x, axis), L.softmax_backward, [x], rng)
    np.testing.assert_allclose(out.sum(axis), 1.0)


def test_softmax_is_stable():
    p, _ = L.softmax_forward(np.array([[1000.0, 1000.0, -1000.0]]))
    np.testing.assert_allclose(p, [[0.5, 0.5, 0.0]])


def test_embedding(rng):
    V, H = 11, 6
    ids = np.array([[1, 4, 4, 0, 0], [10, 1, 0, 3, 4]])  # repeats and padding (id 0)
    W = rng.standard_normal((V, H))
    out, cache = L.embedding_forward(ids, W)
    dout = rng.standard_normal(out.shape)
    dW = L.embedding_backward(dout, cache, padding_idx=0)
    num = numerical_gradient(lambda: L.embedding_forward(ids, W)[0], W, dout)
    num[0] = 0  # the [PAD] row gets no gradient, by design (as nn.Embedding(padding_idx=0))
    assert rel_error(dW, num) < TOL  # entries are O(1) or exactly 0 here
    assert not dW[0].any()
    # a sum over repeated ids: 4 appears three times, 1 twice
    np.testing.assert_allclose(dW[4], dout[0, 1] + dout[0, 2] + dout[1, 4], rtol=1e-13)
    np.testing.assert_allclose(dW[1], dout[0, 0] + dout[1, 1], rtol=1e-13)


def test_dropout(rng):
    x = rng.standard_normal((50, 40))
    fixed = rng.random(x.shape)
    fwd = lambda x: L.dropout_forward(x, 0.3, lambda shape: fixed, True)
    out = check(fwd, L.dropout_backward, [x], rng)
    kept = out != 0
    assert 0.6 < kept.mean() < 0.8
    np.testing.assert_allclose(out[kept], x[kept] / 0.7)
    same, cache = L.dropout_forward(x, 0.3, None, False)
    assert same is x and cache is None


@pytest.mark.parametrize("train", [True, False])
def test_dropout_add_layernorm(rng, train):
    """The post-LN residual connection: its four gradients, the sublayer's through dropout's mask."""
    a, x = rng.standard_normal((3, 4, 9)), rng.standard_normal((3, 4, 9)) * 2
    g, b = rng.standard_normal(9), rng.standard_normal(9)
    fixed = rng.random(a.shape)
    fwd = lambda a, x, g, b: L.dropout_add_layernorm_forward(a, x, g, b, 1e-12, 0.3, lambda shape: fixed, train)
    out = check(fwd, L.dropout_add_layernorm_backward, [a, x, g, b], rng, ["a", "x", "gamma", "beta"])
    mask = (fixed >= 0.3) / 0.7 if train else 1.0
    np.testing.assert_array_equal(out, L.layernorm_forward(a * mask + x, g, b, 1e-12)[0])
    # a gradient of y in two parts is their sum
    dy, skip = rng.standard_normal(a.shape), rng.standard_normal(a.shape)
    cache = fwd(a, x, g, b)[1]
    for got, want in zip(L.dropout_add_layernorm_backward(dy, cache, skip),
                         L.dropout_add_layernorm_backward(dy + skip, cache)):
        np.testing.assert_array_equal(got, want)


def test_dropout_keeps_the_mean(rng):
    x = np.ones(200_000)
    gen = np.random.default_rng(0)
    out, _ = L.dropout_forward(x, 0.1, lambda s: gen.random(s), True)
    assert abs(out.mean() - 1.0) < 0.01


@pytest.mark.parametrize("B,A,T,D", [(2, 3, 5, 4), (1, 1, 3, 2), (3, 2, 7, 3)])
def test_attention_with_padding(rng, B, A, T, D):
    q, k, v = (rng.standard_normal((B, A, T, D)) for _ in range(3))
    mask = np.ones((B, T), dtype=np.int64)
    mask[0, T - 2:] = 0
    if B > 1:
        mask[-1, :] = 0  # a fully padded row
    bias = L.attention_mask_bias(mask, np.float64)
    fwd = lambda q, k, v: L.attention_forward(q, k, v, bias)
    out = check(fwd, L.attention_backward, [q, k, v], rng, ["q", "k", "v"])
    assert np.isfinite(out).all()


def test_attention_ignores_padded_keys(rng):
    B, A, T, D = 1, 2, 6, 4
    q, k, v = (rng.standard_normal((B, A, T, D)) for _ in range(3))
    mask = np.array([[1, 1, 1, 0, 0, 0]])
    out, _ = L.attention_forward(q, k, v, L.attention_mask_bias(mask, np.float64))
    v2 = v.copy()
    v2[..., 3:, :] = 1e6  # whatever sits at padded positions must not leak in
    out2, _ = L.attention_forward(q, k, v2, L.attention_mask_bias(mask, np.float64))
    np.testing.assert_allclose(out, out2)


def test_attention_with_dropout(rng):
    B, A, T, D = 2, 2, 4, 3
    q, k, v = (rng.standard_normal((B, A, T, D)) for _ in range(3))
    fixed = rng.random((B, A, T, T))
    bias = L.attention_mask_bias(np.ones((B, T), dtype=np.int64), np.float64)
    fwd = lambda q, k, v: L.attention_forward(q, k, v, bias, 0.25, lambda s: fixed, True)
    check(fwd, L.attention_backward, [q, k, v], rng)


def test_split_merge_heads(rng):
    x = rng.standard_normal((2, 5, 12))
    assert L.split_heads(x, 3).shape == (2, 3, 5, 4)
    np.testing.assert_array_equal(L.merge_heads(L.split_heads(x, 3)), x)


def test_cross_entropy_ignores_labels(rng):
    N, C = 9, 7
    logits = rng.standard_normal((N, C)) * 3
    labels = rng.integers(0, C, N)
    labels[[1, 4, 5]] = -100
    loss, cache = L.softmax_cross_entropy_forward(logits, labels)
    # reference: mean over the labelled rows only
    valid = labels != -100
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    assert abs(loss - (-logp[valid, labels[valid]].mean())) < 1e-13
    dlogits = L.softmax_cross_entropy_backward(1.0, cache)
    num = numerical_gradient(lambda: L.softmax_cross_entropy_forward(logits, labels)[0], logits)
    assert max_rel_error(dlogits, num) < TOL
    assert not dlogits[~valid].any()


def test_cross_entropy_with_no_label_is_zero(rng):
    logits = rng.standard_normal((3, 4))
    loss, cache = L.softmax_cross_entropy_forward(logits, np.full(3, -100))
    assert loss == 0.0
    assert not L.softmax_cross_entropy_backward(1.0, cache).any()


def test_mse_is_the_mean_squared_error_and_its_gradient(rng):
    pred, target = rng.standard_normal(7), rng.uniform(0, 5, 7)
    loss, cache = L.mse_forward(pred, target)
    assert abs(loss - np.mean((pred - target) ** 2)) < 1e-14
    dpred = L.mse_backward(0.7, cache)
    num = numerical_gradient(lambda: 0.7 * L.mse_forward(pred, target)[0], pred)
    assert max_rel_error(dpred, num) < TOL
    with pytest.raises(ValueError, match=r"mse_forward: pred and target must both be \(N,\), got \(7,\) and \(6,\)"):
        L.mse_forward(pred, target[:6])


def test_layers_name_a_shape_mismatch_in_one_line():
    x = np.ones((4, 8))
    cases = [
        (lambda: L.linear_forward(x, np.ones((5, 7)), np.ones(5)), r"linear_forward: x \(4, 8\), W \(5, 7\)"),
        (lambda: L.linear_forward(x, np.ones((5, 8)), np.ones(8)), "b be \\(out,\\)"),
        (lambda: L.layernorm_forward(x, np.ones(7), np.ones(7), 1e-12), r"gamma and beta must be \(8,\)"),
        (lambda: L.embedding_forward(np.array([[1, 9]]), np.ones((5, 3))), r"ids must be ints in \[0, 5\)"),
        (lambda: L.embedding_forward(np.array([[1.0]]), np.ones((5, 3))), "got float64"),
        (lambda: L.attention_forward(np.ones((2, 2, 3, 4)), np.ones((2, 2, 3, 5)), np.ones((2, 2, 3, 5)), None),
         "same B, A and D"),
        (lambda: L.softmax_cross_entropy_forward(np.ones((3, 5)), np.zeros(4, dtype=int)), r"labels \(N,\)"),
    ]
    from minibert.accel import cpu
    for ns in (L, cpu):           # the bias a GELU or a residual connection adds, in every set of ops
        cases += [(lambda ns=ns: ns.gelu_forward(x, "none", bias=np.ones(4)), r"gelu_forward: .* must be \(8,\)"),
                  (lambda ns=ns: ns.dropout_add_layernorm_forward(x, x, np.ones(8), np.ones(8), 1e-12, 0.0, None, False,
                                                                  bias=np.ones((1, 8))),
                   r"dropout_add_layernorm_forward: .* must be \(8,\); got \(1, 8\)")]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()
