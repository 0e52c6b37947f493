"""What a program needs outside the project, shown read-only: Python installs, never what the project names.

Nothing the project holds decides a bind: its `pyvenv.cfg` is never read, and a program or
interpreter link inside the project counts only where its real target (the resolved path)
lies in a real Python install (a standard library, or a venv) outside the project. Every
folder is checked by where it really is: never `/`, the home folder or one above it, a
folder of secrets in the home folder, `/proc`, `/sys`, `/run` or `/dev`, nor one writable by
all or owned by another user.

Why a Python install and not a search for sockets: a venv holds tens of thousands of files,
too many to walk on every run, a bounded walk misses what lies past its bound, and a socket
made after the walk is not seen; a Python install is recognised by a few fixed names.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Final

from oct_mcp.errors import InstallRefusedError

__all__ = ["install_roots", "is_inside", "tool_path_dirs"]

_SHEBANG_LIMIT: Final = 512
_LIB_ENTRIES_MAX: Final = 256
# What an interpreter reads of its install: its programs, its standard library and site-packages,
# its headers (for builds), and a venv's config.
_INSTALL_PARTS: Final = ("bin", "include", "lib", "lib64", "pyvenv.cfg")
# Already visible in every sandbox, read-only.
_SYSTEM: Final = (Path("/usr"), Path("/bin"), Path("/sbin"), Path("/lib"), Path("/lib64"))
# Kernel and runtime state: processes, devices, sockets of host services.
_NEVER: Final = (Path("/proc"), Path("/sys"), Path("/run"), Path("/dev"))
_SECRET_HOME_FOLDERS: Final = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".password-store",
    ".config",
)
_HOW_TO_FIX: Final = (
    "recreate the project's venv from a Python installed outside the project "
    "(python3 -m venv .venv), or install the tool on the server's PATH"
)


def is_inside(path: Path, project: Path) -> bool:
    """Whether `path` lies inside the project, by its path as given or where its links lead."""
    lexical = Path(os.path.normpath(path))
    return lexical.is_relative_to(project) or Path(os.path.realpath(path)).is_relative_to(
        os.path.realpath(project)
    )


def install_roots(executable: Path, project: Path) -> tuple[Path, ...]:
    """What a program needs to read outside the project to run: its install and its interpreter's.

    A Python install (a venv, or a standard library) is shown whole; a program of the
    server's own PATH that sits in no Python install is shown alone (the file, not its folder).
    A program inside the project is project code: what it leads to outside the project (its
    interpreter link, its `#!` line) is shown only when it is a real Python install.

    Raises:
        InstallRefusedError: A program (or its interpreter) leads somewhere the sandbox must
            not show: the run is refused rather than started without it.
    """
    project = Path(os.path.realpath(project))
    roots: list[Path] = []
    from_project = is_inside(executable, project)
    _add_program(executable, project, from_project=from_project, roots=roots)
    interpreter = _shebang_interpreter(executable)
    if interpreter is not None:
        # A project program's `#!` line is project content: it is trusted no more than the program.
        _add_program(interpreter, project, from_project=from_project, roots=roots)
    return tuple(roots)


def tool_path_dirs(executable: Path, project: Path, roots: tuple[Path, ...]) -> list[str]:
    """The program's venv `bin` first on PATH where the sandbox shows it: what it spawns comes from there."""
    folder = Path(os.path.normpath(executable)).parent
    if not (folder.parent / "pyvenv.cfg").is_file():
        return []
    visible = folder.is_relative_to(project) or any(folder.is_relative_to(root) for root in roots)
    return [str(folder)] if visible else []


def _add_program(program: Path, project: Path, *, from_project: bool, roots: list[Path]) -> None:
    lexical = Path(os.path.normpath(program))
    real = Path(os.path.realpath(program))
    if real.is_relative_to(project) or _is_system(real):
        return
    installs = [real.parent.parent]
    if not from_project and not lexical.is_relative_to(project) and not _is_system(lexical):
        installs.insert(0, lexical.parent.parent)
    covered = False
    for install in installs:
        if _is_python_install(install) and _may_show(install):
            for shown in _shown_parts(install, real, from_project=from_project):
                _append(roots, shown)
                covered = covered or real.is_relative_to(os.path.realpath(shown))
    if not covered:
        _add_lone_program(real, from_project=from_project, roots=roots)
    if not from_project and lexical != real and not _is_system(lexical):
        # The path the command names must be there too (a link on PATH into a venv, say).
        _append(roots, lexical)


def _shown_parts(install: Path, program: Path, *, from_project: bool) -> tuple[Path, ...]:
    """What of a Python install a run is shown: the whole install, or for a link from the project its parts.

    A link in the project chooses which install it leads to, and a folder that merely looks like
    one (a venv made in place in another project, `python -m venv .`) holds other files too: only
    the parts an interpreter reads are shown then, each inside the install where it really is.
    The server's own install is shown whole, as it is the one the server itself runs from.
    """
    real_install = Path(os.path.realpath(install))
    if not from_project or real_install in _server_prefixes():
        return (install,)
    names = sorted({*_INSTALL_PARTS, program.parent.name})
    parts = [install / name for name in names if os.path.lexists(install / name)]
    return tuple(part for part in parts if Path(os.path.realpath(part)).is_relative_to(real_install))


def _add_lone_program(real: Path, *, from_project: bool, roots: list[Path]) -> None:
    if from_project:
        raise InstallRefusedError(
            "a program inside the project leads outside it to something that is not a Python "
            f"install the sandbox may show; nothing ran: {_HOW_TO_FIX}"
        )
    if not _may_show(real):
        raise InstallRefusedError(
            "the tool's program lies where the sandbox shows nothing (the home folder, a folder "
            "of secrets, /proc, /sys, /run or /dev); nothing ran: install it elsewhere on PATH"
        )
    # A lone program of the server's own PATH (a static binary): the file, never its folder.
    _append(roots, real)


def _append(roots: list[Path], path: Path) -> None:
    if path not in roots and not any(path.is_relative_to(root) for root in roots if root.is_dir()):
        roots.append(path)


def _is_system(path: Path) -> bool:
    return any(path.is_relative_to(system) for system in _SYSTEM)


def _homes() -> set[Path]:
    homes = {Path(os.path.realpath(Path.home()))}
    try:
        import pwd

        homes.add(Path(os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)))
    except (ImportError, KeyError):  # pragma: no cover - no password entry for this user
        pass
    return homes


def _may_show(path: Path) -> bool:
    """Whether the sandbox may show `path`, judged by where it really is and who may change it.

    Only root's or the server user's own, and not writable by all: a shared folder such as
    `/tmp` holds other users' sockets, and anyone could plant a Python install in it.
    """
    real = Path(os.path.realpath(path))
    if real == Path("/") or any(real.is_relative_to(never) for never in _NEVER):
        return False
    try:
        info = real.stat()
    except OSError:
        return False
    if info.st_uid not in (0, os.getuid()) or info.st_mode & stat.S_IWOTH:
        return False
    for home in _homes():
        if home.is_relative_to(real):
            return False
        if any(real.is_relative_to(home / secret) for secret in _SECRET_HOME_FOLDERS):
            return False
    return True


def _server_prefixes() -> set[Path]:
    return {
        Path(os.path.realpath(prefix))
        for prefix in (sys.prefix, sys.base_prefix, Path(os.path.realpath(sys.executable)).parent.parent)
    }


def _is_python_install(folder: Path) -> bool:
    """A venv (its `pyvenv.cfg` and `bin/python`), a Python with its standard library, or the server's own."""
    if Path(os.path.realpath(folder)) in _server_prefixes():
        return True
    if (folder / "pyvenv.cfg").is_file() and any(
        (folder / "bin" / name).is_file() for name in ("python", "python3")
    ):
        return True
    try:
        with os.scandir(folder / "lib") as entries:
            for count, entry in enumerate(entries):
                if count >= _LIB_ENTRIES_MAX:
                    break
                if entry.name.startswith("python3") and (Path(entry.path) / "os.py").is_file():
                    return True
    except OSError:
        return False
    return False


def _shebang_interpreter(executable: Path) -> Path | None:
    """A script's interpreter (`#!/path/to/python`), which the sandbox must see too."""
    try:
        # Non-blocking and regular files only: a program that is a FIFO must not hang the server.
        descriptor = os.open(executable, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        first = os.read(descriptor, _SHEBANG_LIMIT).split(b"\n", 1)[0]
    except OSError:
        return None
    finally:
        os.close(descriptor)
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].decode(errors="replace").split()
    if not parts or not parts[0].startswith("/"):
        return None
    return Path(parts[0])
