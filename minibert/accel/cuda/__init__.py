"""Fused CUDA kernels for CuPy arrays (float32 and float64): ``source.py`` holds the C++,
``kernels.py`` compiles and launches it, ``ops.py`` exposes the ops with the reference's caches."""
