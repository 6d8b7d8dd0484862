"""A dense flash-attention forward that is not the gate's: its TileLang factory (flash), the calls
that compile and launch it (ops), and the adapter that gates it (adapter)."""
