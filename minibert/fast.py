"""Fast CPU paths for float32: the same math as ``layers.py``, fewer passes over memory, all cores.

``layers.py`` is the reference: every formula is written there once, plainly,
with one NumPy expression per step.  That style costs time on the CPU for
three reasons:

* each NumPy operation reads and writes whole arrays (a 32 x 8 x 128 x 128
  attention tensor is 16 MB), so a formula of ten operations streams 300 MB
  through memory and allocates ten temporaries;
* NumPy's elementwise functions run on one core, while BLAS and PyTorch use
  them all;
* ``scipy.special.erf`` (the exact GELU) is a scalar loop: ~70 ms for a
  4096 x 1024 array, longer than the matrix product that feeds it;
* between two matrix products a multi-threaded BLAS keeps its threads
  spinning on the cores that the next NumPy operations need, and every
  array a step frees goes back to the kernel, to be faulted in page by page
  in the next step.

The functions here fix that without changing the math:

* work is cut into blocks of whole rows of about ``BLOCK`` elements, small
  enough that the temporaries of a block stay in the core's cache;
* the blocks are spread over a small thread pool (NumPy releases the GIL
  inside its loops, so the threads really run in parallel);
* the exact GELU uses a rational approximation of erf evaluated in float64
  inside each block and rounded once to float32 (``erf`` below), within one
  float32 ulp of SciPy's;
* the linear layers' products are cut into fixed runs of rows, each a
  single-threaded BLAS call (``gemm``), shared out over the same pool, so
  that one pool does all the work, and a CPU model asks malloc to keep the
  memory it frees (``keep_freed_memory``).

Determinism: the blocks and the runs of rows depend only on the array
shapes, never on the number of threads, and every block is computed the same
way whichever thread runs it, so results are identical bit for bit with 1 or
N threads.  That holds on every CPU, though the bits themselves may differ
from one CPU to another (BLAS picks another kernel).  Row-wise operations
(softmax, LayerNorm) never split a row.  Most fast functions also repeat the
reference's float32 operations in the same order, so they return exactly
the reference's values; the exceptions are documented and tested against
the reference within float32 tolerances: the GELU forward, the LayerNorm
parameter gradients, and the linear layers' products (a BLAS kernel may
round a run of rows differently from the same rows in one whole product).

Only float32 NumPy arrays take these paths (``applies``).  float64, the
dtype of the gradient checks and the 1e-9 parity tests, and CuPy always run
the reference code.  Switches: ``MINIBERT_FAST=0`` (or ``set_enabled(False)``)
turns the fast paths off; ``MINIBERT_NUM_THREADS`` (or ``set_num_threads``)
sets the pool size, default: the CPUs this process may use.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

BLOCK = 1 << 15        # elements per block: a few float32/float64 block buffers fit in L2
# the float64 erf runs ~30 NumPy operations per block: larger blocks pay the per-call cost less often
ERF_BLOCK = 1 << 16


def _default_threads():
    env = os.environ.get("MINIBERT_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


_enabled = os.environ.get("MINIBERT_FAST", "1") != "0"
_threads = _default_threads()
_pool = None


def set_enabled(flag: bool) -> None:
    """Turn the fast paths on or off (off: every layer runs its reference code)."""
    global _enabled
    _enabled = bool(flag)


def enabled() -> bool:
    return _enabled


def set_num_threads(n: int) -> None:
    """Threads used for elementwise work (1 = run every block in the calling thread)."""
    global _threads, _pool
    if n < 1:
        raise ValueError(f"need at least one thread, got {n}")
    if _pool is not None:
        _pool.shutdown()
        _pool = None
    _threads = int(n)


def num_threads() -> int:
    return _threads


def applies(*arrays) -> bool:
    """True when the fast path should run: enabled, and every array a float32 NumPy array."""
    return _enabled and all(type(a) is np.ndarray and a.dtype == np.float32 for a in arrays)


# ------------------------------------------------------------------ freed memory
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4     # mallopt parameters, <malloc.h>
_malloc_tuned = None


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for reuse instead of returning it.

    A training step allocates and frees the same arrays every time (about a
    gigabyte for ``mini``).  By default glibc hands freed memory back to the
    kernel, so the next step takes it again page by page: 38,000 page faults
    per ``mini`` step, each one a trip into the kernel to map and zero 4 KiB,
    a quarter of the step on a 2-core machine.  Large arrays are worse: glibc
    gives every allocation over 32 MiB a mapping of its own (the MLM logits
    and their gradient, 74 MB each for ``mini``) and unmaps it when freed, so
    each step the kernel finds and zeroes fresh huge pages for them again
    (the MLM cross-entropy's backward took 45 ms in a step instead of 11).
    Two settings stop both: memory freed at the top of the heap stays with
    the process (trim threshold), and every allocation, whatever its size,
    comes from the heap rather than from a mapping of its own (mmap count 0).
    Peak memory is unchanged; the process simply keeps its peak between
    steps.

    Called once by a model created on the CPU while the fast paths are on.
    Does nothing elsewhere (not glibc, or ``MINIBERT_FAST=0``).  Returns
    whether the settings were applied.
    """
    global _malloc_tuned
    if not _enabled:
        return False
    if _malloc_tuned is None:
        _malloc_tuned = False
        if os.name == "posix":
            try:
                import ctypes
                libc = ctypes.CDLL(None)
                mallopt = libc.mallopt
                _malloc_tuned = bool(mallopt(_M_TRIM_THRESHOLD, (1 << 31) - 1)
                                     and mallopt(_M_MMAP_MAX, 0))
            except (OSError, AttributeError):   # no glibc (macOS, musl): nothing to do
                pass
    return _malloc_tuned


# ---------------------------------------------------------------------- the blocks
def _run_blocks(fn, blocks, results, first):
    for i, (r0, r1) in enumerate(blocks):
        results[first + i] = fn(r0, r1)


def _in_parallel(fn, cuts):
    """Run ``fn(cuts[i], cuts[i + 1])`` for every i, one call per thread; the caller takes the first."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_threads - 1, thread_name_prefix="minibert")
    # NumPy's error state (np.errstate) belongs to the calling thread: hand it on to the workers
    err = np.geterr()

    def run(r0, r1):
        with np.errstate(**err):
            fn(r0, r1)
    futures = [_pool.submit(run, cuts[i], cuts[i + 1]) for i in range(1, len(cuts) - 1)]
    fn(cuts[0], cuts[1])
    for f in futures:
        f.result()


def for_rows(fn, n_rows, row_len, block=None):
    """Call ``fn(r0, r1)`` on fixed blocks of rows covering [0, n_rows), over the thread pool.

    A block holds about ``block`` elements (default ``BLOCK``; at least one
    whole row).  The blocks are a function of (n_rows, row_len) alone; threads
    take contiguous runs of them.  Returns the results of ``fn``, in block order.
    """
    step = max(1, (block or BLOCK) // max(row_len, 1))
    blocks = [(r, min(r + step, n_rows)) for r in range(0, n_rows, step)]
    results = [None] * len(blocks)
    n = min(_threads, len(blocks))
    if n <= 1:
        _run_blocks(fn, blocks, results, 0)
        return results
    cuts = [len(blocks) * i // n for i in range(n + 1)]
    _in_parallel(lambda c0, c1: _run_blocks(fn, blocks[c0:c1], results, c0), cuts)
    return results


def _rows(a):
    """A C-contiguous array as 2-D (rows, last axis)."""
    return a.reshape(-1, a.shape[-1]) if a.ndim else a.reshape(1, 1)


# ------------------------------------------------------------- stacks of matrices
_blas = None


def _blas_controller():
    """threadpoolctl's controller of the BLAS thread pool, or False where it is not installed."""
    global _blas
    if _blas is None:
        try:
            from threadpoolctl import ThreadpoolController
            _blas = ThreadpoolController()
        except ImportError:
            _blas = False
    return _blas


def matmul(a, b, out=None):
    """a @ b for stacks of small matrices: (S, ..., m, k) @ (S, ..., k, n) -> (S, ..., m, n).

    Attention multiplies B * A small matrices (T x D by D x T).  NumPy hands
    them to BLAS one by one, and a multi-threaded BLAS splits each small
    product over the cores and synchronises its threads for every one of
    them, which costs more than the arithmetic.  Here the stack is split over
    the thread pool along its first axis instead, and BLAS runs one thread per
    product (through threadpoolctl; without it, this is plain ``np.matmul``).
    Each product is computed by the same single-threaded call whatever the
    split, so results do not depend on the number of threads.
    """
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    if out is None:
        out = np.empty(shape, dtype=np.result_type(a, b))
    ctl = _blas_controller()
    if not ctl or a.ndim < 3 or a.shape[0] != b.shape[0] or a.shape[0] != shape[0]:
        return np.matmul(a, b, out=out)

    def block(s0, s1):
        np.matmul(a[s0:s1], b[s0:s1], out=out[s0:s1])
    with ctl.limit(limits=1, user_api="blas"):
        for_rows(block, shape[0], math.prod(shape[1:]))
    return out


_GEMM_BLOCK_ROWS = 256   # a block of rows this long costs BLAS no more per row than the whole product
_GEMM_MIN_ROWS = 64      # ...and a product is cut at all only if each block keeps this many
_GEMM_MAX_BLOCKS = 16


def gemm_blocks(M: int) -> list:
    """The runs of rows (r0, r1) that ``gemm`` cuts an M-row product into: a function of M alone.

    A power of two of equal runs (so 2, 4, 8 or 16 threads share them evenly),
    each about ``_GEMM_BLOCK_ROWS`` rows long, at most ``_GEMM_MAX_BLOCKS`` of
    them; two runs as soon as each keeps ``_GEMM_MIN_ROWS`` rows, one below that.
    """
    n = 1
    while n < _GEMM_MAX_BLOCKS and M // (2 * n) >= _GEMM_BLOCK_ROWS:
        n *= 2
    if n == 1 and M // 2 >= _GEMM_MIN_ROWS:
        n = 2
    return [(M * i // n, M * (i + 1) // n) for i in range(n)]


def gemm(a, b, bias=None):
    """a @ b (+ bias) for 2-D float32 arrays: (M, K) @ (K, N) -> (M, N), rows split over the pool.

    A multi-threaded OpenBLAS keeps its worker threads spinning for a while
    after every product, waiting for the next one.  Between two products
    minibert runs its own elementwise work on the same cores (GELU,
    LayerNorm, softmax), and the spinning threads take the cores from it:
    a quarter of a ``mini`` step was lost that way on a 2-core machine.
    Here the rows of ``a`` are cut into fixed runs (``gemm_blocks``: they
    depend on M alone), each run is one single-threaded BLAS call, and the
    threads of the pool take contiguous shares of the runs, so BLAS never
    starts threads of its own and one pool does all the work.  The bias is
    added per run, while those rows are still in cache.

    Bits: every run is the same BLAS call on the same numbers whatever the
    number of threads, so the result is the same bit for bit with 1 or N
    threads, on any CPU and BLAS kernel.  It is *not* promised to equal one
    whole ``a @ b`` bit for bit: a BLAS kernel may round a product of 128
    rows differently from the same rows inside a product of 512 (OpenBLAS's
    Haswell kernel does), so it equals the reference code's product within
    float32 rounding.
    """
    M = a.shape[0]
    out = np.empty((M, b.shape[1]), dtype=np.result_type(a, b))
    runs = gemm_blocks(M)

    def block(i0, i1):
        for r0, r1 in runs[i0:i1]:
            o = np.matmul(a[r0:r1], b, out=out[r0:r1])
            if bias is not None:
                o += bias
    ctl = _blas_controller()
    if not ctl:          # no threadpoolctl: BLAS cannot be held to one thread, so one call
        np.matmul(a, b, out=out)
        if bias is not None:
            out += bias
        return out
    n = min(_threads, len(runs))
    with ctl.limit(limits=1, user_api="blas"):
        if n <= 1:
            block(0, len(runs))
        else:
            _in_parallel(block, [len(runs) * i // n for i in range(n + 1)])
    return out


# ----------------------------------------------------------------------------- erf
# erf(x) ~ x P(x^2) / Q(x^2) on [0, 4], P and Q of degree 5 with Q(0) = 1.
# The coefficients come from fit_erf_rational(5, 5) below (a least-squares fit
# of the relative error, reweighted towards the minimax fit): the relative
# error is 2.5e-8 (0.41 float32 ulp).  erf is odd, so negative x needs nothing
# extra; beyond |x| = 4, erf(x) rounds to +-1 in float32, and so does the
# formula at the clamped x.
_ERF_P = (1.1283791394032212, 0.19354271952308164, 0.053101451977132175,
          0.0038832481619657366, 0.0002845645300698479, 1.986810417530219e-06)
_ERF_Q = (1.0, 0.5048553255645891, 0.11534904591688253, 0.0152070583995587,
          0.0011855493840892556, 3.742039466246513e-05)
_ERF_CLAMP = 4.0


def _erf64(x):
    """erf of a float64 block (a new float64 array), by the rational approximation."""
    x = np.clip(x, -_ERF_CLAMP, _ERF_CLAMP)
    z = x * x
    p = z * _ERF_P[-1]
    q = z * _ERF_Q[-1]
    for cp, cq in zip(_ERF_P[-2:0:-1], _ERF_Q[-2:0:-1]):   # Horner's rule in z
        p += cp
        p *= z
        q += cq
        q *= z
    p += _ERF_P[0]
    q += _ERF_Q[0]
    p *= x
    p /= q
    return p


def erf(x, out=None):
    """float32 erf, within one float32 ulp of ``scipy.special.erf``; any shape.

    Each block is widened to float64 (in cache), evaluated with the rational
    approximation, and rounded once to float32: the only error is the
    approximation's 0.41 ulp plus that final rounding.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x) if out is None else out
    xr, orow = x.reshape(-1), out.reshape(-1)

    def block(r0, r1):
        orow[r0:r1] = _erf64(xr[r0:r1].astype(np.float64))
    for_rows(block, xr.size, 1, ERF_BLOCK)
    return out


def fit_erf_rational(m=5, n=5, clamp=_ERF_CLAMP, iterations=200, points=20000):
    """Fit erf(x) ~ x P(x^2) / Q(x^2) (deg P = m, deg Q = n, Q(0) = 1) on [0, clamp].

    How ``_ERF_P`` and ``_ERF_Q`` were made.  Each iteration solves a linear
    least-squares problem for  x P(z) - erf(x) (Q(z) - 1) = erf(x)  (z = x^2),
    weighted by 1 / (erf(x) Q_previous(z)) so that the residual is the
    relative error of the rational function; after the first iterations the
    weights are multiplied by (error / max error)^0.3 (Lawson's method),
    which pushes the fit towards equal-ripple, the minimax fit.
    Returns (P coefficients, Q coefficients, max relative error), lowest degree first.
    """
    from scipy.special import erf as erf_ref
    x = np.sort(np.concatenate([np.linspace(0, clamp, points)[1:], np.geomspace(1e-6, 0.1, points // 10)]))
    f, z = erf_ref(x), x * x
    w, q_prev = np.ones_like(x), np.ones_like(x)
    for it in range(iterations):
        A = np.concatenate([x[:, None] * z[:, None] ** np.arange(m + 1),
                            -f[:, None] * z[:, None] ** np.arange(1, n + 1)], axis=1)
        s = w / (f * q_prev)
        coef = np.linalg.lstsq(A * s[:, None], f * s, rcond=None)[0]
        p, q = coef[:m + 1], np.r_[1.0, coef[m + 1:]]
        q_prev = np.polyval(q[::-1], z)
        err = np.abs(x * np.polyval(p[::-1], z) / q_prev - f) / f
        if it > 10:
            w = w * (err / err.max()) ** 0.3 + 1e-12
            w /= w.max()
    return p, q, float(err.max())


# ---------------------------------------------------------------------------- GELU
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_C = 0.044715


def gelu_forward(x, approximate="none"):
    """The fast ``layers.gelu_forward`` for float32: same cache, same shapes.

    Exact form: Phi(x) = (1 + erf(x / sqrt 2)) / 2 and x Phi(x) are computed
    in float64 per block and rounded once (the reference rounds after each
    float32 step), so values agree with the reference to float32 rounding.
    The tanh form repeats the reference's float32 operations exactly.
    """
    x = np.ascontiguousarray(x)
    xr = _rows(x)
    y = np.empty_like(x)
    yr = _rows(y)
    if approximate == "none":
        cdf = np.empty_like(x)
        cr = _rows(cdf)

        def block(r0, r1):
            x64 = xr[r0:r1].astype(np.float64)
            c = _erf64(x64 * _INV_SQRT_2)
            c += 1.0
            c *= 0.5
            cr[r0:r1] = c
            c *= x64
            yr[r0:r1] = c
        for_rows(block, xr.shape[0], xr.shape[1], ERF_BLOCK)
        return y, (x, cdf, None)
    t = np.empty_like(x)
    tr = _rows(t)

    def block(r0, r1):
        xb = xr[r0:r1]
        # u = sqrt(2/pi) (x + c x^3), in the reference's order of operations
        u = np.multiply(xb, _GELU_TANH_C)
        u *= xb
        u *= xb
        u += xb
        u *= _SQRT_2_OVER_PI
        np.tanh(u, out=tr[r0:r1])
        # y = 0.5 x (1 + t)
        np.add(tr[r0:r1], 1.0, out=u)
        yb = np.multiply(xb, 0.5, out=yr[r0:r1])
        yb *= u
    for_rows(block, xr.shape[0], xr.shape[1])
    return y, (x, None, t)


def gelu_backward(dy, cache):
    """The fast ``layers.gelu_backward``: the reference's float32 operations, blocked and threaded."""
    x, cdf, t = cache
    dy = np.ascontiguousarray(dy, dtype=x.dtype)
    xr, dyr = _rows(x), _rows(dy)
    dx = np.empty_like(x)
    dxr = _rows(dx)
    if t is None:
        cr = _rows(cdf)

        def block(r0, r1):
            xb = xr[r0:r1]
            # dy * (Phi(x) + x phi(x)),  phi(x) = exp(-x^2 / 2) / sqrt(2 pi)
            g = np.multiply(xb, -0.5)
            g *= xb
            np.exp(g, out=g)
            g *= _INV_SQRT_2PI
            g *= xb
            g += cr[r0:r1]
            np.multiply(dyr[r0:r1], g, out=dxr[r0:r1])
        for_rows(block, xr.shape[0], xr.shape[1])
        return dx
    tr = _rows(t)

    def block(r0, r1):
        xb, tb = xr[r0:r1], tr[r0:r1]
        # dudx = sqrt(2/pi) (1 + 3 c x^2)
        dudx = np.multiply(xb, 3.0 * _GELU_TANH_C)
        dudx *= xb
        dudx += 1.0
        dudx *= _SQRT_2_OVER_PI
        # 0.5 x (1 - t^2) dudx + 0.5 (1 + t)
        s = np.multiply(tb, tb)
        np.subtract(1.0, s, out=s)
        h = np.multiply(xb, 0.5)
        h *= s
        h *= dudx
        np.add(tb, 1.0, out=s)
        s *= 0.5
        s += h
        np.multiply(dyr[r0:r1], s, out=dxr[r0:r1])
    for_rows(block, xr.shape[0], xr.shape[1])
    return dx


# ----------------------------------------------------------------------- LayerNorm
def layernorm_forward(x, gamma, beta, eps):
    """The fast ``layers.layernorm_forward``: row blocks, the reference's float32 operations."""
    x = np.ascontiguousarray(x)
    H = x.shape[-1]
    xr = x.reshape(-1, H)
    y, xhat = np.empty_like(x), np.empty_like(x)
    yr, hr = y.reshape(-1, H), xhat.reshape(-1, H)
    rstd = np.empty(x.shape[:-1] + (1,), dtype=x.dtype)
    sr = rstd.reshape(-1, 1)

    def block(r0, r1):
        xb = xr[r0:r1]
        xc = xb - xb.mean(axis=-1, keepdims=True)
        var = (xc * xc).mean(axis=-1, keepdims=True)
        var += eps
        var **= 0.5
        np.divide(1.0, var, out=sr[r0:r1])
        np.multiply(xc, sr[r0:r1], out=hr[r0:r1])
        yb = np.multiply(hr[r0:r1], gamma, out=yr[r0:r1])
        yb += beta
    for_rows(block, xr.shape[0], H)
    return y, (xhat, rstd, gamma)


def layernorm_backward(dy, cache):
    """The fast ``layers.layernorm_backward``.

    dx repeats the reference's operations row by row (equal bit for bit);
    dgamma and dbeta are sums over rows, taken per block and then over the
    blocks in order, so their rounding differs from the reference's single
    pass (within float32 tolerance) but not between thread counts.
    """
    xhat, rstd, gamma = cache
    H = xhat.shape[-1]
    dy = np.ascontiguousarray(dy, dtype=xhat.dtype)
    dyr, hr, sr = dy.reshape(-1, H), xhat.reshape(-1, H), rstd.reshape(-1, 1)
    dx = np.empty_like(xhat)
    dxr = dx.reshape(-1, H)

    def block(r0, r1):
        dyb, hb = dyr[r0:r1], hr[r0:r1]
        gh = np.multiply(dyb, hb)
        dgamma = gh.sum(axis=0)
        dbeta = dyb.sum(axis=0)
        g = np.multiply(dyb, gamma)
        np.multiply(g, hb, out=gh)
        # rstd * (g - mean(g) - xhat * mean(g * xhat))
        m2 = gh.mean(axis=-1, keepdims=True)
        np.multiply(hb, m2, out=gh)
        g_mean = g.mean(axis=-1, keepdims=True)
        g -= g_mean
        g -= gh
        np.multiply(sr[r0:r1], g, out=dxr[r0:r1])
        return dgamma, dbeta
    parts = for_rows(block, dyr.shape[0], H)
    if not parts:            # no rows (e.g. no labelled MLM position): nothing to sum
        zeros = np.zeros(H, dtype=xhat.dtype)
        return dx, zeros, zeros.copy()
    dgamma = parts[0][0]
    dbeta = parts[0][1]
    for dg, db in parts[1:]:
        dgamma += dg
        dbeta += db
    return dx, dgamma, dbeta


# --------------------------------------------------------------------------- AdamW
def adamw_step(p, g, m, v, decay, n_decay, update):
    """``optim.AdamW.step`` on flat float32 buffers, in cache-sized blocks over the pool.

    The reference makes fourteen passes over buffers as large as the model
    (45 MB each for ``mini``), each one through main memory.  Here each block
    of the four buffers is read once and every pass runs on it in cache:
    the weight decay on the part of the block in the decayed group, then
    ``update(p, g, m, v, tmp)``, the reference's own moment and parameter
    update, on the block.  The same operations in the same order: the same bits.
    """
    def block(r0, r1):
        if decay != 1.0 and r0 < n_decay:
            p[r0:min(r1, n_decay)] *= decay
        update(p[r0:r1], g[r0:r1], m[r0:r1], v[r0:r1], np.empty(r1 - r0, dtype=p.dtype))
    for_rows(block, p.size, 1)


# ----------------------------------------------------------------- uniform draws
_UNIFORM_MIN = 1 << 16   # below this many numbers one thread draws them all


def uniform(gen, shape, dtype=np.float32):
    """``gen.random(shape, dtype=float32)``, the very same numbers, drawn by the whole pool.

    Dropout needs a uniform number per element (17 million per ``mini``
    step), and one NumPy generator draws them on one core.  NumPy's default
    generator (PCG64) can jump ahead: ``advance(k)`` puts it where it would
    be after k more 64-bit outputs, and each 64-bit output gives two float32
    numbers (its low 32 bits first, then its high 32 bits).  So the run of
    numbers [i0, i1), with i0 even, is drawn by a copy of the generator
    advanced by i0 / 2, and the threads draw their runs side by side.  The
    generator itself is then moved past all of them, so the next draw
    continues the stream exactly as after one serial draw (tested).
    Anything else (another generator, another dtype, a half-used 64-bit
    output, a small array, the fast paths off) is one serial draw.
    """
    n = math.prod(shape)
    bitgen = gen.bit_generator
    n_threads = min(_threads, n // _UNIFORM_MIN)
    if (not _enabled or n_threads < 2 or np.dtype(dtype) != np.float32
            or type(bitgen) is not np.random.PCG64):
        return gen.random(shape, dtype=dtype)
    state = bitgen.state
    if state["has_uint32"]:          # half of a 64-bit output is pending: keep it simple
        return gen.random(shape, dtype=dtype)
    out = np.empty(n, dtype=np.float32)
    even = n - n % 2
    cuts = [even * i // n_threads // 2 * 2 for i in range(n_threads + 1)]

    def block(i0, i1):
        copy = np.random.PCG64(0)
        copy.state = state
        copy.advance(i0 // 2)
        np.random.Generator(copy).random(out=out[i0:i1], dtype=np.float32)
    _in_parallel(block, cuts)
    bitgen.advance(even // 2)
    if n % 2:                        # the last number: the low half of the next output, as serially
        out[-1] = gen.random(dtype=np.float32)
    return out.reshape(shape)


# ------------------------------------------------------------------------- dropout
def dropout_mask_apply(x, u, p):
    """mask = (u >= p) / (1 - p) and x * mask, as ``layers.dropout_forward`` (same values)."""
    x = np.ascontiguousarray(x)
    scale = x.dtype.type(1.0 / (1.0 - p))
    xr, ur = _rows(x), _rows(np.ascontiguousarray(u))
    mask, out = np.empty_like(x), np.empty_like(x)
    mr, orr = _rows(mask), _rows(out)

    def block(r0, r1):
        np.multiply(ur[r0:r1] >= p, scale, out=mr[r0:r1])
        np.multiply(xr[r0:r1], mr[r0:r1], out=orr[r0:r1])
    for_rows(block, xr.shape[0], xr.shape[1])
    return out, mask


def multiply(a, b):
    """a * b for two float32 arrays of the same shape (a dropout backward), blocked and threaded."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    out = np.empty_like(a)
    ar, br, orr = _rows(a), _rows(b), _rows(out)

    def block(r0, r1):
        np.multiply(ar[r0:r1], br[r0:r1], out=orr[r0:r1])
    for_rows(block, ar.shape[0], ar.shape[1])
    return out


# ----------------------------------------------------------------------- attention
def attention_probs(scores, scale, mask_bias, dropout_p, rng, train):
    """Scale, mask, softmax and dropout of attention scores, in place, one pass per row block.

    scores: (B, A, T, T) float32, C-contiguous (overwritten with the
    probabilities); mask_bias: (B, 1, 1, T) or None.
    Returns (probs, probs after dropout, dropout mask or None): the values
    ``layers.attention_forward`` computes, bit for bit.
    """
    B, A, T, _ = scores.shape
    sr = scores.reshape(B, A * T, T)
    drop = train and dropout_p != 0.0
    if drop:
        u = rng(scores.shape)                  # one draw, as the reference: the same masks
        ur = np.ascontiguousarray(u).reshape(B, A * T, T)
        keep_scale = scores.dtype.type(1.0 / (1.0 - dropout_p))
        mask, probs_d = np.empty_like(scores), np.empty_like(scores)
        mr, pdr = mask.reshape(B, A * T, T), probs_d.reshape(B, A * T, T)
    bias = None if mask_bias is None else mask_bias.reshape(B, 1, T)
    rows_per_b = A * T

    def block(r0, r1):
        # rows r0..r1 of the (B * A * T, T) view; split at batch boundaries for the mask bias
        r = r0
        while r < r1:
            b, i0 = divmod(r, rows_per_b)
            i1 = min(rows_per_b, i0 + (r1 - r))
            s = sr[b, i0:i1]
            s *= scale
            if bias is not None:
                s += bias[b]
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            if drop:
                np.multiply(ur[b, i0:i1] >= dropout_p, keep_scale, out=mr[b, i0:i1])
                np.multiply(s, mr[b, i0:i1], out=pdr[b, i0:i1])
            r += i1 - i0
    for_rows(block, B * A * T, T)
    if drop:
        return scores, probs_d, mask
    return scores, scores, None


def attention_dscores(dprobs, probs, mask, scale, dead):
    """From dL/d(probs after dropout) to dL/d(scores), in place on ``dprobs``, one pass per row block.

    dscores = P * (dP' - sum(dP' * P)) * scale, with dP' = dprobs * mask;
    rows of fully masked sequences (``dead``) get 0.  The reference's
    operations in its order: the same values bit for bit.
    """
    B, A, T, _ = dprobs.shape
    dr, pr = dprobs.reshape(-1, T), probs.reshape(-1, T)
    mr = None if mask is None else mask.reshape(-1, T)
    rows_per_b = A * T
    dead_np = None if dead is None else np.asarray(dead)

    def block(r0, r1):
        d, p = dr[r0:r1], pr[r0:r1]
        if mr is not None:
            d *= mr[r0:r1]
        dp = d * p
        d -= dp.sum(axis=-1, keepdims=True)
        np.multiply(p, d, out=d)
        d *= scale
        if dead_np is not None:
            for b in range(r0 // rows_per_b, (r1 - 1) // rows_per_b + 1):
                if dead_np[b]:
                    lo, hi = max(r0, b * rows_per_b), min(r1, (b + 1) * rows_per_b)
                    dr[lo:hi] = 0
    for_rows(block, dr.shape[0], T)
    return dprobs


# ------------------------------------------------------------ softmax cross-entropy
# A row of the MLM logits is a whole vocabulary (30,522 numbers, more than BLOCK):
# blocks of one row each would pay NumPy's per-call costs 608 times per pass.  Eight
# times BLOCK (about 8 such rows, 1 MB) halves the time of both passes.
_CE_BLOCK = 8


class CrossEntropyCache:
    """What the fused cross-entropy keeps: the logits and two numbers per row, not log p."""

    def __init__(self, logits, row_max, log_sum, safe, valid, denom):
        self.logits, self.row_max, self.log_sum = logits, row_max, log_sum
        self.safe, self.valid, self.denom = safe, valid, denom


def softmax_cross_entropy_forward(logits, labels, ignore_index=-100):
    """The fused ``layers.softmax_cross_entropy_forward``: row blocks, no (N, C) temporaries.

    Per row: m = max z, s = log sum exp(z - m); the picked log-probability is
    (z_label - m) - s, as in the reference.  The cache keeps m and s per row
    instead of the (N, C) log-probabilities (the backward recomputes them in
    cache), which saves two passes and one (N, C) array.
    """
    logits = np.ascontiguousarray(logits)
    N, C = logits.shape
    valid = labels != ignore_index
    n_valid = int(valid.sum())
    safe = np.where(valid, labels, 0)
    row_max = np.empty((N, 1), dtype=logits.dtype)
    log_sum = np.empty((N, 1), dtype=logits.dtype)

    def block(r0, r1):
        zb = logits[r0:r1]
        m = zb.max(axis=-1, keepdims=True)
        e = zb - m
        np.exp(e, out=e)
        row_max[r0:r1] = m
        np.log(e.sum(axis=-1, keepdims=True), out=log_sum[r0:r1])
    for_rows(block, N, C, _CE_BLOCK * BLOCK)
    rows = np.arange(N)
    picked = (logits[rows, safe][:, None] - row_max) - log_sum
    denom = max(n_valid, 1)
    loss = -(picked[:, 0] * valid).sum() / denom
    return loss, CrossEntropyCache(logits, row_max, log_sum, safe, valid, denom)


def softmax_cross_entropy_backward(dloss, cache):
    """dlogits = (softmax - onehot) * dloss / n_valid, zero on ignored rows; the reference's values."""
    logits, N = cache.logits, cache.logits.shape[0]
    dlogits = np.empty_like(logits)
    coef = (cache.valid * (dloss / cache.denom))[:, None].astype(logits.dtype)

    def block(r0, r1):
        d = np.subtract(logits[r0:r1], cache.row_max[r0:r1], out=dlogits[r0:r1])
        d -= cache.log_sum[r0:r1]
        np.exp(d, out=d)
        rows = np.arange(r1 - r0)
        d[rows, cache.safe[r0:r1]] -= 1.0
        d *= coef[r0:r1]
    for_rows(block, N, logits.shape[1], _CE_BLOCK * BLOCK)
    return dlogits
