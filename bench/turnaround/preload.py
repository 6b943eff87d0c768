"""Builds turnaround.c as the LD_PRELOAD library that bench/run, compare and footprint load."""

import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "turnaround.c")
OUT_DIR = os.path.join(os.path.dirname(HERE), ".build-turnaround")


def build(callgrind=False, log=None):
    """bench/.build-turnaround/turnaround.so (turnaround-cg.so with callgrind's collection
    switch), rebuilt when turnaround.c is newer. Returns its path, or None when the C compiler
    fails; its output goes to `log` (a file) when given."""
    name = "turnaround-cg.so" if callgrind else "turnaround.so"
    lib = os.path.join(OUT_DIR, name)
    if os.path.exists(lib) and os.path.getmtime(lib) >= os.path.getmtime(SOURCE):
        return lib
    os.makedirs(OUT_DIR, exist_ok=True)
    command = ["cc", "-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"]
    if callgrind:
        command.append("-DTURNAROUND_CALLGRIND")
    r = subprocess.run(command + ["-o", lib, SOURCE, "-ldl"], stdout=log, stderr=log)
    return lib if r.returncode == 0 else None
