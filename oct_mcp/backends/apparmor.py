"""Telling a bubblewrap that AppArmor blocks (Ubuntu 24.04+) from one that cannot work; the one-time fix."""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["RESTRICT_SYSCTL", "apparmor_profile_command", "blocked_by_apparmor"]

RESTRICT_SYSCTL: Final = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
"""1 where AppArmor lets only programs whose profile says `userns` create user namespaces."""
# What bwrap prints when it may not create or use its user namespace (the uid map, then lo in
# the network namespace it cannot configure without the capabilities the namespace would give).
_BLOCKED: Final = (
    "setting up uid map: Permission denied",
    "loopback: Failed RTM_NEWADDR",
    "Creating new namespace failed: Permission denied",
)


def blocked_by_apparmor(probe_error: str, sysctl: Path = RESTRICT_SYSCTL) -> bool:
    """Whether bubblewrap's probe failed the way AppArmor's user-namespace restriction makes it fail.

    Both must hold: the probe's error is one bwrap prints when it may not use a user namespace,
    and the kernel's `apparmor_restrict_unprivileged_userns` is on.

    Args:
        probe_error: What the bubblewrap probe reported.
        sysctl: The restriction's sysctl file.
    """
    if not any(marker in probe_error for marker in _BLOCKED):
        return False
    try:
        return sysctl.read_text().strip() == "1"
    except OSError:
        return False  # no such restriction on this kernel: something else blocks it


def apparmor_profile_command(executable: str) -> str:
    """The one-time commands, as Ubuntu documents them, that give `executable` an AppArmor profile
    allowing user namespaces (`userns`), and load it."""
    return (
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
    )
