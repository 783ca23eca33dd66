"""The values in the messages between the checker and its worker: plain data, never a pickle.

``Encoder`` turns Python values into JSON-able structures and sets the bytes
of their arrays aside; ``Decoder`` turns them back.  Never a pickle: the
checker reads what a process running the student's code sends, and
unpickling it would let that code run in the checker.  So the Decoder builds
nothing but plain data (arrays of plain dtypes, lists, tuples, dicts, sets,
NumPy's random generators) and ``Handle`` placeholders for the rest, and
refuses anything else.  Only the standard library and NumPy are imported:
the worker imports this module before the student's file, in isolated mode.
"""
from __future__ import annotations

import json
import math

import numpy as np

from .protocol import ProtocolError

MAX_DEPTH = 40                        # nesting deeper than this is not sent (and not read)
_DTYPE_KINDS = set("biufcmMSU")       # plain data only: no objects, no structured records
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
_PLAIN = (type(None), bool, int, float, str)
_SEEDS = np.random.SeedSequence(0)   # builds a bit generator without reading the OS's entropy (slow)


class Handle:
    """Stands in the checker for an object of the student's that cannot be sent as data.

    The object stays in the worker; the checker can only hand it back (a cache
    of the student's own class goes to the backward pass this way).  Each
    handle is an instance of a subclass named after the object's type, so
    that "got a map" reads as it would in-process.
    """
    __slots__ = ("handle_id",)
    _classes: dict = {}

    @classmethod
    def make(cls, handle_id: int, type_name: str) -> "Handle":
        name = str(type_name)[:80] or "object"
        sub = cls._classes.get(name)
        if sub is None:
            sub = cls._classes[name] = type(name, (cls,), {"__slots__": ()})
        obj = sub()
        obj.handle_id = int(handle_id)
        return obj

    def __repr__(self):
        return f"<{type(self).__name__} kept in the worker>"


class Encoder:
    """Python values to JSON-able structures, the arrays' bytes set aside in ``blobs``.

    handles: in the worker, the table that keeps what cannot be sent (the
    student's objects); None in the checker, which sends only its own data.
    An object met twice in one message is sent once (a reference), so a
    result that returns its input as part of its cache keeps that identity.
    """

    def __init__(self, handles: dict | None = None):
        self.blobs: list = []
        self.size = 0
        self.handles = handles
        self._memo: dict = {}
        self._alive: list = []          # keeps memoised objects alive, so their ids stay theirs

    def __call__(self, obj, depth: int = 0):
        if type(obj) in _PLAIN:
            return obj
        if type(obj) is list and id(obj) not in self._memo and _pure(obj, depth):
            # lists of numbers (token ids, documents): JSON as they are, written now (a later call
            # of the student's may change the list before the message goes)
            return {"t": "j", "m": self._remember(obj), **self._blob(json.dumps(obj).encode())}
        if type(obj) is dict and id(obj) not in self._memo and all(
                type(k) is str and type(v) in _PLAIN for k, v in obj.items()):
            # keyword arguments of numbers: as they are too (no list inside, that another value might share)
            return {"t": "j", "m": self._remember(obj), **self._blob(json.dumps(obj).encode())}
        if depth > MAX_DEPTH:
            return self._handle(obj)
        try:
            return self._value(obj, depth)
        except SystemExit:
            raise
        except BaseException:         # an object whose own methods fail: kept, not sent
            return self._handle(obj)

    def _value(self, obj, depth):
        if id(obj) in self._memo:
            return {"t": "r", "n": self._memo[id(obj)]}
        if isinstance(obj, np.generic) and _plain(obj.dtype):     # before float: np.float64 is one
            return {"t": "ns", **self._array(np.asarray(obj))}
        if isinstance(obj, bool):
            return bool(obj)
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return float(obj)
        if isinstance(obj, str):
            return str(obj)
        if isinstance(obj, complex):
            return {"t": "c", "re": obj.real, "im": obj.imag}
        if isinstance(obj, (bytes, bytearray)):
            return {"t": "by", **self._blob(bytes(obj))}
        if isinstance(obj, np.ndarray):
            return self._ndarray(obj, depth)
        if isinstance(obj, (list, tuple, set, frozenset)):
            if type(obj) not in (list, tuple, set, frozenset) and self.handles is not None:
                # a subclass, such as a NamedTuple cache of minibert's ops (AttentionCache): sent as a
                # plain tuple it would come back without the field names its backward reads, so kept
                return self._handle(obj)
            tag = {list: "l", tuple: "tu", set: "se", frozenset: "fs"}[next(
                k for k in (list, tuple, set, frozenset) if isinstance(obj, k))]
            node = {"t": tag, "m": self._remember(obj)} if tag == "l" else {"t": tag}
            return {**node, "items": [self(x, depth + 1) for x in obj]}
        if isinstance(obj, dict):
            return {"t": "d", "m": self._remember(obj),
                    "items": [[self(k, depth + 1), self(v, depth + 1)] for k, v in obj.items()]}
        if isinstance(obj, np.random.Generator):
            bits, state = obj.bit_generator, obj.bit_generator.state
            plain = _pure(state, depth)       # PCG64's state is JSON as it is; MT19937's holds an array
            return {"t": "rng", "bits": type(bits).__name__, "state": state if plain else self(state, depth + 1),
                    "plain": plain}
        if isinstance(obj, Handle):
            return {"t": "h", "id": obj.handle_id}
        if hasattr(obj, "__array__") and self.handles is not None:   # array-likes of other libraries
            arr = np.asarray(obj)
            if _plain(arr.dtype):
                return self._ndarray(arr, depth)
        return self._handle(obj)

    def sequence(self, items) -> dict:
        """Arguments as a list, each encoded on its own (the list itself is never one JSON block)."""
        return {"t": "l", "items": [self(x) for x in items]}

    def piece(self, obj):
        """``obj`` encoded as it is now, sharing nothing with what was encoded before: each result
        of a series of calls is taken when its call returns, whatever later calls do to it."""
        self._memo = {}
        return self(obj)

    def _ndarray(self, arr, depth):
        if _plain(arr.dtype):
            return {"t": "nd", "m": self._remember(arr), **self._array(arr)}
        if arr.dtype.hasobject and arr.dtype.fields is None:
            return {"t": "oa", "m": self._remember(arr), "shape": list(arr.shape),
                    "items": [self(x, depth + 1) for x in arr.reshape(-1).tolist()]}
        return self._handle(arr)

    def _array(self, arr):
        arr = arr if arr.flags.c_contiguous else arr.copy(order="C")    # (ascontiguousarray makes 0-d 1-d)
        return {"dtype": arr.dtype.str, "shape": list(arr.shape), **self._blob(arr.tobytes())}

    def _blob(self, data: bytes):
        where = {"o": self.size, "n": len(data)}
        self.blobs.append(data)
        self.size += len(data)
        return where

    def _remember(self, obj) -> int:
        """Number ``obj``: met again in this message, it is sent as a reference to that number."""
        self._memo[id(obj)] = n = len(self._memo)
        self._alive.append(obj)
        return n

    def _handle(self, obj):
        if self.handles is None:
            raise TypeError(f"the checker cannot send a {type(obj).__name__}")
        self.handles[id(obj)] = obj
        return {"t": "h", "id": id(obj), "type": type(obj).__name__}


def _pure(obj, depth: int) -> bool:
    """Whether ``obj`` (a list or dict) holds nothing but plain values, lists of them and dicts of
    them with string keys: JSON itself then carries it faithfully, and far faster than node by node."""
    if depth > MAX_DEPTH:
        return False
    if type(obj) is dict:
        if not all(type(k) is str for k in obj):
            return False
        obj = obj.values()
    for x in obj:
        if type(x) is list or type(x) is dict:
            if not _pure(x, depth + 1):
                return False
        elif type(x) not in _PLAIN:
            return False
    return True


def _plain(dtype) -> bool:
    return dtype.kind in _DTYPE_KINDS and dtype.fields is None and not dtype.hasobject


class Decoder:
    """The inverse of ``Encoder``, strict: anything unexpected is a ProtocolError.

    In the checker this reads what the student's process sent, so it builds
    nothing but plain data: arrays of plain dtypes from raw bytes, lists,
    tuples, dicts, sets, random generators of NumPy's own kinds, and
    ``Handle`` placeholders.  No code of the sender's choosing can run.
    """

    def __init__(self, blob: bytes, handles: dict | None = None):
        self.blob = memoryview(blob)
        self.handles = handles
        self._refs: dict = {}

    def __call__(self, node, depth: int = 0):
        if type(node) in _PLAIN:
            return node
        if depth > MAX_DEPTH or not isinstance(node, dict):
            raise ProtocolError("a value nested too deeply, or not a tagged object")
        tag = node.get("t")
        items = node.get("items", [])
        if not isinstance(items, list):
            raise ProtocolError("items that are not a list")
        if tag == "r":
            if node.get("n") not in self._refs:
                raise ProtocolError("a reference to nothing")
            return self._refs[node["n"]]
        if tag == "nd":
            return self._keep(node, self._array(node))
        if tag == "ns":
            return self._array(node)[()]
        if tag == "j":                        # lists and plain values, read by json.loads: data only
            try:
                value = json.loads(bytes(self._slice(node)))
            except (ValueError, RecursionError) as exc:
                raise ProtocolError(f"unreadable JSON ({exc})") from None
            return self._keep(node, value)
        if tag == "l":
            out = self._keep(node, [])
            out.extend(self(x, depth + 1) for x in items)
            return out
        if tag == "d":
            out = self._keep(node, {})
            for pair in items:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ProtocolError("a dict entry that is not a pair")
                out[self(pair[0], depth + 1)] = self(pair[1], depth + 1)
            return out
        if tag in ("tu", "se", "fs"):
            kind = {"tu": tuple, "se": set, "fs": frozenset}[tag]
            return kind(self(x, depth + 1) for x in items)
        if tag == "oa":
            return self._object_array(node, items, depth)
        if tag == "c":
            return complex(float(node["re"]), float(node["im"]))
        if tag == "by":
            return bytes(self._slice(node))
        if tag == "rng":
            return self._generator(node, depth)
        if tag == "h":
            return self._handle(node)
        raise ProtocolError(f"an unknown tag {str(tag)[:20]!r}")

    def piece(self, node):
        """The inverse of ``Encoder.piece``: references count from the start of this piece."""
        self._refs = {}
        return self(node)

    def _keep(self, node, obj):
        """Remember ``obj`` under the number the Encoder gave it, for the references that follow."""
        if "m" in node:
            if type(node["m"]) is not int:
                raise ProtocolError("a reference number that is not a number")
            self._refs[node["m"]] = obj
        return obj

    def _slice(self, node):
        o, n = node.get("o"), node.get("n")
        if type(o) is not int or type(n) is not int or o < 0 or n < 0 or o + n > len(self.blob):
            raise ProtocolError("array bytes out of range")
        return self.blob[o:o + n]

    def _array(self, node):
        try:
            dtype = np.dtype(str(node["dtype"]))
            shape = tuple(int(s) for s in node["shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"an unreadable array ({exc})") from None
        if not _plain(dtype) or any(s < 0 for s in shape) or len(shape) > 32:
            raise ProtocolError(f"an array of dtype {dtype} or shape {shape}")
        data = self._slice(node)
        if len(data) != math.prod(shape) * dtype.itemsize:
            raise ProtocolError("an array whose bytes do not match its shape")
        return np.frombuffer(data, dtype=dtype).reshape(shape).copy()

    def _object_array(self, node, items, depth):
        shape = tuple(int(s) for s in node.get("shape", ()))
        if math.prod(shape) != len(items):
            raise ProtocolError("an object array whose items do not match its shape")
        out = self._keep(node, np.empty(shape, dtype=object))
        flat = out.reshape(-1)            # a view: filling it fills out
        for i, x in enumerate(items):
            flat[i] = self(x, depth + 1)
        return out

    def _generator(self, node, depth):
        name = node.get("bits")
        if name not in _BIT_GENERATORS:
            raise ProtocolError(f"an unknown bit generator {str(name)[:20]!r}")
        gen = np.random.Generator(getattr(np.random, name)(_SEEDS))   # its state is set next
        try:
            state = node.get("state")
            gen.bit_generator.state = state if node.get("plain") is True else self(state, depth + 1)
        except Exception:                 # a state NumPy refuses: the generator cannot be rebuilt
            return Handle.make(0, "Generator")
        return gen

    def _handle(self, node):
        if self.handles is None:          # the checker: a placeholder, never the object
            return Handle.make(node.get("id", 0), node.get("type", "object"))
        try:
            return self.handles[node["id"]]
        except (KeyError, TypeError):
            raise ProtocolError("a handle to nothing") from None
