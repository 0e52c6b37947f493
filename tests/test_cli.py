"""The command line: exit codes, doctor, and call through the same chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from optional import usable_backend

from oct_mcp.cli import main
from oct_mcp.execution.cgroups import delegated_cgroup
from oct_mcp.exit_codes import EXIT_BROAD_ROOT, EXIT_FAILED, EXIT_OK, EXIT_USAGE
from oct_mcp.profiles import shipped_profile

pytestmark = pytest.mark.e2e


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_project_root_that_does_not_exist_exits_with_code_2(
    tmp_path: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"

    code, out, err = _run(capsys, "--project-root", str(missing), "--config", str(config_file))

    assert code == EXIT_USAGE
    assert out == ""
    assert "is not an existing directory" in err


def test_a_project_root_that_is_a_file_exits_with_code_2(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        capsys, "doctor", "--project-root", str(project / "README.md"), "--config", str(config_file)
    )

    assert code == EXIT_USAGE
    assert "--project-root" in err


def test_an_unknown_profile_exits_with_code_2_naming_the_known_ones(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        capsys, "doctor", "--project-root", str(project), "--config", str(config_file), "--profile", "lax"
    )

    assert code == EXIT_USAGE
    assert "no profile named 'lax'" in err
    assert "strict" in err


def test_doctor_shows_each_value_with_its_source_the_chain_and_the_tools(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file.write_text(json.dumps({"max_jobs": 2}))
    monkeypatch.setenv("OCT_MCP_SAFE_MODE", "1")

    code, out, _ = _run(
        capsys, "doctor", "--project-root", str(project), "--config", str(config_file), "--profile", "strict"
    )

    assert code == EXIT_OK
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    assert lines["max_jobs"][1:] == ["2", "file"]
    assert lines["safe_mode"][1:] == ["True", "env"]
    assert lines["profile"][1:] == ["'strict'", "cli"]
    assert lines["timeout_default_seconds"][1:] == ["60", "default"]
    assert "chain, outermost first: audit > gateway > validator > policy > safety > redactor > sandbox" in out
    assert "oct_read_file" in lines
    assert "bubblewrap" in lines


def test_call_prints_the_tool_text_and_exits_0(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        capsys,
        "call",
        "oct_read_file",
        "--project-root",
        str(project),
        "--config",
        str(config_file),
        "--json",
        '{"path": "README.md", "end_line": 1}',
    )

    assert code == EXIT_OK
    assert out == "# Demo\n"
    assert err == ""


def test_call_with_output_json_prints_the_structured_result_alone(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        capsys,
        "call",
        "oct_read_file",
        "--project-root",
        str(project),
        "--config",
        str(config_file),
        "--json",
        '{"path": "README.md", "end_line": 1}',
        "--output",
        "json",
    )

    assert code == EXIT_OK
    assert json.loads(out) == {
        "path": "README.md",
        "text": "# Demo\n",
        "start_line": 1,
        "end_line": 1,
        "total_lines": 4,
    }
    assert err == ""


def test_call_refused_exits_1_with_the_code(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(
        capsys,
        "call",
        "oct_read_file",
        "--project-root",
        str(project),
        "--config",
        str(config_file),
        "--json",
        '{"path": "../outside.txt"}',
    )

    assert code == EXIT_FAILED
    assert out == ""
    assert err.startswith("[path_refused] ")


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]"])
def test_call_with_bad_json_exits_2(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str], arguments: str
) -> None:
    code, out, _ = _run(
        capsys,
        "call",
        "oct_read_file",
        "--project-root",
        str(project),
        "--config",
        str(config_file),
        "--json",
        arguments,
    )

    assert code == EXIT_USAGE
    assert out == ""


def test_python_dash_m_is_the_same_program(project: Path) -> None:
    import subprocess

    completed = subprocess.run(
        [sys.executable, "-m", "oct_mcp", "--version"],
        capture_output=True,
        text=True,
        check=False,
        cwd=project,
    )

    assert completed.returncode == 0
    assert completed.stdout.startswith("oct-mcp ")


def _audited_config(tmp_path: Path, audit_log: Path) -> Path:
    config = tmp_path / "audited.json"
    config.write_text(json.dumps({"audit_log_path": str(audit_log)}))
    return config


def _read_readme(capsys: pytest.CaptureFixture[str], project: Path, config: Path, path: str) -> None:
    _run(
        capsys,
        "call",
        "oct_read_file",
        "--project-root",
        str(project),
        "--config",
        str(config),
        "--json",
        json.dumps({"path": path}),
    )


def test_audit_verify_checks_the_configured_log_and_exits_0_when_intact(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audit_log = tmp_path / "logs" / "audit.log"
    config = _audited_config(tmp_path, audit_log)
    for path in ("README.md", "../outside.txt", "README.md"):
        _read_readme(capsys, project, config, path)

    code, out, _ = _run(capsys, "audit", "verify", "--config", str(config))

    assert code == EXIT_OK
    assert out == f"intact: 3 records in 1 file(s), from {audit_log}\n"


def test_audit_verify_names_the_file_and_line_where_the_chain_breaks_and_exits_1(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audit_log = tmp_path / "audit.log"
    config = _audited_config(tmp_path, audit_log)
    for _ in range(4):
        _read_readme(capsys, project, config, "README.md")
    lines = audit_log.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"outcome":"ok"', '"outcome":"error"')
    audit_log.write_text("".join(lines))

    code, out, _ = _run(capsys, "audit", "verify", str(audit_log))

    assert code == EXIT_FAILED
    assert out.splitlines()[0].startswith(f"broken: {audit_log}:2: changed:")
    assert out.splitlines()[1] == "1 break(s) in 4 records, 1 file(s)"


def test_audit_verify_of_a_log_that_does_not_exist_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "audit", "verify", str(tmp_path / "none.log"))

    assert code == EXIT_USAGE
    assert out == ""
    assert "no audit log at" in err


def test_audit_verify_says_when_older_records_were_rotated_away(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from oct_mcp.audit import AuditWriter

    audit_log = tmp_path / "audit.log"
    writer = AuditWriter(audit_log, max_bytes=500, max_files=1)
    for index in range(20):
        writer.write({"tool": "oct_read_file", "outcome": "ok", "index": index})

    code, out, _ = _run(capsys, "audit", "verify", str(audit_log))

    assert code == EXIT_OK
    assert "those before it were rotated away" in out


def test_audit_tail_shows_the_last_records_one_line_each(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audit_log = tmp_path / "audit.log"
    config = _audited_config(tmp_path, audit_log)
    for path in ("README.md", "README.md", "../outside.txt"):
        _read_readme(capsys, project, config, path)

    code, out, _ = _run(capsys, "audit", "tail", "-n", "2", "--config", str(config))

    assert code == EXIT_OK
    assert [line.split()[1:4] for line in out.splitlines()] == [
        ["oct_read_file", "ok", "-"],
        ["oct_read_file", "refused", "path_refused"],
    ]


def test_doctor_shows_where_the_audit_goes_and_whether_it_is_writable(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    writable = _audited_config(tmp_path, tmp_path / "logs" / "audit.log")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    (tmp_path / "blocked").mkdir()
    blocked = _audited_config(tmp_path / "blocked", blocker / "audit.log")

    _, good, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(writable))
    _, bad, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(blocked))

    assert f"audit: {tmp_path / 'logs' / 'audit.log'}: writable\n" in good
    assert f"audit: {blocker / 'audit.log'}: failing ({blocker} is not a directory)\n" in bad


def test_doctor_says_when_the_profile_has_no_audit_layer(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profiles = {"quiet": {"layers": ["gateway", "validator", "sandbox"]}}
    config_file.write_text(json.dumps({"profile": "quiet", "profiles": profiles}))

    _, out, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(config_file))

    assert "audit: off: the profile has no audit layer" in out


def test_doctor_says_which_caps_hold_over_a_command_run(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(config_file))

    (line,) = [line for line in out.splitlines() if line.startswith("run limits: ")]
    if delegated_cgroup() is not None:
        assert line.startswith("run limits: a cgroup per run under ")
    elif os.geteuid() != 0:
        assert "RLIMIT_NPROC lets a run add" in line
    else:
        assert "no process cap: RLIMIT_NPROC does not bind root" in line


def test_doctor_says_whether_searches_get_a_screening_helper_started_for_real(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, out, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(config_file))
    monkeypatch.setattr(sys, "executable", str(project / "no-such-python"))
    _, without, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(config_file))

    (line,) = [line for line in out.splitlines() if line.startswith("search: ")]
    (failed,) = [line for line in without.splitlines() if line.startswith("search: ")]
    if len(os.sched_getaffinity(0)) >= 2:
        assert line.startswith("search: a screening helper process beside the server (")
        assert failed.startswith("search: in the server alone: the screening helper did not start (")
    else:
        assert (
            line
            == failed
            == "search: in the server alone: one usable core, where a helper only takes turns with it"
        )


def test_doctor_shows_the_landlock_abi_and_each_guarantee_met_or_missed(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from oct_mcp.backends.landlock import landlock_support
    from oct_mcp.backends.loopback import loopback_support

    _, out, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(config_file))

    support = landlock_support()
    section = out.split("landlock guarantees:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    rows = {line.split()[0]: " ".join(line.split()[1:]) for line in section}
    assert rows["ABI"] == (str(support.abi) if support.problem is None else f"none: {support.problem}")
    for guarantee in ("no_network", "reads_confined", "writes_confined"):
        reason = support.missing().get(guarantee)
        assert rows[guarantee] == ("met" if reason is None else f"missed: {reason}")
    assert rows["loopback"].split(":")[0] == (
        "supervised" if support.seccomp and loopback_support() is None else "refused"
    )
    assert "allow_unconfined_project_code is on" not in out


@pytest.mark.parametrize(
    ("backend", "shows"),
    [
        ("bubblewrap", "runs read a masked, read-only copy of each project file a read shows masked"),
        ("landlock", "runs cannot read the project files a read shows masked: permission denied"),
        ("native", "runs read the project files a read shows masked as they are: the native backend"),
    ],
)
def test_doctor_says_what_command_runs_see_of_the_files_a_read_shows_masked(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str], backend: str, shows: str
) -> None:
    usable_backend(backend)
    config_file.write_text(json.dumps({"sandbox_backend": backend, "allow_unconfined_project_code": True}))

    _, out, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(config_file))

    (line,) = [line for line in out.splitlines() if line.startswith("secret files: ")]
    assert line.startswith(f"secret files: {shows}")


def test_doctor_says_when_a_profile_shows_runs_the_real_files(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    default = shipped_profile("default")
    profile = {"layers": list(default.layers), "settings": {"sandbox": {"show_secrets_to_runs": True}}}
    config_file.write_text(json.dumps({"profile": "open", "profiles": {"open": profile}}))

    _, out, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(config_file))

    assert "secret files: runs read the project files a read shows masked as they are " in out


def test_doctor_warns_when_unconfined_project_code_is_allowed(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file.write_text(json.dumps({"allow_unconfined_project_code": True}))

    _, out, _ = _run(capsys, "doctor", "--project-root", str(project), "--config", str(config_file))

    assert "WARNING: allow_unconfined_project_code is on" in out


def _serve(cwd: Path, config_file: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    """`python -m oct_mcp` started in `cwd`, as a host would, with stdin closed at once."""
    command = [sys.executable, "-m", "oct_mcp", "--config", str(config_file), *extra]
    return subprocess.run(command, cwd=cwd, input=b"", capture_output=True, timeout=60, check=False)


@pytest.mark.parametrize("where", ["root", "home", "above home", "holds .ssh", "holds .gitconfig"])
def test_serving_a_broad_folder_as_the_root_is_refused_with_exit_code_3(
    where: str, isolated_home: Path, tmp_path: Path, config_file: Path
) -> None:
    folders = {
        "root": Path("/"),
        "home": isolated_home,
        "above home": isolated_home.parent,
        "holds .ssh": tmp_path / "user",
        "holds .gitconfig": tmp_path / "other",
    }
    (tmp_path / "user" / ".ssh").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / ".gitconfig").write_text("[user]\n\tname = x\n")

    implicit = _serve(folders[where], config_file)
    explicit = _serve(tmp_path, config_file, "--project-root", str(folders[where]))

    assert (implicit.returncode, implicit.stdout) == (EXIT_BROAD_ROOT, b"")
    assert (explicit.returncode, explicit.stdout) == (EXIT_BROAD_ROOT, b"")
    assert b"refusing to serve" in implicit.stderr
    assert b"no --project-root was given" in implicit.stderr
    assert b"--allow-broad-root" in explicit.stderr


def test_allow_broad_root_serves_the_home_folder(isolated_home: Path, config_file: Path) -> None:
    served = _serve(isolated_home, config_file, "--allow-broad-root")

    assert (served.returncode, served.stdout) == (EXIT_OK, b"")


def test_a_project_folder_is_served_from_its_own_working_directory(project: Path, config_file: Path) -> None:
    served = _serve(project, config_file)

    assert (served.returncode, served.stdout) == (EXIT_OK, b"")


def test_call_refuses_the_home_folder_but_doctor_describes_it(
    isolated_home: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(isolated_home)
    call = _run(capsys, "call", "oct_list_files", "--project-root", root, "--config", str(config_file))
    doctor = _run(capsys, "doctor", "--project-root", root, "--config", str(config_file))

    assert call[0] == EXIT_BROAD_ROOT
    assert doctor[0] == EXIT_OK
    assert "the project root is the home folder: served only with --allow-broad-root" in doctor[1]


def _with_checkpoints(config_file: Path) -> Path:
    store = config_file.parent / "checkpoints"
    config_file.write_text(
        json.dumps({"checkpoint_dir": str(store), "audit_log_path": str(config_file.parent / "audit.jsonl")})
    )
    return store


def test_checkpoints_lists_shows_and_undoes_a_change_from_the_command_line(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_checkpoints(config_file)
    where = ("--project-root", str(project), "--config", str(config_file))
    write = json.dumps({"path": "README.md", "content": "changed\n", "dry_run": False, "confirm": True})
    assert _run(capsys, "call", "oct_write_file", *where, "--json", write)[0] == EXIT_OK

    listed = _run(capsys, "checkpoints", "list", *where)
    shown = _run(capsys, "checkpoints", "show", "1", *where)
    asked = _run(capsys, "checkpoints", "undo", "1", *where)
    assert (project / "README.md").read_text() == "changed\n"
    undone = _run(capsys, "checkpoints", "undo", "1", "--yes", *where)
    missing = _run(capsys, "checkpoints", "show", "7", *where)

    assert listed[0] == EXIT_OK
    assert listed[1].splitlines()[1].endswith("oct_write_file: README.md (modified)  [undoable]")
    assert shown[0] == EXIT_OK
    assert "  README.md: modified\n" in shown[1]
    assert "-changed\n+# Demo\n" in shown[1]
    # Not at a terminal and without --yes: asked, as a client that cannot ask a human is.
    assert asked[0] == EXIT_FAILED
    assert asked[2].startswith("[oct-mcp requires_confirmation] oct_undo")
    assert undone[0] == EXIT_OK
    assert (project / "README.md").read_text() == "# Demo\n\nline 3\nline 4\n"
    assert missing[0] == EXIT_FAILED
    assert missing[1].startswith("no checkpoint 7")


def _read_until(controller: int, marker: bytes | None) -> bytes:
    """What the terminal shows until `marker` (None: until the program closes it), a minute at most."""
    import select

    seen = b""
    while marker is None or marker not in seen:
        ready, _, _ = select.select([controller], [], [], 60)
        assert ready, f"the terminal showed nothing more after {seen[-200:]!r}"
        try:
            chunk = os.read(controller, 65_536)
        except OSError:  # EIO: every process holding the terminal closed it
            break
        if not chunk:
            break
        seen += chunk
    return seen


@pytest.mark.parametrize(("answer", "undone"), [("y", True), ("n", False)])
def test_checkpoints_undo_at_a_terminal_shows_the_diff_and_asks(
    project: Path, config_file: Path, answer: str, undone: bool
) -> None:
    import pty

    _with_checkpoints(config_file)
    where = ["--project-root", str(project), "--config", str(config_file)]
    write = json.dumps({"path": "README.md", "content": "changed\n", "dry_run": False, "confirm": True})
    command = [sys.executable, "-m", "oct_mcp"]
    subprocess.run(
        [*command, "call", "oct_write_file", *where, "--json", write], check=True, capture_output=True
    )
    controller, terminal = pty.openpty()
    # The terminal is the person's: the question, the prompt (input() writes it to stdout) and the answer.
    with subprocess.Popen(
        [*command, "checkpoints", "undo", "1", *where], stdin=terminal, stdout=terminal, stderr=terminal
    ) as undo:
        os.close(terminal)
        shown = _read_until(controller, b"[y/N]")
        os.write(controller, f"{answer}\n".encode())
        out = _read_until(controller, None)
        undo.wait(timeout=60)
    os.close(controller)

    assert b"README.md: restore, +4 -1" in shown
    assert b"-changed\r\n+# Demo\r\n" in shown
    assert (project / "README.md").read_text() == ("# Demo\n\nline 3\nline 4\n" if undone else "changed\n")
    assert (undo.returncode == EXIT_OK) is undone
    assert (b"undid checkpoint(s) 1" in out) is undone


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_client_that_cannot_ask_gets_a_dry_run_at_once_and_is_told_truly_a_write_changes_files(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str], dry_run: bool
) -> None:
    write = json.dumps({"path": "README.md", "content": "changed\n", "dry_run": dry_run})

    code, out, err = _run(
        capsys,
        "call",
        "oct_write_file",
        "--project-root",
        str(project),
        "--config",
        str(config_file),
        "--json",
        write,
    )

    if dry_run:
        assert (code, err) == (EXIT_OK, "")
        assert "+changed" in out
    else:
        assert code == EXIT_FAILED
        assert err.startswith("[oct-mcp requires_confirmation] oct_write_file")
        assert "would change files in the project" in err
        assert "Dry run: no, the changes are made." in err
    assert (project / "README.md").read_text() == "# Demo\n\nline 3\nline 4\n"


def test_doctor_says_the_git_tools_run_the_servers_git_under_the_sandbox(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = _run(capsys, "doctor", "--project-root", str(project), "--config", str(config_file))

    git_rows = [line for line in out.splitlines() if line.strip().startswith("oct_git_")]
    assert code == EXIT_OK
    assert len(git_rows) == 10
    assert all("under the sandbox" in row and "in-process" not in row for row in git_rows)


def test_tools_lists_the_profiles_tools_and_shows_one_tools_arguments(
    project: Path, config_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ("--project-root", str(project), "--config", str(config_file))

    listed = _run(capsys, "tools", *where)
    strict = _run(capsys, "tools", *where, "--profile", "strict")
    shown = _run(capsys, "tools", "oct_read_file", *where)
    unknown = _run(capsys, "tools", "oct_shell", *where)

    assert listed[0] == EXIT_OK
    rows = listed[1].splitlines()
    assert rows[0].split()[:2] == ["oct_read_file", "read"]
    assert rows[-1] == "29 tools in profile default; oct-mcp tools NAME shows one"
    assert strict[1].splitlines()[-1].endswith("tools in profile strict; oct-mcp tools NAME shows one")
    assert shown[0] == EXIT_OK
    assert "  path (string, required)\n" in shown[1]
    assert "  start_line (integer or null, default null)\n" in shown[1]
    assert shown[1].endswith("""try: oct-mcp call oct_read_file --json '{"path": "..."}'\n""")
    assert unknown[0] == EXIT_USAGE
    assert "no tool 'oct_shell' in profile default" in unknown[2]
