"""Every command's --help names each option's default once, and no default it does not have."""
import re

import pytest

from gluon_bbb.cli import main

COMMANDS = ["train", "evaluate", "prune", "plot", "reproduce", "reproduce-report", "search",
            "search-report", "uncertainty", "bandit", "data", "continual"]


def help_of(command, capsys):
    """The command's --help as one line (wrapping aside)."""
    assert main([command, "--help"]) == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_says_each_default_once_and_never_none(command, capsys):
    text = help_of(command, capsys)
    assert "(default: None)" not in text and "(default: False)" not in text
    assert not re.search(r"\(default[^()]*(\([^()]*\)[^()]*)*\)\s*\(default", text), text


def test_the_defaults_that_exist_are_shown_zero_included(capsys):
    text = help_of("bandit", capsys)
    assert "seeds the episode and every agent (default: 0)" in text
    assert "interactions per agent (the paper: 50000)" in text and \
        "(the paper: 50000) (default" not in text
    text = help_of("reproduce", capsys)
    assert "weight samples of the Monte Carlo test error (default: 10)" in text
    assert "total number of epochs (default: those of the run in --output-dir)" in text


@pytest.mark.parametrize("action", ["fetch", "list", "verify"])
def test_the_data_actions_say_each_default_once(action, capsys):
    assert main(["data", action, "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "data sets (mnist, fashion-mnist, mushroom; default: all)" in text
    if action == "fetch":
        assert "how long each request may wait for the server (default: 30.0)" in text
