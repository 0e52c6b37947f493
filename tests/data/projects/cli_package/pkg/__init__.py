"""A package with a command line."""

__version__ = "0.1.0"
