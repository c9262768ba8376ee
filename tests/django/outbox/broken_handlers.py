"""A handler module that fails while it is imported (for the import-error tests)."""

raise RuntimeError("the effects module is broken")
