"""What the guarded-host tests share: the audit log and the config of a guarded host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def audit_log(tmp_path: Path) -> Path:
    return tmp_path / "audit" / "audit.log"


@pytest.fixture
def config(tmp_path: Path, audit_log: Path) -> Path:
    path = tmp_path / "config.json"
    # A host's tools have no dry run: a confirmed call runs (the default, a dry run, is refused).
    settings = {
        "audit_log_path": str(audit_log),
        "rate_limit_per_minute": 1000,
        "dry_run_default_for_writes": False,
    }
    path.write_text(json.dumps(settings))
    return path
