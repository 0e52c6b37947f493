"""The layer contract as a claim: every shipped layer calls `call_next` as `Middleware` says, the safety
gate's preview step included, through the real chain and tools; and the check catches each break."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from oct_mcp.app import App, build_app, run_call
from oct_mcp.chain import Chain
from oct_mcp.consent import Consent, SessionGrants
from oct_mcp.testing import TEST_CLIENT, ContractBrokenError, LayerContract, RecordingNext, make_context
from oct_mcp.types import CallContext, CallNext, ClientInfo, ConsentRequest, Outcome, ToolResult

ASKING_CLIENT = ClientInfo(client_id="asking", transport="memory", can_elicit=True)


@pytest.fixture
def app(project: Path, tmp_path: Path) -> Iterator[App]:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"audit_log_path": str(tmp_path / "audit.log")}))
    built = build_app(project, config_path=config, environ={})
    yield built
    built.close()


def _answer(request: ConsentRequest, *, approved: bool = True, grant: bool = False) -> Consent:
    """The human's answer to `request`, as a transport hands it to the chain."""
    preview = request.preview
    assert preview is not None
    return Consent(
        tool=request.tool,
        digest=request.digest,
        approved=approved,
        targets=preview.targets,
        preview_digest=preview.digest(),
        grant_folders=request.grant_folders if grant else (),
    )


@pytest.mark.e2e
def test_every_shipped_layer_keeps_the_contract_through_each_way_a_call_gets_consent(
    app: App, project: Path
) -> None:
    contract = LayerContract()
    checked = replace(app, chain=contract.check(app.chain))
    grants = SessionGrants()

    def write(path: str) -> dict[str, object]:
        return {"path": path, "content": f"{path}\n", "dry_run": False}

    async def calls() -> dict[str, object]:
        with anyio.fail_after(60):
            return await steps()

    async def steps() -> dict[str, object]:
        async def call(arguments: dict[str, object], **options: object) -> object:
            return await run_call(checked, "oct_write_file", arguments, ASKING_CLIENT, **options)  # type: ignore[arg-type]

        outcomes: dict[str, object] = {}
        outcomes["read"] = await run_call(checked, "oct_read_file", {"path": "README.md"}, ASKING_CLIENT)
        asked = await call(write("docs/a.md"), session_grants=grants)
        assert isinstance(asked, ConsentRequest)
        assert asked.grant_folders == ("docs",)
        outcomes["declined"] = await call(
            write("docs/a.md"), consent=_answer(asked, approved=False), session_grants=grants
        )
        asked = await call(write("docs/a.md"), session_grants=grants)
        assert isinstance(asked, ConsentRequest)
        outcomes["answered"] = await call(
            write("docs/a.md"), consent=_answer(asked, grant=True), session_grants=grants
        )
        # Covered by the grant just given: previewed, then run, in one pass through the gate.
        outcomes["granted"] = await call(write("docs/b.md"), session_grants=grants)
        outcomes["confirmed"] = await run_call(
            checked, "oct_write_file", {**write("c.md"), "confirm": True}, TEST_CLIENT
        )
        return outcomes

    (project / "docs").mkdir()
    outcomes = anyio.run(calls)

    assert contract.broken == []
    # Previewed: the two writes a human was asked about, and the one the grant covered; an answered
    # call runs on what was previewed for the question, and a confirmed one is not previewed.
    assert contract.previews == 3
    how = {
        name: outcome.consent.given_by if outcome.consent else None
        for name, outcome in outcomes.items()
        if isinstance(outcome, ToolResult)
    }
    assert how == {
        "read": None,
        "declined": None,
        "answered": "elicitation",
        "granted": "session_grant",
        "confirmed": "confirm",
    }
    declined = outcomes["declined"]
    assert isinstance(declined, ToolResult)
    assert declined.is_error
    assert (project / "docs/a.md").read_text() == "docs/a.md\n"
    assert (project / "docs/b.md").read_text() == "docs/b.md\n"
    assert (project / "c.md").read_text() == "c.md\n"
    # The grant came back as a fact of the answered call and the transport recorded it.
    assert [(grant.tool, grant.scope) for grant in grants.listed()] == [("oct_write_file", "docs")]


class _Twice:
    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        await call_next(ctx)
        return await call_next(ctx)


class _Previews:
    def __init__(self, *, dry_run: bool = True, after: bool = False) -> None:
        self.dry_run, self.after = dry_run, after

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        if self.after:
            await call_next(ctx)
        await call_next(replace(ctx, previewing=True, dry_run=self.dry_run))
        return await call_next(ctx)


class _Late:
    def __init__(self) -> None:
        self.kept: CallNext | None = None

    async def __call__(self, ctx: CallContext, call_next: CallNext, /) -> Outcome:
        self.kept = call_next
        return ToolResult(text="answered")


def _chain(name: str, layer: object) -> Chain:
    async def unchecked(ctx: CallContext, /) -> Outcome:
        raise AssertionError("replaced by the check")

    return Chain(profile="test", layer_names=(name,), layers=(layer,), call=unchecked)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "layer", "broken"),
    [
        ("policy", _Twice(), "policy called call_next twice for the call itself"),
        ("policy", _Previews(), "policy took a preview step, but it does not provide `previewing`"),
        ("safety", _Previews(dry_run=False), "safety took a preview step that is not a dry run"),
        ("safety", _Previews(after=True), "safety took a preview step after call"),
    ],
)
def test_the_check_stops_a_layer_at_the_step_that_breaks_the_contract(
    name: str, layer: object, broken: str
) -> None:
    contract = LayerContract()
    endpoint = RecordingNext()
    chain = contract.check(_chain(name, layer), endpoint=endpoint)

    with pytest.raises(ContractBrokenError, match="^" + broken.replace("`", ".") + "$"):
        anyio.run(chain, make_context())

    assert contract.broken == [broken]
    # Stopped where it broke: the step that broke it never reached the rest of the chain.
    allowed_steps = {"policy called call_next twice for the call itself": 1}
    assert len(endpoint.seen) == allowed_steps.get(broken, 1 if "after call" in broken else 0)


def test_the_check_refuses_a_call_next_kept_past_the_layer_s_return() -> None:
    contract = LayerContract()
    late = _Late()
    chain = contract.check(_chain("policy", late), endpoint=RecordingNext())
    anyio.run(chain, make_context())
    assert late.kept is not None

    with pytest.raises(ContractBrokenError):
        anyio.run(late.kept, make_context())

    assert contract.broken == ["policy called call_next after it had returned"]
