# The one thing pyproject.toml cannot say: the cffi extension, built by _tern_build.py.
from setuptools import setup

setup(cffi_modules=["_tern_build.py:ffibuilder"])
