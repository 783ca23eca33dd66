"""Every accelerated kernel against its reference op, and the wall between the two.

A set of ops (``minibert.ops``, ``minibert.accel.cpu``, ``minibert.accel.cuda``)
defines every name of ``ops.OPS``; the names where a fast set has a function
of its own are its kernels, and each is tested here without a line more (an
op without a case below fails, naming itself).  A forward and its backward
are compared as a pair: the set's forward against the reference forward, and
the set's backward on its own forward's cache against the reference backward
on the reference's cache (a kernel's cache is its own business).

Devices: ``accel.cpu`` on float32 NumPy arrays; ``accel.cuda`` on a GPU
through CuPy, and, with or without one, compiled for the CPU by
``tests/cuda_on_cpu.py`` where a C++ compiler is present (float32 and float64).
"""
import ast
import copy
import sys
from pathlib import Path

import numpy as np
import pytest

import minibert
from minibert import ops
from minibert.accel import cpu as accel_cpu, cuda as accel_cuda
from conftest import ROOT

TOL = {"float32": 2e-5, "float64": 1e-12}


# -------------------------------------------------------------- the wall: ops never import accel
def _imports(source, package):
    """Every module ``source`` (code of a module of ``package``) imports, relative imports resolved."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            names += [base] + [f"{base}.{a.name}" for a in node.names]
    return names


REFERENCE_FILES = sorted((ROOT / "minibert" / "ops").glob("*.py"))


def _accelerated(names):
    return [n for n in names if n.startswith("minibert.accel") or n in ("minibert.fast", "minibert.gpu_fused")]


@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_reference_ops_never_import_accelerated_code(path):
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    bad = _accelerated(_imports(path.read_text(), package))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("line", ["from .. import accel", "from ..accel.cpu import linear",
                                  "import minibert.accel.cuda", "from minibert import accel",
                                  "from ..accel import cpu as c"])
def test_the_import_check_sees_every_form_of_import(line):
    assert _accelerated(_imports(line, "minibert.ops"))


# -------------------------------------------------------------------------------- inputs
def _draws(xp, dtype):
    """A dropout generator that gives the same numbers for the same shape, every call."""
    cache = {}

    def draw(shape):
        if shape not in cache:
            u = np.random.default_rng(abs(hash(shape)) % 2**32).random(shape).astype(dtype)
            cache[shape] = xp.asarray(u)
        return cache[shape]
    return draw


def _cases(concept, xp, dtype, rng):
    """Variants of (forward args, forward kwargs, backward kwargs) for one concept."""
    def a(*shape, scale=1.0):
        return xp.asarray((rng.standard_normal(shape) * scale).astype(dtype))

    if concept == "linear":
        x, W, b = a(3, 70, 24), a(40, 24), a(40)
        out = [((x, W, b), {}, {})]
        if xp is np and dtype == "float32":           # mixed precision: a float16 weight
            W16 = W.astype(np.float16)
            out.append(((x, W16, b), {}, {}))
            # attention's projections: float16 in, no bias (the op after adds it), float16 dx
            out.append(((x.astype(np.float16), W16, None), {}, {"half_dx": True}))
            out.append(((x, W, None), {}, {}))
        return out
    if concept == "embedding":
        ids = rng.integers(0, 50, (6, 37))
        ids[:, 30:] = 0                                # padding, and many repeated ids
        return [((xp.asarray(ids), a(50, 24)), {}, {"padding_idx": 0}), ((xp.asarray(ids[:, :0]), a(50, 24)), {}, {})]
    if concept == "layernorm":
        return [((a(4, 9, 48, scale=2.0) + 1, a(48), a(48), 1e-12), {}, {})]
    if concept == "dropout_add_layernorm":        # 36 rows: the last block of 8 rows part-full
        out = [((a(4, 9, 48, scale=2.0), a(4, 9, 48) + 1, a(48), a(48), 1e-12, 0.3, _draws(xp, dtype), train), {},
                skip) for train in (True, False) for skip in ({}, {"dy_skip": a(4, 9, 48)})]
        # the sublayer's last bias, added as a is read; in mixed precision a is that layer's float16 product
        bias = a(48)
        out += [((a(4, 9, 48, scale=2.0), a(4, 9, 48) + 1, a(48), a(48), 1e-12, 0.3, _draws(xp, dtype), True),
                 {"bias": bias}, {"dy_skip": a(4, 9, 48)})]
        if dtype == "float32":
            out += [((a(4, 9, 48, scale=2.0).astype(np.float16), a(4, 9, 48) + 1, a(48), a(48), 1e-12, 0.3,
                      _draws(xp, dtype), train), {"bias": bias}, {}) for train in (True, False)]
        return out + [((a(0, 48), a(0, 48), a(48), a(48), 1e-12, 0.3, _draws(xp, dtype), True), {}, {})]
    if concept == "gelu":
        x, b = a(37, 53, scale=3.0), a(53)
        out = [((x, form), {}, {}) for form in ("none", "tanh")]
        out += [((x, form), {"bias": b}, {}) for form in ("none", "tanh")]    # the linear layer's bias
        if dtype == "float32":         # mixed precision: the float16 product in, the float16 operand out
            out += [((x.astype(np.float16), form), {"bias": b, "half_out": True}, {}) for form in ("none", "tanh")]
        return out
    if concept == "tanh":                  # the pooler's, with the bias of its linear layer
        x, b = a(9, 40, scale=2.0), a(40)
        out = [((x,), {}, {}), ((x,), {"bias": b}, {})]
        if dtype == "float32":             # mixed precision: the float16 product in
            out.append(((x.astype(np.float16),), {"bias": b}, {}))
        return out
    if concept == "dropout":
        return [((a(20, 33), 0.3, _draws(xp, dtype), True), {}, {})]
    if concept == "attention":
        B, A, T, D = 3, 2, 41, 8                     # 246 score rows: the last block of 8 rows part-full
        mask = np.ones((B, T), dtype=np.int64)
        mask[1, 25:] = 0
        mask[2] = 0                                    # every key masked
        bias = ops.attention_mask_bias(xp.asarray(mask), dtype)
        q, k, v = a(B, A, T, D), a(B, A, T, D), a(B, A, T, D)
        out = [((q, k, v, bias, 0.1, _draws(xp, dtype), train), {}, {}) for train in (False, True)]
        if dtype == "float32":                         # mixed precision: float16 q, k, v, with and without dropout
            out += [((q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), bias, 0.1,
                      _draws(xp, dtype), train), {}, {}) for train in (False, True)]
        return out
    if concept == "softmax_cross_entropy":
        labels = rng.integers(0, 301, 13)
        labels[[2, 7]] = -100
        nsp = rng.integers(0, 2, 9)                      # two classes: a block of 32 threads for 2 columns
        return [((a(13, 301, scale=4.0), xp.asarray(labels)), {}, {}),
                ((a(9, 2, scale=4.0), xp.asarray(nsp)), {}, {}),
                ((a(1, 1000, scale=4.0), xp.asarray(np.array([999]))), {}, {}),
                ((a(5, 7), xp.asarray(np.full(5, -100))), {}, {})]    # no labelled row: loss 0, gradient 0
    raise KeyError(concept)


def _flat(result):
    """The arrays of a result (nested tuples), in order; numbers as 0-d arrays, None dropped."""
    if isinstance(result, (tuple, list)):
        return [x for r in result for x in _flat(r)]
    if result is None or callable(result):
        return []
    return [result]


def _to_np(a):
    return np.asarray(a.get() if hasattr(a, "get") else a, dtype=np.float64)


def _close(got, want, tol, what):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = _to_np(g), _to_np(w)
        assert g.shape == w.shape, f"{what}[{i}]: shape {g.shape} != {w.shape}"
        err = np.abs(g - w).max(initial=0) / max(np.abs(w).max(initial=0), 1e-30)
        assert err <= tol, f"{what}[{i}]: relative error {err:.2e}"


def _backward_args(out, xp, dtype, rng):
    """An upstream gradient shaped like a forward's output (1.0 for a loss)."""
    if getattr(out, "ndim", 0) == 0:
        return 1.0
    # a float16 output (mixed precision's attention and its projections) takes a float16 gradient
    return xp.asarray(rng.standard_normal(out.shape).astype(np.float16 if out.dtype == np.float16 else dtype))


def _check_pair_op(op, ns, xp, dtype, rng):
    concept = op.rpartition("_")[0]
    fwd_ref, bwd_ref = getattr(ops, concept + "_forward"), getattr(ops, concept + "_backward")
    fwd, bwd = getattr(ns, concept + "_forward"), getattr(ns, concept + "_backward")
    tol = TOL[dtype] * (20 if concept == "linear" and dtype == "float32" else 1)
    for args, kwargs, bkw in _cases(concept, xp, dtype, rng):
        # float16 operands (mixed precision): a gradient rounded to float16 before a product may land
        # one float16 step away where the float32 sums before it differ in their last bits
        half = any(getattr(a, "dtype", None) == np.float16 for a in args)
        out_r, cache_r = fwd_ref(*copy.copy(args), **kwargs)
        dout = _backward_args(out_r, xp, dtype, rng)
        want = bwd_ref(dout, cache_r, **bkw)
        out_k, cache_k = fwd(*args, **kwargs)
        _close(out_k, out_r, tol, f"{ns.__name__}.{concept}_forward")
        _close(bwd(dout, cache_k, **bkw), want, max(tol, 20 * TOL[dtype]) if half else tol,
               f"{ns.__name__}.{concept}_backward")
        if concept in HALF_GRADIENT and dtype == "float32" and dout.dtype == np.float32:
            # mixed precision hands these a linear layer's dx in float16: the result of its widening
            d16 = dout.astype(np.float16)
            for i, (g, w) in enumerate(zip(_flat(bwd(d16, cache_k, **bkw)),
                                           _flat(bwd(d16.astype(np.float32), cache_k, **bkw)))):
                assert g.dtype == w.dtype, f"{ns.__name__}.{concept}_backward[{i}] of a float16 gradient: {g.dtype}"
                np.testing.assert_array_equal(_to_np(g), _to_np(w),
                                              err_msg=f"{ns.__name__}.{concept}_backward[{i}] of a float16 gradient")


# the backward ops that take the float16 dx of a linear layer in mixed precision
HALF_GRADIENT = ("layernorm", "dropout_add_layernorm", "gelu", "tanh")


def _check_half_matmul(ns, xp, dtype, rng):
    a = rng.standard_normal((70, 24)).astype(np.float16)
    b = rng.standard_normal((24, 40)).astype(np.float16)
    want = ops.half_matmul(a, b)
    _close(ns.half_matmul(xp.asarray(a), xp.asarray(b)), want, 2e-3, "half_matmul")   # float16 rounding


def _check_adamw(ns, xp, dtype, rng):
    n, n_decay = 5000, 3100
    p, g, m, v = (xp.asarray(rng.standard_normal(n).astype(dtype)) for _ in range(4))
    v = abs(v)
    got, want = [x.copy() for x in (p, m, v)], [x.copy() for x in (p, m, v)]
    for step, (lr, wd) in enumerate([(1e-2, 0.01), (3e-3, 0.0), (1e-2, 0.1)], start=1):
        b1, b2 = 0.9, 0.999
        scalars = (b1, b2, lr / (1 - b1 ** step), (1 - b2 ** step) ** 0.5, 1e-6, 1 - lr * wd,
                   n_decay if wd else 0)
        ns.adamw_update(got[0], g, got[1], got[2], *scalars)
        ops.adamw_update(want[0], g, want[1], want[2], *scalars)
    # a step the loss scaler skips (go = 0, on the GPU a flag there) changes nothing, whatever g holds
    before = [x.copy() for x in got]
    go = xp.zeros((), dtype=dtype) if ns is accel_cuda else False
    ns.adamw_update(got[0], g * np.nan, got[1], got[2], *scalars, go=go)
    for name, a, b in zip("pmv", got, before):
        np.testing.assert_array_equal(_to_np(a), _to_np(b), err_msg=f"adamw {name} after a skipped step")
    if ns is accel_cuda:     # the bias correction computed on the device: 0-d arrays (float64) in
        s = list(scalars)
        s[2], s[3] = xp.asarray(s[2]), xp.asarray(s[3])
        ns.adamw_update(got[0], g, got[1], got[2], *s, go=xp.ones((), dtype=dtype))
        ops.adamw_update(want[0], g, want[1], want[2], *scalars)
    exact = ns is accel_cpu                  # the CPU blocks repeat the reference's operations
    for name, a, b in zip("pmv", got, want):
        if exact:
            np.testing.assert_array_equal(_to_np(a), _to_np(b), err_msg=f"adamw {name}")
        else:
            _close(a, b, TOL[dtype], f"adamw {name}")


def _check_uniform(ns, xp, dtype, rng):
    shapes = [(32, 4, 64, 64), (4097, 33), (7,)]
    gen, gen_ref = np.random.default_rng(11), np.random.default_rng(11)
    for s in shapes:
        np.testing.assert_array_equal(ns.uniform(gen, s, np.float32), ops.uniform(gen_ref, s, np.float32))
    assert gen.bit_generator.state == gen_ref.bit_generator.state


def _check_attention_mask_bias(ns, xp, dtype, rng):
    """The additive mask from masks of ints (the model's) and of bools, a sequence all padding among
    them: the reference's numbers, bit for bit, and its (B, 1, 1, T) shape."""
    mask = (rng.random((5, 37)) < 0.7).astype(np.int64)
    mask[2] = 0
    for m in (mask, mask.astype(bool), mask.astype(np.int32)):
        got, want = ns.attention_mask_bias(xp.asarray(m), dtype), ops.attention_mask_bias(m, dtype)
        assert got.shape == want.shape == (5, 1, 1, 37) and got.dtype == want.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(_to_np(got), _to_np(want))


def _check_split_qkv(ns, xp, dtype, rng):
    """q, k, v from the one product, its bias added, in heads: the reference's bits; in mixed precision
    from the float16 product, rounded to float16.  A bias of the wrong length is one clear error."""
    qkv, bias = rng.standard_normal((3, 7, 48)).astype(dtype), rng.standard_normal(48).astype(dtype)
    cases = [(qkv, bias, False)] + ([(qkv.astype(np.float16), bias, True)] if dtype == "float32" else [])
    for x, b, half in cases:
        got, want = ns.split_qkv(xp.asarray(x), xp.asarray(b), 2, half_out=half), ops.split_qkv(x, b, 2, half_out=half)
        for g, w in zip(got, want):
            assert g.shape == w.shape == (3, 2, 7, 8) and g.dtype == w.dtype and g.flags.c_contiguous
            np.testing.assert_array_equal(_to_np(g), _to_np(w))
    with pytest.raises(ValueError, match=r"split_qkv: .* bias \(3H,\); got \(47,\)"):
        ns.split_qkv(xp.asarray(qkv), xp.asarray(bias[:47]), 2)


def _check_merge_qkv(ns, xp, dtype, rng):
    """split_qkv's backward: the three gradients in (B, T, 3H), the reference's bits, in their dtype
    (float16 in mixed precision)."""
    for dt in (dtype, np.float16) if dtype == "float32" else (dtype,):
        grads = [rng.standard_normal((3, 2, 7, 8)).astype(dt) for _ in range(3)]
        got, want = ns.merge_qkv(*(xp.asarray(g) for g in grads)), ops.merge_qkv(*grads)
        assert got.shape == want.shape == (3, 7, 48) and got.dtype == want.dtype == np.dtype(dt)
        np.testing.assert_array_equal(_to_np(got), _to_np(want))
    # the backward of split_qkv: <dqkv, u> = sum over q, k, v of <g, split(u)>
    u = rng.standard_normal((3, 7, 48)).astype(dtype)
    parts = ops.split_qkv(u, np.zeros(48, dtype), 2)
    np.testing.assert_allclose(np.vdot(_to_np(ns.merge_qkv(*(xp.asarray(g) for g in grads))), u),
                               sum(np.vdot(g, p) for g, p in zip(grads, parts)), rtol=1e-5)


def _check_add_grads(ns, xp, dtype, rng):
    """Adds into views of one flat buffer, two of them into the same memory (as the tied word
    embeddings get two), one into the first rows of a table, one empty, and a last call where one
    source is not C-ordered: the same bits as the reference's adds, in the same order."""
    flat = rng.standard_normal(200).astype(dtype)
    views = [lambda f: f[0:10], lambda f: f[10:40].reshape(6, 5)[:3], lambda f: f[40:100],
             lambda f: f[0:10], lambda f: f[5:15], lambda f: f[100:100], lambda f: f[100:200].reshape(10, 10)]
    srcs = [rng.standard_normal(v(flat).shape).astype(dtype) for v in views]
    for last_transposed in (False, True):
        if last_transposed:
            srcs[-1] = srcs[-1].T          # a view, not C-ordered: that call goes to the reference
        got, want = xp.asarray(flat), flat.copy()
        ns.add_grads([v(got) for v in views], [xp.asarray(s) for s in srcs])
        ops.add_grads([v(want) for v in views], srcs)
        np.testing.assert_array_equal(_to_np(got), want, err_msg=f"add_grads, transposed source {last_transposed}")
    # mixed precision's weight gradients come as float16 (every float16 widens exactly)
    halves = [s.astype(np.float16) for s in srcs[:-1]] + [srcs[-1].T.copy()]
    got, want = xp.asarray(flat), flat.copy()
    ns.add_grads([v(got) for v in views], [xp.asarray(s) for s in halves])
    ops.add_grads([v(want) for v in views], halves)
    np.testing.assert_array_equal(_to_np(got), want, err_msg="add_grads, float16 sources")


def _check_clip_by_norm(ns, xp, dtype, rng):
    """Clipped (the norm above max_norm), left alone (below it: a factor of exactly 1), and a NaN or
    infinite norm (NaN or zero gradients): the same bits as the reference, the norm on the device."""
    g = rng.standard_normal(3001).astype(dtype)
    for max_norm, norm in [(1.0, 7.25), (1.0, 0.5), (0.3, float(np.linalg.norm(g))), (1.0, np.nan),
                           (1.0, np.inf), (5.0, 5.0)]:
        got, want = xp.asarray(g.copy()), g.copy()
        ns.clip_by_norm(got, xp.asarray(np.array(norm, dtype=dtype)), max_norm)
        ops.clip_by_norm(want, np.array(norm, dtype=dtype), max_norm)
        np.testing.assert_array_equal(_to_np(got), want, err_msg=f"clip_by_norm, norm {norm}, max {max_norm}")


def _check_unscale(ns, xp, dtype, rng):
    """Scales that divide exactly and that do not, with accumulated passes, one that overflows the
    gradients' dtype in the factor (1e-300), one float32 cannot hold (1.1: the factor must be made
    in float64, then rounded): the same bits as the reference, the scale on the device."""
    g = (rng.standard_normal(3001) * 1e4).astype(dtype)
    g[7], g[8] = np.inf, np.nan          # an overflowed step's gradients stay what they are
    for scale, accum in [(65536.0, 1), (32768.0, 4), (3.0, 1), (1.0, 3), (0.7, 5), (1e-300, 1), (1.1, 1)]:
        got, want = xp.asarray(g.copy()), g.copy()
        with np.errstate(over="ignore", invalid="ignore"):
            ns.unscale(got, xp.asarray(np.array(scale)), accum)
            ops.unscale(want, np.array(scale), accum)
        np.testing.assert_array_equal(_to_np(got), want, err_msg=f"unscale, scale {scale}, accum {accum}")


SPECIAL = {"half_matmul": _check_half_matmul, "adamw_update": _check_adamw, "uniform": _check_uniform,
           "add_grads": _check_add_grads, "clip_by_norm": _check_clip_by_norm, "unscale": _check_unscale,
           "attention_mask_bias": _check_attention_mask_bias, "split_qkv": _check_split_qkv,
           "merge_qkv": _check_merge_qkv}


def kernels_of(ns):
    """The ops where ``ns`` has a function of its own (the rest are the reference's, imported)."""
    return [op for op in ops.OPS if getattr(ns, op) is not getattr(ops, op)]


def check_kernel(op, ns, xp, dtype):
    rng = np.random.default_rng(1234)
    if op in SPECIAL:
        return SPECIAL[op](ns, xp, dtype, rng)
    assert op.endswith(("_forward", "_backward")), f"no test case for the op {op!r}: add one here"
    _check_pair_op(op, ns, xp, dtype, rng)


# ------------------------------------------------------------------------ the devices
def _gpu_reason():
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "no CUDA GPU is visible"
    except ImportError:
        return "CuPy is not installed"
    except Exception as exc:  # no driver
        return f"no usable CUDA GPU ({type(exc).__name__})"
    return None


PARAMS = [pytest.param(op, "numpy", id=f"{op}-cpu") for op in kernels_of(accel_cpu)]
PARAMS += [pytest.param(op, where, id=f"{op}-{where}") for op in kernels_of(accel_cuda)
           for where in ("cuda-on-cpu", "cupy")]


@pytest.mark.parametrize("op,where", PARAMS)
def test_every_kernel_against_the_reference(op, where, monkeypatch):
    if where == "numpy":
        check_kernel(op, accel_cpu, np, "float32")
        return
    if where == "cupy":
        reason = _gpu_reason()
        if reason:
            pytest.skip(reason)
        import cupy
        for dtype in ("float32", "float64"):
            check_kernel(op, accel_cuda, cupy, dtype)
        return
    sys.path.insert(0, str(ROOT / "tests"))
    import cuda_on_cpu
    from test_gpu_kernels_on_cpu import cuda_kernels_on_numpy
    reason = cuda_on_cpu.unavailable()
    if reason:
        pytest.skip(reason)
    cuda_kernels_on_numpy(monkeypatch)
    for dtype in ("float32", "float64"):
        check_kernel(op, accel_cuda, np, dtype)


def test_every_set_of_ops_is_complete_and_has_its_kernels():
    for ns in (ops, accel_cpu, accel_cuda):
        missing = [op for op in ops.OPS if not callable(getattr(ns, op, None))]
        assert not missing, f"{ns.__name__} lacks {missing}"
    assert {"linear_forward", "attention_backward", "embedding_backward", "adamw_update",
            "uniform"} <= set(kernels_of(accel_cpu))
    assert {"layernorm_forward", "gelu_backward", "attention_forward", "adamw_update",
            "half_matmul"} <= set(kernels_of(accel_cuda))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_model_chooses_its_ops_once_from_kernels_device_and_dtype(dtype):
    config = minibert.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=20, max_position_embeddings=16)
    fast = minibert.BertForPreTraining(config, dtype=dtype, kernels="fast")
    assert fast.ops is (accel_cpu if dtype == "float32" else ops)      # float64: no CPU kernels
    assert fast.params.ops is fast.ops                                  # the optimiser's update too
    assert minibert.BertForPreTraining(config, dtype=dtype).ops is ops  # the default: the reference
    assert minibert.BertForPreTraining(config, dtype=dtype, kernels=accel_cuda).ops is accel_cuda
    with pytest.raises(ValueError, match=r"kernels must be one of \['reference', 'fast'\], got 'quick'"):
        minibert.BertForPreTraining(config, kernels="quick")
    with pytest.raises(ValueError, match="lacks"):
        minibert.BertForPreTraining(config, kernels=np)      # not a set of ops


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_a_model_on_the_fast_cpu_ops_follows_the_reference_model(dropout, rng):
    """Three training steps: the same losses, gradients and weights (float32 rounding apart), the
    same dropout masks, on a batch with padding and a fully padded sequence."""
    from conftest import padded_batch
    from minibert.optim import AdamW
    config = minibert.BertConfig(vocab_size=301, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                                 intermediate_size=72, max_position_embeddings=32,
                                 hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    batch = padded_batch(rng, 301)
    batch["attention_mask"][2] = 0
    runs = []
    for kernels in ("fast", "reference"):
        m = minibert.BertForPreTraining(config, seed=3, kernels=kernels)
        opt = AdamW(m.params, lr=1e-3)
        losses, grads = [], []
        for step in range(3):
            m.seed_dropout((0, step))
            losses.append(float(m.forward(**batch, train=True).loss))
            m.backward()
            grads.append(m.params.grad.copy())
            opt.step()
        runs.append((losses, grads, m.params.data.copy()))
    (lf, gf, wf), (lr_, gr, wr) = runs
    np.testing.assert_allclose(lf, lr_, rtol=1e-5)
    for a, b in zip(gf, gr):
        _close(a, b, 1e-4, "gradients")
    _close(wf, wr, 1e-5, "weights")
    assert lf[-1] < lf[0]
