"""A name for a check's computation that is the same wherever the check runs: ``key(exercise, compute)``.

The student copy looks up what each usual mistake gave for a computation
(``recorded.py``) by this name.  ``compute`` is a function of the module, a
lambda of the check's written over the check's own inputs, so the name is a
digest of the function as written (its place in the source, the names and
constants it uses) and of everything it closes over (arrays, numbers, other
such functions), whatever the Python version and the machine: floats enter
rounded to float32, so a last bit that another BLAS computes otherwise
does not change the name.  An object of any other kind raises ``Unkeyable``;
the student copy then gives no hint for that computation, never a wrong one.
"""
from __future__ import annotations

import functools
import hashlib
import types

import numpy as np


class Unkeyable(Exception):
    """The computation holds an object that has no stable name (a report, the student's module)."""


def key(exercise: str, compute) -> str:
    digest = hashlib.sha256(exercise.encode())
    _feed(digest, compute, set())
    return digest.hexdigest()[:32]


def _feed(h, obj, seen: set) -> None:
    t = type(obj)
    if obj is None or t in (bool, int, str):
        h.update(f"{t.__name__}:{obj!r};".encode())
    elif t is float or isinstance(obj, np.floating):
        h.update(f"f:{float(np.float32(obj))!r};".encode())
    elif isinstance(obj, (np.generic, np.ndarray)):
        _array(h, np.asarray(obj), seen)
    elif t in (list, tuple):
        h.update(f"{t.__name__}[{len(obj)}:".encode())
        for item in obj:
            _feed(h, item, seen)
        h.update(b"]")
    elif t in (set, frozenset):
        parts = sorted(_alone(item, seen) for item in obj)
        h.update(f"set[{','.join(parts)}]".encode())
    elif t is dict:
        h.update(f"dict[{len(obj)}:".encode())
        for k, v in obj.items():
            _feed(h, k, seen)
            _feed(h, v, seen)
        h.update(b"]")
    elif t is types.SimpleNamespace:
        h.update(b"ns:")
        _feed(h, vars(obj), seen)
    elif t is types.FunctionType:
        _function(h, obj, seen)
    elif t is functools.partial:
        h.update(b"partial:")
        for part in (obj.func, obj.args, obj.keywords):
            _feed(h, part, seen)
    elif t in (types.BuiltinFunctionType, types.ModuleType, type, np.ufunc):
        h.update(f"{t.__name__}:{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', obj.__name__)};"
                 .encode())
    elif isinstance(obj, np.random.Generator):
        h.update(f"rng:{type(obj.bit_generator).__name__}:".encode())
        _feed(h, obj.bit_generator.state, seen)
    else:
        raise Unkeyable(f"a {t.__module__}.{t.__qualname__}")


def _alone(obj, seen) -> str:
    one = hashlib.sha256()
    _feed(one, obj, seen)
    return one.hexdigest()


def _array(h, arr: np.ndarray, seen) -> None:
    h.update(f"array{arr.shape}{arr.dtype.kind}:".encode())
    if arr.dtype.kind in "fc":
        h.update(np.ascontiguousarray(arr, dtype=np.complex64 if arr.dtype.kind == "c" else "<f4").tobytes())
    elif arr.dtype.kind in "biu":
        h.update(np.ascontiguousarray(arr, dtype="<i8").tobytes())
    elif arr.dtype.kind in "US":
        h.update(repr(arr.tolist()).encode())
    elif arr.dtype.kind == "O":
        for item in arr.reshape(-1):
            _feed(h, item, seen)
    else:
        raise Unkeyable(f"an array of {arr.dtype}")


def _function(h, func, seen: set) -> None:
    """A function as written: where it is, the names and constants it uses, what it closes over."""
    if id(func) in seen:
        h.update(b"again;")
        return
    seen.add(id(func))
    if not func.__module__ or not func.__module__.startswith(("exercises.", "minibert.")):
        raise Unkeyable(f"the function {func.__qualname__} of {func.__module__}")   # the student's, say
    code = func.__code__
    h.update(f"fn:{func.__module__}.{func.__qualname__}@{code.co_firstlineno}:".encode())
    _code(h, code)
    for part in (func.__defaults__, func.__kwdefaults__):
        _feed(h, part, seen)
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        h.update(f"{name}=".encode())
        _feed(h, cell.cell_contents, seen)


def _code(h, code) -> None:
    """The names and constants the code uses, as sets: the same for the same source on Python 3.11
    to 3.13 (whose bytecode differs: 3.12 writes a comprehension inside its function, 3.11 apart)."""
    names, consts = set(), set()
    _gather(code, names, consts)
    h.update(f"{sorted(names)}{sorted(consts)}".encode())


def _gather(code, names: set, consts: set) -> None:
    names.update(n for n in (*code.co_names, *code.co_varnames, *code.co_freevars, *code.co_cellvars)
                 if n.isidentifier())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _gather(const, names, consts)
        elif const is not None:
            consts.add(f"{type(const).__name__}:{float(np.float32(const))!r}" if type(const) is float
                       else f"{type(const).__name__}:{const!r}")
