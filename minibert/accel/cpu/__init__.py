"""Kernels for float32 NumPy arrays: the reference's formulas in cache-sized blocks on all cores.

Each module mirrors one of ``minibert/ops/`` and returns the same cache
type.  Most repeat the reference's float32 operations in the same order
and so return exactly its values; the exceptions, tested against the
reference within float32 tolerances, are the exact GELU forward (a float64
erf per block, ``accel/erf.py``), the LayerNorm parameter gradients (sums
per block) and the linear layers' products (``accel/blas.py``: a BLAS
kernel may round a run of rows differently from the same rows in one
whole product).
"""
