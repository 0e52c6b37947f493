"""The standalone bundle verifier refuses what is no bundle with exit 2 and a reason, not a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import oct_mcp.audit.verify_bundle as verifier

pytestmark = pytest.mark.e2e


def _run(tmp_path: Path, content: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "bundle.json").write_text(content)
    return subprocess.run(
        [sys.executable, "-I", verifier.__file__, "bundle.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[1, 2]",
        json.dumps({"format": "something else"}),
        json.dumps({"format": verifier.BUNDLE_FORMAT, "public_key": "not a key", "records": ["{}"]}),
    ],
)
def test_what_is_no_bundle_exits_2_with_a_reason(tmp_path: Path, content: str) -> None:
    run = _run(tmp_path, content)
    assert run.returncode == verifier.EXIT_USAGE
    assert run.stderr.startswith("verify_bundle: cannot check bundle.json:")
    assert "Traceback" not in run.stderr


def test_the_verifier_imports_nothing_of_oct_mcp() -> None:
    source = Path(verifier.__file__).read_text()
    assert "oct_mcp" not in "\n".join(
        line for line in source.splitlines() if line.startswith(("import ", "from "))
    )
