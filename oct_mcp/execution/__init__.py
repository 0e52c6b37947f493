"""Plans in, effects out: the one package that runs a tool's plan and applies what it changes.

`in_process` runs a function over the workspace in a worker thread under the call's deadline;
`changes` applies a tool's file changes after the one set of checks every write passes;
`commands` runs a `command_plan` under the sandbox backend; `checkpoints` keeps what each change
replaced, for undo.
"""
