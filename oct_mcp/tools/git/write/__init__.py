"""oct_git_add, oct_git_commit, oct_git_branch, oct_git_switch, oct_git_restore: git writes, each shown first.

Each previews its change read-only (what would be staged, committed, switched or discarded, with
the diff) and binds the consent to the files it reads: the work-tree files it stages or discards
and the git folder's `HEAD` and `index`. The write itself runs the server's git in the sandbox with
the safety options of the read tools and more (no signing, no auto gc or maintenance, no transport
at all, so nothing fetches or pushes), and without any right on the project's git folder itself:
git works on private copies of HEAD and the index (`GitWrites`), which the sandbox installs
afterwards; only the data folders (`objects`, `refs`, `logs`) are writable. Hooks never run:
`core.hooksPath` points at nothing, and the hooks folder stays read-only. A switch or restore
that would replace a file where the sandbox's backend cannot make or remove one (landlock: at
the project root) is refused before git runs, never left half done.

Protected paths and a commit: `oct_git_add` never stages a protected path (CI pipelines, hook
managers' configs, agent configs: `protected.py`), named or inside a folder it is given. A commit
lists every staged path in its question, protected ones marked; it commits a staged protected
path only when a human approved that question (the path is one of the approved targets): with a
bare `confirm=true`, or with nobody shown the list, it is refused. Nothing pushes or fetches.
"""
