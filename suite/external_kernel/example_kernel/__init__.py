"""A kernel package that is not the gate: its own TileLang kernel and the adapter that gates it."""
