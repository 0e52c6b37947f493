"""The git tools: reading (`status`, `diff`, `log`, `history`) and writing (`write`), on git as
`runner` runs it."""
