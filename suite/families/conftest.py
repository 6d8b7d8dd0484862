"""Every test in this folder is in the families tier (tilegate/testing/tiers.py)."""

from tilegate.testing.tiers import folder_marker

pytest_itemcollected = folder_marker(__file__)
