"""`python -m oct_mcp` is the `oct-mcp` command."""

from oct_mcp.cli import main

raise SystemExit(main())
