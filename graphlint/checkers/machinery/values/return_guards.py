"""Returns a function takes only for some types of an argument: a factory that switches on type.

SGLang's quantisation configs pick a layer's method by the layer's type:
`get_quant_method(self, layer, prefix)` returns a linear method under
`if isinstance(layer, LinearBase):` and an MoE method under `elif isinstance(layer, FusedMoE):`.
A context-insensitive flow gives each caller every return, so a linear layer's
`self.quant_method.apply(...)` reached the MoE kernels: 24 of SGLang's findings with values
followed came only through that wrong link, all of them false.

The file phase (`value_facts`) records a `return` under positive `isinstance(param, C)` tests
on the function's parameters (in `if` tests, alone or among `and`'s operands; not where the
function rebinds the parameter) at a location of its own, ``f.<return>#n``, with a
``("Q", location, ((parameter name, classes expr), ...))`` fact. The solver (`value_flow`)
gives a call that location's values only when each argument it passes for a tested parameter
may be an instance of the tested classes (`may_pass`); a call whose argument holds nothing yet,
or something other than instances the project defines, gets them as before.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from graphlint.checkers.machinery.core.syntax import FUNCTION_NODES
from graphlint.checkers.machinery.values.class_hierarchy import ClassHierarchy

Guard = tuple[str, ast.expr]  # (the tested parameter, the classes expression)


def return_guards(body: list[ast.stmt], params: tuple[str, ...], rebound: set[str]) -> dict[int, tuple[Guard, ...]]:
    """Each `return` of ``body`` (by ``id``) that sits in the arm of one or more positive
    `isinstance(param, C)` tests, with those tests; parameters in ``rebound`` are never tests."""
    found: dict[int, tuple[Guard, ...]] = {}
    stack: list[tuple[list[ast.stmt], tuple[Guard, ...]]] = [(body, ())]
    while stack:
        statements, guards = stack.pop()
        for stmt in statements:
            if isinstance(stmt, ast.Return):
                if guards:
                    found[id(stmt)] = guards
            elif isinstance(stmt, ast.If):
                stack.append((stmt.body, guards + _tests(stmt.test, params, rebound)))
                stack.append((stmt.orelse, guards))
            elif not isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
                stack.extend((block, guards) for block in _blocks(stmt))
    return found


def _tests(test: ast.expr, params: tuple[str, ...], rebound: set[str]) -> tuple[Guard, ...]:
    return tuple(
        (name.id, classes) for name, classes in isinstance_tests(test) if name.id in params and name.id not in rebound
    )


def isinstance_tests(test: ast.expr) -> list[tuple[ast.Name, ast.expr]]:
    """The `isinstance(name, classes)` tests an `if` test makes, alone or among `and`'s operands."""
    operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    return [tested for tested in map(isinstance_of_name, operands) if tested is not None]


def isinstance_of_name(node: ast.expr) -> tuple[ast.Name, ast.expr] | None:
    """`isinstance(name, classes)`: the name tested and the classes expression, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"):
        return None
    if len(node.args) != 2 or node.keywords or not isinstance(node.args[0], ast.Name):
        return None
    return node.args[0], node.args[1]


def _blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists a compound statement holds (loops, `with`, `try`, `match`)."""
    for name in ("body", "orelse", "finalbody"):
        block = getattr(stmt, name, None)
        if isinstance(block, list):
            yield block
    for holder in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
        yield holder.body


def may_pass(values: set[str] | frozenset[str], classes: set[str] | frozenset[str], hierarchy: ClassHierarchy) -> bool:
    """Whether an argument holding ``values`` may be an instance of one of ``classes`` (project
    class qualnames, ``?name`` for a library's). Unknown is yes: no values yet, no class known,
    or a value that is not an instance of a project class (a library object, a function)."""
    if not values or not classes:
        return True
    cones = [set(hierarchy.cone(cls)) for cls in classes]
    for value in values:
        if value[0] not in "!&+":
            return True
        cls = value[1:]
        if any(cls in cone for cone in cones):
            return True
        # a cone (`self` in a base class, an isinstance-narrowed value) may be any class below it
        if value[0] != "!" and any(tested in hierarchy.cone(cls) for tested in classes):
            return True
    return False
