"""Figures of the paper and of training runs, with matplotlib and seaborn.

Every function draws into the axes it is given (``ax``, or ``axes`` for the two-panel
figures, or ``fig`` for the image grid) or, by default, into a new ``matplotlib.figure.Figure``
that is not registered with pyplot; it returns the Figure. Nothing here changes global
state (no ``plt.show``, no style changes): save with ``fig.savefig(path)``; in Jupyter a
returned Figure is displayed like any other.

Drawing weight samples for :func:`weight_densities` is done by
:func:`gluon_bbb.analysis.pruning.sample_weights`, next to :func:`gluon_bbb.analysis.pruning.signal_to_noise`.

Densities of millions of weights are histograms drawn as lines (``np.histogram``, linear in
the number of weights), not kernel density estimates. matplotlib is imported when drawing.
"""
from .axes import axes_for, save_png
from .training import error_curves, image_grid, posterior_widths, training_curves
from .weights import (METHOD_LABELS, log_snr_density, posterior_gaussian, pruning_curve,
                      weight_densities)

__all__ = ["METHOD_LABELS", "axes_for", "save_png", "image_grid", "training_curves", "error_curves",
           "posterior_widths", "weight_densities", "log_snr_density", "pruning_curve",
           "posterior_gaussian"]
