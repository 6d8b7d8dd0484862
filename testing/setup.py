"""A wheel of the gate is built from the sources alone: setuptools reuses build/lib, which keeps
files from older builds (a moved module would ship twice)."""

import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class FreshBuildPy(build_py):
    def run(self):
        shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()


setup(cmdclass={"build_py": FreshBuildPy})
