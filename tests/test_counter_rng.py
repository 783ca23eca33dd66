"""Dropout's counter-based uniforms (minibert/accel/counter_rng.py): the numbers the GPU's dropout kernels
compute for themselves, here in NumPy.  The kernels' own C is compared with these numbers in
``tests/test_gpu_kernels_on_cpu.py`` (and on a GPU in ``tests/test_gpu.py``)."""
import numpy as np
import pytest

from minibert.accel.counter_rng import GOLDEN, MASK, CounterUniform, counter_uniform, mix64


def test_each_number_is_the_hash_of_its_index():
    key = 0x0123456789ABCDEF
    u = counter_uniform(key, (5,), dtype=np.float64)
    for i in range(5):
        z = mix64((key + (i + 1) * GOLDEN) & MASK)
        assert u[i] == (z >> 11) / 2.0 ** 53
    u32 = counter_uniform(key, (5,), dtype=np.float32)
    assert u32.dtype == np.float32
    for i in range(5):
        assert u32[i] == np.float32((mix64((key + (i + 1) * GOLDEN) & MASK) >> 40) / 2.0 ** 24)


def test_an_element_does_not_depend_on_the_shape_it_is_drawn_in():
    # element i of a draw is the same in any shape holding it (C order): a kernel that computes
    # the number of element k of a (B, A, T, T) array needs only k
    a = counter_uniform(7, (6, 10))
    b = counter_uniform(7, (60,))
    np.testing.assert_array_equal(a.reshape(-1), b)
    np.testing.assert_array_equal(counter_uniform(7, (3, 4)).reshape(-1), b[:12])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_numbers_are_uniform_on_0_1(dtype):
    n = 1 << 20
    u = counter_uniform(12345, (n,), dtype=dtype)
    assert u.dtype == dtype and u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n)
    counts = np.bincount((u * 64).astype(int), minlength=64)
    chi2 = ((counts - n / 64) ** 2 / (n / 64)).sum()
    assert chi2 < 120          # 63 degrees of freedom: 120 is beyond the 99.99th percentile
    # neighbours are independent: the correlation of u_i and u_{i+1} is within noise of 0
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 5 / np.sqrt(n)


def test_a_dropout_mask_keeps_1_minus_p():
    u = counter_uniform(99, (512, 512))
    assert abs((u >= 0.1).mean() - 0.9) < 0.002


def test_successive_draws_and_steps_differ_and_repeat():
    a, b = CounterUniform(5), CounterUniform(5)
    first, second = a((1000,)), a((1000,))
    np.testing.assert_array_equal(first, b((1000,)))          # the same seed: the same numbers
    np.testing.assert_array_equal(second, b((1000,)))
    assert abs(np.corrcoef(first, second)[0, 1]) < 0.15        # the next dropout draws anew
    other_step = CounterUniform(6)((1000,))
    assert not np.array_equal(first, other_step)
    # a key and an array advance the same counter: a kernel that takes keys draws what the array would
    c, d = CounterUniform(5), CounterUniform(5)
    c.next_key()
    d((3,))
    np.testing.assert_array_equal(c((1000,)), d((1000,)))


def test_a_draw_for_a_kernel_is_the_next_key_and_reseeding_rewrites_the_same_base():
    """``next_draw`` gives (base in device memory, n) with next_key's counter; ``reseed`` starts a step
    anew and writes its base into the same array, which a CUDA graph keeps reading."""
    c, d = CounterUniform(5), CounterUniform(5)
    base, n = c.next_draw()
    assert n == 0 and base.shape == () and base.dtype == np.uint64 and int(base) == c.base
    assert c.next_draw()[1] == 1 and d.next_key() == mix64(c.base) and c.next_key() == mix64((c.base + 2 * GOLDEN) & MASK)
    c.reseed(6)
    again, n = c.next_draw()
    assert again is base and n == 0 and int(base) == CounterUniform(6).base != d.base
