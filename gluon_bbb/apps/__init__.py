"""Bayes by Backprop beyond classification: the paper's other two experiments.

- :mod:`~gluon_bbb.apps.regression`: the toy regression of Figure 5, with predictive intervals;
- :mod:`~gluon_bbb.apps.bandit`: the mushroom contextual bandit of section 5.3 (Thompson
  sampling against epsilon-greedy agents, Figure 6).
"""
