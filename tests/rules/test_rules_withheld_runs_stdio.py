"""A path a deny rule covers is kept from the runs of project code too, over stdio: a test, a task or
`python -c` opens it no more than a read tool shows it, on each backend that confines reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from clients import model_view, oct_server
from git_repos import git
from mcp import Client
from optional import usable_backend

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BACKENDS = ("bubblewrap", "landlock")
MARKER = "WITHHELD-RUN-MARKER-4K"
DENY = {
    "name": "no-prod",
    "effect": "deny",
    "when": {"paths": ["config/prod.yaml", "private/"]},
    "reason": "production settings stay out of the model's reach",
}
PROBE = """
import subprocess
for path in ("config/prod.yaml", "private/deep/key.txt", "config/dev.yaml", "alias.yaml"):
    try:
        print(path, "READ", repr(open(path).read()))
    except OSError as exc:
        print(path, "REFUSED", type(exc).__name__)
shown = subprocess.run(["git", "show", "HEAD:config/prod.yaml"], capture_output=True, text=True)
print("git show", "READ" if shown.returncode == 0 else "FAILED", repr(shown.stdout))
"""


def _project(where: Path) -> Path:
    """Settings of two kinds, a private folder, a link to the denied file, all committed."""
    root = where.resolve() / "project"
    (root / "config").mkdir(parents=True)
    (root / "config" / "prod.yaml").write_text(f"db: {MARKER}\n")
    (root / "config" / "dev.yaml").write_text("db: local\n")
    (root / "private" / "deep").mkdir(parents=True)
    (root / "private" / "deep" / "key.txt").write_text(f"{MARKER}\n")
    (root / "alias.yaml").symlink_to(root / "config" / "prod.yaml")
    (root / "probe.py").write_text(PROBE)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    git(root, "init", "-q")
    git(root, "add", "config", "private", "probe.py")
    git(root, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "settings")
    return root


def _config(config_file: Path, tmp_path: Path, backend: str, rules: list[dict[str, Any]]) -> None:
    config = {"sandbox_backend": backend, "audit_log_path": str(tmp_path / "audit.log"), "rules": rules}
    config_file.write_text(json.dumps(config))


async def _run_probe(project: Path, config_file: Path) -> tuple[str, str]:
    """The probe's output, and everything the model is shown of the call."""
    with anyio.fail_after(180):
        async with Client(oct_server(project, config_file)) as client:
            result = await client.call_tool("oct_run", {"argv": ["python", "probe.py"]})
    view = model_view(result)
    assert result.is_error is not True, view
    assert result.structured_content is not None
    return result.structured_content["stdout"], view


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_run_opens_no_path_a_deny_rule_covers(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path)
    _config(config_file, tmp_path, backend, [DENY])

    stdout, view = await _run_probe(project, config_file)

    assert MARKER not in view
    assert "config/dev.yaml READ 'db: local\\n'" in stdout
    for denied in ("config/prod.yaml", "private/deep/key.txt", "alias.yaml"):
        # landlock refuses the file and anything below the folder; bubblewrap covers the file with
        # an unopenable stand-in and the folder with an empty one.
        assert f"{denied} REFUSED" in stdout, stdout
    # git's history holds the file as it is: kept from the run too, and the result says so.
    assert "git show FAILED" in stdout
    how = ", a folder shows empty" if backend == "bubblewrap" else " (permission denied)"
    kept = "2 path(s) the rules withhold from this call were kept from the run: they cannot be opened there"
    assert f"{kept}{how}; git's" in view
    assert "git's objects (.git/objects) hold one of them" in view
    assert "prod.yaml" not in view.split("kept from the run")[-1]


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_rule_for_other_tools_keeps_nothing_from_a_run(
    tmp_path: Path, config_file: Path, backend: str
) -> None:
    usable_backend(backend)
    project = _project(tmp_path)
    _config(config_file, tmp_path, backend, [{**DENY, "tools": ["oct_read_file"]}])

    stdout, view = await _run_probe(project, config_file)

    assert f"config/prod.yaml READ 'db: {MARKER}\\n'" in stdout
    assert "git show READ" in stdout
    assert "withhold" not in view
