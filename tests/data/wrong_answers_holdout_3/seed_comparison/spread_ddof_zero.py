# slip: the spread is np.std with its default ddof=0 (divide by n), not the sample standard deviation with ddof=1 (divide by n - 1)
# names it: ddof=1 | ddof | n - 1 | sample standard deviation | bessel
"""Exercise: an ablation against the default, over seeds.

Every training run is noisy: the same settings with another seed (other
held-out documents, starting weights, batches and masks) end at another
loss.  Notebook 12 compares each one-flag ablation with the default over
three seeds, in two ways:

* each setting on its own: the mean of its seeds' results and their
  spread, the SAMPLE standard deviation (ddof=1: the seeds run are a sample
  of all the seeds one could run).  A run may have no number (None): a run
  without next-sentence prediction has no NSP accuracy.  Leave those seeds
  out; with no number at all the result is (nan, nan), which the table
  prints as a dash;
* paired: one seed gives both settings the same held-out documents and the
  same starting weights, so compare them seed by seed, flag - default, over
  the seeds where both runs have a number; then the mean and the spread of
  those differences, as above.

Check your work with:   python -m exercises check seed_comparison
Stuck?  python -m exercises hint seed_comparison  (then 2, then 3)
"""
import numpy as np


def mean_and_spread(values):
    """One setting over its seeds.

    Args:
        values: a list with one number (or None) per seed

    Returns:
        (mean, spread): two floats, over the numbers that are not None; (nan, nan) if there are none
    """
    # TODO
    x = np.array([v for v in values if v is not None], dtype=np.float64)
    if len(x) == 0:
        return float("nan"), float("nan")
    mean = float(x.mean())
    spread = float(np.std(x))  # the standard deviation of the seeds
    return mean, spread


def paired_differences(flag, default):
    """A flag against the default, seed by seed.

    Args:
        flag, default: lists with one number (or None) per seed, the same seeds in the same order

    Returns:
        (differences, mean, spread): differences, an array of flag - default for each seed where
        both have a number, in the order of the seeds (empty if there is none); mean and spread,
        two floats, those of the differences, as mean_and_spread computes them
    """
    # TODO
    differences = np.array([f - d for f, d in zip(flag, default) if f is not None and d is not None],
                           dtype=np.float64)
    mean, spread = mean_and_spread(list(differences))
    return differences, mean, spread
