#!/usr/bin/env python3
"""The engine's files call each other one way only.

Reads CSources/*.c, finds which file defines each tern_/tern__ function, and draws an arrow
from a file to every other file whose functions it names (calls, or takes the address of).
Fails, naming the files and the functions that tie them, when the arrows form a cycle, and
when a .c file grows past the line limit (one concern per file). Lower layers report upward
through tables of function pointers (tern__conn_events, tern__owner_ops) that they declare
and an upper file fills in, which is why naming a function counts but calling through a
table does not.
"""
import os
import re
import sys

LINE_LIMIT = 650
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "CSources")

def strip(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\\n])'", "''", text)
    return text

files = sorted(f for f in os.listdir(ROOT) if f.endswith(".c"))
code = {f: strip(open(os.path.join(ROOT, f)).read()) for f in files}
defined = {}
for f, text in code.items():
    for m in re.finditer(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b(tern_\w+)\s*\([^;{]*\)\s*\{",
                         text, flags=re.M):
        defined[m.group(1)] = f

edges = {f: {} for f in files}
for f, text in code.items():
    for name in set(re.findall(r"\b(tern_\w+)\b", text)):
        owner = defined.get(name)
        if owner and owner != f:
            edges[f].setdefault(owner, set()).add(name)

problems = []
for f in files:
    n = open(os.path.join(ROOT, f)).read().count("\n")
    if n > LINE_LIMIT:
        problems.append(f"{f}: {n} lines, over {LINE_LIMIT}: split it by concern")

state, stack = {}, []
def visit(f):
    state[f] = 1
    stack.append(f)
    for g in sorted(edges[f]):
        if state.get(g) == 1:
            cycle = stack[stack.index(g):] + [g]
            ties = ", ".join(f"{a} -> {b} ({', '.join(sorted(edges[a][b]))})"
                             for a, b in zip(cycle, cycle[1:]))
            problems.append("call cycle: " + ties)
        elif g not in state:
            visit(g)
    stack.pop()
    state[f] = 2
for f in files:
    if f not in state:
        visit(f)

if problems:
    print("\n".join(problems))
    sys.exit(1)
arrows = sum(len(v) for v in edges.values())
print(f"layers: {len(files)} files, {arrows} arrows between them, no cycle, "
      f"none over {LINE_LIMIT} lines")
