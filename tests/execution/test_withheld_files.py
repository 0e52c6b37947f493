"""Which project entries a run is kept from for the rules: found as the secret files are."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from pathlib import Path

from oct_mcp.execution.withheld_files import withheld_entries


class _Names:
    """Hides the names matching one glob, wherever they are (a rule over `*.pem`)."""

    def __init__(self, glob: str) -> None:
        self.glob = glob

    def hides(self, path: str) -> bool:
        return fnmatch.fnmatch(path.rsplit("/", 1)[-1], self.glob)

    def hidden_among(self, prefix: str, names: Sequence[str]) -> list[int]:
        return [index for index, name in enumerate(names) if self.hides(prefix + name)]

    def git_exclusions(self) -> tuple[str, ...]:
        return ()


def test_a_folder_is_kept_once_and_installed_packages_and_git_objects_are_not_looked_into(
    tmp_path: Path,
) -> None:
    (tmp_path / "keys" / "deep").mkdir(parents=True)
    (tmp_path / "keys" / "deep" / "server.pem").write_text("key\n")
    (tmp_path / "secret.pem").mkdir()  # a folder the glob names: kept whole
    (tmp_path / "secret.pem" / "inside.pem").write_text("key\n")
    (tmp_path / ".venv" / "lib" / "certifi").mkdir(parents=True)
    (tmp_path / ".venv" / "lib" / "certifi" / "cacert.pem").write_text("public CAs\n")
    (tmp_path / ".venv" / "client.pem").write_text("the venv's own file\n")
    (tmp_path / ".git" / "objects" / "ab").mkdir(parents=True)
    (tmp_path / ".git" / "objects" / "ab" / "x.pem").write_text("zlib\n")
    (tmp_path / "alias.pem").symlink_to(tmp_path / "keys" / "deep" / "server.pem")

    found = withheld_entries(tmp_path, _Names("*.pem"))

    assert found == (
        tmp_path / ".venv" / "client.pem",
        tmp_path / "keys" / "deep" / "server.pem",
        tmp_path / "secret.pem",
    )
