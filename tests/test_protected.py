"""The protected-path table is the one source: every way of matching a path agrees with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from oct_mcp.execution.protected_walk import snapshot_protected
from oct_mcp.protected import (
    PROTECTED_RULES,
    ProtectedPaths,
    ProtectedRule,
    is_git_directory,
)

_BY_NAME = [(rule, name) for rule in PROTECTED_RULES for name in sorted(rule.components)]
_BY_PREFIX = [(rule, prefix) for rule in PROTECTED_RULES for prefix in rule.prefixes]


def _ids(case: tuple[ProtectedRule, object]) -> str:
    rule, matched = case
    return f"{rule.name}:{matched}"


@pytest.mark.parametrize("case", _BY_NAME, ids=[_ids(case) for case in _BY_NAME])
def test_every_protected_name_is_found_by_the_check_and_by_the_walk_under_its_rule(
    tmp_path: Path, case: tuple[ProtectedRule, str]
) -> None:
    rule, name = case
    root = tmp_path.resolve()
    nested = root / "vendor" / "lib" / name
    nested.parent.mkdir(parents=True)
    nested.write_text("x\n")
    paths = ProtectedPaths(root=root)

    found = (paths.rule_for(root / name), paths.rule_for(nested), snapshot_protected(root).roots)

    assert found == (rule, rule, {f"vendor/lib/{name}": rule})


@pytest.mark.parametrize("case", _BY_PREFIX, ids=[_ids(case) for case in _BY_PREFIX])
def test_every_protected_prefix_is_found_by_the_check_and_by_the_walk_under_its_rule(
    tmp_path: Path, case: tuple[ProtectedRule, tuple[str, ...]]
) -> None:
    rule, prefix = case
    root = tmp_path.resolve()
    inside = root.joinpath(*prefix, "file.yml")
    inside.parent.mkdir(parents=True)
    inside.write_text("x\n")

    found = (ProtectedPaths(root=root).rule_for(inside), snapshot_protected(root).roots)

    assert found == (rule, {"/".join(prefix): rule})


def test_a_protected_name_matches_in_any_case(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    paths = ProtectedPaths(root=root)

    assert [paths.rule_for(root / name.upper()) for _rule, name in _BY_NAME] == [rule for rule, _ in _BY_NAME]


def test_the_git_directory_check_and_the_walk_use_the_same_markers(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    for folder, markers in {"plain": ("HEAD", "objects", "refs"), "linked": ("HEAD", "commondir")}.items():
        for marker in markers:
            (root / "vendor" / folder / marker).mkdir(parents=True)
    (root / "vendor" / "half" / "HEAD").mkdir(parents=True)

    assert sorted(snapshot_protected(root).roots) == ["vendor/linked", "vendor/plain"]
    assert [
        is_git_directory(names) for names in (["HEAD", "objects", "refs"], ["head", "COMMONDIR"], ["HEAD"])
    ] == [
        True,
        True,
        False,
    ]
