"""The import graph of playground/, read from the code with `ast`: apps import one way, the modules
of one app import one way (no circle), the engine stays plain Python, and imports sit at the top of
modules.

Every import counts, also those inside functions (a function-level import is still a dependency; it
only hides a circle until the function runs) and module objects (`from playground.x import module`).
Only imports under `if TYPE_CHECKING:` are left out of the circle check: they never run.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "playground"

# Lower apps first: an app may import its own layer and the layers below, never one above or beside.
LAYERS = {
    "engine": 0,
    "registry": 1,
    "mcp_servers": 2,
    "conversations": 3,
    "evaluation": 3,
    "gateway": 4,  # serves profiles over MCP with the conversations' learned usage
    "agenteval": 4,  # runs tasks as conversations and reads the evaluation's toolsets
    "inbox": 5,  # the permission prompts of conversations and gateway sessions in one list
}
# Project-level modules (settings, urls, asgi, celery_app, views, access, runner/ ...) are not layered:
# they may import any app.

# Function-level imports of playground modules that stay, each with its reason.
ALLOWED_LATE_IMPORTS = {
    ("playground/agenteval/cli.py", "playground.agenteval.selectors"):
        "the command sets the stack's database and queue (--own-stack) before Django loads the models",
    ("playground/agenteval/cli.py", "playground.agenteval.services"):
        "the command sets the stack's database and queue (--own-stack) before Django loads the models",
    ("playground/agenteval/cli.py", "playground.agenteval.sources"):
        "the command sets the stack's database and queue (--own-stack) before Django loads the models",
    ("playground/agenteval/cli.py", "playground.agenteval.models"):
        "the command sets the stack's database and queue (--own-stack) before Django loads the models",
    ("playground/agenteval/cli.py", "playground.registry.models"):
        "the command sets the stack's database and queue (--own-stack) before Django loads the models",
    ("playground/agenteval/cli.py", "playground.loadtest.stack"):
        "only --own-stack starts a stack; the stack module sets the environment Django reads",
    ("playground/conversations/apps.py", "playground.conversations.providers"):
        "AppConfig.ready: modules that import models load only once the app registry is ready",
    ("playground/conversations/apps.py", "playground.conversations.usage"):
        "AppConfig.ready: modules that import models load only once the app registry is ready",
    ("playground/conversations/apps.py", "playground.registry.ports"):
        "AppConfig.ready: where the conversations app hands its usage log and providers to the registry",
    ("playground/mcp_servers/apps.py", "playground.mcp_servers.builtin_tools"):
        "AppConfig.ready: modules that import models load only once the app registry is ready",
    ("playground/mcp_servers/apps.py", "playground.mcp_servers.secrets"):
        "AppConfig.ready: the scrubber forgets the process's keys when a setting changes (connected here)",
    ("playground/mcp_servers/apps.py", "playground.registry.models"):
        "AppConfig.ready: modules that import models load only once the app registry is ready",
    ("playground/loadtest/stack.py", "playground.celery_app"):
        "the load test sets its stack's environment (database, Redis prefix, queue) before Celery reads the settings",
    ("playground/loadtest/stack.py", "playground.conversations.models"):
        "the load test sets its stack's database before Django loads the models",
    ("playground/loadtest/stack.py", "playground.registry.index_builds"):
        "the load test sets its stack's database before Django loads the models (the index build's rows)",
    ("playground/loadtest/stack.py", "playground.registry.models"):
        "the load test sets its stack's database before Django loads the models (the index build's rows)",
    ("playground/runner/main.py", "playground.registry.models"):
        "the runner starts before Django is set up; models load after django.setup()",
    ("playground/runner/main.py", "playground.celery_app"):
        "the runner starts before Django is set up; the Celery app reads the settings",
    ("playground/runner/main.py", "playground.mcp_servers.tasks"):
        "the runner starts before Django is set up; tasks import models",
    ("playground/runner/main.py", "playground.mcp_servers.models"):
        "the runner starts before Django is set up; models load after django.setup()",
    ("playground/mcp_servers/status.py", "playground.mcp_servers.selectors"):
        "status.py is being reworked for the socket push; to move to the top with that change",
    ("playground/mcp_servers/status.py", "playground.mcp_servers.models"):
        "status.py is being reworked for the socket push; to move to the top with that change",
}
# Folders whose modules may import playground modules inside functions, each with its reason.
LATE_IMPORTS_ALLOWED_UNDER = {
    "playground/bench/": "each benchmark is its own process: it sets its database and environment before Django loads the models",
}


@dataclass(frozen=True)
class Import:
    path: str  # relative to the repository, e.g. playground/registry/previews.py
    module: str  # the imported module, absolute (for `from a import b`: a.b when b is a module, else a)
    line: int
    in_function: bool
    typing_only: bool = False  # under `if TYPE_CHECKING:`
    via: str = ""  # for `from a import b` with b a module: a, which runs first

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line} imports {self.module}" + (" (inside a function)" if self.in_function else "")


def _is_module(base: Path, dotted: str) -> bool:
    relative = base / Path(*dotted.split("."))
    return relative.with_suffix(".py").is_file() or (relative / "__init__.py").is_file()


def imports_of(path: Path, root: Path = PACKAGE) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    package = parts[:-1]  # the package a relative import starts from (an __init__'s own package)
    rel = path.relative_to(root.parent).as_posix()
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool, typing_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend(Import(rel, alias.name, child.lineno, in_function, typing_only) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package[: len(package) - (child.level - 1)]
                    base = ".".join([*anchor, *([child.module] if child.module else [])])
                for alias in child.names:
                    candidate = f"{base}.{alias.name}"
                    if _is_module(root.parent, candidate):
                        found.append(Import(rel, candidate, child.lineno, in_function, typing_only, via=base))
                    else:
                        found.append(Import(rel, base, child.lineno, in_function, typing_only))
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for statement in child.body:
                    visit(ast.Module(body=[statement], type_ignores=[]), in_function, True)
                for statement in child.orelse:
                    visit(ast.Module(body=[statement], type_ignores=[]), in_function, typing_only)
                continue
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)), typing_only)

    visit(tree, False, False)
    return found


def all_imports(root: Path = PACKAGE) -> list[Import]:
    return [imp for path in sorted(root.rglob("*.py")) if "migrations" not in path.parts for imp in imports_of(path, root)]


def _app_of(dotted_or_path: str) -> str | None:
    parts = dotted_or_path.replace("/", ".").removesuffix(".py").split(".")
    if parts[0] != "playground" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def layer_violations(imports: list[Import]) -> list[str]:
    bad = []
    for imp in imports:
        source, target = _app_of(imp.path), _app_of(imp.module)
        if source is None or target is None:
            continue
        if target != source and LAYERS[target] >= LAYERS[source]:
            bad.append(f"{imp.where}: {source} must not import {target} (order: engine < registry < mcp_servers < conversations, evaluation)")
    return bad


def _module_of(path: str) -> str:
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _package_of(dotted: str) -> str | None:
    """The sub-package of playground/ a module belongs to (its app), None for playground's own modules."""
    parts = dotted.split(".")
    return parts[1] if parts[0] == "playground" and len(parts) > 2 else None


def module_graph(imports: list[Import]) -> dict[str, dict[str, Import]]:
    """module → {imported module of the same app → the first import that makes the edge}; imports
    under TYPE_CHECKING left out. Packages count as modules (`from a import b` runs a first)."""
    modules = {_module_of(imp.path) for imp in imports}
    graph: dict[str, dict[str, Import]] = {}
    for imp in imports:
        source = _module_of(imp.path)
        app = _package_of(source)
        if imp.typing_only or app is None:
            continue
        for target in (imp.module, imp.via):
            if target and target != source and target in modules and _package_of(target) == app:
                graph.setdefault(source, {}).setdefault(target, imp)
    return graph


def strongly_connected(graph: dict[str, dict[str, Import]]) -> list[list[str]]:
    """The components of more than one module (Tarjan), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, {})):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found, key=lambda component: (-len(component), component))


def module_circles(imports: list[Import]) -> list[str]:
    """Every import circle inside an app, with the imports that close it."""
    graph = module_graph(imports)
    described = []
    for component in strongly_connected(graph):
        members = set(component)
        edges = [graph[source][target].where for source in component for target in sorted(graph.get(source, {})) if target in members]
        described.append(" <-> ".join(component) + "\n    " + "\n    ".join(edges))
    return described


def engine_django_imports(imports: list[Import]) -> list[str]:
    return [imp.where for imp in imports if _app_of(imp.path) == "engine" and imp.module.split(".")[0] == "django"]


def late_imports(imports: list[Import]) -> list[str]:
    return [imp.where for imp in imports
            if imp.in_function and imp.module.startswith("playground.") and (imp.path, imp.module) not in ALLOWED_LATE_IMPORTS
            and not imp.path.startswith(tuple(LATE_IMPORTS_ALLOWED_UNDER))]


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return all_imports()


def test_apps_import_only_lower_apps(imports):
    assert layer_violations(imports) == []


def test_no_import_circle_between_the_modules_of_an_app(imports):
    circles = module_circles(imports)
    assert not circles, f"{len(circles)} import circle(s) inside apps (queue tasks by name, pass in what a lower module needs):\n" + "\n".join(circles)


def test_the_engine_imports_no_django(imports):
    assert engine_django_imports(imports) == []


def test_no_function_level_imports_of_playground_modules_beyond_the_allowlist(imports):
    assert late_imports(imports) == []


def test_every_allowlisted_late_import_still_exists(imports):
    present = {(imp.path, imp.module) for imp in imports if imp.in_function}
    assert sorted(set(ALLOWED_LATE_IMPORTS) - present) == []


# -- the checks themselves catch what they are for -------------------------------------------------
def _imports_of_source(tmp_path: Path, relative: str, source: str) -> list[Import]:
    root = tmp_path / "playground"
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source, encoding="utf-8")
    return imports_of(target, root)


def test_the_checks_catch_violations(tmp_path):
    upward = _imports_of_source(tmp_path, "registry/bad.py", "from playground.conversations.usage import usage_log\n")
    assert layer_violations(upward) and "registry must not import conversations" in layer_violations(upward)[0]
    sideways = _imports_of_source(tmp_path, "evaluation/bad.py", "import playground.conversations.models\n")
    assert layer_violations(sideways)
    relative = _imports_of_source(tmp_path, "registry/bad2.py", "from ..mcp_servers import models\n")
    assert layer_violations(relative)
    downward = _imports_of_source(tmp_path, "conversations/ok.py", "from playground.registry import adapter\n")
    assert layer_violations(downward) == []
    django = _imports_of_source(tmp_path, "engine/bad.py", "from django.conf import settings\n")
    assert engine_django_imports(django)
    late = _imports_of_source(tmp_path, "mcp_servers/bad.py", "def f():\n    from playground.registry import adapter\n")
    assert late_imports(late) and "inside a function" in late_imports(late)[0]


def test_the_conversations_app_hands_the_registry_what_its_pages_show():
    """registry/ports.py is filled at start-up (ConversationsConfig.ready), not by an upward import."""
    from playground.conversations import providers, usage
    from playground.registry import ports

    assert ports.usage() is usage and ports.providers() is providers


def test_the_circle_check_catches_module_level_function_level_and_module_object_circles(tmp_path):
    root = tmp_path / "playground"
    sources = {
        "app/__init__.py": "",
        # a -> b at module level, b -> a inside a function, as a module object
        "app/a.py": "from playground.app.b import helper\n",
        "app/b.py": "def helper():\n    from playground.app import a\n    return a\n",
        # c -> d -> e -> c, relative imports
        "app/c.py": "from . import d\n",
        "app/d.py": "from .e import thing\n",
        "app/e.py": "import playground.app.c\nthing = 1\n",
        # f -> g, and g -> f only for type checking: no circle
        "app/f.py": "from playground.app import g\n",
        "app/g.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from playground.app import f\n",
        # across two apps: a circle between apps is the layer check's business, not this one's
        "other/__init__.py": "",
        "other/x.py": "from playground.app import a\n",
        "app/h.py": "from playground.other import x\n",
    }
    for relative, source in sources.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(source, encoding="utf-8")
    imports = all_imports(root)
    assert strongly_connected(module_graph(imports)) == [
        ["playground.app.c", "playground.app.d", "playground.app.e"],
        ["playground.app.a", "playground.app.b"],
    ]
    described = module_circles(imports)
    assert "playground/app/b.py:2 imports playground.app.a (inside a function)" in described[1]
    (root / "app/g.py").write_text("from playground.app import f\n", encoding="utf-8")  # the same import, now at run time
    assert ["playground.app.f", "playground.app.g"] in strongly_connected(module_graph(all_imports(root)))
