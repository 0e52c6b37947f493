"""The size of tools/list, which a host puts in every turn of the model's context.

Measured as the JSON a client receives (no spaces) from a server with the default profile, through
the SDK's own client in both protocol eras, as a whole and as the part a model reads (each tool's
name, description and input schema; hosts keep output schemas and annotations for themselves).
The reference is the same catalog listed as the SDK would list it unshaped: pydantic's generated
schemas whole, every annotation, a title beside the annotations' own. Goal: the whole listing
under 20,000 characters, ratio <= 0.5. Sizes in characters; tokens are about a quarter of that.

Run: `python benchmarks/catalog.py` (add `--tools` for a row per tool).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from _common import arguments
from mcp import Client

from oct_mcp.app import build_app
from oct_mcp.server import build_server

GOAL = 0.5
BUDGET = 20_000
MODEL_VISIBLE = ("name", "description", "inputSchema")


def size(document: Any) -> int:
    return len(json.dumps(document, separators=(",", ":")))


def dumped(tools: list[types.Tool]) -> list[dict[str, Any]]:
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]


def model_visible(tools: list[dict[str, Any]]) -> int:
    return size({"tools": [{key: tool[key] for key in MODEL_VISIBLE if key in tool} for tool in tools]})


def unshaped(tool: types.Tool, app: Any) -> types.Tool:
    """`tool` as an SDK server lists it when handed the tool's models as they are."""
    spec = app.catalog[tool.name]
    output = spec.output.model_json_schema() if spec.output is not None else None
    schema = spec.params.model_json_schema()
    if "confirm" in tool.input_schema.get("properties", {}):
        confirm = {
            "type": "boolean",
            "default": False,
            "description": "Re-submit with true when the server asks for it.",
        }
        schema["properties"] = {**schema["properties"], "confirm": confirm}
    return tool.model_copy(
        update={
            "title": spec.title,
            "input_schema": schema,
            "output_schema": output,
            "annotations": types.ToolAnnotations.model_validate(spec.annotations),
        }
    )


async def listed(app: Any, mode: str) -> list[types.Tool]:
    async with Client(build_server(app, transport="memory"), mode=mode) as client:
        return list((await client.list_tools()).tools)


def main() -> None:
    per_tool = "--tools" in sys.argv
    if per_tool:
        sys.argv.remove("--tools")
    options = arguments(__doc__ or "", default_rounds=1)
    with tempfile.TemporaryDirectory() as temp:
        # A server with the default config: `confirm` listed where a call may need consent.
        config = Path(temp, "config.json")
        config.write_text(json.dumps({"audit_log_path": str(Path(temp, "audit.log"))}))
        app = build_app(temp, config_path=config, environ={})
        try:
            eras = {mode: anyio.run(listed, app, mode) for mode in ("legacy", "auto")}
            reference = dumped([unshaped(tool, app) for tool in eras["legacy"]])
        finally:
            app.close()
    print(f"rounds: {options.rounds}, tools: {len(eras['legacy'])}")
    print("| claim | subject | reference | ratio | goal | |")
    print("|---|---|---|---|---|---|")
    for mode, tools in eras.items():
        subject = dumped(tools)
        whole, visible = size({"tools": subject}), model_visible(subject)
        ratio = whole / size({"tools": reference})
        verdict = "met" if ratio <= GOAL and whole < BUDGET else "MISSED"
        print(
            f"| tools/list ({mode}), whole, characters | {whole} | {size({'tools': reference})} "
            f"| {ratio:.3f} | <= {GOAL}, < {BUDGET} | {verdict} |"
        )
        print(
            f"| tools/list ({mode}), model-visible, characters | {visible} | {model_visible(reference)} "
            f"| {visible / model_visible(reference):.3f} | | |"
        )
    if per_tool:
        for tool in dumped(eras["legacy"]):
            parts = ", ".join(f"{key} {size(value)}" for key, value in tool.items())
            print(f"| {tool['name']} | {size(tool)} | {parts} | | | |")


if __name__ == "__main__":
    main()
