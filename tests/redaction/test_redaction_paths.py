"""Path anonymisation: the project root, the home and the user name, and only where they stand as such."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oct_mcp.redaction import HostPath, anonymise_paths, names_host_paths, server_paths

ROOT = "/home/dev/work/app"
HOME = "/home/dev"


def _anonymise(text: str, *, user: str = "dev", root: str = ROOT, home: str = HOME) -> str:
    return anonymise_paths(text, project_root=root, home=home, user=user)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f'  File "{ROOT}/src/app/main.py", line 3', '  File "<project>/src/app/main.py", line 3'),
        (f"{ROOT}:12: error", "<project>:12: error"),
        (f"cd {ROOT}", "cd <project>"),
        (f"{HOME}/.cache/pip/wheels", "~/.cache/pip/wheels"),
        (f"PATH={HOME}/.local/bin:/usr/bin", "PATH=~/.local/bin:/usr/bin"),
        (f"file://{ROOT}/README.md", "file://<project>/README.md"),
        ("/tmp/pytest-of-dev/pytest-3/test_x0/out.txt", "/tmp/pytest-of-<user>/pytest-3/test_x0/out.txt"),
        ("/Users/dev/Library/Caches", "/Users/<user>/Library/Caches"),
        ("/var/mail/dev", "/var/mail/<user>"),
        ("ls ~dev/notes", "ls ~<user>/notes"),
        ("ssh dev@build-01.internal", "ssh <user>@build-01.internal"),
        ("Author: dev <dev@example.com>", "Author: dev <<user>@example.com>"),
        ("USER=dev\nLOGNAME='dev'\nSUDO_USER=dev", "USER=<user>\nLOGNAME='<user>'\nSUDO_USER=<user>"),
    ],
)
def test_roots_and_the_user_are_replaced_where_they_stand_as_such(text: str, expected: str) -> None:
    assert _anonymise(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        f"{HOME}2/other",  # another home that starts with this one's name
        "/dev/null and /dev/tty",  # the user "dev" is also a system directory
        "dev dependencies are installed with --dev",
        "developer mode; devices",
        "the root cause",
        "/usr/share/doc",
    ],
)
def test_other_paths_and_ordinary_words_are_left_alone(text: str) -> None:
    assert _anonymise(text) == text


def test_a_sibling_of_the_project_is_under_the_home_only() -> None:
    assert _anonymise(f"{ROOT}-old/src") == "~/work/app-old/src"


def test_the_project_under_the_home_becomes_project_not_tilde() -> None:
    assert _anonymise(f"{ROOT}/a {HOME}/b") == "<project>/a ~/b"


def test_a_trailing_slash_on_a_root_does_not_matter() -> None:
    assert _anonymise(f"{ROOT}/a", root=ROOT + "/", home=HOME + "/") == "<project>/a"


def test_a_distinctive_user_name_is_replaced_wherever_it_stands_alone() -> None:
    text = "-rw-r--r-- 1 j.smith staff 10 notes.txt; owner j.smith; j.smithson stays"

    assert _anonymise(text, user="j.smith") == (
        "-rw-r--r-- 1 <user> staff 10 notes.txt; owner <user>; j.smithson stays"
    )


def test_a_plain_user_name_outside_user_forms_is_left_alone() -> None:
    assert _anonymise("-rw-r--r-- 1 dev staff 10 notes.txt") == "-rw-r--r-- 1 dev staff 10 notes.txt"


def test_empty_settings_change_nothing_and_root_slash_is_never_a_root() -> None:
    text = f"{ROOT}/a dev@host"

    assert anonymise_paths(text, project_root="", home="", user="") == text
    assert anonymise_paths(text, project_root="/", home="/", user="") == text


@given(st.text())
def test_text_without_the_roots_or_the_name_is_unchanged(text: str) -> None:
    # Names and roots no generated text can hold: the function must then be the identity.
    assert anonymise_paths(text, project_root="/\x00root", home="/\x00home", user="\x00user") == text


@given(st.text(alphabet="/abcdev@~.-_ \n", max_size=40))
def test_anonymising_twice_is_anonymising_once(text: str) -> None:
    once = _anonymise(text)

    assert _anonymise(once) == once


def test_the_servers_own_folders_are_replaced_and_system_folders_are_kept() -> None:
    others = (
        HostPath(f"{ROOT}/.venv", "<venv>"),
        HostPath("/opt/python/3.11", "<python>"),
        HostPath("/tmp/oct-run-", "<scratch>", name_prefix=True),
    )
    text = (
        f"{ROOT}/.venv/lib/site.py {ROOT}/src/a.py /opt/python/3.11/bin/python3 "
        "HOME=/tmp/oct-run-k2_x9/home /tmp/other /usr/bin/git /opt/python/3.110"
    )

    assert anonymise_paths(text, project_root=ROOT, home=HOME, user="dev", others=others) == (
        "<venv>/lib/site.py <project>/src/a.py <python>/bin/python3 "
        "HOME=<scratch>/home /tmp/other /usr/bin/git /opt/python/3.110"
    )


def test_server_paths_name_the_venv_and_the_scratch_folders_but_no_system_folder() -> None:
    found = {path.path: path.token for path in server_paths("/tmp", "oct-run-")}

    assert found.get(sys.prefix.rstrip("/"), "<venv>") == "<venv>"
    assert found["/tmp/oct-run-"] == "<scratch>"
    assert not {"/", "/usr", "/tmp"} & set(found)


_OTHERS = (HostPath("/tmp/oct-run-", "<scratch>", name_prefix=True),)
_LITERALS = ("/srv/pr\u00f8jekt", "/home/d\u00e9v", "d\u00e9v", "/tmp/oct-run-")


@given(
    st.lists(st.sampled_from([*_LITERALS, "/srv/pr", "\u00e9", "\ud800", "d", "/", "v", "\n"]), max_size=10)
)
def test_a_text_names_a_host_path_exactly_when_a_root_a_folder_or_the_name_is_in_it(
    pieces: list[str],
) -> None:
    # Non-ASCII roots and a lone surrogate (a file name's undecodable byte): the one pass for all
    # the literals says what looking for each would.
    text = "".join(pieces)

    named = names_host_paths(
        text, project_root=_LITERALS[0], home=_LITERALS[1], user=_LITERALS[2], others=_OTHERS
    )

    assert named == any(literal in text for literal in _LITERALS)


def test_a_root_and_a_name_out_of_ascii_are_replaced() -> None:
    text = "\ud800 /srv/pr\u00f8jekt/a.py /home/d\u00e9v/.cache ~d\u00e9v /tmp/oct-run-x1/home"

    anonymised = anonymise_paths(
        text, project_root=_LITERALS[0], home=_LITERALS[1], user=_LITERALS[2], others=_OTHERS
    )

    assert anonymised == "\ud800 <project>/a.py ~/.cache ~<user> <scratch>/home"
