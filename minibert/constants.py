"""Numbers with a meaning, written once.

The cache folders' names are in ``minibert.paths``.
"""
import math

# the MLM label of every position that is not predicted (the loss and the heads skip it;
# PyTorch's and Hugging Face's value, so labels carry over)
IGNORE_INDEX = -100

# GELU: exact Phi(x) = (1 + erf(x / sqrt 2)) / 2; the tanh form of Hendrycks and Gimpel
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
INV_SQRT_2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
GELU_TANH_C = 0.044715
