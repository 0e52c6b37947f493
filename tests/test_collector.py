"""The collector held back while oct-mcp imports and builds itself, and given back as it was."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from oct_mcp.collector import collector_paused


def _fail_paused(inside: list[bool]) -> None:
    with collector_paused():
        inside.append(gc.isenabled())
        raise ImportError("a missing optional part")


@pytest.mark.parametrize("enabled", [True, False])
def test_the_callers_setting_comes_back_even_when_the_inside_fails(enabled: bool) -> None:
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        inside: list[bool] = []
        with pytest.raises(ImportError):
            _fail_paused(inside)
        assert inside == [False]
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_freezing_moves_what_was_built_out_of_later_collections() -> None:
    frozen_before = gc.get_freeze_count()
    try:
        with collector_paused(freeze=True):
            built = [[index] for index in range(1000)]

        assert gc.get_freeze_count() >= frozen_before + len(built)
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def _fresh(code: str) -> str:
    completed = subprocess.run(  # argv is a list, never a shell
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return completed.stdout.strip()


@pytest.mark.e2e
def test_importing_oct_mcp_leaves_an_embedders_collector_as_it_found_it() -> None:
    assert _fresh("import gc, oct_mcp.cli; print(gc.isenabled(), gc.get_freeze_count())") == "True 0"
    assert _fresh("import gc; gc.disable(); import oct_mcp; print(gc.isenabled())") == "False"


@pytest.mark.e2e
def test_the_shared_types_and_the_command_line_load_no_chain_until_asked() -> None:
    loaded = "import sys, {0}; print(sorted(m for m in sys.modules if m.startswith('oct_mcp')))"

    assert _fresh(loaded.format("oct_mcp.types")) == str(
        [
            "oct_mcp",
            "oct_mcp.base_types",
            "oct_mcp.collector",
            "oct_mcp.errors",
            "oct_mcp.lazy_names",
            "oct_mcp.types",
        ]
    )
    assert "oct_mcp.chain" not in _fresh(loaded.format("oct_mcp.cli"))
    # What the stdio server loads before it answers `initialize` (the rest loads on a worker thread).
    served = _fresh(loaded.format("oct_mcp.transports.stdio"))
    assert "oct_mcp.tools" not in served
    assert "oct_mcp.redaction" not in served
    assert "oct_mcp.chain" in _fresh(loaded.format("oct_mcp; oct_mcp.Chain"))


@pytest.mark.e2e
def test_the_server_and_its_pins_command_never_load_the_sdk_server_that_guard_wraps() -> None:
    loaded = "import sys, oct_mcp.cli; print('mcp.server.mcpserver' in sys.modules)"
    guarded = "from oct_mcp.embed import guard, ForeignTool; print(guard.__name__, ForeignTool.__name__)"

    assert _fresh(loaded) == "False"
    assert _fresh(guarded) == "guard ForeignTool"
    with pytest.raises(subprocess.CalledProcessError) as raised:
        _fresh("from oct_mcp.embed import nothing_of_that_name")
    assert "cannot import name 'nothing_of_that_name'" in raised.value.stderr
