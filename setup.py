"""Two things pyproject.toml cannot say: the test extra names tilegate-testing by this checkout's
testing/ folder (a direct reference, so no package index is ever asked for that name), and a wheel
is built from the sources alone (setuptools reuses build/lib, which keeps files from older builds:
a moved module would ship twice)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

TESTING = (Path(__file__).resolve().parent / "testing").as_uri()


class FreshBuildPy(build_py):
    def run(self):
        shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()


setup(
    extras_require={"test": [f"tilegate-testing @ {TESTING}"]}, cmdclass={"build_py": FreshBuildPy}
)
