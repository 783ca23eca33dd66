"""Run minibert's CUDA kernels on the CPU: a stand-in for the few CuPy pieces ``minibert.accel.cuda`` uses.

Without a GPU ``tests/test_gpu.py`` skips, and the CUDA C++ in ``minibert/accel/cuda/source.py``
would go unchecked.  This module compiles that very source with the host's C++ compiler
instead, after a short prelude that provides what CUDA does:

* ``threadIdx``, ``blockIdx``, ``blockDim`` and ``gridDim`` (x only: minibert's launches
  are one-dimensional);
* the threads of a block are fibers of one OS thread, each with its own stack (made by
  ``ucontext``, switched by ``_setjmp``/``_longjmp``, which leave the signal mask alone and so
  make no system call); the blocks of a launch run one after another;
* ``__syncthreads()`` waits until every thread of the block has reached it;
* ``__shfl_xor_sync`` exchanges values through memory between the 32 lanes of a warp,
  waiting for all 32 before and after, as the full mask promises;
* ``__shared__`` variables are ``static``: one copy for the block's threads.

A thread that waits at a barrier the others never reach (a ``__syncthreads`` inside a
branch, a shuffle in part of a warp) hangs a GPU; here the launch stops with an error.

Elementwise and reduction kernels (``cupy.ElementwiseKernel``, ``cupy.ReductionKernel``)
become a loop over the elements with CuPy's rules: an input parameter is the element's
value, an output parameter a variable written back after the operation, ``i`` the index,
``T`` the dtype of the first array given for a ``T`` parameter.

Every launch checks what a GPU would not: each argument's type against the kernel's
parameter list (an ``int`` parameter given a 64-bit integer, or a ``float`` given a
Python float, which CuPy passes as a ``double``, reads garbage on a GPU), arrays
C-contiguous, blocks a whole number of warps when the kernel shuffles.

Not modelled: CUDA's math library (the host's ``exp`` and ``erf`` may differ in the last
bit), memory ordering beyond the barriers, and time.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import types

import numpy as np

# C types of kernel parameters -> NumPy dtypes
_C_DTYPES = {"float": np.float32, "double": np.float64, "int": np.int32, "long long": np.int64,
             "unsigned long long": np.uint64, "unsigned char": np.uint8, "bool": np.bool_}
# type names of ElementwiseKernel parameters -> C types
_EK_CTYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long",
              "uint64": "unsigned long long", "uint8": "unsigned char", "bool": "bool"}
_NP_CTYPES = {np.dtype(v): k for k, v in _C_DTYPES.items()}
# a float16 array goes to a kernel as its bits: minibert's kernels take float16 as unsigned short
# (added after _NP_CTYPES, which maps the elementwise kernels' dtypes, none of them float16)
_C_DTYPES["unsigned short"] = np.float16
_C_DTYPES["unsigned int"] = np.uint32      # the column sums' tickets

_PRELUDE = r"""
#include <setjmp.h>
#include <ucontext.h>
#include <cmath>
#include <cstring>
#include <vector>
using namespace std;

struct minibert_dim3 { unsigned int x, y, z; };
static minibert_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0}, blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

namespace emu {
struct Fiber { ucontext_t ctx; jmp_buf at; vector<char> stack; int waiting; bool done, started; };
static jmp_buf scheduler;
static vector<Fiber> fibers;
static vector<int> arrived, expected;   // barrier 0: the block; barrier 1 + w: warp w
static int current = 0;
static double lanes[1024];

// Back to the launch's loop; it resumes this fiber here.
static void yield() {
    if (!_setjmp(fibers[current].at)) _longjmp(scheduler, 1);
}

// Wait at barrier b until every thread it names has arrived; the last one releases the rest.
static void wait_at(int b) {
    if (++arrived[b] == expected[b]) {
        arrived[b] = 0;
        for (auto& f : fibers) if (f.waiting == b) f.waiting = -1;
        return;
    }
    fibers[current].waiting = b;
    yield();
}
}  // namespace emu

static inline void __syncthreads() { emu::wait_at(0); }
// the blocks run one after another, and a block's threads are fibers of one OS thread: an atomic
// is a plain read-modify-write, and every write is seen by the next block without a fence
static inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { const unsigned int old = *p; *p += v; return old; }
static inline void __threadfence() {}
template <class V> static inline V __ldcg(const V* p) { return *p; }   // a load that skips L1: here, a load
static inline float __fmul_rn(float a, float b) { return a * b; }      // never fused: ISO C++ does not
static inline double __dmul_rn(double a, double b) { return a * b; }   // contract (GCC's -std=c++17)
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
template <class V> static inline V __shfl_xor_sync(unsigned int, V v, int o) {
    const unsigned int t = threadIdx.x, w = t >> 5;
    emu::lanes[t] = (double)v;
    emu::wait_at(1 + w);
    V r = (V)emu::lanes[(w << 5) | ((t & 31) ^ (unsigned int)o)];
    emu::wait_at(1 + w);
    return r;
}

// The tensor cores' mma.m16n8k16 (float16 A 16x16 and B 16x8, float32 D), which the kernels reach
// through PTX on a GPU (``flash_source.py``, its layout of the tiles over a warp's lanes): each lane
// leaves its pieces of a and b, the warp waits, each lane rebuilds both tiles and adds its four
// elements of a b to d.
#define MINIBERT_CPU 1
namespace emu { static unsigned int mma_a[1024][4], mma_b[1024][2]; }
// the kernels' own float16 widening (source.REDUCE, which every kernel is compiled after)
inline float half_to_float(unsigned short h);
static inline void mma16816(float* d, const unsigned int* a, const unsigned int* b) {
    const unsigned int t = threadIdx.x, w = t >> 5;
    for (int i = 0; i < 4; ++i) emu::mma_a[t][i] = a[i];
    emu::mma_b[t][0] = b[0];
    emu::mma_b[t][1] = b[1];
    emu::wait_at(1 + w);
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; ++l) {
        const unsigned int* la = emu::mma_a[(w << 5) | l];
        const unsigned int* lb = emu::mma_b[(w << 5) | l];
        const int g = l >> 2, c = 2 * (l & 3);
        for (int h = 0; h < 2; ++h) {
            A[g][c + h] = half_to_float((unsigned short)(la[0] >> (16 * h)));
            A[g + 8][c + h] = half_to_float((unsigned short)(la[1] >> (16 * h)));
            A[g][c + 8 + h] = half_to_float((unsigned short)(la[2] >> (16 * h)));
            A[g + 8][c + 8 + h] = half_to_float((unsigned short)(la[3] >> (16 * h)));
            B[c + h][g] = half_to_float((unsigned short)(lb[0] >> (16 * h)));
            B[c + 8 + h][g] = half_to_float((unsigned short)(lb[1] >> (16 * h)));
        }
    }
    emu::wait_at(1 + w);
    const int g = (t & 31) >> 2, c = 2 * (t & 3);
    for (int e = 0; e < 4; ++e) {
        float acc = 0.0f;
        for (int k = 0; k < 16; ++k) acc += A[g + 8 * (e >> 1)][k] * B[k][c + (e & 1)];
        d[e] += acc;
    }
}
"""

_LAUNCH = r"""
static void** minibert_args;
// A fiber runs the kernel once for each block of the launch: done, it waits to be resumed for the next.
static void minibert_thread() {
    for (;;) {
        KERNEL_CALL;
        emu::fibers[emu::current].done = true;
        emu::yield();
    }
}

// 0: done;  1: some threads wait at a barrier that the others never reach
extern "C" int minibert_launch(void** args, long long grid, int block) {
    using namespace emu;
    minibert_args = args;
    blockDim.x = block;
    gridDim.x = (unsigned int)grid;
    const int warps = (block + 31) / 32;
    expected.assign(1 + warps, 32);
    expected[0] = block;
    expected[warps] = block - 32 * (warps - 1);
    fibers.resize(block);
    ucontext_t model;
    getcontext(&model);
    for (int t = 0; t < block; ++t) {           // each fiber made once a launch, from one getcontext
        Fiber& f = fibers[t];
        f.stack.resize(1 << 17);
        f.ctx = model;
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = nullptr;                // never reached: a fiber does not return
        makecontext(&f.ctx, minibert_thread, 0);
        f.started = false;
    }
    for (long long b = 0; b < grid; ++b) {
        blockIdx.x = (unsigned int)b;
        arrived.assign(1 + warps, 0);
        for (int t = 0; t < block; ++t) {
            fibers[t].waiting = -1;
            fibers[t].done = false;
        }
        for (;;) {
            bool all_done = true, ran = false;
            for (int t = 0; t < block; ++t) {
                Fiber& f = fibers[t];
                if (f.done) continue;
                all_done = false;
                if (f.waiting != -1) continue;
                current = t;
                threadIdx.x = (unsigned int)t;
                if (!_setjmp(scheduler)) {
                    if (f.started) _longjmp(f.at, 1);
                    f.started = true;
                    setcontext(&f.ctx);
                }
                ran = true;
            }
            if (all_done) break;
            if (!ran) return 1;
        }
    }
    return 0;
}
"""

# A kernel that reaches no barrier runs each thread to its end before the next one starts, fibers or not:
# its threads are then called one after another, without a fiber each (three system calls a thread).
_LAUNCH_PLAIN = r"""
static void** minibert_args;
extern "C" int minibert_launch(void** args, long long grid, int block) {
    using namespace emu;
    minibert_args = args;
    blockDim.x = block;
    gridDim.x = (unsigned int)grid;
    for (long long b = 0; b < grid; ++b) {
        blockIdx.x = (unsigned int)b;
        for (int t = 0; t < block; ++t) {
            current = t;
            threadIdx.x = (unsigned int)t;
            KERNEL_CALL;
        }
    }
    return 0;
}
"""
_WAITS = ("__syncthreads", "__syncwarp", "__shfl", "wait_at", "mma16816")


def reaches_a_barrier(source, name):
    """Whether kernel ``name`` of ``source`` may wait at a barrier: its body, or the body of a function or
    macro it names (and so on), names one of the primitives that wait (``_WAITS``).  By names, so a
    function that merely shares a name with one that waits counts as waiting: the answer errs on the
    side of fibers.  A kernel whose body cannot be found waits."""
    text = _PRELUDE + source
    bodies = {}
    for m in re.finditer(r"\b(\w+)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*(?:const\s*)?\{", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if m.group(1) not in ("if", "for", "while", "switch", "return", "sizeof"):     # a definition, not a block
            bodies[m.group(1)] = bodies.get(m.group(1), "") + text[m.end():i]
    for m in re.finditer(r"^\s*#define\s+(\w+)(.*(?:\\\n.*)*)", text, re.M):
        bodies[m.group(1)] = bodies.get(m.group(1), "") + m.group(2)
    if name not in bodies:
        return True
    waits = {n for n, b in bodies.items() if any(p in b for p in _WAITS)}
    names = {n: set(re.findall(r"\b\w+\b", b)) for n, b in bodies.items()}
    while True:                                   # every function that names one that waits, waits
        more = {n for n, used in names.items() if n not in waits and used & waits}
        if not more:
            break
        waits |= more
    return name in waits


_compiled = {}
_workdir = None
_status = None


def compiler():
    """The host C++ compiler to use, or None."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def unavailable():
    """None when kernels can run here, else why not (for a skip reason)."""
    global _status
    if _status is None:
        if os.name != "posix":
            _status = "the CPU stand-in for CUDA needs a POSIX system (ucontext)"
        elif compiler() is None:
            _status = "no C++ compiler (g++, c++ or clang++) to run the CUDA kernels on the CPU"
        else:
            try:
                lib = _build("typedef float T;\n"
                             "extern \"C\" __global__ void probe(T* x) { x[threadIdx.x] = blockIdx.x; }",
                             "probe")
                x = np.zeros(4, np.float32)
                _launch(lib, [x.ctypes.data], 3, 4)
                _status = "" if x.tolist() == [2.0] * 4 else "the CPU stand-in for CUDA gave a wrong result"
            except (RuntimeError, OSError) as exc:
                _status = f"the CPU stand-in for CUDA does not build here: {str(exc)[:200]}"
    return _status or None


def _build(source, name, raw=True):
    """Compile a kernel (with the prelude and launcher) or an elementwise loop; the loaded library."""
    global _workdir
    if raw:
        params = _signature(source, name)
        call = ", ".join(_arg_expr(i, ctype, ptr) for i, (ctype, ptr) in enumerate(params))
        launch = _LAUNCH if reaches_a_barrier(source, name) else _LAUNCH_PLAIN
        full = _PRELUDE + source + launch.replace("KERNEL_CALL", f"{name}({call})")
    else:
        full = source
    # -U_FORTIFY_SOURCE: a fortified _longjmp refuses to jump to another stack (the fibers' are on the heap)
    flags = ["-std=c++17", "-O1", "-U_FORTIFY_SOURCE", "-shared", "-fPIC", "-w"]
    key = hashlib.sha256("\0".join([full, compiler(), *flags]).encode()).hexdigest()[:24]
    if key in _compiled:
        return _compiled[key]
    if _workdir is None:
        _workdir = tempfile.TemporaryDirectory(prefix="minibert-cuda-on-cpu-")
    lib = os.path.join(_shared_dir() or _workdir.name, key + ".so")
    if not os.path.isfile(lib):               # compiled here, by this process, or by another before
        src = os.path.join(_workdir.name, key + ".cpp")
        with open(src, "w") as f:
            f.write(full)
        part = os.path.join(_workdir.name, key + ".so")
        done = subprocess.run([compiler(), *flags, src, "-o", part], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{name} does not compile on the CPU:\n{done.stderr[-3000:]}")
        if part != lib:
            try:
                shutil.copyfile(part, lib + f".{os.getpid()}")
                os.replace(lib + f".{os.getpid()}", lib)  # whole or not at all: another process may load it
            except OSError:                               # the shared folder went away: this process's own
                lib = part
    _compiled[key] = (ctypes.CDLL(lib), params if raw else None)
    return _compiled[key]


def _shared_dir():
    """A folder of this user's alone where the test processes (pytest-xdist's workers, later runs) share
    what they compiled, by the hash of the source, the compiler and its flags; None where there is none."""
    path = os.path.join(tempfile.gettempdir(), f"minibert-cuda-on-cpu-{os.getuid()}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.stat(path)
    except OSError:
        return None
    private = info.st_uid == os.getuid() and not info.st_mode & 0o077   # nobody else may put a library here
    return path if private else None


def _signature(source, name):
    """[(C type with T resolved by the caller later, is_pointer)] of kernel ``name``'s parameters."""
    m = re.search(r'extern\s+"C"\s+__global__\s+void\s+' + re.escape(name) + r"\s*\(([^)]*)\)", source)
    if m is None:
        raise RuntimeError(f"no kernel named {name} in the source")
    out = []
    for p in m.group(1).split(","):
        p = " ".join(p.replace("*", " * ").split())
        ptr = "*" in p
        words = [w for w in p.replace("*", " ").split() if w != "const"]
        out.append((" ".join(words[:-1]), ptr))
    return out


def _arg_expr(i, ctype, ptr):
    return f"({ctype}*)minibert_args[{i}]" if ptr else f"*({ctype}*)minibert_args[{i}]"


def _launch(lib_params, pointers, grid, block):
    lib = lib_params[0]
    argv = (ctypes.c_void_p * max(len(pointers), 1))(*pointers)
    rc = lib.minibert_launch(argv, ctypes.c_longlong(grid), ctypes.c_int(block))
    if rc:
        raise RuntimeError("the kernel's threads wait at a barrier that the other threads of their "
                           "block (or warp) never reach: on a GPU this launch would hang")


class RawKernel:
    """``cupy.RawKernel(code, name, options=...)`` run on the CPU."""

    def __init__(self, code, name, options=()):
        self.code, self.name = code, name
        m = re.search(r"typedef\s+(float|double)\s+T\s*;", code)
        self.T = m.group(1) if m else None
        self.lib = _build(code, name)
        self.params = [(self.T if c == "T" else c, ptr) for c, ptr in self.lib[1]]
        self.shuffles = "__shfl" in code

    def __call__(self, grid, block, args, shared_mem=0):
        grid, block = tuple(grid), tuple(block)
        if len(grid) != 1 or len(block) != 1:
            raise NotImplementedError("the CPU stand-in runs one-dimensional launches only")
        if not 0 < block[0] <= 1024:
            raise ValueError(f"{self.name}: {block[0]} threads per block (CUDA allows 1 to 1024)")
        if self.shuffles and block[0] % 32:
            raise ValueError(f"{self.name}: {block[0]} threads per block is not a whole number of "
                             f"warps, and the kernel shuffles with a full mask")
        if grid[0] < 1:
            raise ValueError(f"{self.name}: a grid of {grid[0]} blocks is a CUDA launch error")
        if len(args) != len(self.params):
            raise TypeError(f"{self.name} takes {len(self.params)} arguments, got {len(args)}")
        pointers, keep = [], []
        for i, (a, (ctype, ptr)) in enumerate(zip(args, self.params)):
            want = np.dtype(_C_DTYPES[ctype])
            if ptr:
                if not isinstance(a, np.ndarray):
                    raise TypeError(f"{self.name}: argument {i} ({ctype}*) must be an array, got {type(a)}")
                if a.dtype != want or not a.flags.c_contiguous:
                    raise TypeError(f"{self.name}: argument {i} ({ctype}*) got a {a.dtype} array"
                                    f"{'' if a.flags.c_contiguous else ' (not C-contiguous)'}")
                pointers.append(a.ctypes.data)
            else:
                if not isinstance(a, np.generic) or a.dtype != want:
                    raise TypeError(f"{self.name}: argument {i} ({ctype}) must be a NumPy {want} scalar, "
                                    f"got {type(a).__name__} (a GPU would read it as another type)")
                box = np.array(a)
                keep.append(box)
                pointers.append(box.ctypes.data)
        _launch(self.lib, pointers, grid[0], block[0])


def _ek_params(text):
    out = []
    for p in text.split(","):
        words = p.split()
        if len(words) != 2:
            raise NotImplementedError(f"parameter {p.strip()!r}: the CPU stand-in takes 'TYPE name' only")
        out.append((words[0], words[1]))
    return out


class ElementwiseKernel:
    """``cupy.ElementwiseKernel(in_params, out_params, operation, name)`` run on the CPU."""

    def __init__(self, in_params, out_params, operation, name="kernel", **kwargs):
        self.ins, self.outs = _ek_params(in_params), _ek_params(out_params)
        self.operation, self.name = operation, name

    def _resolve(self, args):
        """The C type of each type placeholder (T), from the first array given for it."""
        types_ = {}
        for (t, _), a in zip(self.ins + self.outs, args):
            if t not in _EK_CTYPES and t not in types_ and isinstance(a, np.ndarray):
                types_[t] = _NP_CTYPES[a.dtype]
        for (t, _), a in zip(self.ins + self.outs, args):
            if t not in _EK_CTYPES and t not in types_ and isinstance(a, np.generic):
                types_[t] = _NP_CTYPES[a.dtype]
        return types_

    def __call__(self, *args):
        n_in, n_out = len(self.ins), len(self.outs)
        if len(args) not in (n_in, n_in + n_out):
            raise TypeError(f"{self.name} takes {n_in} or {n_in + n_out} arguments, got {len(args)}")
        tmap = self._resolve(args)
        ctype = lambda t: _EK_CTYPES.get(t) or tmap[t]
        # a 0-d input array (a number left on the device) is broadcast, as CuPy does; nothing else is
        arrays = [a for k, a in enumerate(args) if isinstance(a, np.ndarray) and (a.ndim or k >= n_in)]
        shape = arrays[0].shape if arrays else ()
        if any(a.shape != shape for a in arrays):
            raise NotImplementedError(f"{self.name}: the CPU stand-in does not broadcast "
                                      f"({[a.shape for a in arrays]})")
        args = list(args)
        for (t, pname), a in zip(self.ins + self.outs, args):
            want = np.dtype(_C_DTYPES[ctype(t)])
            if isinstance(a, np.ndarray) and a.dtype != want:
                raise TypeError(f"{self.name}: {pname} is {t} ({want}), got a {a.dtype} array")
            if isinstance(a, np.generic) and a.dtype != want:
                raise TypeError(f"{self.name}: {pname} is {t} ({want}), got a {a.dtype} scalar")
        for (t, _) in self.outs[len(args) - n_in:]:
            args.append(np.empty(shape, dtype=_C_DTYPES[ctype(t)]))
        lines, store, pointers, keep = [], [], [], []
        for k, ((t, pname), a) in enumerate(zip(self.ins + self.outs, args)):
            c = ctype(t)
            out = k >= n_in
            if isinstance(a, np.ndarray) and (a.ndim or out):
                if out and not a.flags.c_contiguous:
                    raise NotImplementedError(f"{self.name}: output {pname} is not C-contiguous")
                a = np.ascontiguousarray(a)
                keep.append(a)
                pointers.append(a.ctypes.data)
                lines.append(f"{'' if out else 'const '}{c} {pname} = (({c}*)a[{k}])[i];")
                if out:
                    store.append(f"(({c}*)a[{k}])[i] = {pname};")
            else:
                if out:
                    raise TypeError(f"{self.name}: output {pname} must be an array")
                box = np.array(a, dtype=_C_DTYPES[c])
                keep.append(box)
                pointers.append(box.ctypes.data)
                lines.append(f"const {c} {pname} = *({c}*)a[{k}];")
        typedefs = "".join(f"typedef {c} {t};\n" for t, c in tmap.items())
        source = ("#include <cmath>\nusing namespace std;\n" + typedefs +
                  'extern "C" void minibert_elementwise(long long n, void** a) {\n'
                  "    for (long long i = 0; i < n; ++i) {\n        " + "\n        ".join(lines) +
                  "\n        {\n" + self.operation + "\n        }\n        " + "\n        ".join(store) +
                  "\n    }\n}\n")
        lib = _build(source, self.name, raw=False)[0]
        argv = (ctypes.c_void_p * len(pointers))(*pointers)
        lib.minibert_elementwise(ctypes.c_longlong(int(np.prod(shape))), argv)
        outs = args[n_in:]
        return outs[0] if n_out == 1 else tuple(outs)


    def cuda_source(self, T):
        """This kernel as CUDA C++ (one thread per element), with T the C type given: for a
        compile check by ``nvcc`` where one is installed."""
        ctype = lambda t: _EK_CTYPES.get(t) or T
        n_in = len(self.ins)
        params, loads, stores = [], [], []
        for k, (t, pname) in enumerate(self.ins + self.outs):
            c = ctype(t)
            params.append(f"{'' if k >= n_in else 'const '}{c}* {pname}_")
            loads.append(f"{'' if k >= n_in else 'const '}{c} {pname} = {pname}_[i];")
            if k >= n_in:
                stores.append(f"{pname}_[i] = {pname};")
        return (f'extern "C" __global__ void {self.name}(const long long n, {", ".join(params)}) {{\n'
                "    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                "    if (i >= n) return;\n    " + "\n    ".join(loads) + "\n    {\n" + self.operation +
                "\n    }\n    " + "\n    ".join(stores) + "\n}\n")


class ReductionKernel:
    """``cupy.ReductionKernel`` for sums: the map expression per element, then a sum along ``axis``."""

    def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name="reduce",
                 **kwargs):
        if (reduce_expr.replace(" ", ""), post_map_expr.replace(" ", ""), identity) != ("a+b", "out=a", "0"):
            raise NotImplementedError("the CPU stand-in reduces sums only")
        (t, self.out_name), = _ek_params(out_params)
        self.map = ElementwiseKernel(in_params, f"{t} {self.out_name}", f"{self.out_name} = {map_expr};",
                                     name + "_map")
        self.name = name

    def __call__(self, *args, axis=None):
        return self.map(*args).sum(axis=axis)


def nvcc():
    """The CUDA compiler, or None: on PATH, under $CUDA_HOME or /usr/local/cuda."""
    home = os.environ.get("CUDA_HOME")
    for path in (shutil.which("nvcc"), home and os.path.join(home, "bin", "nvcc"), "/usr/local/cuda/bin/nvcc"):
        if path and os.access(path, os.X_OK):
            return path
    return None


def gemm(p, c):
    """``accel/cuda/cublas.py``'s ``gemm`` on NumPy arrays: each of the plan's operands read from its
    memory as cuBLAS reads it (column-major, through its leading dimension and batch stride), the
    row-major a and b taken back from them, and c = a @ b (float16: widened, multiplied in float32,
    rounded once) written through ldc and the batch stride."""
    from numpy.lib.stride_tricks import as_strided

    def read(op, rows, cols, i):      # op(X) of entry i as cuBLAS reads it: (rows, cols)
        sr, sc = (cols, rows) if op.trans else (rows, cols)
        assert op.array.flags.c_contiguous and op.ld >= sr and i * op.stride + (sr - 1) + (sc - 1) * op.ld < op.array.size
        flat = op.array.reshape(-1)
        x = as_strided(flat[i * op.stride:], shape=(sr, sc), strides=(flat.itemsize, flat.itemsize * op.ld))
        return x.T if op.trans else x

    assert c.flags.c_contiguous and p.ldc >= p.m and c.size >= (p.batch - 1) * p.stride_c + p.ldc * (p.n - 1) + p.m
    out = c.reshape(-1)
    wide = np.float32 if c.dtype == np.float16 else c.dtype
    for i in range(p.batch):
        a = read(p.B, p.k, p.n, i).T.astype(wide)         # cuBLAS's B is the row-major left operand
        b = read(p.A, p.m, p.k, i).T.astype(wide)
        with np.errstate(over="ignore", invalid="ignore"):
            prod = (a @ b).astype(c.dtype)
        as_strided(out[i * p.stride_c:], shape=(p.n, p.m), strides=(out.itemsize * p.ldc, out.itemsize))[...] = prod
    return c


def fake_cupy():
    """A module to stand in for ``cupy`` while minibert.accel.cuda runs on NumPy arrays."""
    m = types.ModuleType("cupy")
    m.RawKernel, m.ElementwiseKernel, m.ReductionKernel = RawKernel, ElementwiseKernel, ReductionKernel
    for name in ("empty", "empty_like", "zeros", "full", "ascontiguousarray", "asarray", "uint8", "float16", "float32", "float64",
                 "int32", "int64"):
        setattr(m, name, getattr(np, name))
    m.asnumpy = np.asarray
    import graph_stand_in       # streams, and their capture into graphs
    m.cuda = types.SimpleNamespace(Stream=graph_stand_in.Stream, get_current_stream=graph_stand_in.get_current_stream,
                                   MemoryPool=graph_stand_in.MemoryPool, using_allocator=graph_stand_in.using_allocator)
    return m
