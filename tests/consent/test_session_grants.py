"""A session's grants: given with a lifetime or for the session, listed, revoked, expired."""

from __future__ import annotations

import pytest

from oct_mcp.consent import SessionGrants, command_grant, granted_action


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def test_a_grant_with_a_lifetime_covers_its_folder_until_it_expires_and_is_then_gone() -> None:
    clock = Clock()
    grants = SessionGrants(clock)
    grants.grant("oct_write_file", ("src",), lifetime_seconds=60)
    grants.grant("oct_edit", ("docs",))

    clock.now += 59
    assert grants.covers("oct_write_file", ("src",)) is True
    clock.now += 1

    assert grants.covers("oct_write_file", ("src",)) is False
    assert [(g.id, g.tool, g.scope, g.expires_at) for g in grants.listed()] == [
        ("g2", "oct_edit", "docs", None)
    ]


def test_giving_a_folder_again_renews_its_grant_under_the_same_id() -> None:
    clock = Clock()
    grants = SessionGrants(clock)
    grants.grant("oct_write_file", ("src",), lifetime_seconds=60)
    clock.now += 50
    grants.grant("oct_write_file", ("src", "tests"), lifetime_seconds=60)
    clock.now += 50

    assert [(g.id, g.scope, g.expires_at) for g in grants.listed()] == [
        ("g1", "src", 1_110.0),
        ("g2", "tests", 1_110.0),
    ]


def test_revoked_grants_cover_nothing_and_ids_are_never_reused() -> None:
    grants = SessionGrants(Clock())
    grants.grant("oct_write_file", ("src", "docs"))

    assert [g.id for g in grants.revoke(["g1"])] == ["g1"]
    assert grants.covers("oct_write_file", ("src",)) is False
    assert grants.covers("oct_write_file", ("docs",)) is True
    grants.grant("oct_write_file", ("src",))
    assert [g.id for g in grants.listed()] == ["g2", "g3"]
    assert [g.id for g in grants.revoke()] == ["g2", "g3"]
    assert grants.listed() == []


def test_revoking_an_id_not_in_force_revokes_nothing() -> None:
    clock = Clock()
    grants = SessionGrants(clock)
    grants.grant("oct_write_file", ("src",))
    grants.grant("oct_edit", ("docs",), lifetime_seconds=1)
    clock.now += 1

    # g2 has expired: the call names a grant that is gone, and g1 stays.
    with pytest.raises(KeyError):
        grants.revoke(["g1", "g2"])

    assert [g.id for g in grants.listed()] == ["g1"]


def test_a_folder_named_like_a_command_is_shown_as_the_folder_it_is() -> None:
    assert granted_action(("command: `rm -rf ~`",)) == "write in command: `rm -rf ~`/ (not the subfolders)"
    assert granted_action((command_grant("`make docs` in the project root"),)) == (
        "run `make docs` in the project root"
    )
