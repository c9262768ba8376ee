"""The ``xsm_*`` management commands (see docs/commands.md)."""
