"""Every registered accelerated kernel against its reference op, and the wall between the two.

The kernels are taken from ``minibert.accel.registry.KERNELS`` itself, so a
kernel registered there is tested here without a line more (an op without a
case below fails, naming itself).  Each forward kernel is compared with the
reference forward, and its cache is fed to the reference backward; each
backward kernel is fed the reference forward's cache (and its own device's
forward cache): either backward takes either forward's cache.

Devices: the CPU kernels on float32 NumPy arrays; the CUDA kernels on a GPU
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
from minibert import dispatch, ops
from minibert.accel import registry
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


REFERENCE_FILES = sorted((ROOT / "minibert" / "ops").glob("*.py")) + [ROOT / "minibert" / "layers.py"]


def _accelerated(names):
    return [n for n in names if n.startswith("minibert.accel") or n in ("minibert.fast", "minibert.gpu_fused")]


@pytest.mark.parametrize("path", REFERENCE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_reference_ops_never_import_accelerated_code(path):
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    bad = _accelerated(_imports(path.read_text(), package))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


@pytest.mark.parametrize("line", ["from .. import accel", "from ..accel.cpu import linear",
                                  "import minibert.accel.registry", "from minibert import accel",
                                  "from ..accel import registry as r"])
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
            out.append(((x, W.astype(np.float16), b), {}, {}))
        return out
    if concept == "layernorm":
        return [((a(4, 9, 48, scale=2.0) + 1, a(48), a(48), 1e-12), {}, {})]
    if concept == "gelu":
        x = a(37, 53, scale=3.0)
        return [((x, "none"), {}, {}), ((x, "tanh"), {}, {})]
    if concept == "dropout":
        return [((a(20, 33), 0.3, _draws(xp, dtype), True), {}, {})]
    if concept == "attention":
        B, A, T, D = 3, 2, 40, 8
        mask = np.ones((B, T), dtype=np.int64)
        mask[1, 25:] = 0
        mask[2] = 0                                    # every key masked
        bias = ops.attention_mask_bias(xp.asarray(mask), dtype)
        q, k, v = a(B, A, T, D), a(B, A, T, D), a(B, A, T, D)
        return [((q, k, v, bias, 0.1, _draws(xp, dtype), train), {}, {}) for train in (False, True)]
    if concept == "softmax_cross_entropy":
        labels = rng.integers(0, 301, 13)
        labels[[2, 7]] = -100
        return [((a(13, 301, scale=4.0), xp.asarray(labels)), {}, {})]
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
    return xp.asarray(rng.standard_normal(out.shape).astype(dtype))


def _kernel(op, device):
    return next(k for k in registry.KERNELS[op] if k.device == device)


def _check_pair_op(op, kernel, xp, dtype, rng):
    concept, _, direction = op.rpartition("_")
    fwd_ref, bwd_ref = ops.__dict__[concept + "_forward"], ops.__dict__[concept + "_backward"]
    tol = TOL[dtype] * (20 if concept == "linear" and dtype == "float32" else 1)
    for args, kwargs, bkw in _cases(concept, xp, dtype, rng):
        out_r, cache_r = fwd_ref(*copy.copy(args), **kwargs)
        dout = _backward_args(out_r, xp, dtype, rng)
        want = bwd_ref(dout, cache_r, **bkw)
        if direction == "forward":
            assert kernel.applies(*args, **kwargs), f"{op}: the kernel does not take its own test inputs"
            out_k, cache_k = kernel.fn(*args, **kwargs)
            _close(out_k, out_r, tol, f"{op} output")
            _close(bwd_ref(dout, cache_k, **bkw), want, tol, f"{op} cache -> reference backward")
        else:
            assert kernel.applies(dout, cache_r, **bkw), f"{op}: the kernel does not take its own test inputs"
            _close(kernel.fn(dout, cache_r, **bkw), want, tol, f"reference cache -> {op}")
            fwd = [k for k in registry.KERNELS.get(concept + "_forward", ()) if k.device == kernel.device]
            if fwd:
                _, cache_k = fwd[0].fn(*args, **kwargs)
                _close(kernel.fn(dout, cache_k, **bkw), want, tol, f"its forward's cache -> {op}")


def _check_half_matmul(kernel, xp, dtype, rng):
    a = rng.standard_normal((70, 24)).astype(np.float16)
    b = rng.standard_normal((24, 40)).astype(np.float16)
    assert kernel.applies(a, b)
    _close(kernel.fn(a, b), ops.half_matmul(a, b), 2e-3, "half_matmul")     # float16 rounding


def _check_adamw(kernel, xp, dtype, rng):
    n, n_decay = 5000, 3100
    p, g, m, v = (xp.asarray(rng.standard_normal(n).astype(dtype)) for _ in range(4))
    v = abs(v)
    got, want = [x.copy() for x in (p, m, v)], [x.copy() for x in (p, m, v)]
    for step, (lr, wd) in enumerate([(1e-2, 0.01), (3e-3, 0.0), (1e-2, 0.1)], start=1):
        b1, b2 = 0.9, 0.999
        scalars = (b1, b2, lr / (1 - b1 ** step), (1 - b2 ** step) ** 0.5, 1e-6, 1 - lr * wd,
                   n_decay if wd else 0)
        assert kernel.applies(got[0], g, got[1], got[2], *scalars)
        kernel.fn(got[0], g, got[1], got[2], *scalars)
        dispatch.reference("adamw_update")(want[0], g, want[1], want[2], *scalars)
    exact = kernel.device == "cpu"              # the CPU blocks repeat the reference's operations
    for name, a, b in zip("pmv", got, want):
        if exact:
            np.testing.assert_array_equal(_to_np(a), _to_np(b), err_msg=f"adamw {name}")
        else:
            _close(a, b, TOL[dtype], f"adamw {name}")


def _check_uniform(kernel, xp, dtype, rng):
    shapes = [(32, 4, 64, 64), (4097, 33), (7,)]
    gen, gen_ref = np.random.default_rng(11), np.random.default_rng(11)
    for s in shapes:
        assert kernel.applies(gen, s, np.float32)
        np.testing.assert_array_equal(kernel.fn(gen, s, np.float32),
                                      dispatch.reference("uniform")(gen_ref, s, np.float32))
    assert gen.bit_generator.state == gen_ref.bit_generator.state


SPECIAL = {"half_matmul": _check_half_matmul, "adamw_update": _check_adamw, "uniform": _check_uniform}


def check_kernel(op, kernel, xp, dtype):
    rng = np.random.default_rng(1234)
    if op in SPECIAL:
        return SPECIAL[op](kernel, xp, dtype, rng)
    assert op.endswith(("_forward", "_backward")), f"no test case for the op {op!r}: add one here"
    _check_pair_op(op, kernel, xp, dtype, rng)


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


PARAMS = []
for _op, _kernels in registry.KERNELS.items():
    for _k in _kernels:
        for _where in (("numpy",) if _k.device == "cpu" else ("cuda-on-cpu", "cupy")):
            PARAMS.append(pytest.param(_op, _k.device, _where, id=f"{_op}-{_where}"))


@pytest.mark.parametrize("op,device,where", PARAMS)
def test_every_registered_kernel_against_the_reference(op, device, where, monkeypatch):
    kernel = _kernel(op, device)
    if where == "numpy":
        check_kernel(op, kernel, np, "float32")
        return
    if where == "cupy":
        reason = _gpu_reason()
        if reason:
            pytest.skip(reason)
        import cupy
        for dtype in ("float32", "float64"):
            check_kernel(op, kernel, cupy, dtype)
        return
    sys.path.insert(0, str(ROOT / "tests"))
    import cuda_on_cpu
    from test_gpu_kernels_on_cpu import cuda_kernels_on_numpy
    reason = cuda_on_cpu.unavailable()
    if reason:
        pytest.skip(reason)
    cuda_kernels_on_numpy(monkeypatch)
    for dtype in ("float32", "float64"):
        check_kernel(op, kernel, np, dtype)


def test_every_op_of_the_registry_has_a_reference():
    for op in registry.KERNELS:
        assert callable(dispatch.reference(op)), op
        assert callable(getattr(dispatch, op)), f"minibert.dispatch has no {op}"


def test_layers_keeps_its_names_as_the_reference_ops():
    from minibert import layers
    for name in ops.__all__:
        assert getattr(layers, name) is getattr(ops, name)
    assert minibert.layers is layers


def test_dispatch_runs_the_reference_when_accel_is_off_and_a_kernel_when_on(rng):
    from conftest import fast_paths_off
    x = rng.standard_normal((4, 8)).astype(np.float32)
    assert dispatch.choose("gelu_forward", x) is _kernel("gelu_forward", "cpu").fn
    assert dispatch.choose("gelu_forward", x.astype(np.float64)) is ops.gelu_forward   # float64: none applies
    with fast_paths_off():
        assert dispatch.choose("gelu_forward", x) is ops.gelu_forward
