"""Figures (gluon_bbb.plots) with the Agg backend: axes, lines, labels and the plotted values."""
import os
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from mxnet import nd  # noqa: E402

from gluon_bbb import plots  # noqa: E402
from gluon_bbb.plots import uncertainty as uncertainty_plots  # noqa: E402
from gluon_bbb.data import CLASS_NAMES  # noqa: E402

BBB_HISTORY = [
    {"epoch": 1, "loss": 30.0, "nll": 20.0, "complexity": 10.0, "train_error": 0.3, "test_error": 0.25},
    {"epoch": 2, "loss": 20.0, "nll": 14.0, "complexity": 6.0, "train_error": 0.2, "test_error": 0.15},
]
BASELINE_HISTORY = [
    {"epoch": 1, "loss": 25.0, "train_error": 0.28, "test_error": 0.2},
    {"epoch": 2, "loss": 12.0, "train_error": 0.1, "test_error": 0.12},
]


@pytest.fixture(autouse=True)
def no_pyplot_figures():
    """No function may leave figures in pyplot's global registry."""
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before


def labels_of(ax):
    return [line.get_label() for line in ax.lines]


def assert_renders(figure):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")


def test_image_grid_titles_each_image_by_class_name():
    rng = np.random.default_rng(0)
    images = nd.array(rng.random((5, 784)))  # NDArray input, flattened 28 x 28 images
    labels = np.array([0, 9, 3, 3, 1])
    figure = plots.image_grid(images, labels, class_names=CLASS_NAMES["fashion-mnist"], rows=2, cols=3)
    assert isinstance(figure, Figure) and len(figure.axes) == 6
    titles = [ax.get_title() for ax in figure.axes]
    assert titles == ["T-shirt/top", "Ankle boot", "Dress", "Dress", "Trouser", ""]
    assert [len(ax.images) for ax in figure.axes] == [1, 1, 1, 1, 1, 0]
    np.testing.assert_allclose(figure.axes[1].images[0].get_array(), images[1].asnumpy().reshape(28, 28))
    assert_renders(figure)


def test_image_grid_marks_wrong_predictions_in_red():
    images = np.zeros((4, 1, 5, 5))
    figure = plots.image_grid(images, [0, 1, 2, 3], predictions=[0, 2, 2, 1], rows=2, cols=2)
    assert [ax.get_title() for ax in figure.axes] == ["0 / 0", "1 / 2", "2 / 2", "3 / 1"]
    red = [matplotlib.colors.same_color(ax.title.get_color(), "tab:red") for ax in figure.axes]
    assert red == [False, True, False, True]


def test_training_curves_name_the_validation_split():
    history = [{k.replace("test_error", "validation_error"): v for k, v in r.items()}
               for r in BBB_HISTORY]
    figure = plots.training_curves(history)
    assert labels_of(figure.axes[1]) == ["training batches, as trained", "validation set, after the epoch"]
    np.testing.assert_allclose(figure.axes[1].lines[1].get_ydata(), [25.0, 15.0])


def test_training_curves_draw_each_key_that_is_present():
    figure = plots.training_curves(BBB_HISTORY)
    loss_ax, error_ax = figure.axes
    assert labels_of(loss_ax) == ["free energy (loss)", "likelihood cost (nll)", "complexity cost"]
    assert labels_of(error_ax) == ["training batches, as trained", "test set, after the epoch"]
    assert loss_ax.lines[0].get_linestyle() == "--" and loss_ax.lines[0].get_zorder() > 2
    assert "complexity + likelihood" not in loss_ax.get_title()  # true of a baseline's loss too
    np.testing.assert_allclose(error_ax.lines[1].get_ydata(), [25.0, 15.0])  # in percent
    np.testing.assert_allclose(loss_ax.lines[1].get_xdata(), [1, 2])
    # a baseline drawn on the same axes: only its own keys, prefixed by its label
    plots.training_curves(BASELINE_HISTORY, label="dropout", ax=figure.axes)
    assert labels_of(loss_ax)[3:] == ["dropout: free energy (loss)"]
    assert labels_of(error_ax)[2:] == ["dropout: training batches, as trained",
                                       "dropout: test set, after the epoch"]
    assert loss_ax.lines[3].get_color() != loss_ax.lines[0].get_color()
    assert_renders(figure)


def test_weight_densities_one_normalised_line_per_model():
    rng = np.random.default_rng(1)
    weights = {"Bayes by Backprop": rng.normal(scale=0.05, size=(3, 20000)),
               "dropout": rng.normal(scale=0.1, size=50000)}
    figure = plots.weight_densities(weights, limits=(-0.6, 0.6), bins=120)
    (ax,) = figure.axes
    assert labels_of(ax) == list(weights)
    for line, scale in zip(ax.lines, (0.05, 0.1)):
        x, density = line.get_xdata(), line.get_ydata()
        assert np.sum(density) * (x[1] - x[0]) == pytest.approx(1.0, abs=1e-6)  # all within limits
        assert density.max() == pytest.approx(1 / (scale * np.sqrt(2 * np.pi)), rel=0.1)
    assert ax.get_yscale() == "log" and "log" in ax.get_ylabel()  # the tails stay visible
    linear = plots.weight_densities(weights, log_density=False).axes[0]
    assert linear.get_yscale() == "linear" and linear.get_ylabel() == "density"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(weights)


def test_weight_densities_bins_float32_weights_on_float64_edges_on_every_numpy():
    """float32 weights and limits that are float32 scalars (a percentile of float32 weights is one
    on numpy 2, a float64 on numpy 1): the bins are float64 edges from the limits either way, so
    the line is one float64 histogram on numpy 1 and 2 alike."""
    rng = np.random.default_rng(3)
    values = rng.normal(scale=0.05, size=40000).astype(np.float32)
    half = np.percentile(np.abs(values), 99.5)
    assert half.dtype == (np.float32 if np.lib.NumpyVersion(np.__version__) >= "2.0.0"
                          else np.float64)  # the promotion rule that differs (NEP 50)
    line = plots.weight_densities({"w": values}, limits=(-half, half), bins=200).axes[0].lines[0]
    edges = np.linspace(-float(half), float(half), 201)
    counts, _ = np.histogram(values, bins=edges)
    density = counts / (values.size * (edges[1] - edges[0]))
    shown = density > 0  # the log-density line leaves empty bins out
    np.testing.assert_allclose(line.get_ydata(), density[shown], rtol=1e-12)


def test_log_snr_density_marks_the_cutoffs_at_the_snr_quantiles():
    rng = np.random.default_rng(2)
    snr = np.concatenate([np.exp(rng.normal(size=10000)), [0.0]])  # the zero has no logarithm
    figure = plots.log_snr_density(snr, cutoffs=[0.5, 0.75])
    density_ax, cdf_ax = figure.axes
    for ax in (density_ax, cdf_ax):
        assert len(ax.lines) == 3
        assert labels_of(ax)[1:] == ["50% removed", "75% removed"]
        np.testing.assert_allclose([line.get_xdata()[0] for line in ax.lines[1:]],
                                   10 * np.log10(np.quantile(snr, [0.5, 0.75])))
    cdf = cdf_ax.lines[0].get_ydata()
    assert cdf[-1] == pytest.approx(1.0) and np.all(np.diff(cdf) >= 0)
    decibels = 10 * np.log10(snr[:-1])
    x = cdf_ax.lines[0].get_xdata()
    np.testing.assert_allclose(cdf[::40], [np.mean(decibels <= v) for v in x[::40]], atol=1e-3)
    assert len(plots.log_snr_density(snr).axes[0].lines) == 1


def test_log_snr_density_cutoff_lines_differ_in_colour_and_dash():
    snr = np.exp(np.random.default_rng(4).normal(size=5000))
    lines = plots.log_snr_density(snr, cutoffs=[0.5, 0.75, 0.9, 0.95, 0.98, 0.99]).axes[0].lines[1:]
    colours = [matplotlib.colors.to_hex(line.get_color()) for line in lines]
    assert len(set(colours)) == 6
    # each line its own dash pattern: the named ones read back, the custom ones all distinct
    from gluon_bbb.plots.weights import CUTOFF_STYLES
    assert [line.get_linestyle() for line in lines[:3]] == ["--", ":", "-."]
    assert len({str(style) for style in CUTOFF_STYLES}) == len(CUTOFF_STYLES) == 6
    assert matplotlib.colors.to_hex(plots.log_snr_density(snr).axes[0].lines[0].get_color()) not in colours


def test_log_snr_density_starts_its_axis_at_the_lowest_quantile():
    rng = np.random.default_rng(3)
    decibels = np.concatenate([rng.normal(0.0, 3.0, 9900), rng.uniform(-70.0, -20.0, 100)])
    snr = 10.0 ** (decibels / 10.0)
    start = np.quantile(decibels, 0.02)
    density_ax, cdf_ax = plots.log_snr_density(snr, cutoffs=[0.5], lowest=0.02).axes
    for ax in (density_ax, cdf_ax):
        assert ax.get_xlim()[0] == pytest.approx(start) and "lowest 2%" in ax.get_xlabel()
    x, cdf = cdf_ax.lines[0].get_xdata(), cdf_ax.lines[0].get_ydata()
    # the CDF still counts the weights left of the axis
    np.testing.assert_allclose(cdf[::25], [np.mean(decibels <= v) for v in x[::25]], atol=2e-4)
    whole = plots.log_snr_density(snr, lowest=None).axes[0]
    assert whole.get_xlim()[0] == pytest.approx(decibels.min()) and "lowest" not in whole.get_xlabel()


def test_pruning_curve_one_line_per_method_in_fraction_order():
    table = [
        {"fraction": 0.5, "method": "snr", "test_error": 0.02},
        {"fraction": 0.0, "method": "snr", "test_error": 0.018},
        {"fraction": 0.0, "method": "naive", "test_error": 0.018},
        {"fraction": 0.5, "method": "naive", "test_error": 0.05},
    ]
    (ax,) = plots.pruning_curve(table).axes
    assert labels_of(ax) == [plots.METHOD_LABELS["snr"], plots.METHOD_LABELS["naive"]]
    np.testing.assert_allclose(ax.lines[0].get_xdata(), [100, 50])  # weights kept (%)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [1.8, 2.0])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), [1.8, 5.0])
    # both axes logarithmic, fewer weights kept to the right
    assert ax.get_xscale() == ax.get_yscale() == "log"
    left, right = ax.get_xlim()
    assert left > right
    assert "kept" in ax.get_xlabel() and "log" in ax.get_ylabel()


def test_pruning_curve_refuses_a_fraction_it_cannot_draw_on_a_log_axis():
    with pytest.raises(ValueError, match="fraction in \\[0, 1\\)"):
        plots.pruning_curve([{"fraction": 1.0, "method": "snr", "test_error": 0.9}])


def test_posterior_gaussian_is_a_normal_density_and_stacks_on_one_axes():
    figure = plots.posterior_gaussian(0.2, 0.05)
    (ax,) = figure.axes
    x, y = ax.lines[0].get_xdata(), ax.lines[0].get_ydata()
    assert x.min() == pytest.approx(0.0) and x.max() == pytest.approx(0.4)
    assert x[np.argmax(y)] == pytest.approx(0.2)
    assert y.max() == pytest.approx(1 / (0.05 * np.sqrt(2 * np.pi)))
    area = np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2)  # the trapezoid rule (np.trapz left numpy 2.4)
    assert area == pytest.approx(1.0, abs=1e-3)
    plots.posterior_gaussian(-0.1, 0.02, ax=ax, label="w_2")
    assert labels_of(ax) == ["mu = 0.2, sigma = 0.05", "w_2"]


def test_functions_draw_into_given_axes():
    figure = Figure()
    left, right = figure.subplots(1, 2)  # the pruning curve's axes are logarithmic
    assert plots.pruning_curve([{"fraction": 0.0, "method": "snr", "test_error": 0.1}], ax=left) is figure
    assert plots.weight_densities({"a": np.arange(5.0)}, ax=right) is figure
    assert plots.weight_densities({"b": np.arange(5.0)}, ax=right) is figure  # stacks
    assert len(left.lines) == 1 and len(right.lines) == 2


@pytest.mark.parametrize("call, error, message", [
    (lambda: plots.image_grid(np.zeros((3, 10)), [0, 1, 2]), ValueError, "not square"),
    (lambda: plots.image_grid(np.zeros((3, 4, 4)), [0, 1]), ValueError, "labels"),
    (lambda: plots.image_grid(np.zeros((3, 4, 4)), [0, 1, 2], rows=0), ValueError, "rows"),
    (lambda: plots.training_curves([]), ValueError, "history"),
    (lambda: plots.training_curves(BBB_HISTORY, ax=[None]), ValueError, "ax"),
    (lambda: plots.weight_densities({}), ValueError, "named_weight_arrays"),
    (lambda: plots.weight_densities({"a": [1.0]}, limits=(1, 0)), ValueError, "limits"),
    (lambda: plots.log_snr_density([1.0], cutoffs=[1.0]), ValueError, "cutoffs"),
    (lambda: plots.log_snr_density([0.0]), ValueError, "snr"),
    (lambda: plots.log_snr_density([1.0, 2.0], lowest=1.0), ValueError, "lowest"),
    (lambda: plots.pruning_curve([{"fraction": 0.5}]), ValueError, "table"),
    (lambda: plots.posterior_gaussian(0.0, 0.0), ValueError, "sigma"),
    (lambda: plots.posterior_gaussian("a", 1.0), TypeError, "mu"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_every_plot_function_takes_ax_and_returns_the_figure_it_drew_on():
    import inspect

    from gluon_bbb import bandit, regression, uncertainty
    from gluon_bbb.experiments import uncertainty_eval
    functions = [getattr(plots, name) for name in plots.__all__
                 if name not in ("axes_for", "save_png", "image_grid", "METHOD_LABELS")
                 and callable(getattr(plots, name))]
    functions += [getattr(module, name) for module in (uncertainty, bandit, regression)
                  for name in module.__all__ if name.startswith("plot_")]
    functions += [uncertainty_eval.reliability_figure, uncertainty_eval.entropy_figure]
    missing = [f.__qualname__ for f in functions if "ax" not in inspect.signature(f).parameters]
    assert not missing, missing
    figure = Figure()
    ax = figure.subplots()
    drawn = uncertainty.plot_score_histograms({"in": [0.1, 0.2], "out": [0.5, 0.9]}, ax=ax)
    assert drawn is figure and ax.get_xlabel() == "predictive entropy (nats)"
    pair = Figure().subplots(1, 2)
    assert plots.training_curves(BBB_HISTORY, ax=list(pair)) is pair[0].figure


def test_axes_for_checks_what_it_is_given():
    figure = Figure()
    one = figure.subplots()
    assert plots.axes_for(one) is one
    assert len(plots.axes_for(None, 3)) == 3
    with pytest.raises(ValueError, match="sequence of 2 Axes"):
        plots.axes_for(one, 2)
    with pytest.raises(ValueError, match="one matplotlib Axes"):
        plots.axes_for([one])


def test_save_png_writes_the_figure_atomically(tmp_path):
    figure = plots.training_curves([{"epoch": 1, "loss": 2.0, "test_error": 0.5}])
    path = tmp_path / "curves.png"
    plots.save_png(figure, path)
    assert path.read_bytes().startswith(b"\x89PNG") and os.listdir(tmp_path) == ["curves.png"]


def test_axes_for_wraps_new_panels_into_rows():
    axes = plots.axes_for(None, 6, max_columns=4)
    assert len(axes) == 6 and len(axes[0].figure.axes) == 6  # the two spare cells removed
    rows = sorted({round(ax.get_position().y0, 3) for ax in axes})
    assert len(rows) == 2
    assert len(plots.axes_for(None, 3, max_columns=4)) == 3


def test_reliability_diagrams_of_many_models_wrap_into_rows():
    from gluon_bbb import uncertainty
    probs = np.full((4, 2), 0.5)
    probs[:, 0] = [0.9, 0.8, 0.3, 0.6]
    probs[:, 1] = 1 - probs[:, 0]
    diagram = uncertainty.reliability_diagram(probs, np.array([0, 0, 1, 1]), 5)
    figure = uncertainty_plots.plot_reliability_diagrams({f"model {i}": diagram for i in range(6)})
    width, height = figure.get_size_inches()
    assert len(figure.axes) == 6 and width == 4.0 * uncertainty_plots.RELIABILITY_COLUMNS and height == 8.0


def test_cost_axis_is_logarithmic_only_when_every_value_is_positive():
    loss_ax, _ = plots.training_curves(BBB_HISTORY).axes
    assert loss_ax.get_yscale() == "log" and "log scale" in loss_ax.get_ylabel()
    negative = [dict(record, complexity=-1.0) for record in BBB_HISTORY]  # a Monte Carlo estimate
    loss_ax, _ = plots.training_curves(negative).axes
    assert loss_ax.get_yscale() == "linear" and "log" not in loss_ax.get_ylabel()


def test_score_histograms_have_a_log_density_axis_by_default():
    scores = {"in": [0.01, 0.02, 0.03, 1.5], "out": [0.5, 0.9, 1.2]}
    assert uncertainty_plots.plot_score_histograms(scores).axes[0].get_yscale() == "log"
    linear = uncertainty_plots.plot_score_histograms(scores, log_density=False).axes[0]
    assert linear.get_yscale() == "linear" and linear.get_ylabel() == "density"
