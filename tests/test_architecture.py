"""The package's floors (docs/architecture.md), checked on the source: every module imports
only from its own floor or those below, the module-level imports form no circle, and an import
inside a function is there only to defer a heavy import for start-up time, and says so. And no
function is longer than MAX_FUNCTION_LINES unless its docstring says why (LONG_REASON)."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Source folder -> installed package (setup.py's package_dir).
PACKAGES = {"advrace": "advrace", "attacks": "advrace.attacks", "training": "advrace.training",
            "human_eval": "advrace.human_eval"}
FLOORS = {
    "advrace": 1, "advrace.core": 1, "advrace.metrics": 1,
    "advrace.formats": 2,
    "advrace.resources": 3,
    "advrace.models": 4,
    "advrace.attacks": 5,
    "advrace.release": 6,
    "advrace.evaluation": 7, "advrace.training": 7, "advrace.human_eval": 7,
    "advrace.cli": 8, "advrace.__main__": 8,
}
DEFERRED = "start-up"  # the comment that marks an import deferred for start-up time
MAX_FUNCTION_LINES = 60  # from its `def` line to its last line, docstring and nested functions included
# A docstring sentence that begins "Long because" lets a function pass the limit: it says why it
# reads best as one piece (a table of cases, a paper's algorithm step by step).
LONG_REASON = re.compile(r"(?:\A|[.:;!?]\s+|\n\s*)Long because\b")


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package,) + tuple(p for p in rel if p != "__init__"))
            found[name] = path
    return found


MODULES = modules()


def floor(module: str) -> int:
    if module == "advrace":
        return FLOORS["advrace"]
    best = max((p for p in FLOORS if p != "advrace" and (module == p or module.startswith(p + "."))),
               key=len, default=None)
    assert best is not None, f"{module} has no floor; add its package to FLOORS and to docs/architecture.md"
    return FLOORS[best]


def imports(name: str, path: Path):
    """(target module, line, inside a function?, deferral comment?) for first-party imports."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    in_function = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            targets = subs or [base]
        for target in targets:
            if target.split(".")[0] != "advrace":
                continue
            while target not in MODULES and "." in target:
                target = target.rpartition(".")[0]
            window = " ".join(lines[max(0, node.lineno - 2): node.end_lineno])
            yield target, node.lineno, id(node) in in_function, DEFERRED in window


def test_every_module_has_a_floor():
    for name in MODULES:
        floor(name)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_down_only(name):
    here = floor(name)
    upward = [f"line {line}: {target} (floor {floor(target)})"
              for target, line, _, _ in imports(name, MODULES[name]) if floor(target) > here]
    assert not upward, f"{name} (floor {here}) imports upward: " + "; ".join(upward)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_function_level_imports_are_deferred_for_start_up_only(name):
    bare = [f"line {line}: {target}" for target, line, inside, marked in imports(name, MODULES[name])
            if inside and not marked]
    assert not bare, (f"{name} imports first-party modules inside functions without saying why: "
                      + "; ".join(bare) + f" (move them to the top, or mark a deferral with a "
                      f"'{DEFERRED}' comment)")


def test_no_import_circle():
    graph = {name: {t for t, _, inside, _ in imports(name, path) if not inside and t != name}
             for name, path in MODULES.items()}
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def test_one_top_level_package():
    """setup.py installs the design card's folders under one name, and every package folder is
    listed (a folder left out would be missing from a normal install, though not from an
    editable one)."""
    setup = (ROOT / "setup.py").read_text()
    for folder, package in PACKAGES.items():
        if folder != "advrace":
            assert f'"{package}": "{folder}"' in setup
    call = next(n for n in ast.walk(ast.parse(setup)) if isinstance(n, ast.Call)
                and getattr(n.func, "id", "") == "setup")
    listed = set(ast.literal_eval(next(k.value for k in call.keywords if k.arg == "packages")))
    folders = {name for name, path in MODULES.items() if path.name == "__init__.py"}
    assert folders == listed, f"setup.py packages: missing {sorted(folders - listed)}, extra {sorted(listed - folders)}"


def test_the_command_line_starts_without_torch():
    """`advrace --help`, `verify` and `export` must not pay torch's seconds of start-up: only
    the models that need it import it, when they run."""
    import subprocess
    import sys

    code = "import sys, advrace.cli; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def long_functions(source: str, where: str) -> list[str]:
    """`where:line name (N lines)` for each function (nested ones too) over MAX_FUNCTION_LINES
    whose docstring gives no reason (LONG_REASON)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES and not LONG_REASON.search(ast.get_docstring(node) or ""):
                found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_long_without_saying_why():
    """A function over MAX_FUNCTION_LINES lines reads as a list of steps: split it where the steps
    are ideas of their own, or say in its docstring, in a sentence that begins "Long because", why
    it reads best as one piece."""
    found = [hit for path in MODULES.values()
             for hit in long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]
    assert not found, (f"{len(found)} function(s) over {MAX_FUNCTION_LINES} lines whose docstring does not say "
                       "why (a sentence beginning 'Long because'):\n  " + "\n  ".join(found))


def _function(lines: int, docstring: str) -> str:
    body = [f"    x{i} = {i}" for i in range(lines - 2)]
    return "\n".join(["def f():", f'    """{docstring}"""', *body]) + "\n"


def test_the_length_rule_flags_a_long_function_unless_its_docstring_says_why():
    assert long_functions(_function(MAX_FUNCTION_LINES, "Short enough."), "m.py") == []
    assert long_functions(_function(MAX_FUNCTION_LINES + 1, "One step after another."), "m.py") == [
        f"m.py:1 f ({MAX_FUNCTION_LINES + 1} lines)"]
    assert long_functions(_function(MAX_FUNCTION_LINES + 1, "Rules in order. Long because Jia and Liang's "
                                                            "order is the algorithm."), "m.py") == []
    assert long_functions(_function(MAX_FUNCTION_LINES + 1, "Long because the table is one."), "m.py") == []
    # a passing mention is no reason
    assert long_functions(_function(MAX_FUNCTION_LINES + 1, "How long because of what."), "m.py") != []
