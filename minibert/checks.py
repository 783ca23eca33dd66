"""The checks many modules make of a value someone passed: a count, a number, a probability.

A bool is never a number here: ``True`` is 1 to Python, but ``steps=True`` is a
mistake to report, not one step to run.  NumPy's integers and floats are
numbers like Python's.
"""
from __future__ import annotations

import numbers

import numpy as np


def is_int(value) -> bool:
    """A whole number (Python's or NumPy's int), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_number(value) -> bool:
    """A real number (int or float, Python's or NumPy's), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def check_count(name: str, value, low: int = 0) -> None:
    """A whole number >= low (seeds, epochs, sizes): say so here rather than deep in NumPy."""
    if not is_int(value) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer >= {low}.")


def check_flag(name, value, what="True or False"):
    """A ``TypeError`` unless ``value`` is True or False (NumPy's bools too); returns it as a bool: "no", None or
    0.5 would otherwise be read as what they are worth as a truth value."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be {what}, got {value!r}")
    return bool(value)


def check_generator(name: str, value) -> None:
    """A NumPy random generator (an int seed, say, fails deep inside with another message)."""
    if not isinstance(value, np.random.Generator):
        raise TypeError(f"{name} must be a numpy.random.Generator (np.random.default_rng(seed)), got "
                        f"{type(value).__name__}")


def check_probability(name: str, value, low_open: bool = False) -> None:
    """A number in [0, 1] (in (0, 1] with ``low_open``)."""
    if not is_number(value):
        raise ValueError(f"{name}={value!r} must be a probability (a number).")
    if not (0.0 < value <= 1.0 if low_open else 0.0 <= value <= 1.0):
        raise ValueError(f"{name}={value!r} must be a probability in {'(0, 1]' if low_open else '[0, 1]'}.")
