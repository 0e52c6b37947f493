"""Rules over arguments without a client: what a call's facts are, how tiers combine, the admin
file's keeping, and `oct-mcp policy check`, `policy test` and `doctor`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from git_repos import git_output, new_repo
from hypothesis import given
from hypothesis import strategies as st

from oct_mcp.app import build_app
from oct_mcp.cli import main
from oct_mcp.errors import ConfigError
from oct_mcp.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from oct_mcp.profiles import shipped_profile
from oct_mcp.rules import (
    CallFacts,
    RuleSource,
    compile_rules,
    facts_of_arguments,
    git_exclusions,
    path_globs,
    read_admin_rules,
)
from oct_mcp.tools import default_catalog
from oct_mcp.tools.git.runner import GIT_SAFETY_OPTIONS
from oct_mcp.workspace import Workspace

CATALOG = default_catalog()


def rule(effect: str, reason: str = "because", **extra: Any) -> dict[str, Any]:
    return {"effect": effect, "reason": reason, **extra}


def read(path: str) -> CallFacts:
    return CallFacts(tool="oct_read_file", risk="read", paths=(path,))


def decided(sources: list[RuleSource], facts: CallFacts) -> tuple[str, str] | None:
    chosen = compile_rules(sources, CATALOG).decide(facts)
    return None if chosen is None else (chosen.rule.effect, chosen.tier)


def test_the_first_matching_rule_of_a_file_decides() -> None:
    user = RuleSource(
        tier="user",
        file="config.json",
        rules=(rule("allow", when={"paths": ["docs/public/"]}), rule("deny", when={"paths": ["docs/"]})),
    )

    assert decided([user], read("docs/public/a.md")) == ("allow", "user")
    assert decided([user], read("docs/private/a.md")) == ("deny", "user")
    assert decided([user], read("src/a.py")) is None


def test_of_the_tiers_the_strictest_answer_wins_so_none_below_loosens_one_above() -> None:
    admin = RuleSource(tier="admin", file="policy.toml", rules=(rule("ask", tools=["oct_read_file"]),))
    user = RuleSource(tier="user", file="config.json", rules=(rule("allow"), rule("deny", tools=["oct_run"])))
    repo = RuleSource(tier="repo", file=".octrc.json", rules=(rule("deny", when={"paths": ["*.pem"]}),))

    assert decided([admin, user, repo], read("README.md")) == ("ask", "admin")
    assert decided([admin, user, repo], read("keys/server.pem")) == ("deny", "repo")
    assert decided([user], read("README.md")) == ("allow", "user")


def test_a_repository_allow_is_ignored() -> None:
    repo = RuleSource(tier="repo", file=".octrc.json", rules=(rule("allow"), rule("ask", tools=["oct_run"])))

    book = compile_rules([repo], CATALOG)

    assert [r.rule.effect for r in book.rules] == ["ask"]
    assert book.decide(read("README.md")) is None


@pytest.mark.parametrize(
    "bad",
    [
        {"effect": "maybe", "reason": "r"},
        {"effect": "deny"},
        {"effect": "deny", "reason": "r", "tools": []},
        {"effect": "deny", "reason": "r", "tools": ["oct_no_such_tool"]},
        {"effect": "deny", "reason": "r", "when": {"path": ["a"]}},
        "deny everything",
    ],
)
def test_a_malformed_rule_stops_the_start_up(bad: object) -> None:
    with pytest.raises(ConfigError) as raised:
        compile_rules([RuleSource(tier="user", file="config.json", rules=(bad,))], CATALOG)  # type: ignore[arg-type]

    assert raised.value.rule == "rules"
    assert "rule #1 of config.json (user tier)" in raised.value.message


def test_the_facts_of_a_call_are_its_paths_as_named_and_resolved_its_argv_and_its_refs(
    tmp_path: Path,
) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key.txt").write_text("k")
    (tmp_path / "notes.txt").symlink_to(tmp_path / "secrets" / "key.txt")
    workspace = Workspace(tmp_path.resolve())

    facts = facts_of_arguments(CATALOG["oct_read_file"], {"path": "notes.txt"}, workspace)
    run = facts_of_arguments(CATALOG["oct_run"], {"argv": ["pytest", "-q"]}, workspace)

    assert facts.paths == ("notes.txt", "secrets/key.txt")
    assert facts.risk == "read"
    assert run.argv == ("pytest", "-q")


def test_argv_conditions_match_the_prefix_the_program_and_any_word() -> None:
    sources = [
        RuleSource(
            tier="user",
            file="config.json",
            rules=(
                rule("allow", when={"argv": {"prefix": ["pytest", "-q"]}}),
                rule("deny", when={"argv": {"any": ["--co*"]}}),
                rule("ask", when={"argv": {"program": ["make"]}}),
            ),
        )
    ]

    def run(*argv: str) -> CallFacts:
        return CallFacts(tool="oct_run", risk="execute", argv=argv)

    assert decided(sources, run("pytest", "-q", "tests")) == ("allow", "user")
    assert decided(sources, run("pytest", "--cov")) == ("deny", "user")
    assert decided(sources, run("make", "docs")) == ("ask", "user")
    assert decided(sources, run("python", "x.py")) is None
    assert decided(sources, read("Makefile")) is None


def test_a_ref_rule_matches_the_branch_a_git_call_names() -> None:
    sources = [RuleSource(tier="user", file="c", rules=(rule("deny", when={"ref": ["main", "release/*"]}),))]

    def branch(name: str) -> CallFacts:
        return CallFacts(tool="oct_git_switch", risk="write", refs=(name,))

    assert decided(sources, branch("release/1.2")) == ("deny", "user")
    assert decided(sources, branch("main")) == ("deny", "user")
    assert decided(sources, branch("feature/mainline")) is None


def write_admin(tmp_path: Path, text: str, mode: int = 0o644) -> Path:
    path = tmp_path / "admin" / "policy.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


ADMIN_RULE = '[[rules]]\neffect = "deny"\nreason = "no keys"\nwhen = { paths = ["*.pem"] }\n'


def test_an_admin_file_is_read_when_root_alone_may_write_it(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("an admin policy must be owned by root: writing one needs root")
    path = write_admin(tmp_path, ADMIN_RULE)

    source = read_admin_rules({"OCT_MCP_ADMIN_POLICY": str(path)})

    assert source is not None
    assert (source.tier, source.file, len(source.rules)) == ("admin", str(path), 1)


def test_an_admin_file_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    path = write_admin(tmp_path, ADMIN_RULE)
    os.chown(path, 65534, 65534)

    with pytest.raises(ConfigError) as raised:
        read_admin_rules({"OCT_MCP_ADMIN_POLICY": str(path)})

    assert raised.value.rule == "admin"


@pytest.mark.parametrize("text", ["rules = 3\n", "[other]\nx = 1\n", "[[rules]\n"])
def test_an_admin_file_that_is_not_a_list_of_rules_is_refused(tmp_path: Path, text: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("an admin policy must be owned by root: writing one needs root")
    path = write_admin(tmp_path, text)

    with pytest.raises(ConfigError):
        read_admin_rules({"OCT_MCP_ADMIN_POLICY": str(path)})


def test_an_admin_file_the_environment_names_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        read_admin_rules({"OCT_MCP_ADMIN_POLICY": str(tmp_path / "missing.toml")})


def test_a_profile_rules_join_the_user_tier_after_the_config_file(tmp_path: Path) -> None:
    default = shipped_profile("default")
    settings = {**default.settings, "policy": {**default.settings["policy"], "rules": [rule("ask")]}}
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "audit_log_path": str(tmp_path / "audit.log"),
                "profile": "mine",
                "profiles": {"mine": {"layers": list(default.layers), "settings": settings}},
                "rules": [rule("deny", when={"paths": ["*.pem"]})],
            }
        )
    )
    project = tmp_path / "project"
    project.mkdir()

    app = build_app(project, config_path=config, environ={})
    from oct_mcp.policy_command import rules_in_force

    book = rules_in_force(app)
    assert [(r.rule.effect, r.tier, r.file) for r in book.rules] == [
        ("deny", "user", str(config)),
        ("ask", "user", "profile mine"),
    ]


@pytest.fixture
def ruled(tmp_path: Path, config_file: Path) -> Path:
    config_file.write_text(
        json.dumps(
            {
                "audit_log_path": str(tmp_path / "audit.log"),
                "rules": [
                    {
                        "name": "no-keys",
                        "effect": "deny",
                        "when": {"paths": ["*.pem"]},
                        "reason": "keys stay out",
                        "examples": {"match": [{"tool": "oct_read_file", "arguments": {"path": "a/b.pem"}}]},
                    }
                ],
            }
        )
    )
    return config_file


def test_policy_check_prints_the_decision_the_rule_and_its_tier(
    project: Path, ruled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--project-root", str(project), "--config", str(ruled)]
    code = main(["policy", "check", "oct_read_file", "--json", '{"path": "deep/x.pem"}', *where])
    out = capsys.readouterr().out

    assert code == EXIT_OK
    assert "decision: deny" in out
    assert f"by: rule no-keys (user tier, {ruled})" in out
    assert "reason: keys stay out" in out
    assert not (project / "deep").exists()


def test_policy_check_refuses_a_call_the_server_would_refuse(
    project: Path, ruled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--project-root", str(project), "--config", str(ruled)]
    code = main(["policy", "check", "oct_read_file", "--json", '{"path": "../x.pem"}', *where])

    assert code == EXIT_USAGE
    assert capsys.readouterr().out.startswith("[path_refused]")


def test_policy_test_prints_each_example_and_exits_1_when_one_disagrees(
    project: Path, ruled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    passing = main(["policy", "test", "--project-root", str(project), "--config", str(ruled)])
    out = capsys.readouterr().out
    document = json.loads(ruled.read_text())
    document["rules"][0]["examples"]["not_match"] = [
        {"tool": "oct_read_file", "arguments": {"path": "x.pem"}}
    ]
    ruled.write_text(json.dumps(document))
    failing = main(["policy", "test", "--project-root", str(project), "--config", str(ruled)])
    err = capsys.readouterr().err

    assert passing == EXIT_OK
    assert "ok  rule no-keys" in out
    assert "1 example(s) of 1 rule(s) agree" in out
    assert failing == EXIT_FAILED
    assert "rule no-keys (user tier" in err
    assert 'not_match example oct_read_file {"path": "x.pem"} matches it' in err


def test_doctor_lists_the_rules_in_force_with_tier_and_file(
    project: Path, ruled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--project-root", str(project), "--config", str(ruled)])
    out = capsys.readouterr().out

    assert code == EXIT_OK
    assert f"  user   deny   no-keys              tools *: keys stay out ({ruled})" in out
    assert "admin policy: none" in out


def test_a_risk_condition_matches_the_call_s_own_risk(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path.resolve())
    sources = [
        RuleSource(tier="user", file="c", rules=(rule("ask", tools=["oct_run"], when={"risk": ["write"]}),))
    ]
    writes = facts_of_arguments(CATALOG["oct_run"], {"argv": ["pytest"], "writes": True}, workspace)
    reads = facts_of_arguments(CATALOG["oct_run"], {"argv": ["pytest"]}, workspace)

    assert decided(sources, writes) == ("ask", "user")
    assert decided(sources, reads) is None


def listing(path: str = ".") -> CallFacts:
    return CallFacts(tool="oct_list_files", risk="read", paths=(path,))


def test_a_listing_withholds_what_a_call_naming_the_path_would_be_denied() -> None:
    admin = RuleSource(tier="admin", file="policy.toml", rules=(rule("deny", when={"paths": ["*.pem"]}),))
    user = RuleSource(
        tier="user",
        file="config.json",
        rules=(
            rule("allow", when={"paths": ["docs/public/"]}),
            rule("deny", when={"paths": ["docs/"]}),
            rule("deny", tools=["oct_run"], when={"paths": ["scripts/"]}),
        ),
    )
    withheld = compile_rules([admin, user], CATALOG).withheld_from(listing())

    assert withheld is not None
    assert withheld.hides("keys/deep/server.pem")
    assert withheld.hides("docs/private/a.md")
    # The user's allow before the deny, as for a read that names it; no user allow lifts the admin's deny.
    assert not withheld.hides("docs/public/a.md")
    assert withheld.hides("docs/public/server.pem")
    # A rule for another tool withholds nothing from this one.
    assert not withheld.hides("scripts/deploy.sh")
    assert not withheld.hides("src/app.py")


def test_a_deny_rule_whose_other_conditions_fail_withholds_nothing() -> None:
    user = RuleSource(
        tier="user", file="config.json", rules=(rule("deny", when={"paths": ["*.pem"], "risk": ["write"]}),)
    )
    book = compile_rules([user], CATALOG)

    assert book.withheld_from(listing()) is None
    assert compile_rules([], CATALOG).withheld_from(listing()) is None


# Names a tree's folders are made of, some of them what the globs below name.
_NAMES = ("a.pem", "secrets", "docs", "public", "x", "build", "prod.yaml", "key1", "n.key2", "Z")
_NAME_GLOBS = ["*.pem", "secrets/", "*.key2", "key[0-9]", "docs/"]
# Globs over one name alone take one path through the screen; with globs from the root, another.
_WITHHOLDING = {
    "names": (rule("allow", when={"paths": ["docs/public/"]}), rule("deny", when={"paths": _NAME_GLOBS})),
    "names and rooted": (
        rule("allow", when={"paths": ["docs/public/"]}),
        rule("deny", when={"paths": [*_NAME_GLOBS, "/x/build", "**/prod.*"]}),
    ),
}


def _walk_order(paths: list[str]) -> list[tuple[str, list[str]]]:
    """Each folder of a tree the paths make (its prefix, its names), a folder before those inside it."""
    folders: dict[str, dict[str, None]] = {"": {}}
    for path in paths:
        parts = path.split("/")
        for depth in range(len(parts)):
            prefix = "".join(f"{part}/" for part in parts[:depth])
            folders.setdefault(prefix, {})[parts[depth]] = None
            if depth < len(parts) - 1:
                folders.setdefault(prefix + parts[depth] + "/", {})
    return sorted(((prefix, list(names)) for prefix, names in folders.items()), key=lambda item: item[0])


@pytest.mark.parametrize("rules", _WITHHOLDING.values(), ids=_WITHHOLDING.keys())
@given(paths=st.lists(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4).map("/".join), max_size=12))
def test_a_walk_s_screened_folders_hide_just_what_a_call_naming_each_path_would_be_denied(
    rules: tuple[dict[str, Any], ...], paths: list[str]
) -> None:
    """`hidden_among` (the fast answer a listing asks for, folder by folder) against `hides`, twice:
    the second walk answers from the names the first remembered."""
    book = compile_rules([RuleSource(tier="user", file="c", rules=rules)], CATALOG)
    for _ in range(2):
        withheld = book.withheld_from(listing())
        assert withheld is not None
        for prefix, names in _walk_order(paths):
            expected = [index for index, name in enumerate(names) if withheld.hides(prefix + name)]
            assert withheld.hidden_among(prefix, names) == expected


@pytest.mark.parametrize("rules", _WITHHOLDING.values(), ids=_WITHHOLDING.keys())
def test_a_folder_of_more_names_than_are_remembered_is_screened_whole(
    rules: tuple[dict[str, Any], ...],
) -> None:
    book = compile_rules([RuleSource(tier="user", file="c", rules=rules)], CATALOG)
    withheld = book.withheld_from(listing())
    assert withheld is not None
    names = [f"file{number}.{'pem' if number % 7 == 0 else 'txt'}" for number in range(10_000)]

    for _ in range(2):
        assert withheld.hidden_among("src/", names) == list(range(0, 10_000, 7))


# Paths every glob below is tried against; the names are those git reads back byte for byte.
_PATHS = (
    "a.pem",
    "keys/deep/server.pem",
    "keys/deep/server.pem.txt",
    "pem/readme.md",
    "secrets/db.txt",
    "app/secrets/db.txt",
    "secretsmore/x.txt",
    "config/prod.yaml",
    "config/prod.yaml.bak",
    "src/config/prod.yaml",
    "docs/guide/intro.md",
    "docs/a/b/c.md",
    "docsx/a.md",
    "build/out.bin",
    "src/build/out.bin",
    "odd[name.txt",
    "back\\slash.txt",
    "aXb/c.txt",
    "a/x/b.txt",
)


@pytest.mark.parametrize(
    "glob",
    [
        "*.pem",
        "secrets/",
        "secrets",
        "config/prod.yaml",
        "/build",
        "build/",
        "docs/**/*.md",
        "docs/*",
        "**/db.txt",
        "odd[name.txt",
        "back\\slash.txt",
        "a**b",
        "a**b/c.txt",
        "a/**",
        "[ab].pem",
        "?.pem",
    ],
)
def test_git_leaves_out_at_least_every_path_a_rule_glob_matches(tmp_path: Path, glob: str) -> None:
    """The exclusions git is given for a glob, against git itself: every path the rules match is left out."""
    root = new_repo(tmp_path)
    (root / "blob").write_text("x\n")
    blob = git_output(root, "hash-object", "-w", "blob").strip()
    for path in _PATHS:
        git_output(root, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}")
    options = [option for option in GIT_SAFETY_OPTIONS if option != "--literal-pathspecs"]
    shown = git_output(root, *options, "ls-files", "-z", "--", *git_exclusions(glob)).split("\0")
    matched = {path for path in _PATHS if path_globs([glob]).matches(path)}

    assert matched, f"the table has no path {glob!r} matches"
    assert matched.isdisjoint(shown), f"{glob!r}: git still shows {sorted(matched & set(shown))}"


def test_a_field_condition_matches_an_arguments_value_by_json_pointer() -> None:
    user = RuleSource(
        tier="user",
        file="config.json",
        rules=(
            rule("deny", when={"fields": {"/table": ["billing_*"], "/options/mode": ["drop"]}}),
            rule("ask", when={"fields": {"/tags": ["prod"], "/a~1b": ["1"], "/message": ["*WIP*"]}}),
        ),
    )
    book = compile_rules([user], CATALOG)

    def call(arguments: dict[str, Any]) -> tuple[str, str] | None:
        chosen = book.decide(CallFacts(tool="run_sql", risk="write", arguments=arguments))
        return None if chosen is None else (chosen.rule.effect, chosen.label)

    assert book.looks_into_arguments is True
    assert call({"table": "billing_2026", "options": {"mode": "drop"}}) == ("deny", "#1")
    # Every condition must hold; a pointer the arguments do not have fails.
    assert call({"table": "billing_2026", "options": {"mode": "keep"}}) is None
    assert call({"table": "billing_2026"}) is None
    # A list matches where any item does; a number as JSON writes it; ~1 is a slash; * spans lines.
    assert call({"tags": ["dev", "prod"], "a/b": 1, "message": "first line\nWIP: later"}) == ("ask", "#2")
    assert call({"tags": ["dev"], "a/b": 1, "message": "WIP"}) is None
    assert (
        compile_rules(
            [RuleSource(tier="user", file="c", rules=(rule("deny"),))], CATALOG
        ).looks_into_arguments
        is False
    )


@pytest.mark.parametrize("fields", [{"table": ["x"]}, {"/table": []}, {"/" + "a/" * 9: ["x"]}])
def test_a_field_condition_that_is_no_pointer_or_has_no_glob_stops_the_start(fields: dict[str, Any]) -> None:
    source = RuleSource(tier="user", file="config.json", rules=(rule("deny", when={"fields": fields}),))

    with pytest.raises(ConfigError) as refused:
        compile_rules([source], CATALOG)

    assert "is malformed" in refused.value.message
