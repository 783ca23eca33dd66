"""``minibert finetune``'s model and recipe on the GPU's code path, without a GPU.

The model's arrays are the stand-in device's and its ops the GPU's (``accel.cuda``, with their kernels
compiled for the CPU: ``tests/cuda_on_cpu.py``), as ``--device cuda`` runs them: the classifier's
forward and backward, the loss scaler's verdict and step in mixed precision, the clipping on the device,
the predictions read back.  Without dropout (a GPU draws its masks from a counter, the CPU from NumPy's
generator) a few epochs of the recipe give the CPU's losses and predictions, in float32 and in mixed
precision; with dropout, the seed fixes the run on the device too.
"""
import numpy as np
import pytest

from minibert.data.tokenizer import WordPieceTokenizer
from minibert.finetune.features import encode
from minibert.finetune.train import Recipe, predict, train
from test_finetune_train import VOCAB, small_model, sst2_like
from test_sync_free_step import REASON, Device, on_gpu_stand_in  # noqa: F401 (a fixture)

pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
RECIPE = Recipe(lr=2e-3, batch_size=16, epochs=2, seed=0)


def fine_tune(mixed_precision, dropout=0.0, device="cpu"):
    """(the loss of every step, the logits of the training examples afterwards, the model)."""
    model = small_model(dropout=dropout, layers=1, device=device, kernels="fast", mixed_precision=mixed_precision)
    tok = WordPieceTokenizer(VOCAB)
    features = encode(tok, sst2_like(np.random.default_rng(0), 40), 32)     # 3 batches an epoch, the last of 8
    losses = train(model, features, tok.pad_id, RECIPE)
    return np.array(losses), predict(model, features, tok.pad_id), model


@pytest.fixture(scope="module")
def on_the_cpu():
    """The CPU's runs, made before the stand-in takes over model building."""
    return {mixed: fine_tune(mixed)[:2] for mixed in (False, True)}


@pytest.mark.parametrize("mixed_precision", [False, True], ids=["float32", "mixed"])
def test_fine_tuning_on_the_gpus_path_follows_the_cpu(on_the_cpu, on_gpu_stand_in, mixed_precision):
    losses, logits, model = fine_tune(mixed_precision, device="cuda")
    assert isinstance(model.params.data, Device)            # the run was on the stand-in device
    cpu_losses, cpu_logits = on_the_cpu[mixed_precision]
    assert len(losses) == len(cpu_losses) == 6
    # the kernels sum in another order than NumPy's BLAS: the last bits differ (about 1e-7 here)
    np.testing.assert_allclose(losses, cpu_losses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logits, cpu_logits, rtol=1e-5, atol=1e-6)
    assert isinstance(logits, np.ndarray) and not isinstance(logits, Device)   # read back to the host


def test_the_seed_fixes_a_run_with_dropout_on_the_gpus_path(on_the_cpu, on_gpu_stand_in):
    first, again = (fine_tune(True, dropout=0.3, device="cuda")[0] for _ in range(2))
    assert np.array_equal(first, again)
    assert np.abs(first - on_the_cpu[True][0]).max() > 1e-2        # the masks were drawn: not the run without
