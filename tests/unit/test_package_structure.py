"""The package's shape: no import cycle between smolalign's and rewards' modules and no module over 300 lines.

The import graph is built statically from every module's AST (tests/import_graph.py) and counts imports inside
functions too: a deferred import still ties two modules' designs together, it only hides the cycle from the
interpreter. The layers the imports keep: tests/unit/test_layers.py."""

from import_graph import ROOT, all_imports

PACKAGE = ROOT / "smolalign"
MAX_LINES = 300


def import_graph() -> dict[str, set[str]]:
    """smolalign's and rewards' modules, each with the modules of the two it imports (at the top or in a function)."""
    graph: dict[str, set[str]] = {}
    for found in all_imports():
        targets = graph.setdefault(found.importer, set())
        if found.internal and found.imported not in (found.importer, "smolalign"):
            targets.add(found.imported)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return out


def test_the_import_graph_finds_a_known_cycle(tmp_path):
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_graph()["smolalign.stages.rl"] >= {"smolalign.plan", "smolalign.errors"}


def test_smolalign_has_no_import_cycle():
    assert cycles(import_graph()) == []


def test_no_module_is_over_300_lines():
    long = {str(f.relative_to(ROOT)): n for f in PACKAGE.rglob("*.py")
            if (n := len(f.read_text().splitlines())) > MAX_LINES}
    assert long == {}

