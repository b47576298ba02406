"""The package's own imports form no circle: each module of flce imports only modules that do
not import it back (directly or through others), function-level imports included, so that each
can be read, and loaded, after the ones it names."""

import ast
import pathlib

import flce


def _package_imports():
    root = pathlib.Path(flce.__file__).parent
    graph = {}
    for path in sorted(root.glob("*.py")):
        name = path.stem
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("flce."):
                deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[1] for a in node.names if a.name.startswith("flce."))
        graph[name] = {d for d in deps if d != name and (root / f"{d}.py").exists()}
    return graph


def _cycle(graph):
    """A circle of imports as a list of module names, or None."""
    state = {}

    def visit(m, path):
        state[m] = "open"
        for d in sorted(graph.get(m, ())):
            if state.get(d) == "open":
                return path[path.index(d):] + [d] if d in path else [m, d]
            if d not in state:
                found = visit(d, path + [d])
                if found:
                    return found
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m, [m])
            if found:
                return found
    return None


def test_the_package_imports_form_no_circle():
    graph = _package_imports()
    assert {"ops", "three_product", "_common", "vocab_parallel"} <= set(graph)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_the_check_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
