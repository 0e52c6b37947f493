"""The project entries a deny rule withholds from a run: kept from it as the files a read masks are.

A rule such as "never read `secrets/` or `*.pem`" refuses a call that names such a path and leaves
it out of every listing, search and git output; a run of project code (a test, a task, `python -c`)
would still open it. The run's backend keeps each entry found here from it, as it keeps the files
holding secrets without a masked copy: under landlock opening one fails with permission denied;
under bubblewrap a file is covered by a stand-in that cannot be opened, a folder by an empty one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from oct_mcp.base_types import WithheldPaths
from oct_mcp.workspace import ENVIRONMENT_FOLDERS

__all__ = ["withheld_entries"]


def withheld_entries(project: Path, withheld: WithheldPaths) -> tuple[Path, ...]:
    """The entries of `project` that `withheld` hides, a folder once (not what is under it).

    Walked as the search for files holding secrets walks: an environment folder's own entries are
    looked at, not the installed packages below them (a rule for `*.pem` would otherwise take
    certifi's CA bundle from every run), nor git's objects. A symlink is left where it is: the run
    reaches what it points at through the target's own name, kept from the run where a rule
    covers it. A folder that cannot be listed is not looked into.
    """
    found: list[Path] = []
    folders = [("", project, True)]
    while folders:
        prefix, folder, descend = folders.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue
        hidden = set(withheld.hidden_among(prefix, [entry.name for entry in entries]))
        for index, entry in enumerate(entries):
            if entry.is_symlink():
                continue
            if index in hidden:
                found.append(Path(entry.path))
            elif descend and entry.is_dir(follow_symlinks=False) and f"{prefix}{entry.name}" != _GIT_OBJECTS:
                below = entry.name not in ENVIRONMENT_FOLDERS
                folders.append((f"{prefix}{entry.name}/", Path(entry.path), below))
    return tuple(sorted(found))


_GIT_OBJECTS: Final = ".git/objects"
