"""The tools that change files: write, edit by strings, apply a patch, move and delete; and the kit
they share (`change_kit`: propose, preview, check, let the applier apply)."""
