"""The same model on CuPy: outputs and gradients equal to the NumPy model's.

Skipped, with the reason, where CuPy or a CUDA GPU is missing.
"""
import numpy as np
import pytest

import minibert as mb
from conftest import padded_batch


def _gpu_reason():
    try:
        import cupy
    except ImportError:
        return 'CuPy is not installed (pip install "minibert[gpu]")'
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "no CUDA GPU is visible"
    except Exception as exc:  # no driver
        return f"no usable CUDA GPU ({type(exc).__name__})"
    return None


REASON = _gpu_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def cfg(**kw):
    return mb.BertConfig(vocab_size=301, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                         intermediate_size=72, max_position_embeddings=32,
                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-4)])
@pytest.mark.parametrize("act", ["gelu", "gelu_new"])
def test_cupy_matches_numpy(dtype, tol, act, rng):
    import cupy
    cpu = mb.BertForPreTraining(cfg(hidden_act=act), seed=4, dtype=dtype)
    gpu = mb.BertForPreTraining(cfg(hidden_act=act), seed=4, dtype=dtype, device="cuda")
    assert isinstance(gpu.params.data, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(gpu.params.data), cpu.params.data)  # same init
    batch = padded_batch(rng, 301, B=3, T=10)
    batch["attention_mask"][2] = 0  # a fully padded sequence too
    a = cpu.forward(**batch, train=False)
    b = gpu.forward(**{k: cupy.asarray(v) for k, v in batch.items()}, train=False)
    assert abs(float(a.loss) - float(b.loss)) / float(a.loss) < tol
    np.testing.assert_allclose(cupy.asnumpy(b.mlm_logits), a.mlm_logits, rtol=tol, atol=tol)
    cpu.backward()
    gpu.backward()
    g_cpu, g_gpu = cpu.grad_state_dict(), gpu.grad_state_dict()
    for name, g in g_cpu.items():
        diff = np.linalg.norm(cupy.asnumpy(g_gpu[name]) - g)
        assert diff <= tol * max(np.linalg.norm(g), 1e-6), name


def test_gpu_dropout_is_seeded(rng):
    import cupy
    c = mb.BertConfig.from_preset("tiny", vocab_size=301)
    batch = padded_batch(rng, 301)
    losses = [float(mb.BertForPreTraining(c, seed=s, device="cuda").forward(**batch, train=True).loss)
              for s in (1, 1, 2)]
    assert losses[0] == losses[1] != losses[2]


def test_gpu_lists_in_and_save_load(tmp_path):
    import cupy
    m = mb.BertForPreTraining(cfg(), seed=1, device="cuda")
    out = m.forward([[2, 3, 4]], nsp_labels=[1])
    m.backward()
    assert isinstance(m.params.grad, cupy.ndarray) and bool(cupy.isfinite(m.params.grad).all())
    m.save_pretrained(tmp_path)
    again = mb.BertForPreTraining.from_pretrained(tmp_path, device="cuda")
    np.testing.assert_array_equal(cupy.asnumpy(again.params.data), cupy.asnumpy(m.params.data))
