"""The gate's pytest wiring lives in the package (tilegate/testing/pytest_plugin.py). Installed,
pytest loads it through the pytest11 entry point; from a checkout on PYTHONPATH, this line does."""

pytest_plugins = ["tilegate.testing.pytest_plugin"]
