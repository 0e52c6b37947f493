"""SafetyGate: the seed's five rules as properties, and consent bound to one exact call."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from fakes import WRITE_TOOL, RecordingNext, WriteFileParams, catalog_with_write_tool, make_context
from hypothesis import given
from hypothesis import strategies as st

import oct_mcp.testing.strategies as kit
from oct_mcp.chain import build_chain, compose
from oct_mcp.code_config import configures_code
from oct_mcp.config import McpConfig
from oct_mcp.consent import Consent, SessionGrants, argument_digest
from oct_mcp.consent_questions import confirmation_request_text
from oct_mcp.diff_view import shown_diff
from oct_mcp.errors import ConsentReplayedError, ConsentUnavailableError, PolicyError
from oct_mcp.middleware.safety import CONFIRMATION_PREFIX, SafetyDecision, SafetyGate, SafetySettings
from oct_mcp.middleware.validator import InputValidator
from oct_mcp.preview import ABSENT, FileChange, Preview, TargetState
from oct_mcp.profiles import Profile
from oct_mcp.spec import Risk, ToolSpec
from oct_mcp.tools import default_catalog
from oct_mcp.types import CallContext, ClientInfo, ConsentRequest, LayerRuntime, ToolResult
from oct_mcp.workspace import Workspace

pytestmark = pytest.mark.e2e

READ_TOOL = default_catalog()["oct_read_file"]
FORMAT_TOOL = default_catalog()["oct_format"]
RUN_TOOL = default_catalog()["oct_run"]
# What the validator hands over (model_dump), with the fields the rules read mixed in.
arg_dicts = kit.arguments()
configs = kit.configs()
specs = kit.tool_specs([WRITE_TOOL, READ_TOOL])
tool_names = kit.tool_names(["oct_format", "oct_fix", "oct_write_file", "test_write_file"])


def _gate(config: McpConfig, **settings: Any) -> SafetyGate:
    return SafetyGate(config, SafetySettings(**settings))


@given(
    tool=tool_names,
    spec=specs | st.sampled_from([FORMAT_TOOL, RUN_TOOL]) | st.none() | st.integers() | st.text(),
    args=arg_dicts | st.none() | st.lists(st.integers()),
    config=configs,
    confirm_execute=st.booleans(),
)
def test_check_never_raises_and_its_decision_is_coherent(
    tool: str, spec: Any, args: Any, config: McpConfig, confirm_execute: bool
) -> None:
    decision = _gate(config, confirm_execute=confirm_execute).check(tool, spec, args)

    assert decision.proceed is not decision.requires_confirmation
    assert not (decision.dry_run and not decision.proceed)
    assert decision.reason


@given(tool=tool_names, args=arg_dicts, config=configs.filter(lambda c: c.auto_approve_read_tools))
def test_rule_1_non_destructive_tools_proceed_without_a_dry_run(
    tool: str, args: dict[str, Any], config: McpConfig
) -> None:
    for risk in (Risk.READ, Risk.EXECUTE):
        decision = _gate(config).check(tool, replace(READ_TOOL, risk=risk), args)

        assert (decision.proceed, decision.requires_confirmation, decision.dry_run) == (True, False, False)


@given(tool=tool_names, args=arg_dicts, config=configs, junk_spec=st.none() | st.text())
def test_rule_2_destructive_without_confirm_does_not_proceed(
    tool: str, args: dict[str, Any], config: McpConfig, junk_spec: Any
) -> None:
    unconfirmed = {**args, "confirm": args.get("confirm") if args.get("confirm") is not True else False}
    for spec in (WRITE_TOOL, junk_spec):
        decision = _gate(config).check(tool, spec, unconfirmed)

        assert (decision.proceed, decision.requires_confirmation, decision.dry_run) == (False, True, False)


@given(args=arg_dicts, config=configs)
def test_rule_3_format_confirmed_without_apply_is_a_dry_run(args: dict[str, Any], config: McpConfig) -> None:
    decision = _gate(config).check("oct_format", FORMAT_TOOL, {**args, "confirm": True, "apply": False})

    assert (decision.proceed, decision.requires_confirmation, decision.dry_run) == (True, False, True)


@given(args=arg_dicts, config=configs)
def test_rule_4_format_confirmed_with_apply_runs_for_real(args: dict[str, Any], config: McpConfig) -> None:
    decision = _gate(config).check("oct_format", FORMAT_TOOL, {**args, "confirm": True, "apply": True})

    assert (decision.proceed, decision.requires_confirmation, decision.dry_run) == (True, False, False)


@given(args=arg_dicts, config=configs)
def test_format_without_apply_follows_the_dry_run_default(args: dict[str, Any], config: McpConfig) -> None:
    args = {key: value for key, value in args.items() if key != "apply"}

    decision = _gate(config).check("oct_format", FORMAT_TOOL, {**args, "confirm": True})

    assert decision.dry_run is config.dry_run_default_for_writes


@given(tool=tool_names.filter(lambda t: t != "oct_format"), args=arg_dicts, own=st.booleans(), config=configs)
def test_rule_5_other_destructive_confirmed_proceed_and_honour_their_own_dry_run(
    tool: str, args: dict[str, Any], own: bool, config: McpConfig
) -> None:
    decision = _gate(config).check(tool, WRITE_TOOL, {**args, "confirm": True, "dry_run": own})

    assert (decision.proceed, decision.requires_confirmation, decision.dry_run) == (True, False, False)


@given(tool=tool_names.filter(lambda t: t != "oct_format"), args=arg_dicts, config=configs)
def test_a_destructive_call_that_does_not_say_follows_the_dry_run_default(
    tool: str, args: dict[str, Any], config: McpConfig
) -> None:
    args = {key: value for key, value in args.items() if key != "dry_run"}

    decision = _gate(config).check(tool, WRITE_TOOL, {**args, "confirm": True})

    assert decision.proceed is True
    assert decision.dry_run is config.dry_run_default_for_writes


@given(args=arg_dicts)
def test_read_tools_need_confirmation_when_auto_approval_is_off(args: dict[str, Any]) -> None:
    gate = _gate(McpConfig(auto_approve_read_tools=False))
    unconfirmed = {**args, "confirm": False}

    assert gate.check("oct_read_file", READ_TOOL, unconfirmed).requires_confirmation is True
    assert gate.check("oct_read_file", READ_TOOL, {**args, "confirm": True}).proceed is True


def test_execute_tools_need_confirmation_where_the_profile_says_so() -> None:
    spec = replace(READ_TOOL, risk=Risk.EXECUTE)

    assert _gate(McpConfig(), confirm_execute=True).check("oct_test", spec, {}).requires_confirmation is True
    assert _gate(McpConfig(), confirm_execute=False).check("oct_test", spec, {}).proceed is True


@given(tool=tool_names, args=arg_dicts, dry_run=st.booleans())
def test_the_confirmation_request_always_starts_with_the_sentinel(
    tool: str, args: dict[str, Any], dry_run: bool
) -> None:
    text = confirmation_request_text(tool, WRITE_TOOL, args, argument_digest(args), changes_nothing=dry_run)

    assert text.startswith(CONFIRMATION_PREFIX)
    assert argument_digest(args) in text
    assert "confirm=true" in text


@pytest.mark.parametrize("changes_nothing", [True, False])
def test_the_confirmation_request_says_truly_whether_the_confirmed_call_changes_anything(
    changes_nothing: bool,
) -> None:
    text = confirmation_request_text(
        WRITE_TOOL.name, WRITE_TOOL, {"path": "notes.txt"}, "sha256:00", changes_nothing=changes_nothing
    )

    first, *rest = text.splitlines()
    said = [first.removeprefix(f"{CONFIRMATION_PREFIX} {WRITE_TOOL.name} ({WRITE_TOOL.title}) ")]
    said += [line for line in rest if line.startswith("Dry run:")]
    assert said == (
        ["would show the change it would make.", "Dry run: yes, nothing will change."]
        if changes_nothing
        else ["would change files in the project.", "Dry run: no, the changes are made."]
    )


PATCH = """\
--- a/src/app.py
+++ b/src/app.py
@@ -1 +1 @@
-print('old')
+print('new')
diff --git a/docs/old.md b/docs/new.md
similarity index 100%
rename from docs/old.md
rename to docs/new.md
diff --git a/notes/added.txt b/notes/added.txt
new file mode 100644
--- /dev/null
+++ b/notes/added.txt
@@ -0,0 +1 @@
+added
"""


def test_the_question_for_a_patch_names_the_files_it_changes() -> None:
    spec = default_catalog()["oct_apply_patch"]

    text = confirmation_request_text(spec.name, spec, {"patch": PATCH}, "sha256:00", changes_nothing=False)

    assert "Files (4):\n  src/app.py\n  docs/old.md\n  docs/new.md\n  notes/added.txt\n" in text


@pytest.mark.parametrize("patch", ["not a diff", "", None])
def test_the_question_for_a_patch_it_cannot_read_names_no_paths(patch: object) -> None:
    spec = default_catalog()["oct_apply_patch"]

    text = confirmation_request_text(spec.name, spec, {"patch": patch}, "sha256:00", changes_nothing=True)

    assert text.startswith(CONFIRMATION_PREFIX)
    assert "Files: none named." in text


def test_a_targets_function_that_raises_still_gets_the_question_asked() -> None:
    def broken(arguments: object) -> list[str]:
        raise RuntimeError("cannot tell")

    spec = replace(WRITE_TOOL, targets=broken)

    text = confirmation_request_text(
        spec.name, spec, {"path": "notes.txt"}, "sha256:00", changes_nothing=False
    )

    assert "Files (1):\n  notes.txt\n" in text


@given(args=arg_dicts)
def test_the_digest_ignores_confirm_only(args: dict[str, Any]) -> None:
    assert argument_digest({**args, "confirm": True}) == argument_digest({**args, "confirm": False})
    assert argument_digest({**args, "extra-key": 1}) != argument_digest(
        {key: value for key, value in args.items() if key != "extra-key"}
    )


@pytest.mark.parametrize("last", [2.5, None], ids=["orjson", "json, for the null"])
def test_the_digest_is_the_sha256_of_canonical_json(last: float | None) -> None:
    written = "null" if last is None else str(last)
    canonical = f'{{"a":"caf\u00e9","b":[1,{written}],"c":{{"x":false,"y":true}}}}'.encode()

    digest = argument_digest(
        {"c": {"y": True, "x": False}, "b": [1, last], "a": "caf\u00e9", "confirm": True}
    )

    assert digest == "sha256:" + hashlib.sha256(canonical).hexdigest()


@pytest.mark.parametrize(
    "value",
    ["lone \ud800 surrogate", 2**70, {1: "an integer key"}, object(), float("nan")],
    ids=["surrogate", "big-int", "int-key", "object", "nan"],
)
def test_the_digest_takes_what_orjson_refuses_and_tells_it_apart(value: object) -> None:
    digest = argument_digest({"path": value})

    assert digest.startswith("sha256:")
    assert digest == argument_digest({"path": value})
    assert digest != argument_digest({"path": "other"})
    assert digest != argument_digest({"path": None})


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_the_digest_tells_the_infinities_from_null(value: float) -> None:
    assert argument_digest({"timeout": value}) != argument_digest({"timeout": None})


# -- the middleware --------------------------------------------------------------------------


ASKING_CLIENT = ClientInfo(client_id="c", transport="memory", can_elicit=True)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One empty project for the module: Hypothesis runs many examples against it."""
    return tmp_path_factory.mktemp("project").resolve()


def _write_call(
    project: Path,
    client: ClientInfo,
    consent: Consent | None = None,
    *,
    confirm: bool = False,
    **arguments: Any,
) -> CallContext:
    """A call of the test write tool as the validator passes it on: `confirm` taken off the params."""
    params = WriteFileParams(**{"path": "notes.txt", **arguments})
    sent = {**params.model_dump(), **({"confirm": True} if confirm else {})}
    ctx = make_context(WRITE_TOOL.name, Workspace(project), **sent)
    return replace(
        ctx,
        spec=WRITE_TOOL,
        params=params,
        risk=WRITE_TOOL.risk_of(params.model_dump()),
        client=client,
        consent=consent,
        confirmed=confirm,
    )


def _run(gate: SafetyGate, ctx: CallContext, call_next: RecordingNext) -> Any:
    return anyio.run(gate, ctx, call_next)


@given(first=st.text(max_size=20), second=st.text(max_size=20))
def test_a_consent_for_one_set_of_arguments_never_lets_another_proceed(
    first: str, second: str, project: Path
) -> None:
    digest = argument_digest(WriteFileParams(path="notes.txt", content=first, dry_run=False).model_dump())
    consent = Consent(tool=WRITE_TOOL.name, digest=digest, approved=True)
    call_next = RecordingNext()

    outcome = _run(
        _gate(McpConfig()),
        _write_call(project, ASKING_CLIENT, consent, content=second, dry_run=False),
        call_next,
    )

    if first == second:
        assert len(call_next.seen) == 1
    else:
        assert isinstance(outcome, ConsentRequest)
        assert call_next.seen == []


def test_a_consent_for_another_tool_does_not_count(project: Path) -> None:
    digest = argument_digest(WriteFileParams(path="notes.txt", dry_run=False).model_dump())
    consent = Consent(tool="oct_other", digest=digest, approved=True)
    call_next = RecordingNext()

    outcome = _run(_gate(McpConfig()), _write_call(project, ASKING_CLIENT, consent, dry_run=False), call_next)

    assert isinstance(outcome, ConsentRequest)
    assert call_next.seen == []


def test_an_approved_consent_passes_on_with_the_decided_dry_run(project: Path) -> None:
    digest = argument_digest(WriteFileParams(path="notes.txt").model_dump())
    call_next = RecordingNext()

    consent = Consent(tool=WRITE_TOOL.name, digest=digest, approved=True)
    _run(
        _gate(McpConfig(dry_run_default_for_writes=True)),
        _write_call(project, ASKING_CLIENT, consent),
        call_next,
    )

    assert call_next.seen[0].dry_run is True


def test_a_declined_consent_answers_without_running(project: Path) -> None:
    digest = argument_digest(WriteFileParams(path="notes.txt").model_dump())
    call_next = RecordingNext()

    consent = Consent(tool=WRITE_TOOL.name, digest=digest, approved=False)
    outcome = _run(_gate(McpConfig()), _write_call(project, ASKING_CLIENT, consent), call_next)

    assert isinstance(outcome, ToolResult)
    assert outcome.is_error is True
    assert call_next.seen == []


def test_required_human_consent_refuses_a_client_that_cannot_ask(project: Path) -> None:
    silent = ClientInfo(client_id="c", transport="memory", can_elicit=False)

    with pytest.raises(ConsentUnavailableError):
        _run(
            _gate(McpConfig(dry_run_default_for_writes=False), human_consent="required"),
            _write_call(project, silent, confirm=True),
            RecordingNext(),
        )


@given(
    path=st.sampled_from(
        [".git/config", ".github/workflows/x.yml", ".vscode/tasks.json", ".bashrc", ".mcp.json"]
    ),
    can_elicit=st.booleans(),
    confirm=st.booleans(),
    profile=st.sampled_from(["default", "strict"]),
)
def test_a_call_the_policy_refuses_is_refused_never_asked_about(
    path: str, can_elicit: bool, confirm: bool, profile: str, project: Path
) -> None:
    runtime = LayerRuntime(
        config=McpConfig(), workspace=Workspace(project), catalog=catalog_with_write_tool()
    )
    human = "required" if profile == "strict" else "when_client_can_ask"
    chain = build_chain(
        Profile(
            name=profile,
            layers=("gateway", "validator", "policy", "safety", "sandbox"),
            settings={"safety": {"human_consent": human}},
        ),
        runtime,
    )
    client = ClientInfo(client_id="c", transport="memory", can_elicit=can_elicit)
    ctx = CallContext(
        tool=WRITE_TOOL.name, arguments={"path": path, "confirm": confirm}, client=client, call_id="1"
    )

    with pytest.raises(PolicyError):
        anyio.run(chain, ctx)


def test_a_tool_outside_the_allowlist_is_refused_never_asked_about(project: Path) -> None:
    runtime = LayerRuntime(
        config=McpConfig(), workspace=Workspace(project), catalog=catalog_with_write_tool()
    )
    chain = build_chain(
        Profile(
            name="readonly",
            layers=("gateway", "validator", "policy", "safety", "sandbox"),
            settings={"policy": {"tools": ["oct_read_file"]}},
        ),
        runtime,
    )
    ctx = CallContext(tool=WRITE_TOOL.name, arguments={"path": "a.txt"}, client=ASKING_CLIENT, call_id="1")

    with pytest.raises(PolicyError):
        anyio.run(chain, ctx)


def test_the_gate_sits_after_the_policy_in_every_shipped_profile() -> None:
    from oct_mcp.config import PROFILE_NAMES
    from oct_mcp.profiles import shipped_profile

    for name in PROFILE_NAMES:
        layers = shipped_profile(name).layers
        assert layers.index("policy") < layers.index("safety") < layers.index("sandbox")


def test_the_question_shows_each_file_where_it_lands_and_flags_code_configuration(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path.resolve())
    hidden = "docs/release-notes-" + "n" * 200 + "/../../conftest.py"

    text = confirmation_request_text(
        "oct_write_file",
        WRITE_TOOL,
        {"path": hidden},
        "sha256:00",
        changes_nothing=False,
        workspace=workspace,
    )

    assert "Files (1):\n  conftest.py (configures code that runs later: check it)\n" in text


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        ("notes\u202etxt.py", '"notes\\u202etxt.py"'),
        ("a\u2028b", '"a\\u2028b"'),
        ("zero\u200bwidth", '"zero\\u200bwidth"'),
        ('"quoted"', '"\\"quoted\\""'),
        ("café.txt", "café.txt"),
    ],
)
def test_the_question_escapes_what_a_reader_cannot_see(path: str, shown: str) -> None:
    text = confirmation_request_text(
        "oct_write_file", WRITE_TOOL, {"path": path}, "sha256:00", changes_nothing=True
    )

    assert f"Files (1):\n  {shown}\n" in text


@pytest.mark.parametrize(
    ("path", "flagged"),
    [
        ("conftest.py", True),
        ("tests/conftest.py", True),
        ("pyproject.toml", True),
        ("setup.cfg", True),
        ("tox.ini", True),
        ("noxfile.py", True),
        ("lib/site-packages/evil.pth", True),
        (".venv/pyvenv.cfg", True),
        ("venv/bin/python", True),
        ("src/app.py", False),
        ("docs/venv.md", False),
    ],
)
def test_files_that_configure_code_are_flagged(path: str, flagged: bool) -> None:
    assert configures_code(path) is flagged


@given(
    tool=tool_names, spec=specs | st.sampled_from([FORMAT_TOOL]) | st.none(), args=arg_dicts, config=configs
)
def test_for_any_arguments_check_keeps_the_seeds_five_rules(
    tool: str, spec: Any, args: dict[str, Any], config: McpConfig
) -> None:
    gate = _gate(config)

    def decision(confirm: bool, **extra: Any) -> SafetyDecision:
        return gate.check(tool, spec, {**args, **extra, "confirm": confirm})

    destructive = spec is None or spec.risk_of(args).risk is Risk.WRITE
    if not destructive:
        if config.auto_approve_read_tools:  # rule 1
            assert decision(False) == SafetyDecision(True, False, False, decision(False).reason)
        return
    assert (decision(False).proceed, decision(False).requires_confirmation) == (False, True)  # rule 2
    if spec is FORMAT_TOOL:
        assert (decision(True, apply=False).proceed, decision(True, apply=False).dry_run) == (True, True)  # 3
        assert (decision(True, apply=True).proceed, decision(True, apply=True).dry_run) == (True, False)  # 4
    elif spec is not None and "dry_run" in spec.params.model_fields:
        own = decision(True, dry_run=True)  # rule 5: the tool honours its own field
        assert (own.proceed, own.requires_confirmation, own.dry_run) == (True, False, False)
    else:
        assert decision(True).dry_run is config.dry_run_default_for_writes


def test_a_question_shows_at_most_two_hundred_diff_lines_and_says_how_many_were_cut() -> None:
    diff = "--- /dev/null\n+++ b/long.txt\n@@ -0,0 +1,250 @@\n" + "".join(
        f"+line {number}\n" for number in range(250)
    )

    shown = shown_diff(diff)

    assert shown[:3] == ["File: long.txt (created)", "@@ -0,0 +1,250 @@", "+line 0"]
    assert shown[199] == "+line 197"
    assert shown[200:] == [
        "... the diff is cut here: 52 more of its 252 lines are not shown: +52 -0 in long.txt (created)."
    ]


def test_a_question_escapes_in_the_diff_what_a_reader_cannot_see() -> None:
    diff = '--- a/x.py\n+++ b/x.py\n@@ -0,0 +1,2 @@\n+if user == "admin\u202e":\n+\x1b[2J\tx\n'

    assert shown_diff(diff)[-2:] == ['+if user == "admin\\u202e":', "+\\u001b[2J\tx"]


def _previewing(project: Path) -> CallContext:
    """A write whose tool has a preview plan: safety runs it through the layers below before asking."""
    ctx = _write_call(project, ASKING_CLIENT, content="new\n", dry_run=False)
    return replace(ctx, spec=replace(WRITE_TOOL, preview=WRITE_TOOL.plan))


def test_a_write_whose_preview_refuses_is_answered_with_the_refusal_and_nobody_is_asked(
    project: Path,
) -> None:
    refusal = ToolResult(text="the patch does not apply; nothing was changed.", is_error=True)
    call_next = RecordingNext(outcome=refusal)

    outcome = _run(_gate(McpConfig()), _previewing(project), call_next)

    assert outcome == refusal
    assert [(seen.previewing, seen.dry_run) for seen in call_next.seen] == [(True, True)]


def test_a_write_whose_preview_raises_is_refused_before_anyone_is_asked(project: Path) -> None:
    call_next = RecordingNext(error=PolicyError("protected"))

    with pytest.raises(PolicyError):
        _run(_gate(McpConfig()), _previewing(project), call_next)

    assert [seen.previewing for seen in call_next.seen] == [True]


def test_a_write_whose_preview_applies_is_put_to_the_human_with_the_change(project: Path) -> None:
    change = Preview(
        files=(FileChange(path="notes.txt", action="create", added=1, removed=0),),
        diff="--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+new\n",
        targets=(TargetState(path="notes.txt", digest=ABSENT),),
    )
    call_next = RecordingNext(outcome=ToolResult(text="dry run, nothing changed", preview=change))

    outcome = _run(_gate(McpConfig()), _previewing(project), call_next)

    assert isinstance(outcome, ConsentRequest)
    assert outcome.preview == change
    assert "+new" in outcome.question


# -- Each rule of the gate, asserted by the rule that fired (its reason), so that a rule that is
# -- changed or dropped fails here.

SILENT_CLIENT = ClientInfo(client_id="c", transport="memory", can_elicit=False)


def _run_call(
    project: Path, client: ClientInfo, consent: Consent | None = None, **arguments: Any
) -> CallContext:
    params = RUN_TOOL.params.model_validate({"argv": ["python", "-V"], **arguments})
    ctx = make_context(RUN_TOOL.name, Workspace(project), **params.model_dump())
    risk = RUN_TOOL.risk_of(params.model_dump())
    return replace(ctx, spec=RUN_TOOL, params=params, risk=risk, client=client, consent=consent)


def test_a_read_tool_proceeds_saying_no_consent_was_needed() -> None:
    decision = _gate(McpConfig()).check("oct_read_file", READ_TOOL, {"path": "a"})

    assert decision == SafetyDecision(True, False, False, "read tool: no consent needed")


def test_a_read_tool_needs_consent_when_auto_approval_is_off_and_says_why() -> None:
    decision = _gate(McpConfig(auto_approve_read_tools=False)).check("oct_read_file", READ_TOOL, {})

    assert decision == SafetyDecision(
        False, True, False, "confirmation required: a read tool, and auto_approve_read_tools is off"
    )


def test_an_execute_tool_needs_consent_under_confirm_execute_and_says_why() -> None:
    decision = _gate(McpConfig(), confirm_execute=True).check("oct_run", RUN_TOOL, {"argv": ["python"]})

    assert decision == SafetyDecision(
        False,
        True,
        False,
        "confirmation required: it runs project code, and the profile sets confirm_execute",
    )


def test_oct_run_without_writes_needs_no_consent_by_default() -> None:
    decision = _gate(McpConfig()).check("oct_run", RUN_TOOL, {"argv": ["python"], "writes": False})

    assert decision == SafetyDecision(True, False, False, "execute tool: no consent needed")


def test_oct_run_with_writes_needs_consent_like_a_write_and_is_never_a_dry_run() -> None:
    gate = _gate(McpConfig(dry_run_default_for_writes=True))
    arguments = {"argv": ["python"], "writes": True}

    asked = gate.check("oct_run", RUN_TOOL, arguments)
    confirmed = gate.check("oct_run", RUN_TOOL, {**arguments, "confirm": True})

    assert asked == SafetyDecision(
        False, True, False, "confirmation required: oct_run with writes=true changes files"
    )
    assert confirmed == SafetyDecision(
        True,
        False,
        False,
        "confirmed (oct_run with writes=true changes files); oct_run with writes=true changes files: "
        "the changes are made",
    )


def test_oct_run_with_network_needs_consent_even_where_reads_are_approved() -> None:
    arguments = {"argv": ["python"], "network": True}

    decision = _gate(McpConfig(auto_approve_read_tools=True)).check("oct_run", RUN_TOOL, arguments)

    assert decision == SafetyDecision(
        False, True, False, "confirmation required: it reaches the network (network=true)"
    )


def test_a_tool_the_gate_does_not_know_is_treated_as_destructive() -> None:
    decision = _gate(McpConfig()).check("host_tool", None, {})  # type: ignore[arg-type]

    assert decision == SafetyDecision(
        False, True, False, "confirmation required: a tool the gate does not know"
    )


def test_a_write_that_honours_its_own_dry_run_says_so() -> None:
    decision = _gate(McpConfig()).check("test_write_file", WRITE_TOOL, {"dry_run": False, "confirm": True})

    assert decision == SafetyDecision(
        True, False, False, "confirmed (a destructive tool); the tool honours its own dry_run"
    )


@pytest.mark.parametrize("default", [True, False])
def test_a_write_that_does_not_say_follows_the_default_and_says_so(default: bool) -> None:
    gate = _gate(McpConfig(dry_run_default_for_writes=default))

    decision = gate.check("test_write_file", WRITE_TOOL, {"path": "a", "dry_run": None, "confirm": True})

    assert decision == SafetyDecision(
        True,
        False,
        default,
        f"confirmed (a destructive tool); dry run by default: {'yes' if default else 'no'}",
    )


@pytest.mark.parametrize(("apply", "dry_run"), [(True, False), (False, True)])
def test_format_s_apply_rule_lives_on_its_spec(apply: bool, dry_run: bool) -> None:
    decision = _gate(McpConfig()).check("oct_format", FORMAT_TOOL, {"apply": apply, "confirm": True})

    shown = "true" if apply else "false"
    effect = "a dry run" if dry_run else "the changes are made"
    assert decision == SafetyDecision(
        True,
        False,
        dry_run,
        f"confirmed (oct_format with apply={shown}); oct_format with apply={shown}: {effect}",
    )


def test_an_unconfirmed_write_from_a_client_that_cannot_ask_is_answered_with_the_question(
    project: Path,
) -> None:
    call_next = RecordingNext()

    outcome = _run(_gate(McpConfig()), _write_call(project, SILENT_CLIENT, dry_run=False), call_next)

    assert call_next.seen == []
    assert isinstance(outcome, ConsentRequest)
    assert outcome.message.startswith(CONFIRMATION_PREFIX)
    assert outcome.reason == "confirmation required: a destructive tool; the tool honours its own dry_run"


def test_a_write_the_model_confirmed_for_a_client_that_cannot_ask_runs_with_the_reason(project: Path) -> None:
    call_next = RecordingNext()

    outcome = _run(
        _gate(McpConfig()), _write_call(project, SILENT_CLIENT, dry_run=False, confirm=True), call_next
    )

    (seen,) = call_next.seen
    assert seen.dry_run is False
    assert isinstance(outcome, ToolResult)
    assert outcome.consent is not None
    assert (outcome.consent.given_by, outcome.consent.reason) == (
        "confirm",
        "confirmation required: a destructive tool; the tool honours its own dry_run",
    )


def test_the_models_confirm_is_not_consent_where_a_human_can_be_asked(project: Path) -> None:
    call_next = RecordingNext()

    outcome = _run(
        _gate(McpConfig()), _write_call(project, ASKING_CLIENT, dry_run=False, confirm=True), call_next
    )

    assert call_next.seen == []
    assert isinstance(outcome, ConsentRequest)


def test_a_dry_run_write_runs_without_asking_a_client_that_can_ask(project: Path) -> None:
    call_next = RecordingNext()

    outcome = _run(_gate(McpConfig()), _write_call(project, ASKING_CLIENT, dry_run=True), call_next)

    (seen,) = call_next.seen
    assert seen.dry_run is False  # the tool honours its own dry_run=true
    assert isinstance(outcome, ToolResult)
    assert outcome.consent is None


def test_a_human_s_approval_runs_the_call_and_records_the_reason(project: Path) -> None:
    digest = argument_digest(WriteFileParams(path="notes.txt", dry_run=False).model_dump())
    consent = Consent(tool=WRITE_TOOL.name, digest=digest, approved=True)
    call_next = RecordingNext()

    outcome = _run(_gate(McpConfig()), _write_call(project, ASKING_CLIENT, consent, dry_run=False), call_next)

    assert len(call_next.seen) == 1
    assert isinstance(outcome, ToolResult)
    assert outcome.consent is not None
    assert (outcome.consent.given_by, outcome.consent.reason) == (
        "elicitation",
        "confirmation required: a destructive tool; the tool honours its own dry_run",
    )


def test_a_replayed_answer_is_refused(project: Path) -> None:
    digest = argument_digest(WriteFileParams(path="notes.txt", dry_run=False).model_dump())
    consent = Consent(tool=WRITE_TOOL.name, digest=digest, approved=True, replayed=True)
    call_next = RecordingNext()

    with pytest.raises(ConsentReplayedError) as caught:
        _run(_gate(McpConfig()), _write_call(project, ASKING_CLIENT, consent, dry_run=False), call_next)

    assert caught.value.code == "consent_replayed"
    assert call_next.seen == []


def test_oct_run_with_writes_is_asked_about_naming_the_command(project: Path) -> None:
    call_next = RecordingNext()

    outcome = _run(_gate(McpConfig()), _run_call(project, ASKING_CLIENT, writes=True), call_next)

    assert call_next.seen == []
    assert isinstance(outcome, ConsentRequest)
    assert outcome.question == (
        "oct_run (Run a project command) asks to run `python -V` in the project root, the project writable "
        "(protected paths stay read-only); afterwards the result lists the files it changed.\n"
        "The changes are made.\n"
        "Accept: the call runs exactly as described. Decline or cancel: nothing runs."
    )


def test_oct_run_with_network_is_asked_about_saying_why(project: Path) -> None:
    call_next = RecordingNext()

    outcome = _run(_gate(McpConfig()), _run_call(project, ASKING_CLIENT, network=True), call_next)

    assert call_next.seen == []
    assert isinstance(outcome, ConsentRequest)
    assert outcome.question == (
        "oct_run (Run a project command) asks to run `python -V` in the project root, the project read-only, "
        "with network access.\n"
        "It needs consent because it reaches the network (network=true).\n"
        "Accept: the call runs exactly as described. Decline or cancel: nothing runs."
    )


def test_oct_run_without_writes_or_network_passes_on_unasked(project: Path) -> None:
    call_next = RecordingNext()

    _run(_gate(McpConfig()), _run_call(project, ASKING_CLIENT), call_next)

    (seen,) = call_next.seen
    assert seen.dry_run is False


def test_a_consented_call_that_changes_no_file_is_never_a_dry_run() -> None:
    gate = _gate(McpConfig(dry_run_default_for_writes=True))

    decision = gate.check("oct_run", RUN_TOOL, {"argv": ["python"], "network": True, "confirm": True})

    assert decision == SafetyDecision(
        True, False, False, "confirmed (it reaches the network (network=true)); it changes no file"
    )


def test_the_sentinel_for_oct_run_with_writes_names_the_command_and_says_it_writes(project: Path) -> None:
    outcome = _run(_gate(McpConfig()), _run_call(project, SILENT_CLIENT, writes=True), RecordingNext())

    assert isinstance(outcome, ConsentRequest)
    first, *rest = outcome.message.splitlines()
    assert first == (
        f"{CONFIRMATION_PREFIX} oct_run (Run a project command) would run `python -V` in the project root, "
        "the project writable (protected paths stay read-only); afterwards the result lists the files it "
        "changed."
    )
    assert rest[0] == "Dry run: no, the changes are made."


# -- `confirm`: from the validator to the gate -----------------------------------------------------


def _validated(
    gate: SafetyGate, client: ClientInfo, project: Path, call_next: RecordingNext, **sent: Any
) -> Any:
    """A call of the test write tool through the real validator, then the gate."""
    chain = compose([InputValidator(catalog=catalog_with_write_tool()), gate], call_next)
    ctx = replace(make_context(WRITE_TOOL.name, Workspace(project), **sent), client=client)
    return anyio.run(chain, ctx)


def test_the_models_confirm_reaches_the_gate_from_the_validator_never_the_tools_model(project: Path) -> None:
    call_next = RecordingNext()

    outcome = _validated(
        _gate(McpConfig()), SILENT_CLIENT, project, call_next, path="notes.txt", dry_run=False, confirm=True
    )

    (seen,) = call_next.seen
    assert (seen.params, seen.confirmed) == (WriteFileParams(path="notes.txt", dry_run=False), True)
    assert isinstance(outcome, ToolResult)
    assert outcome.consent is not None
    assert outcome.consent.given_by == "confirm"


def test_a_call_sent_with_confirm_is_asked_about_under_the_digest_of_the_call_without_it(
    project: Path,
) -> None:
    arguments = {"path": "notes.txt", "dry_run": False}

    asked = [
        _validated(_gate(McpConfig()), ASKING_CLIENT, project, RecordingNext(), **arguments, **extra)
        for extra in ({}, {"confirm": True}, {"confirm": False})
    ]

    digest = argument_digest({"path": "notes.txt", "content": "", "dry_run": False})
    assert [outcome.digest for outcome in asked] == [digest, digest, digest]


# -- which tools may need consent, and so take `confirm` -------------------------------------------


@given(
    spec=kit.tool_specs().filter(lambda spec: spec.call_risk is None),
    config=configs,
    confirm_execute=st.booleans(),
)
def test_a_tool_may_need_consent_exactly_where_check_asks_about_its_calls(
    spec: ToolSpec, config: McpConfig, confirm_execute: bool
) -> None:
    gate = _gate(config, confirm_execute=confirm_execute)

    asks = gate.check(spec.name, spec, {"confirm": False}).requires_confirmation

    assert gate.may_need_consent(spec) is asks


@given(config=configs, confirm_execute=st.booleans())
def test_a_tool_whose_arguments_decide_its_risk_may_always_need_consent(
    config: McpConfig, confirm_execute: bool
) -> None:
    gate = _gate(config, confirm_execute=confirm_execute)
    writes = {"argv": ["python"], "writes": True, "confirm": False}

    assert (gate.may_need_consent(RUN_TOOL), gate.may_need_consent(FORMAT_TOOL)) == (True, True)
    assert gate.check("oct_run", RUN_TOOL, writes).requires_confirmation is True


@pytest.mark.parametrize(
    ("config", "settings", "risks"),
    [
        pytest.param(McpConfig(), {}, {Risk.WRITE}, id="default"),
        pytest.param(
            McpConfig(), {"confirm_execute": True}, {Risk.WRITE, Risk.EXECUTE}, id="confirm_execute"
        ),
        pytest.param(McpConfig(auto_approve_read_tools=False), {}, set(Risk), id="reads need consent"),
    ],
)
def test_the_tools_that_may_need_consent_are_those_the_settings_name_and_those_the_arguments_decide(
    config: McpConfig, settings: dict[str, Any], risks: set[Risk]
) -> None:
    gate = _gate(config, **settings)
    catalog = default_catalog()

    may = {name for name, spec in catalog.items() if gate.may_need_consent(spec)}

    assert may == {name for name, spec in catalog.items() if spec.risk in risks or spec.call_risk is not None}


@pytest.mark.parametrize("human_consent", ["when_client_can_ask", "required"])
def test_confirm_is_taken_where_a_call_may_need_consent_unless_only_a_humans_answer_counts(
    human_consent: str,
) -> None:
    gate = _gate(McpConfig(auto_approve_read_tools=False), human_consent=human_consent)

    taking = [spec.name for spec in default_catalog().values() if gate.takes_confirm(spec)]

    assert taking == ([] if human_consent == "required" else list(default_catalog()))


def test_a_grant_given_with_an_answer_comes_back_as_a_fact_and_the_gate_changes_no_session_s_grants(
    project: Path,
) -> None:
    grants = SessionGrants()
    unanswered = _write_call(project, ASKING_CLIENT, content="new\n", dry_run=False)
    assert unanswered.params is not None
    digest = argument_digest(unanswered.params.model_dump())
    consent = Consent(tool=WRITE_TOOL.name, digest=digest, approved=True, grant_folders=(".",))
    ctx = replace(unanswered, consent=consent, session_grants=grants)
    call_next = RecordingNext()

    outcome = _run(_gate(McpConfig(), session_grant=True, session_grant_seconds=600), ctx, call_next)

    assert isinstance(outcome, ToolResult)
    assert outcome.consent is not None
    assert (outcome.consent.given_by, outcome.consent.granted_folders) == ("elicitation", (".",))
    assert outcome.consent.grant_seconds == 600
    assert [seen.session_grants for seen in call_next.seen] == [grants]
    # Recorded by the transport when the call comes back (`run_call`), never by the gate.
    assert grants.listed() == []
