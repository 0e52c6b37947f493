"""The layers of the chain, one module each; `oct_mcp.registry` is where profiles find them by name."""
