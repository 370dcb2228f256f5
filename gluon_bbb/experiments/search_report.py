"""The report of a search (:mod:`gluon_bbb.experiments.search`): a markdown table of its
trials, its best trial on validation re-evaluated once on the test set, and Optuna's figures
(optimisation history, parameter importances, parallel coordinates).

The study is read from its database, which may come from someone else: every setting read
from it is checked as a configuration is before it names a folder.
"""
import logging
import os

import matplotlib
import optuna
from optuna.visualization import matplotlib as optuna_plots

from .. import plots
from ..io.checkpoint import atomic_write_bytes
from .configs import check_hyperparameter, with_current_names
from .protocol import MC_SAMPLES, report
from .runfolder import read_sessions
from .search import (STUDY_NAME, TRIALS, open_storage, quiet_optuna, storage_errors, storage_url,
                     study_settings)
from .spaces import format_setting, search_space, trial_name

__all__ = ["SEARCH_MD", "FIGURES", "load_search", "search_settings", "trial_rows", "best_row", "best_setting",
           "training_time", "search_table", "report_search"]

logger = logging.getLogger(__name__)


SEARCH_MD = "search.md"


#: The figures of a search report: name -> file in the search folder.
FIGURES = {
    "history": "optimization_history.png",
    "importances": "param_importances.png",
    "parallel": "parallel_coordinate.png",
}


def load_search(output_dir, storage=None):
    """The study of a search folder (or of ``storage``), or a one-line ValueError."""
    url = storage_url(output_dir, storage)
    if storage is None and not os.path.isfile(url[len("sqlite:///"):]):
        raise FileNotFoundError(f"{url[len('sqlite:///'):]} not found: is {output_dir} a folder "
                                "written by 'gluon-bbb search'?")
    with storage_errors(url):  # the storage's messages hide its password
        rdb = open_storage(url)
        try:
            study = optuna.load_study(study_name=STUDY_NAME, storage=rdb)
        except KeyError:
            raise ValueError(f"the storage of {output_dir} holds no study {STUDY_NAME!r}: run "
                             "'gluon-bbb search' first") from None
        settings = search_settings(study)
    if not isinstance(settings, dict) or not isinstance(settings.get("space"), dict):
        raise ValueError(f"the study of {output_dir} has no search settings: it was not written "
                         "by 'gluon-bbb search', or its creator died while setting it up")
    try:  # a database may come from someone else: its settings are checked like new ones
        checked = study_settings(search_space(settings.get("base"), **settings["space"]),
                                 settings.get("epochs"),
                                 settings.get("base"), settings.get("overrides"),
                                 settings.get("sampler"), settings.get("pruner"),
                                 settings.get("max_trials"), settings.get("seed"))
    except (ValueError, TypeError) as error:
        raise ValueError(f"the study of {output_dir} holds bad search settings: {error}") from None
    if checked["space"] != settings["space"]:
        raise ValueError(f"the study of {output_dir} holds bad search settings: its space")
    return study


def search_settings(study):
    """The search settings a study holds, with hyperparameters under their current names
    (:func:`~gluon_bbb.experiments.configs.with_current_names`: a study may be older than a
    rename); None if it holds none."""
    settings = study.user_attrs.get("settings")
    if not isinstance(settings, dict):
        return settings
    return dict(settings, **{key: with_current_names(settings.get(key))
                             for key in ("space", "overrides") if key in settings})


def _setting(trial, space):
    """The trial's checked setting, or None when it has no complete one."""
    params = with_current_names(trial.params)
    if set(params) != set(space):
        return None
    try:
        return {key: check_hyperparameter(key, params[key]) for key in space}
    except ValueError:
        return None


def trial_rows(study):
    """One dict per trial: 'number', 'state', the setting, 'value' (best validation error of a
    complete trial, else None), 'best_epoch', 'epochs_run', 'epochs_reported', 'best_reported'
    (the lowest validation error reported, also of a pruned trial), 'retry_of', 'repeat_of'
    (the first trial of the same setting, when a sampler drew it again), 'folder' (relative to
    the search folder, or None)."""
    space = search_settings(study)["space"]
    rows, first_of = [], {}
    for trial in study.get_trials(deepcopy=False):
        setting = _setting(trial, space)
        with quiet_optuna():
            retry_of = optuna.storages.RetryHeartbeatStaleTrialCallback.retried_trial_number(trial)
        if retry_of is None and isinstance(trial.user_attrs.get("retry_of"), int):
            retry_of = trial.user_attrs["retry_of"]  # queued again after an interruption
        value = trial.value if trial.state == optuna.trial.TrialState.COMPLETE else None
        repeat_of = None
        if setting is not None:
            key = tuple(sorted(setting.items()))
            repeat_of = first_of.get(key) if retry_of is None else None
            first_of.setdefault(key, trial.number)
        rows.append(dict(setting or {}, number=trial.number, state=trial.state.name.lower(),
                         value=value, best_epoch=trial.user_attrs.get("best_epoch"),
                         epochs_run=trial.user_attrs.get("epochs_run"),
                         epochs_reported=len(trial.intermediate_values),
                         best_reported=min(trial.intermediate_values.values(), default=None),
                         retry_of=retry_of, repeat_of=repeat_of,
                         folder=None if setting is None else os.path.join(TRIALS,
                                                                          trial_name(setting))))
    return rows


def best_row(rows):
    """The row of :func:`trial_rows` with the lowest best validation error among the complete
    trials (the first such trial on a tie), or None when no trial is complete."""
    complete = [row for row in rows if row["value"] is not None and row["folder"] is not None]
    return min(complete, key=lambda r: (r["value"], r["number"])) if complete else None


def best_setting(study):
    """The setting of the study's best complete trial, as ``key=value`` pairs separated by commas
    (what ``--set`` of ``reproduce`` takes), or a ValueError when no trial is complete."""
    best = best_row(trial_rows(study))
    if best is None:
        raise ValueError("the search has no complete trial yet")
    return format_setting({key: best[key] for key in search_settings(study)["space"]})


def training_time(output_dir, rows):
    """The training done by a search: seconds and epochs summed over the sessions recorded in
    its distinct trial folders (a repeated or retried setting trains in its first folder).

    Returns
    -------
    (float, int)
        Seconds and epochs.

    Raises
    ------
    ValueError
        A trial's ``sessions.json`` is malformed (one line naming the file).
    """
    seconds, epochs = 0.0, 0
    for folder in sorted({row["folder"] for row in rows if row["folder"] is not None}):
        for session in read_sessions(os.path.join(output_dir, folder)):
            seconds += session["seconds"]
            epochs += session["epochs_after"] - session["epochs_before"]
    return seconds, epochs


def search_table(rows, space):
    """A markdown table of :func:`trial_rows`, best validation error first; a pruned trial's
    best reported error is in parentheses."""
    keys = list(space)
    lines = ["| trial | state | " + " | ".join(keys) + " | epochs | best epoch | best validation "
             "error | retry of | repeat of |",
             "| ---: | --- | " + " | ".join("---:" for _ in keys)
             + " | ---: | ---: | ---: | ---: | ---: |"]
    ordered = sorted(rows, key=lambda r: (r["value"] is None, r["value"] or 0.0, r["number"]))
    for row in ordered:
        cells = [f"{row[key]:g}" if isinstance(row.get(key), (int, float)) else
                 str(row.get(key, "-")) for key in keys]
        if row["value"] is not None:
            value = f"{100 * row['value']:.2f}%"
        elif row["best_reported"] is not None:  # a pruned (or failed) trial's best epoch so far
            value = f"({100 * row['best_reported']:.2f}%)"
        else:
            value = "-"
        epochs = row["epochs_run"] if row["epochs_run"] is not None else row["epochs_reported"]
        lines.append(f"| {row['number']} | {row['state']} | {' | '.join(cells)} | {epochs} | "
                     f"{row['best_epoch'] if row['best_epoch'] is not None else '-'} | {value} | "
                     f"{'-' if row['retry_of'] is None else row['retry_of']} | "
                     f"{'-' if row['repeat_of'] is None else row['repeat_of']} |")
    return "\n".join(lines) + "\n"


def _figures(study, output_dir):
    """Draw Optuna's figures into the search folder; returns name -> file or the reason why not."""
    space = search_settings(study)["space"]
    varied = [key for key, values in space.items() if len(values) > 1]
    draw = {"history": lambda: optuna_plots.plot_optimization_history(study),
            "importances": lambda: optuna_plots.plot_param_importances(study, params=varied),
            "parallel": lambda: optuna_plots.plot_parallel_coordinate(study, params=varied)}
    drawn = {}
    for name, function in draw.items():
        if name != "history" and not varied:
            drawn[name] = "not drawn: the search varies no hyperparameter"
            continue
        with quiet_optuna():
            try:
                axes = function()
            except (ValueError, RuntimeError, ZeroDivisionError) as error:
                drawn[name] = f"not drawn: {error}"
                continue
        axes = getattr(axes, "flat", [axes])
        figure = next(iter(axes)).figure
        figure.set_size_inches(9.0, 5.0)
        figure.tight_layout()
        plots.save_png(figure, os.path.join(output_dir, FIGURES[name]))
        matplotlib.pyplot.close(figure)
        drawn[name] = FIGURES[name]
    return drawn


def report_search(output_dir, storage=None, mc_samples=MC_SAMPLES, data_dir=None, ctx=None,
                  figures=True, command=None):
    """Write ``search.md`` (and the figures) of a search folder; re-evaluate its best trial on
    the test set once (its run folder's ``result.json``, :func:`~.protocol.report`).

    Returns
    -------
    dict
        'rows' (:func:`trial_rows`), 'best' (the best row, or None), 'result' (the best trial's
        report, or None), 'figures' (name -> file, or why it was not drawn).
    """
    with storage_errors(storage_url(output_dir, storage)):  # what reads the study
        study = load_search(output_dir, storage)
        settings = search_settings(study)
        rows = trial_rows(study)
        drawn = _figures(study, output_dir) if figures else {}
    best = best_row(rows)
    result = None
    if best is not None:
        result = report(os.path.join(output_dir, best["folder"]), mc_samples=mc_samples,
                        data_dir=data_dir, ctx=ctx, command=command)
    counts = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    changed = "".join(f", {key}={value}" for key, value in sorted(settings["overrides"].items()))
    text = [f"# Search of {settings['base']}{changed}",
            "",
            f"Sampler {settings['sampler']}, pruner {settings['pruner']}, {settings['epochs']} "
            f"epochs per trial at most; trials: "
            + ", ".join(f"{count} {state}" for state, count in sorted(counts.items())) + ". "
            "The value of a trial is the lowest validation error over its epochs (of the posterior "
            "mean for Bayes by Backprop); the search never touches the test set.",
            "",
            "Training time, summed over the trials: {:,.0f} s for {} epochs.".format(
                *training_time(output_dir, rows)),
            ""]
    if result is not None:
        test = f"{100 * result['test_error_mean']:.2f}%"
        if result["test_error_mc"] is not None:  # Bayes by Backprop
            test += (f" (posterior mean), {100 * result['test_error_mc']:.2f}% "
                     f"(MC {result['mc_samples']} samples)")
        text += [f"Best trial: {best['number']} ({best['folder']}), validation error "
                 f"{100 * best['value']:.2f}% at epoch {result['best_epoch']}; re-evaluated once "
                 f"on the test set: {test}.", ""]
    text += [search_table(rows, settings["space"])]
    text += [f"![{name}]({file})" if file in FIGURES.values() else f"{name}: {file}"
             for name, file in drawn.items()]
    if command:
        text += ["", f"Command: `{command}`"]
    atomic_write_bytes(os.path.join(output_dir, SEARCH_MD), ("\n".join(text) + "\n").encode("utf-8"))
    return {"rows": rows, "best": best, "result": result, "figures": drawn}
