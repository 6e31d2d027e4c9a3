"""The schedule file: frozen config objects (``model``) and the validating loader."""
