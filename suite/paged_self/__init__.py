"""The gate's own paged kernels, declared as foreign kernels of family 'paged' (adapter.py)."""
