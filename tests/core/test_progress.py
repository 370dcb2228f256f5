"""How progress shows (gluon_bbb.epochs.progress_bar and print_in_notebook): tqdm's text bar on
stderr and the epoch's line in the log on a terminal; in a Jupyter kernel ipywidgets' bar and
the epoch's line on stdout as well, where it stays in the cell's output. The fixtures ``kernel``
and ``no_ipywidgets`` (conftest.py) make a kernel-like environment."""
import logging
import sys

import mxnet as mx
import pytest
import tqdm
from mxnet import gluon

from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior
from gluon_bbb.baselines import train_deterministic
from gluon_bbb.data import ArrayLoader
from gluon_bbb.epochs import epoch_line, in_notebook, progress_bar, progress_bar_class

from synthetic import blobs


@pytest.fixture
def loader():
    x, y = blobs(num_examples=64)
    return ArrayLoader(x, y, 32, shuffle=True, seed=0)


def test_a_terminal_gets_tqdms_text_bar():
    assert not in_notebook()
    assert progress_bar_class() is tqdm.tqdm
    assert type(progress_bar(range(3), show=False)) is tqdm.tqdm


def test_a_kernel_gets_the_widget_bar(kernel):
    pytest.importorskip("ipywidgets")
    import tqdm.notebook
    assert progress_bar_class() is tqdm.notebook.tqdm


def test_a_kernel_without_ipywidgets_gets_the_text_bar_without_a_warning(kernel, no_ipywidgets,
                                                                         recwarn):
    assert progress_bar_class() is tqdm.tqdm
    assert not recwarn.list


def test_no_bar_imports_nothing(kernel, monkeypatch):
    monkeypatch.delitem(sys.modules, "tqdm.notebook", raising=False)
    bar = progress_bar(range(3), show=False)
    assert list(bar) == [0, 1, 2] and bar.disable and "tqdm.notebook" not in sys.modules


def fit(loader, progress):
    mx.random.seed(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(8, activation="relu"), gluon.nn.Dense(3))
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), optimizer_params={"learning_rate": 0.01})
    return trainer.fit(loader, 2, progress=progress)


def test_on_a_terminal_the_epoch_line_is_logged_and_the_bar_is_on_stderr(loader, capsys, caplog):
    with caplog.at_level(logging.INFO, logger="gluon_bbb"):
        history = fit(loader, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "epoch 1/2:" in captured.err and "epoch 2/2:" in captured.err  # tqdm's text bar
    assert [r.getMessage() for r in caplog.records] == [epoch_line(r, 2) for r in history]


def test_in_a_kernel_the_epoch_line_is_printed_to_stdout_too(kernel, no_ipywidgets, loader,
                                                              capsys, caplog):
    with caplog.at_level(logging.INFO, logger="gluon_bbb"):
        history = fit(loader, progress=True)
    lines = [epoch_line(record, 2) for record in history]
    assert capsys.readouterr().out.splitlines() == lines
    assert [r.getMessage() for r in caplog.records] == lines  # the log is unchanged


def test_in_a_kernel_without_progress_nothing_is_printed(kernel, loader, capsys):
    fit(loader, progress=False)
    assert capsys.readouterr() == ("", "")


def test_a_deterministic_networks_epochs_are_printed_in_a_kernel_only(kernel, no_ipywidgets,
                                                                      loader, capsys,
                                                                      monkeypatch):
    mx.random.seed(0)
    history = train_deterministic(gluon.nn.Dense(3), loader, 2, eval_data=loader)
    out = capsys.readouterr().out
    assert out.splitlines() == [epoch_line(record, 2) for record in history]
    assert out.startswith("epoch 1/2  loss ") and " train " in out and " test " in out
    monkeypatch.delitem(sys.modules, "ipykernel.zmqshell")  # back on a terminal
    train_deterministic(gluon.nn.Dense(3), loader, 1)
    assert capsys.readouterr().out == ""
