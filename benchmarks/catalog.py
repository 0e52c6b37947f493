"""The size of tools/list, which a host puts in every turn of the model's context.

Measured as the JSON a host receives (no spaces), against the same catalog with pydantic's
generated schema titles left in. Goal: ratio <= 0.9. Sizes in characters; tokens are about a
quarter of that.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import mcp_types as types
from _common import arguments

from oct_mcp.app import build_app
from oct_mcp.server import _tool_listing
from oct_mcp.tools import default_catalog

GOAL = 0.9


def size(tools: list[types.Tool]) -> int:
    document = types.ListToolsResult(tools=tools).model_dump(mode="json", by_alias=True, exclude_none=True)
    return len(json.dumps(document, separators=(",", ":")))


def with_titles(tool: types.Tool, spec: Any) -> types.Tool:
    output = spec.output.model_json_schema() if spec.output is not None else None
    return tool.model_copy(update={"input_schema": spec.params.model_json_schema(), "output_schema": output})


def main() -> None:
    options = arguments(__doc__ or "", default_rounds=1)
    specs = list(default_catalog().values())
    # The listing a server with the default config sends: `confirm` where a call may need consent.
    with tempfile.TemporaryDirectory() as temp:
        config = Path(temp, "config.json")
        config.write_text(json.dumps({"audit_log_path": str(Path(temp, "audit.log"))}))
        app = build_app(temp, config_path=config, environ={})
        takes_confirm = [app.chain.takes_confirm(spec) for spec in specs]
        app.close()
    compact = [
        _tool_listing(spec, takes_confirm=confirm) for spec, confirm in zip(specs, takes_confirm, strict=True)
    ]
    titled = [with_titles(tool, spec) for tool, spec in zip(compact, specs, strict=True)]
    subject, reference = size(compact), size(titled)
    ratio = subject / reference
    print(f"rounds: {options.rounds}, tools: {len(specs)}")
    print("| claim | subject | reference | ratio | goal | |")
    print("|---|---|---|---|---|---|")
    verdict = "met" if ratio <= GOAL else "MISSED"
    print(f"| tools/list, characters | {subject} | {reference} | {ratio:.3f} | <= {GOAL} | {verdict} |")
    for tool in compact:
        print(f"| {tool.name} | {size([tool])} | | | | |")


if __name__ == "__main__":
    main()
