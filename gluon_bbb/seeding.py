"""Seeds derived from a run's seed and an epoch: the same on every resume.

Anything random that a run does in epoch e (the weight noise, dropout masks, the minibatch
order) is seeded from (seed, e) at the start of that epoch, so a run resumed at epoch e draws
what an uninterrupted run draws. Independent streams of one run use different ``stream``
numbers.
"""
import numpy as np

__all__ = ["epoch_seed"]

#: Seeds are kept below this, the bound of ``mx.random.seed`` and NumPy's legacy seeding.
SEED_BOUND = 2**31 - 1


def epoch_seed(seed, epoch, stream=0):
    """A seed in [0, 2^31 - 1) for epoch ``epoch`` of a run seeded with ``seed``.

    Parameters
    ----------
    seed, epoch : int
    stream : int
        0 for the trainer's weight noise; other numbers for other streams of the same run
        (1: the dropout masks of the deterministic baselines; 2: the bandit agents' segments,
        with ``epoch`` the segment).

    Returns
    -------
    int
    """
    entropy = [int(seed), int(epoch)] + ([int(stream)] if stream else [])
    return int(np.random.SeedSequence(entropy).generate_state(1)[0] % SEED_BOUND)
