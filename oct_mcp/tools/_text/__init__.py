"""Text the tools share (private): lines, diffs and their hunks, patches, and the masks a secret
wears in what the model is shown."""
