"""A secret kept behind a mask is masked again where it stands after the edit, or the edit is refused."""

from __future__ import annotations

import ast
import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import pytest
from changes import carried_out
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

import oct_mcp
from oct_mcp.app import build_app, run_call
from oct_mcp.errors import SecretUnmaskedError
from oct_mcp.middleware.redactor import HostIdentity, scrub
from oct_mcp.redaction import redact
from oct_mcp.testing import TEST_CLIENT
from oct_mcp.tools._text.diffs import unified_diff
from oct_mcp.tools._text.masks import masked, unmask
from oct_mcp.tools.edit.apply_patch import APPLY_PATCH, ApplyPatchParams
from oct_mcp.tools.edit.edit_strings import EDIT, EditParams
from oct_mcp.tools.edit.moves import MOVE, MoveParams
from oct_mcp.tools.edit.write_file import WRITE_FILE, WriteFileParams
from oct_mcp.tools.files import ReadFileParams, read_file
from oct_mcp.types import ToolResult
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.e2e

PASSWORD = "hunter2hunter2x"  # noqa: S105 - a test secret
RANDOM = "Zq8vR2mK9xL4pT7w"
API_KEY = "a8F3kQ9zP2mX7vL4tR6wY1nB5cJ0hD8gS3e"
SETTINGS = f'import os\nDB_PASSWORD = "{PASSWORD}"\nDEBUG = True\n'


@cache
def key_body() -> str:
    """The lines between an RSA key's armour: what `lines 2-27 of id_rsa` shows."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    return "".join(pem.splitlines(keepends=True)[1:-1])


def project(tmp_path: Path, files: dict[str, str]) -> Workspace:
    root = (tmp_path / "project").resolve()
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    return Workspace(root)


def read_back(workspace: Workspace, path: str) -> str:
    """The file read with oct_read_file as the model gets it (the redactor's pass included), whole and
    line by line, with line numbers and without."""
    who = HostIdentity(project_root=str(workspace.root), home="/home/nobody", user="nobody")
    total = len((workspace.root / path).read_text().splitlines())
    shown = []
    for start, end in [(None, None), *((line, line) for line in range(1, total + 1))]:
        for numbered in (False, True):
            params = ReadFileParams(path=path, start_line=start, end_line=end, line_numbers=numbered)
            result = scrub(read_file(workspace, params, 100_000), who)
            shown.append(f"{result.text}\n{result.structured}")
    return "\n".join(shown)


def edit(workspace: Workspace, path: str, *edits: dict[str, Any]) -> ToolResult:
    params = EditParams.model_validate({"path": path, "edits": list(edits)})
    return carried_out(workspace, EDIT, params)


def write(workspace: Workspace, path: str, content: str) -> ToolResult:
    return carried_out(workspace, WRITE_FILE, WriteFileParams(path=path, content=content))


def patch(workspace: Workspace, text: str) -> ToolResult:
    return carried_out(workspace, APPLY_PATCH, ApplyPatchParams(patch=text))


def assert_refused(workspace: Workspace, files: dict[str, str], call: Any, line: int) -> None:
    """The call refused with the code, naming the line; every file as it was; no secret in the message."""
    with pytest.raises(SecretUnmaskedError) as refused:
        call()
    assert refused.value.code == "secret_unmasked"
    assert f"line {line} of the new text" in refused.value.message
    for secret in (PASSWORD, RANDOM, API_KEY):
        assert secret not in refused.value.message
    for name, text in files.items():
        assert (workspace.root / name).read_text() == text


def test_the_red_teams_probe_a_password_renamed_to_note_is_refused(tmp_path: Path) -> None:
    files = {"settings.py": SETTINGS}
    workspace = project(tmp_path, files)
    assert PASSWORD not in read_back(workspace, "settings.py")

    assert_refused(
        workspace,
        files,
        lambda: edit(workspace, "settings.py", {"old": "DB_PASSWORD =", "new": "note ="}),
        line=2,
    )
    assert PASSWORD not in read_back(workspace, "settings.py")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('DB_PASSWORD = "[REDACTED:password]"', 'note = " ".join(["[REDACTED:password]"])'),
        ('DB_PASSWORD = "[REDACTED:password]"', '# the old one was "[REDACTED:password]"'),
        ('DB_PASSWORD = "[REDACTED:password]"', 'print("[REDACTED:password]")'),
    ],
    ids=["joined", "into a comment", "into a call"],
)
def test_a_password_carried_where_no_name_marks_it_is_refused(tmp_path: Path, old: str, new: str) -> None:
    files = {"settings.py": SETTINGS}
    workspace = project(tmp_path, files)

    assert_refused(workspace, files, lambda: edit(workspace, "settings.py", {"old": old, "new": new}), line=2)


def test_a_password_renamed_to_another_secret_kind_is_refused_by_its_kind(tmp_path: Path) -> None:
    files = {"settings.py": SETTINGS}
    workspace = project(tmp_path, files)

    with pytest.raises(SecretUnmaskedError) as refused:
        edit(workspace, "settings.py", {"old": "DB_PASSWORD", "new": "DB_TOKEN"})

    assert "would be read back as [REDACTED:token]" in refused.value.message
    assert (workspace.root / "settings.py").read_text() == SETTINGS


def test_an_env_key_renamed_is_refused(tmp_path: Path) -> None:
    files = {".env": f"DEBUG=1\nDB_PASSWORD={RANDOM}\n"}
    workspace = project(tmp_path, files)

    assert_refused(
        workspace, files, lambda: edit(workspace, ".env", {"old": "DB_PASSWORD=", "new": "DB_NOTE="}), line=2
    )


def test_a_yaml_key_renamed_in_a_whole_file_write_is_refused(tmp_path: Path) -> None:
    files = {"config.yaml": f"db:\n  host: localhost\n  password: {RANDOM}\n"}
    workspace = project(tmp_path, files)

    assert_refused(
        workspace,
        files,
        lambda: write(workspace, "config.yaml", "db:\n  host: localhost\n  note: [REDACTED:password]\n"),
        line=3,
    )


def test_a_json_key_renamed_by_a_patch_across_the_mask_line_is_refused(tmp_path: Path) -> None:
    files = {"config.json": f'{{\n  "user": "app",\n  "password": "{RANDOM}"\n}}\n'}
    workspace = project(tmp_path, files)
    text = (
        "--- a/config.json\n+++ b/config.json\n@@ -2,2 +2,2 @@\n"
        '   "user": "app",\n-  "password": "[REDACTED:password]"\n+  "hint": "[REDACTED:password]"\n'
    )

    assert_refused(workspace, files, lambda: patch(workspace, text), line=3)


@pytest.mark.parametrize("quote", ['"', ""], ids=["toml", "ini"])
def test_a_toml_or_ini_key_renamed_is_refused(tmp_path: Path, quote: str) -> None:
    files = {"app.cfg": f"[db]\npassword = {quote}{RANDOM}{quote}\n"}
    workspace = project(tmp_path, files)

    assert_refused(
        workspace, files, lambda: edit(workspace, "app.cfg", {"old": "password =", "new": "note ="}), line=2
    )


def test_a_name_a_line_above_renamed_by_a_patch_without_masks_is_refused(tmp_path: Path) -> None:
    pod = f"env:\n- name: DB_PASSWORD\n  value: {RANDOM}\n- name: MODE\n  value: prod\n"
    files = {"pod.yaml": pod}
    workspace = project(tmp_path, files)
    text = "--- a/pod.yaml\n+++ b/pod.yaml\n@@ -2 +2 @@\n-- name: DB_PASSWORD\n+- name: GREETING\n"

    assert_refused(workspace, files, lambda: patch(workspace, text), line=3)
    assert_refused(
        workspace,
        files,
        lambda: edit(workspace, "pod.yaml", {"old": "name: DB_PASSWORD", "new": "name: GREETING"}),
        line=3,
    )


def test_a_numbered_read_masks_a_secret_named_on_the_line_above(tmp_path: Path) -> None:
    workspace = project(tmp_path, {"pod.yaml": f"env:\n- name: DB_PASSWORD\n  value: {RANDOM}\n"})

    assert RANDOM not in read_back(workspace, "pod.yaml")


def test_a_key_body_put_inside_a_certificates_armour_stays_masked(tmp_path: Path) -> None:
    # It was refused while a certificate's armour showed the body: now the armour does not unmask a
    # body that reads as a private key, so the edit goes through and shows nothing more.
    files = {"notes": f"key:\n{key_body()}done\n"}
    workspace = project(tmp_path, files)
    body = key_body().splitlines()
    assert body[1] not in read_back(workspace, "notes")

    edit(
        workspace,
        "notes",
        {"old": "key:\n", "new": "-----BEGIN CERTIFICATE-----\n"},
        {"old": "done\n", "new": "-----END CERTIFICATE-----\n"},
    )

    assert (workspace.root / "notes").read_text().startswith("-----BEGIN CERTIFICATE-----\n" + body[0])
    shown = read_back(workspace, "notes")
    assert [line for line in body if line in shown] == []


def test_a_key_picked_out_by_its_randomness_renamed_is_refused(tmp_path: Path) -> None:
    files = {"client.py": f'api_key = "{API_KEY}"\n'}
    workspace = project(tmp_path, files)

    assert_refused(
        workspace,
        files,
        lambda: edit(workspace, "client.py", {"old": "api_key =", "new": "api_hint ="}),
        line=1,
    )


def test_a_patch_refused_in_its_second_file_writes_neither(tmp_path: Path) -> None:
    files = {"a.py": "A = 1\n", "settings.py": SETTINGS}
    workspace = project(tmp_path, files)
    text = (
        "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-A = 1\n+A = 2\n"
        "--- a/settings.py\n+++ b/settings.py\n@@ -2 +2 @@\n"
        '-DB_PASSWORD = "[REDACTED:password]"\n+note = "[REDACTED:password]"\n'
    )

    with pytest.raises(SecretUnmaskedError) as refused:
        patch(workspace, text)

    assert refused.value.message.startswith("file 2 of the patch (settings.py): line 2 of the new text")
    assert (workspace.root / "a.py").read_text() == "A = 1\n"
    assert (workspace.root / "settings.py").read_text() == SETTINGS


def test_a_mask_duplicated_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    files = {"settings.py": SETTINGS}
    workspace = project(tmp_path, files)

    result = edit(
        workspace,
        "settings.py",
        {"old": "DEBUG = True", "new": 'DEBUG = True\nDB_PASSWORD_COPY = "[REDACTED:password]"'},
    )

    assert result.is_error is True
    assert "has a mask" in result.text
    assert (workspace.root / "settings.py").read_text() == SETTINGS


def test_a_mask_cut_in_half_writes_its_text_never_the_secret(tmp_path: Path) -> None:
    workspace = project(tmp_path, {"settings.py": SETTINGS})

    result = edit(workspace, "settings.py", {"old": 'password]"', "new": 'pass"'})

    assert result.is_error is False, result.text
    assert (
        workspace.root / "settings.py"
    ).read_text() == 'import os\nDB_PASSWORD = "[REDACTED:pass"\nDEBUG = True\n'


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("DB_PASSWORD", "DATABASE_PASSWORD"),
        ('"[REDACTED:password]"', '"[REDACTED:password]"  # rotate yearly'),
        ("import os\n", "import os\n\n# database\n"),
    ],
    ids=["a longer secret name", "a comment after it", "lines above it"],
)
def test_an_edit_that_leaves_the_secret_marked_keeps_it(tmp_path: Path, old: str, new: str) -> None:
    workspace = project(tmp_path, {"settings.py": SETTINGS})

    result = edit(workspace, "settings.py", {"old": old, "new": new})

    assert result.is_error is False, result.text
    assert (workspace.root / "settings.py").read_text() == SETTINGS.replace(
        old.replace("[REDACTED:password]", PASSWORD), new.replace("[REDACTED:password]", PASSWORD)
    )
    assert PASSWORD not in read_back(workspace, "settings.py")


@pytest.mark.parametrize(("old", "new"), [(".env", "env.txt"), ("id_rsa", "notes")])
def test_a_file_moved_to_a_name_that_marks_nothing_reads_masked_there(
    tmp_path: Path, old: str, new: str
) -> None:
    # Redaction reads what a file holds, never its name: the same bytes read the same at any name.
    text = (
        f"DB_PASSWORD={RANDOM}\n"
        if old == ".env"
        else f"-----BEGIN RSA PRIVATE KEY-----\n{key_body()}-----END RSA PRIVATE KEY-----\n"
    )
    workspace = project(tmp_path, {old: text})
    secret = RANDOM if old == ".env" else key_body().splitlines()[1]

    result = carried_out(workspace, MOVE, MoveParams(source=old, destination=new))

    assert result.is_error is False, result.text
    assert (workspace.root / new).read_text() == text
    assert secret not in read_back(workspace, new)


def test_a_file_renamed_by_a_patch_reads_masked_at_its_new_name(tmp_path: Path) -> None:
    workspace = project(tmp_path, {".env": f"DEBUG=1\nDB_PASSWORD={RANDOM}\n"})
    text = (
        "diff --git a/.env b/env.txt\nrename from .env\nrename to env.txt\n"
        "--- a/.env\n+++ b/env.txt\n@@ -1,2 +1,2 @@\n-DEBUG=1\n+DEBUG=0\n DB_PASSWORD=[REDACTED:password]\n"
    )

    result = patch(workspace, text)

    assert result.is_error is False, result.text
    assert (workspace.root / "env.txt").read_text() == f"DEBUG=0\nDB_PASSWORD={RANDOM}\n"
    assert RANDOM not in read_back(workspace, "env.txt")


def test_only_unmask_turns_a_mask_back_into_its_secret() -> None:
    # The check sits in unmask: a tool that put secrets back by itself would go around it.
    package = Path(oct_mcp.__file__).parent
    readers = sorted(
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if any(
            isinstance(node, ast.Attribute) and node.attr == "originals"
            for node in ast.walk(ast.parse(path.read_text()))
        )
    )

    assert readers == ["tools/_text/masks.py"]


def test_an_undo_of_a_kept_secret_shows_masks_and_puts_the_secret_back_masked(tmp_path: Path) -> None:
    workspace = project(tmp_path, {"settings.py": SETTINGS})
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "audit_log_path": str(tmp_path / "audit.log"),
                "checkpoint_dir": str(tmp_path / "store"),
                "dry_run_default_for_writes": False,
            }
        )
    )
    app = build_app(workspace.root, config_path=config, environ={})
    edits = [{"old": "DB_PASSWORD", "new": "DATABASE_PASSWORD"}]
    edited = anyio.run(
        run_call, app, "oct_edit", {"path": "settings.py", "edits": edits, "confirm": True}, TEST_CLIENT
    )
    assert isinstance(edited, ToolResult)
    assert edited.is_error is False, edited.text

    undone = anyio.run(run_call, app, "oct_undo", {"id": "1", "confirm": True}, TEST_CLIENT)

    assert isinstance(undone, ToolResult)
    assert undone.is_error is False, undone.text
    assert '-DATABASE_PASSWORD = "[REDACTED:password]"' in undone.text
    assert PASSWORD not in f"{undone.text}\n{undone.structured}"
    assert (workspace.root / "settings.py").read_text() == SETTINGS
    assert PASSWORD not in read_back(workspace, "settings.py")


def test_the_check_is_in_unmask_itself() -> None:
    seen = masked(SETTINGS)

    with pytest.raises(SecretUnmaskedError):
        unmask(seen, seen.view.replace("DB_PASSWORD", "note"))


# --- The property: whatever edit of the view the tools accept, a read of the result masks every secret.

FILES = {
    "settings.py": SETTINGS,
    ".env": f"DEBUG=1\nDB_PASSWORD={RANDOM}\nAPI_TOKEN={API_KEY}\n",
    "config.yaml": f"db:\n  password: {RANDOM}\n  api_key: {API_KEY}\n",
    "pod.yaml": f"env:\n- name: DB_PASSWORD\n  value: {RANDOM}\n",
}
SECRETS = (PASSWORD, RANDOM, API_KEY)
# What a model may type: names that mark a secret and names that do not, the marks around values.
PIECES = st.sampled_from(
    [
        "note",
        "password",
        "PASSWORD",
        "token",
        "name",
        "key",
        "api_",
        "DB_",
        "#",
        "//",
        " ",
        "=",
        ":",
        '"',
        "'",
        "\n",
        "- ",
        "value",
        "print(",
        ")",
        "x",
        "-----BEGIN CERTIFICATE-----\n",
    ]
)


@st.composite
def edits_of(draw: st.DrawFn, view: str) -> str:
    """The view with a few of its stretches replaced by what a model may type (masks left whole or not)."""
    new = view
    for _ in range(draw(st.integers(1, 3))):
        start = draw(st.integers(0, len(new)))
        end = draw(st.integers(start, min(len(new), start + 24)))
        typed = "".join(draw(st.lists(PIECES, max_size=4)))
        new = new[:start] + typed + new[end:]
    return new


def written_by(tool: str, workspace: Workspace, name: str, view: str, new_view: str) -> ToolResult:
    """`new_view` written over the file whose view is `view`, the way `tool` takes it."""
    if tool == "oct_write_file":
        return write(workspace, name, new_view)
    if tool == "oct_edit":
        return edit(workspace, name, {"old": view, "new": new_view})
    return patch(workspace, unified_diff(view, new_view, f"a/{name}", f"b/{name}").text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    name=st.sampled_from(sorted(FILES)),
    tool=st.sampled_from(["oct_write_file", "oct_edit", "oct_apply_patch"]),
)
@example(data=None, name="settings.py", tool="oct_edit").via("the red team's probe")
@example(data=None, name="pod.yaml", tool="oct_apply_patch").via("a name a line above, by a patch")
def test_any_edit_the_tools_accept_reads_back_with_every_secret_masked(
    data: Any, name: str, tool: str
) -> None:
    view = redact(FILES[name])[0]
    if data is None:
        new_view = view.replace("DB_PASSWORD =", "note =").replace("name: DB_PASSWORD", "name: GREETING")
    else:
        new_view = data.draw(edits_of(view))
    assume(new_view != view)  # an empty patch is no patch
    with tempfile.TemporaryDirectory() as folder:
        workspace = project(Path(folder), {name: FILES[name]})
        try:
            result: ToolResult | None = written_by(tool, workspace, name, view, new_view)
        except SecretUnmaskedError:
            result = None
        shown = read_back(workspace, name)
    if result is not None and not result.is_error:
        for secret in SECRETS:
            assert secret not in shown
