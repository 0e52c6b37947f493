"""The git tools: reading (`read`, `history`) and writing (`write`), on git as `runner` runs it."""
