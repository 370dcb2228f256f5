"""What the uncertainty is for, measured on trained networks.

- :mod:`~gluon_bbb.analysis.uncertainty`: predictive entropy, mutual information, refusal
  curves, out-of-distribution detection;
- :mod:`~gluon_bbb.analysis.calibration`: reliability diagrams and the expected calibration
  error;
- :mod:`~gluon_bbb.analysis.pruning`: removing weights by signal-to-noise ratio (Table 2).
"""
