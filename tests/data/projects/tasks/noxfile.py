"""The demo's sessions; this file must never run while its tasks are listed."""

import pathlib

import nox
from nox import session as nox_session

pathlib.Path("NOXFILE_WAS_RUN").write_text("ran\n")

PYTHONS = ["3.11", "3.12"]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """Run the test suite."""
    session.run("pytest")


@nox.session(name="docs-live", python="3.12")
def docs(session: nox.Session) -> None:
    session.run("sphinx-autobuild", "docs", "build")


@nox_session
def lint(session: nox.Session) -> None:
    """Lint with ruff.

    More words that are not the summary.
    """
    session.run("ruff", "check")


def helper() -> None:
    """Not a session."""
