"""The transports that carry MCP to the chain: streamable HTTP (stdio lives in `server.py`)."""
