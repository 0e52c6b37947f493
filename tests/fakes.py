"""A write tool for tests; RecordingNext and make_context come from the testing kit the package ships."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

from oct_mcp.spec import InProcessPlan, ProjectPath, Risk, ToolEnv, ToolSpec
from oct_mcp.testing import TEST_CLIENT, RecordingNext, make_context
from oct_mcp.tools import default_catalog
from oct_mcp.types import ToolResult


class WriteFileParams(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    path: ProjectPath
    content: Annotated[str, StringConstraints(max_length=65_536)] = ""
    dry_run: bool | None = None


def _write_file(params: WriteFileParams, env: ToolEnv) -> InProcessPlan:
    def write() -> ToolResult:
        target = env.workspace.contain(params.path)
        # Its own dry_run field when given, else the gate's decision.
        if params.dry_run if params.dry_run is not None else env.dry_run:
            return ToolResult(text=f"would write {env.workspace.relative(target)}")
        target.write_text(params.content)
        return ToolResult(text=f"wrote {env.workspace.relative(target)}")

    return InProcessPlan(write)


WRITE_TOOL = ToolSpec(
    name="test_write_file",
    title="Write a file (tests only)",
    description="A write tool for tests, until the catalog has its own.",
    params=WriteFileParams,
    output=None,
    risk=Risk.WRITE,
    plan=_write_file,
    idempotent=False,
)


def catalog_with_write_tool() -> dict[str, ToolSpec]:
    return {**default_catalog(), WRITE_TOOL.name: WRITE_TOOL}


__all__ = ["TEST_CLIENT", "WRITE_TOOL", "RecordingNext", "catalog_with_write_tool", "make_context"]
