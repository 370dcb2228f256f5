"""The fused variational step: a C++ MXNet operator, built on first use, with a visible fallback.

One call of the operator ``gluon_bbb_variational`` does, for every weight tensor at once,
what the pure-MXNet path does in dozens of operators: draw eps ~ N(0, 1) (counter-based,
keyed from MXNet's seeded generator), sigma = softplus(rho), w = mu + sigma * eps (section 3.2, step 2), and the
complexity sum_j [log q(w_j | theta) - log P(w_j)] of Eq. (8) (or its closed form), with P
shared by all weights or a per-weight DiagonalGaussianPrior (:func:`prior_inputs`); its backward
pass gives the gradients with respect to mu and rho. Helpers share the library: ``gluon_bbb_finite_guard``
(:func:`finite_guard`, the skip of a non-finite step in one pass), ``gluon_bbb_adam`` and
``gluon_bbb_sgd`` (MXNet's Adam and SGD rules over all tensors in one pass, used by
:mod:`gluon_bbb.fused.optimizers`) and ``gluon_bbb_normal``
(:func:`normal_sample`, mean + std * eps with the same noise, for the local
reparameterisation of :meth:`gluon_bbb.BBBTrainer.predict_proba`). The source is
``gluon_bbb/fused/variational_op.cc``.

Build: at first use the source is compiled against the headers that ship inside the mxnet
wheel, into a per-user cache (``$GLUON_BBB_CACHE``, else ``$XDG_CACHE_HOME/gluon_bbb``, else
``~/.cache/gluon_bbb``) under a name keyed by the source, the MXNet version, the compiler,
the flags and the CPU. The library is test-loaded in a child process (a broken library kills
the process that loads it), then moved into place atomically, and loaded once per process.
``-march=native`` is safe because the build happens on the machine that runs it.

Fallback: without a compiler, when the build fails, on a GPU, or when ``GLUON_BBB_FUSED=0``,
:func:`fused_status` says why, and :class:`~gluon_bbb.BBBTrainer` uses the pure-MXNet path
and logs the reason (``trainer.fused``, ``trainer.fused_reason``).
"""
from .build import (COMPILE_FLAGS, ENV_SWITCH, NORMAL_OP_NAME, OP_NAME, OPERATORS, SOURCE,
                    FusedStatus, fused_status, load_fused_op)
from .operators import (FiniteGuard, finite_guard, fused_path, normal_sample, prior_attributes,
                        prior_inputs, variational_sample)

__all__ = ["FusedStatus", "FiniteGuard", "fused_status", "fused_path", "load_fused_op",
           "variational_sample", "finite_guard", "normal_sample", "prior_attributes", "prior_inputs", "OP_NAME",
           "NORMAL_OP_NAME", "OPERATORS", "ENV_SWITCH", "SOURCE", "COMPILE_FLAGS"]
