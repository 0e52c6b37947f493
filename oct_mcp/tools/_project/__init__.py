"""The project as the tools see it (private): the walk, ignore rules, its programs and its task files."""
