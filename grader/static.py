"""Static checks on a submission's source: nothing is imported or executed here.

* imports: every `import` / `from ... import` names an allowed module; `__import__`, `exec`, `eval`, `compile`
  and `__builtins__` are flagged wherever they appear.
* signatures: the required functions and kernels are defined at the top level with the skeleton's parameters.
* autotune decorators: where each kernel's `@triton.autotune` sits (its config count is read in the worker).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from grader.config import TaskSpec

FLAGGED_NAMES = {"__import__", "exec", "eval", "compile", "__builtins__", "importlib", "open", "globals", "setattr",
                 "delattr"}
"""Names that reach around the import whitelist, read files, or rewrite other modules."""
FLAGGED_ATTRS = {"os", "sys", "subprocess", "builtins", "ctypes", "importlib", "__builtins__", "__import__",
                 "__globals__", "__subclasses__", "__code__"}
"""Attributes that reach modules or internals the whitelist keeps out (e.g. `torch.os`)."""


@dataclass
class StaticReport:
    imports: list[str] = field(default_factory=list)
    """Problems with imports, each 'line N: ...'; empty when the gate passes."""
    signatures: list[str] = field(default_factory=list)
    decorators: dict[str, dict] = field(default_factory=dict)
    filename: str = ""
    """kernel name -> {'line': def line, 'autotune_line': line of @triton.autotune or None, 'jit': bool}."""

    @property
    def ok(self) -> bool:
        return not self.imports and not self.signatures


def check_source(source: str, task: TaskSpec, always_allowed: list[str] | None = None,
                 filename: str = "") -> StaticReport:
    """Every problem message starts with 'FILE:LINE:' (or 'line N:' without a file name)."""

    def at(lineno: int | None) -> str:
        return f"{filename}:{lineno}:" if filename else f"line {lineno}:"

    report = StaticReport(filename=filename)
    allowed = set(task.allowed_imports) | set(always_allowed or [])
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        msg = f"{at(exc.lineno)} syntax error: {exc.msg}"
        report.imports.append(msg)
        report.signatures.append(msg)
        return report

    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree)
                if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in allowed:
                    report.imports.append(f"{at(node.lineno)} import {alias.name} is not allowed")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                report.imports.append(f"{at(node.lineno)} relative import is not allowed")
                continue
            mod = node.module or ""
            for alias in node.names:
                if mod not in allowed and f"{mod}.{alias.name}" not in allowed:
                    report.imports.append(f"{at(node.lineno)} from {mod} import {alias.name} is not allowed")
        elif isinstance(node, ast.Name) and node.id in FLAGGED_NAMES:
            report.imports.append(f"{at(node.lineno)} use of {node.id} is not allowed")
        elif isinstance(node, ast.Attribute) and node.attr in FLAGGED_ATTRS:
            report.imports.append(f"{at(node.lineno)} use of .{node.attr} is not allowed")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                root = target
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(target, ast.Attribute) and isinstance(root, ast.Name) and root.id in imported:
                    report.imports.append(f"{at(node.lineno)} assigning to {ast.unparse(target)} (changing an "
                                          "imported module) is not allowed")
    if report.imports:
        report.imports.append(f"allowed imports: {', '.join(sorted(set(task.allowed_imports)))}")

    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for name, params in task.functions.items():
        report.signatures += _check_params(defs.get(name), name, params, False, at)
    for name, spec in task.kernels.items():
        node = defs.get(name)
        report.signatures += _check_params(node, name, spec.params, True, at)
        if node is not None:
            decos = {_deco_name(d): d.lineno for d in node.decorator_list}
            report.decorators[name] = {
                "line": node.lineno,
                "autotune_line": next((ln for d, ln in decos.items() if d.endswith("autotune")), None),
                "jit": any(d.endswith("jit") for d in decos),
            }
            if not report.decorators[name]["jit"]:
                report.signatures.append(f"{at(node.lineno)} kernel {name} must be decorated with @triton.jit")
    return report


def _deco_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _check_params(node: ast.FunctionDef | None, name: str, expected: list[str], kernel: bool, at) -> list[str]:
    what = "kernel" if kernel else "function"
    want = ", ".join(expected)
    if node is None:
        return [f"{what} {name}({want}) is not defined at the top level of the file"]
    positional = [a.arg for a in node.args.posonlyargs + node.args.args]
    kwonly = [a.arg for a in node.args.kwonlyargs]
    exp_pos = [p for p in expected if not p.startswith("*")]
    exp_kw = [p[1:] for p in expected if p.startswith("*")]
    problems = []
    if positional[: len(exp_pos)] != exp_pos:
        problems.append(f"{at(node.lineno)} {what} {name} must take ({', '.join(exp_pos)}) first, "
                        f"found ({', '.join(positional)})")
    if not kernel:
        # Extra positional parameters are fine only with defaults: the harness passes just the listed ones.
        n_defaults = len(node.args.defaults)
        extra = positional[len(exp_pos):]
        if len(extra) > n_defaults:
            problems.append(f"{at(node.lineno)} {name}: extra parameters {extra} need default values")
        missing_kw = [k for k in exp_kw if k not in kwonly and k not in positional]
        if missing_kw:
            problems.append(f"{at(node.lineno)} {name} must accept keyword argument(s) {', '.join(missing_kw)}")
    return problems
