"""CUDA graphs (``accel/cuda/graph.py``) on the CPU stand-in: a capture refuses what a graph cannot hold,
and a replay redoes the captured launches on the arrays' new contents, with the scalars of the capture.

The stand-in's capture (``tests/graph_stand_in.py``) records each launch of the ``Device`` arrays and
of the kernels as a function that makes it again; ``tests/test_gpu.py`` captures on a GPU.
"""
import numpy as np
import pytest

from minibert import accel
from minibert.accel.cuda import gemm, graph
import graph_stand_in
from test_sync_free_step import REASON, Device, device_numpy, on_gpu_stand_in  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def dev(a):
    return np.asarray(a).view(Device)


def _block(rng, B=3, T=5, H=16):
    """A small forward through the GPU's ops: linear, bias + GELU, residual + LayerNorm, and a product."""
    x = dev(rng.standard_normal((B, T, H)).astype(np.float32))
    W1 = dev(rng.standard_normal((4 * H, H)).astype(np.float32) * 0.1)
    b1 = dev(rng.standard_normal(4 * H).astype(np.float32))
    W2 = dev(rng.standard_normal((H, 4 * H)).astype(np.float32) * 0.1)
    gamma, beta = dev(np.ones(H, np.float32)), dev(np.zeros(H, np.float32))
    ops = accel.cuda

    def fn():
        h, _ = ops.linear_forward(x, W1, None)
        h, _ = ops.gelu_forward(h, bias=b1)
        h, _ = ops.linear_forward(h, W2, None)
        y, _ = ops.dropout_add_layernorm_forward(h, x, gamma, beta, 1e-12, 0.0, None, False)
        return y, ops.attention_forward(y[:, None], y[:, None], y[:, None], None)[0]
    return x, fn


def test_a_replay_computes_the_captured_work_on_new_inputs(on_gpu_stand_in):
    rng = np.random.default_rng(0)
    x, fn = _block(rng)
    g = graph.Graph(fn)
    for _ in range(2):
        x[...] = rng.standard_normal(x.shape).astype(np.float32)     # the host fills the input in place
        got = [a.copy() for a in g.replay()]
        with graph.direct_products():
            want = fn()
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert not gemm.DIRECT                                # the capture's setting is undone after it


def test_a_scalar_is_frozen_into_the_graph(on_gpu_stand_in):
    """A number given to a launch as a value is the capture's forever: what changes must be in an array."""
    x, lr = dev(np.ones(4, np.float32)), [0.5]
    g = graph.Graph(lambda: x * np.float32(lr[0]))
    lr[0] = 2.0
    np.testing.assert_array_equal(g.replay(), [0.5] * 4)


@pytest.mark.parametrize("what, fn", [
    ("a device value read on the host", lambda x, xp: float(x.sum())),
    ("cuBLAS called by CuPy", lambda x, xp: x.reshape(2, 2) @ x.reshape(2, 2)),
    ("a host-to-device copy", lambda x, xp: x + xp.asarray(np.ones(4, np.float32))),
    ("a size read back", lambda x, xp: xp.flatnonzero(x)),
])
def test_a_capture_refuses_what_a_graph_cannot_hold(what, fn, on_gpu_stand_in):
    x, xp = dev(np.ones(4, np.float32)), device_numpy()
    with pytest.raises(graph_stand_in.CaptureError, match=what):
        graph.Graph(lambda: fn(x, xp))
    assert not graph_stand_in.capturing()               # the failed capture was ended
    assert graph.Graph(lambda: x * 2).replay().tolist() == [2.0] * 4
