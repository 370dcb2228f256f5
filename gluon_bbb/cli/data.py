"""``gluon-bbb data fetch|list|verify``: download the data sets ahead of time, see where they
are, and check them (:mod:`gluon_bbb.data.fetch`, :mod:`gluon_bbb.data.sources`)."""
import argparse
import sys

from ..data import datafolders, fetch, sources, state
from ..io.locks import LockTimeout
from .common import HelpFormatter, number

__all__ = ["add_parsers", "data_command"]


def add_parsers(commands):
    """The ``data`` command and its three actions."""
    group = commands.add_parser(
        "data", help="fetch the data sets ahead of time, list where they are, verify them",
        formatter_class=HelpFormatter,
        description="The data sets: " + ", ".join(sources.FETCHABLE) + ". Downloads go to "
                    f"${datafolders.DATA_ENV_VAR}/<name> if it is set, else to "
                    "~/.cache/gluon_bbb/data/<name>; "
                    f"${sources.MIRROR_ENV_VAR} (a base URL laid out like a data folder) is "
                    "tried before the public sources. Each file is checked by the SHA-256 of "
                    "its decompressed content.")
    actions = group.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    names = dict(nargs="*", type=_data_set, metavar="NAME",
                 help=f"data sets ({', '.join(sources.FETCHABLE)}; default: all)")

    get = actions.add_parser(
        "fetch", formatter_class=HelpFormatter, help="download what is missing, verified",
        description="Download every file of the data sets that is not already found verified, "
                    "from the first source that serves it with the right content. A host that "
                    "does not answer within --timeout is not asked for its other files.")
    get.add_argument("names", **names)
    get.add_argument("--to", default=None, metavar="DIR",
                     help=f"download into DIR/<name> (default: ${datafolders.DATA_ENV_VAR}, "
                          "else ~/.cache/gluon_bbb/data; without --to, a data set found "
                          "verified where the loaders look is left there)")
    get.add_argument("--timeout", type=number(float, 0, False), default=fetch.DEFAULT_TIMEOUT_S,
                     metavar="SECONDS", help="how long each request may wait for the server")
    get.add_argument("--deadline", type=number(float, 0, False),
                     default=fetch.DEFAULT_DEADLINE_S, metavar="SECONDS",
                     help="how long a file's download from one source may take in all")
    get.add_argument("--no-progress", action="store_true", help="no progress bar")
    get.set_defaults(func=data_command, interrupted=(
        "interrupted: the files already verified are kept, the one being downloaded is "
        "dropped; run the same command again for the rest"))

    show = actions.add_parser(
        "list", formatter_class=HelpFormatter, help="where each data set is, verified or not",
        description="Every folder where the loaders look that holds files of a data set, in "
                    "the order they look, with each file's check; the first complete one is "
                    "the one used.")
    show.add_argument("names", **names)
    show.add_argument("--data-dir", default=None, help="a folder searched first, as --data-dir "
                                                       "of the other commands")
    show.set_defaults(func=data_command)

    check = actions.add_parser(
        "verify", formatter_class=HelpFormatter, help="check the files the loaders would use",
        description="Check every file of the data sets the loaders would use (with no NAME, "
                    "every data set). Exit status 0 only when each is found and every file "
                    "verifies; else 2, with one line naming each data set not found (and where "
                    "it was looked for) and each file that fails its check.")
    check.add_argument("names", **names)
    check.add_argument("--data-dir", default=None, help="a folder searched first, as --data-dir "
                                                        "of the other commands")
    check.set_defaults(func=data_command)


def _data_set(text):
    """An argparse type: a data set's name (``choices`` refuses an empty list of them)."""
    if text not in sources.FETCHABLE:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from "
                                         + ", ".join(map(repr, sources.FETCHABLE)) + ")")
    return text


def _fetch(args):
    for name in args.names or sources.FETCHABLE:
        if not args.to:
            used = state.dataset_state(name).used
            if used is not None and used.verified:
                print(f"{name}: already in {used.folder} (every file verified)")
                continue
        try:
            folder = fetch.fetch(name, root=args.to, progress=not args.no_progress,
                                 timeout=args.timeout, deadline=args.deadline)
        except (fetch.FetchError, LockTimeout):  # one line each, from main
            raise
        except OSError as error:  # a folder that cannot be created or written
            raise ValueError(f"{error.filename or args.to}: cannot download there "
                             f"({error.strerror or error}); choose another folder with --to, "
                             f"or set {datafolders.DATA_ENV_VAR}") from None
        print(f"{name}: {folder} (every file verified)")
    return 0


def _list(args):
    for name in args.names or sources.FETCHABLE:
        report = state.dataset_state(name, args.data_dir, every_folder=True)
        shown = [folder for folder in report.folders if folder.present]
        for folder in shown:
            print(f"{name}: {folder.folder}" + (" (used)" if folder == report.used else ""))
            for file in folder.files:
                if file.path is None:
                    print(f"  {file.data_file.name}: missing")
                else:
                    print(f"  {file.path.name}: " + (
                        "verified" if file.verified else
                        "WRONG: " + file.problem.replace(f"{file.path}: ", "", 1)))
        if not shown:
            print(f"{name}: not found (gluon-bbb data fetch {name} downloads it)")
    return 0


def _verify(args):
    problems = []
    for name in args.names or sources.FETCHABLE:
        report = state.dataset_state(name, args.data_dir)
        if report.used is None:
            problems.append(f"{name}: not found in " + ", ".join(map(str, report.searched))
                            + f" (gluon-bbb data fetch {name} downloads it)")
        elif not report.used.verified:
            problems += report.used.problems()
        else:
            print(f"{name}: {report.used.folder}: {len(report.used.files)} file(s) verified")
    if problems:
        print(f"gluon-bbb: error: {'; '.join(problems)}", file=sys.stderr)
    return 2 if problems else 0


def data_command(args):
    """``gluon-bbb data fetch|list|verify``."""
    return {"fetch": _fetch, "list": _list, "verify": _verify}[args.action](args)
