"""The oct tool catalog: each tool a ToolSpec with its params model, risk and plan."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from oct_mcp.spec import ToolSpec
from oct_mcp.tools.edit.apply_patch import APPLY_PATCH
from oct_mcp.tools.edit.edit_strings import EDIT
from oct_mcp.tools.edit.moves import DELETE, MOVE
from oct_mcp.tools.edit.write_file import WRITE_FILE
from oct_mcp.tools.files import LIST_FILES, READ_FILE, READ_FILES
from oct_mcp.tools.git.diff import GIT_DIFF
from oct_mcp.tools.git.history import GIT_BLAME, GIT_SHOW
from oct_mcp.tools.git.log import GIT_LOG
from oct_mcp.tools.git.status import GIT_STATUS
from oct_mcp.tools.git.write.add import GIT_ADD
from oct_mcp.tools.git.write.branch import GIT_BRANCH
from oct_mcp.tools.git.write.commit import GIT_COMMIT
from oct_mcp.tools.git.write.restore import GIT_RESTORE
from oct_mcp.tools.git.write.switch import GIT_SWITCH
from oct_mcp.tools.grants import GRANTS
from oct_mcp.tools.python.format import FIX, FORMAT
from oct_mcp.tools.python.lint import LINT
from oct_mcp.tools.python.test import TEST
from oct_mcp.tools.python.typecheck import TYPECHECK
from oct_mcp.tools.run import RUN
from oct_mcp.tools.search import SEARCH
from oct_mcp.tools.tasks import LIST_TASKS
from oct_mcp.tools.undo import CHECKPOINTS, UNDO

__all__ = ["default_catalog"]


def default_catalog() -> Mapping[str, ToolSpec]:
    """Every tool this server offers, by name, in the order tools/list shows them."""
    specs = (
        READ_FILE,
        READ_FILES,
        LIST_FILES,
        SEARCH,
        LIST_TASKS,
        GIT_STATUS,
        GIT_DIFF,
        GIT_LOG,
        GIT_SHOW,
        GIT_BLAME,
        GIT_ADD,
        GIT_COMMIT,
        GIT_BRANCH,
        GIT_SWITCH,
        GIT_RESTORE,
        LINT,
        TEST,
        TYPECHECK,
        FORMAT,
        FIX,
        RUN,
        EDIT,
        WRITE_FILE,
        APPLY_PATCH,
        MOVE,
        DELETE,
        CHECKPOINTS,
        UNDO,
        GRANTS,
    )
    return MappingProxyType({spec.name: spec for spec in specs})
