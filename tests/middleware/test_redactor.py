"""OutputRedactor: secrets masked, paths anonymised, in text and structured content; nothing else changed."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from fakes import RecordingNext, make_context
from hypothesis import given, settings
from secret_corpus import Format
from strategies import placed_secrets

from oct_mcp.config import McpConfig
from oct_mcp.middleware import redactor
from oct_mcp.middleware.redactor import HostIdentity, OutputRedactor, RedactorSettings
from oct_mcp.types import ConsentRequest, LayerRuntime, Outcome, ToolResult
from oct_mcp.workspace import Workspace

GITHUB = "ghp_" + "aB3dE6fG9hJ2kL5mN8pQ1rS4tU7vW0xY3zA6"
PASSWORD = "hunter2x9"  # noqa: S105 - a value the redactor must mask, not a credential
ROOT = "/srv/projects/shop"
HOME = "/home/dev"
WHO = HostIdentity(project_root=ROOT, home=HOME, user="dev")


def _through(outcome: Outcome, *, active: bool = True) -> Outcome:
    layer = OutputRedactor(who=WHO, active=active)
    return anyio.run(layer, make_context(), RecordingNext(outcome=outcome))


def test_a_secret_in_the_text_is_masked_and_counted() -> None:
    result = _through(ToolResult(text=f"token = {GITHUB}\nok\n", redactions=1))

    assert isinstance(result, ToolResult)
    assert result.text == "token = [REDACTED:github_token]\nok\n"
    assert result.redactions == 2  # one before, one here


def test_structured_content_is_masked_by_value_and_by_secret_named_key() -> None:
    structured = {"log": [f"pushed with {GITHUB}"], "password": PASSWORD, "count": 3}

    result = _through(ToolResult(text="done", structured=structured))

    assert isinstance(result, ToolResult)
    assert result.structured == {
        "log": ["pushed with [REDACTED:github_token]"],
        "password": "[REDACTED:password]",
        "count": 3,
    }
    assert result.redactions == 2
    assert structured["password"] == PASSWORD  # the tool's own value is not changed in place


def test_structured_content_that_repeats_a_clean_text_is_still_masked_by_its_secret_named_key() -> None:
    """The text is found clean once and not screened again in the structured copy; a key that
    names a secret still masks the very same string there (the key is the context the text lacks)."""
    result = _through(ToolResult(text=PASSWORD, structured={"password": PASSWORD, "text": PASSWORD}))

    assert isinstance(result, ToolResult)
    assert result.text == PASSWORD
    assert result.structured == {"password": "[REDACTED:password]", "text": PASSWORD}
    assert result.redactions == 1


def test_a_read_whose_structured_content_repeats_its_text_is_masked_in_both() -> None:
    text = f"deploy with {GITHUB}\n"
    masked = "deploy with [REDACTED:github_token]\n"

    clean = _through(ToolResult(text="x = 1\n", structured={"path": "a.py", "text": "x = 1\n"}))
    found = _through(ToolResult(text=text, structured={"path": "a.py", "text": text}))

    assert isinstance(clean, ToolResult)
    assert clean.structured == {"path": "a.py", "text": "x = 1\n"}
    assert isinstance(found, ToolResult)
    assert (found.text, found.structured) == (masked, {"path": "a.py", "text": masked})
    assert found.redactions == 2


def test_the_project_root_and_the_home_are_anonymised_in_text_and_structured_content() -> None:
    result = _through(
        ToolResult(
            text=f"{ROOT}/src/app.py:3: E501\nconfig in {HOME}/.config/tool\n",
            structured={"file": f"{ROOT}/src/app.py", "files": [f"{HOME}/notes.txt"]},
        )
    )

    assert isinstance(result, ToolResult)
    assert result.text == "<project>/src/app.py:3: E501\nconfig in ~/.config/tool\n"
    assert result.structured == {"file": "<project>/src/app.py", "files": ["~/notes.txt"]}
    assert result.redactions == 0


def test_a_result_with_nothing_to_mask_comes_back_as_it_went_in() -> None:
    clean = ToolResult(text="3 passed in 0.4s\n", structured={"passed": 3, "path": "tests/test_app.py"})

    assert _through(clean) is clean


def test_a_consent_request_and_an_inactive_redactor_change_nothing() -> None:
    question = ConsentRequest(tool="oct_write_file", digest="sha256:00", message=f"write {GITHUB}?")
    secret = ToolResult(text=GITHUB)

    assert _through(question) is question
    assert _through(secret, active=False) is secret


@pytest.mark.parametrize(
    ("development", "always_on", "config_always_on", "active"),
    [
        (False, False, False, True),
        (True, False, False, False),
        (True, True, False, True),  # the profile forbids turning it off (strict, airgapped)
        (True, False, True, True),  # so does the config's redaction_always_on
    ],
)
def test_development_mode_turns_redaction_off_only_where_nothing_forbids_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    development: bool,
    always_on: bool,
    config_always_on: bool,
    active: bool,
) -> None:
    monkeypatch.delenv(redactor.DEVELOPMENT_ENV, raising=False)
    runtime = LayerRuntime(
        config=McpConfig(redaction_always_on=config_always_on),
        workspace=Workspace(tmp_path.resolve()),
        catalog={},
        development=development,
    )

    layer = redactor.LAYER.build(RedactorSettings(always_on=always_on), runtime)

    assert isinstance(layer, OutputRedactor)
    assert layer.active is active


@settings(max_examples=300)
@given(secret=placed_secrets())
def test_no_placed_secret_comes_back_in_text_or_structured_content(secret: tuple[Format, str, str]) -> None:
    _format, value, context = secret
    text = context.replace("{}", value)

    result = _through(ToolResult(text=text, structured={"output": text, "lines": [text]}))

    assert isinstance(result, ToolResult)
    assert value not in result.text
    assert value not in repr(result.structured)
    assert result.redactions >= 3


def test_scrub_anonymises_the_one_path_among_many_that_names_a_host_folder() -> None:
    files = [{"path": f"pkg/module_{n:03}.py", "kind": "file"} for n in range(300)]
    files[211] = {"path": f"{HOME}/notes/module_211.py", "kind": "file"}

    scrubbed = redactor.scrub(ToolResult(text="listed", structured={"files": files}), WHO)

    assert scrubbed.structured is not None
    assert scrubbed.structured["files"][211] == {"path": "~/notes/module_211.py", "kind": "file"}
    assert scrubbed.structured["files"][:211] == files[:211]
    assert scrubbed.structured["files"][212:] == files[212:]


def test_scrub_returns_a_result_naming_no_host_folder_as_it_came() -> None:
    result = ToolResult(text="listed", structured={"files": [{"path": f"m{n}.py"} for n in range(300)]})

    assert redactor.scrub(result, WHO) is result


def test_scrub_masks_a_secret_and_anonymises_a_path_in_the_same_listing() -> None:
    # A masked result's strings are no longer those first gathered: they are looked at again.
    files = [{"path": f"pkg/module_{n:03}.py", "kind": "file"} for n in range(300)]
    files[7] = {"path": f"{ROOT}/deploy/{GITHUB}.txt", "kind": "file"}
    files[8] = {"path": f"{HOME}/notes.txt", "kind": "file"}

    scrubbed = redactor.scrub(ToolResult(text="listed", structured={"files": files}), WHO)

    assert scrubbed.structured is not None
    assert scrubbed.structured["files"][7:9] == [
        {"path": "<project>/deploy/[REDACTED:github_token].txt", "kind": "file"},
        {"path": "~/notes.txt", "kind": "file"},
    ]
    assert scrubbed.structured["files"][9:] == files[9:]
    assert scrubbed.redactions == 1


def test_a_result_with_a_secret_named_field_and_nothing_to_mask_comes_back_as_it_went_in() -> None:
    # The field's name makes redaction look at its value (a copy is made); nothing changes.
    clean = ToolResult(text="ok", structured={"secret": None, "files": [{"path": "a.py", "kind": "file"}]})

    assert _through(clean) is clean
