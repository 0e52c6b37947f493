"""doctor on a machine where AppArmor blocks bubblewrap: it says so and prints the one-time fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from oct_mcp.backends.bubblewrap import Bubblewrap
from oct_mcp.doctor import bubblewrap_advice

pytestmark = pytest.mark.e2e

# What bwrap prints on Ubuntu 24.04+ when AppArmor keeps it from its user namespace.
UID_MAP = "bwrap: setting up uid map: Permission denied"
LOOPBACK = "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"


def _fake_bwrap(tmp_path: Path, message: str) -> str:
    """A bwrap that fails as a blocked one does: the boundary is the program's own output."""
    program = tmp_path / "bin" / "bwrap"
    program.parent.mkdir()
    program.write_text(f"#!/bin/sh\necho '{message}' >&2\nexit 1\n")
    program.chmod(0o755)
    return str(program)


def _sysctl(tmp_path: Path, value: str) -> Path:
    path = tmp_path / "apparmor_restrict_unprivileged_userns"
    path.write_text(f"{value}\n")
    return path


def _probe_error(executable: str) -> str:
    backend = Bubblewrap()
    backend.executable = executable  # the probe runs this program as it runs the real one
    availability = backend.probe()
    assert availability.usable is False
    return availability.detail


@pytest.mark.parametrize("message", [UID_MAP, LOOPBACK])
def test_doctor_says_apparmor_blocks_bubblewrap_and_prints_the_profile_that_lets_it_run(
    tmp_path: Path, message: str
) -> None:
    executable = _fake_bwrap(tmp_path, message)
    advice = bubblewrap_advice(_probe_error(executable), executable, _sysctl(tmp_path, "1"))

    assert advice is not None
    assert advice.startswith("bubblewrap is installed but AppArmor blocks it")
    assert "kernel.apparmor_restrict_unprivileged_userns = 1" in advice
    command = advice.split("(Ubuntu's documented profile):\n", 1)[1]
    assert command == (
        "sudo tee /etc/apparmor.d/bwrap > /dev/null <<'EOF'\n"
        "abi <abi/4.0>,\n"
        "include <tunables/global>\n"
        "\n"
        f"profile bwrap {executable} flags=(unconfined) {{\n"
        "  userns,\n"
        "\n"
        "  # Site-specific additions and overrides. See local/README for details.\n"
        "  include if exists <local/bwrap>\n"
        "}\n"
        "EOF\n"
        "sudo apparmor_parser -r /etc/apparmor.d/bwrap\n"
        "then run `oct-mcp doctor` again: `auto` picks bubblewrap once its probe passes\n"
    )


@pytest.mark.parametrize("sysctl", ["0", None])
def test_doctor_blames_apparmor_only_where_its_restriction_is_on(tmp_path: Path, sysctl: str | None) -> None:
    executable = _fake_bwrap(tmp_path, UID_MAP)
    path = tmp_path / "absent" if sysctl is None else _sysctl(tmp_path, sysctl)

    assert bubblewrap_advice(_probe_error(executable), executable, path) is None


def test_doctor_blames_apparmor_only_for_the_errors_it_causes(tmp_path: Path) -> None:
    executable = _fake_bwrap(tmp_path, "bwrap: No space left on device")

    assert bubblewrap_advice(_probe_error(executable), executable, _sysctl(tmp_path, "1")) is None
