"""The file phase of the value flow: one file's assignments of callables, classes and instances.

PyCG's assignment graph, as facts the project phase solves (`value_flow`). A *location* is a
dotted name: a module's global is `mod.x`, a function's local or parameter is
`mod.f.<locals>.x` (so a nested function's qualname is the location holding it), a class or
instance attribute is `mod.C.x` (a method's qualname is the class attribute holding it), and
what a function returns is `mod.f.<return>`. An *expression* is a small tuple the solver
evaluates to the set of values it may hold:

    ("v", loc)                      the values at a location
    ("g", dotted)                   an imported or re-exported name, followed project-wide
    ("w", modules, name)            a name only a `from m import *` can have bound
    ("d", qualname)                 a function, lambda or class object
    ("i", class)                    an instance of a class (`self` in its methods)
    ("n", expr)                     an instance of each class ``expr`` holds (an annotation)
    ("+", expr)                     an instance of each class ``expr`` holds or of any project
                                    subclass (`isinstance(p, C)` narrows a parameter)
    ("a", expr, attr)               an attribute: an instance's or class's, a bound method
    ("c", callee, args, kwargs, key, extra)   a call, its result; ``key`` (scope, line, column,
                                    end line, end column) names the call site; ``extra`` for calls the binder never
                                    names (lambda bodies, decorators, `map(f, ...)`)
    ("k", decorator, value, key)    a decorator applied; an unresolved one leaves ``value``
    ("p", expr, args, kwargs)       functools.partial: ``expr``'s functions, arguments bound
    ("m", expr, method)             `d.get(...)`, `d.values()`: what the container holds
    ("s", class, self_loc)          super() in a method of ``class``
    ("S", class_expr, object_expr)  super(Cls, obj): the bases after ``Cls`` on what ``obj`` holds
    ("r", expr, key)                `raise E`: ``E`` constructed
    ("t", expr, key)                iterating: the elements, or __iter__ then __next__ of an object
    ("u", expr, ...)                the union
    ("l", site, entries)            a list/tuple/set/dict display: a container of its own, its
                                    entries (key, expr, splat) stored per constant key
                                    (`value_containers`; a value that is no container is its
                                    own element, the older reading)
    ("[", expr, key)                `x[k]`: the entries under ``key`` (a constant's repr, a name
                                    that may be a module constant, or None: every entry)
    (":", expr, view)               `x[1:3]`: a view of each list ("low:high", or "*")
    ("V", expr, ...)                `list(xs)`, `sorted(xs)`: the same containers, positions unknown
    ("z", expr)                     `xs.pop(0)`, `del xs[0]`: the lists lose their positions
    ("y", read, stored)             a read right after a store of the same path (`value_memory`)
    ("K",)                          a store into another module's global (no longer a constant)
    ("e", expr, ...)                evaluated for the calls inside, no value
    ("o", dotted, key)              a library call the flow knows (`list(...)`), as a call outside

Facts are ("=", target, expr) (a target is a "v", "g", "a", "[" or ":" expression, or
("{", expr): `d.update(other)`, key by key), ("x", expr), ("K", location, key): a module
global bound once, to a constant, and ("G", location, class expr): a parameter a leading
`if not isinstance(p, C): raise` checks (for `capture_origins`; the solver skips it), and
("Q", location, ((parameter name, classes expr), ...)): a return under `isinstance` tests on
the function's parameters, stored at ``f.<return>#n`` (`return_guards`), and ("P", function,
name): a `return p` of a parameter the function never rebinds, which gives each call the
argument it passed there (not what every caller passes: `_passthrough_params`). Both name the
parameter, not its position: a qualname defined twice (overloads under a dispatch decorator,
a definition in each arm of an `if`) keeps one definition's parameters in `flow_defs`, and the
solver reads the name in those.
Definitions are kept as `flow_defs`: qualname -> (params, positional count, *args, **kwargs,
kind), kind "f" function, "m" method, "s" staticmethod, "c" classmethod, "p" property.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from graphlint.checkers.machinery.core.flow import TRY_NODES, FlowState, walk
from graphlint.checkers.machinery.core.model import FunctionSummary
from graphlint.checkers.machinery.core.module_state import ModuleState
from graphlint.checkers.machinery.core.names import ImportMap, canonical, dotted_parts
from graphlint.checkers.machinery.core.syntax import (
    FUNCTION_NODES,
    all_statements,
    bound_names,
    statements,
    unquoted_annotation,
)
from graphlint.checkers.machinery.values.return_guards import Guard, isinstance_of_name, isinstance_tests, return_guards
from graphlint.checkers.machinery.values.value_keys import constant_key, slice_view
from graphlint.checkers.machinery.values.value_memory import STRAIGHT, access_path, forget_name

Expr = tuple
# Asked for like a rule's code (in the codes a file is summarised for, so in its cache key) by
# the runs that follow values: a plain check records none of these facts.
VALUE_FACTS = "value-facts"
# Calls that return the elements of their arguments in a new container (or a copy), by
# resolved name: their positions are unknown (``("V", ...)``, `value_containers`).
VIEWS = frozenset(
    {
        "list",
        "tuple",
        "set",
        "frozenset",
        "dict",
        "sorted",
        "reversed",
        "iter",
        "enumerate",
        "zip",
        "copy.copy",
        "copy.deepcopy",
        "weakref.proxy",  # behaves as the object it refers to (a method call on it runs the object's)
        "torch.nn.ModuleList",
        "torch.nn.Sequential",
        "torch.nn.ModuleDict",
    }
)
_EMPTY_CONTAINERS = {"list": "l", "set": "s", "dict": "d"}  # called with nothing: the site's kind
PASSTHROUGH = frozenset({"functools.wraps", "staticmethod", "classmethod"})  # return what they are given
PARTIAL = frozenset({"functools.partial"})
CALLS_FIRST = frozenset({"map", "filter"})  # map(f, xs) calls f with the elements of xs
CAPTURED_FIRST = frozenset({"torch.compile", "torch.cuda.make_graphed_callables"})
STORE_METHODS = frozenset({"append", "insert", "add", "appendleft"})  # one value, at an unknown key
SHIFT_METHODS = frozenset({"pop", "insert", "remove", "sort", "reverse"})  # a list's positions move
READ_METHODS = frozenset({"get", "pop", "values", "items", "copy", "setdefault", "popitem"})
_DEFAULT_READS = frozenset({"get", "pop", "setdefault"})  # d.get(k, default): the default too


@dataclass
class _Scope:
    """A module, class or function body: where its names live."""

    qualname: str
    kind: str  # "module" | "class" | "function"
    parent: _Scope | None
    names: set[str] = field(default_factory=set)
    globals: set[str] = field(default_factory=set)
    class_qualname: str | None = None  # a method's class (for super())
    self_loc: str | None = None
    key: str = ""  # the qualname the binder gives this scope's calls
    extra: bool = False  # inside a lambda: the binder names none of its calls
    lambdas: int = 0
    versioned: frozenset[str] = frozenset()  # names bound only by top-level `name = ...`, twice or more
    versions: dict[str, int] = field(default_factory=dict)  # the assignment each such name holds now
    memory: dict[tuple[str, ...], tuple | None] = field(default_factory=dict)  # value_memory: path -> stored
    imports: dict[str, str] = field(default_factory=dict)  # names only a late import binds -> dotted
    return_guards: dict[int, tuple[Guard, ...]] = field(default_factory=dict)  # return_guards: id(return) -> tests
    guarded: int = 0  # guarded returns recorded so far (their locations' numbers)
    function: ast.FunctionDef | ast.AsyncFunctionDef | None = None  # the scope's own definition
    assigned: set[str] = field(default_factory=set)  # names the function's body binds
    passthrough: frozenset[str] | None = None  # `_passthrough_params`, read at its first `return p`

    def loc(self, name: str) -> str:
        if self.kind == "function":
            return f"{self.qualname}.<locals>.{name}"
        return f"{self.qualname}.{name}"


class FactRecorder:
    """Records one file's value-flow facts into its summary (`flow`, `flow_defs`)."""

    def __init__(self, st: ModuleState) -> None:
        self.st = st
        self.module = st.module
        self.facts: list[tuple] = []
        self.defs: dict[str, tuple] = {}
        self._strings: dict[str, str] = {}
        self._declared: set[str] = set()  # names some function declares global or nonlocal
        # Each handler takes the node type it is filed under: a mapping mypy cannot express per key.
        self._expr: dict[type[ast.AST], Callable[[_Scope, Any], Expr | None]] = {
            ast.Name: self._name_load,
            ast.Attribute: self._attribute,
            ast.Call: self._call,
            ast.Lambda: self._lambda,
            ast.Subscript: self._subscript,
            ast.Starred: lambda scope, node: self.ex(scope, node.value),
            ast.Await: self._await,
            ast.List: self._display,
            ast.Tuple: self._display,
            ast.Set: self._display,
            ast.Dict: self._display,
            ast.IfExp: lambda scope, node: self._union(scope, [node.body, node.orelse], [node.test]),
            ast.BoolOp: lambda scope, node: self._union(scope, node.values),
            ast.NamedExpr: self._named,
            ast.ListComp: self._comprehension,
            ast.SetComp: self._comprehension,
            ast.GeneratorExp: self._comprehension,
            ast.DictComp: self._comprehension,
            ast.Yield: self._yield,
            ast.YieldFrom: self._yield,
            ast.Constant: lambda scope, node: None,
        }

    def run(self) -> None:
        st = self.st
        scope = _Scope(self.module, "module", None, key=f"{self.module}.<module>")
        scope.names = set(st.defs) | st.module_assigned | _loop_and_with_names(st.tree.body)
        self._scope_body(scope, st.tree.body)
        self._constants(st.tree.body)
        st.summary.flow = self.facts
        st.summary.flow_defs = self.defs

    def _constants(self, body: list[ast.stmt]) -> None:
        """Module-level names bound once, to a constant, and nowhere else in the file (`key = 1`):
        a container key they name is that constant (another module's store undoes it). Run
        after the walk, which collected the names functions declare `global`."""
        candidates = {
            stmt.targets[0].id: key
            for stmt in body
            if isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and (key := constant_key(stmt.value)) is not None
        }
        if not candidates:
            return
        counts: dict[str, int] = {}
        for stmt in statements(body):
            for name in _bound_by_statement(stmt):
                counts[name] = counts.get(name, 0) + 1
        for name, key in candidates.items():
            if counts.get(name) == 1 and name not in self._declared:
                self.facts.append(("K", self.intern(f"{self.module}.{name}"), key))

    def intern(self, text: str) -> str:
        """One object per string, so the pickled summary stores each location once."""
        return self._strings.setdefault(text, text)

    # -- statements --------------------------------------------------------------------------
    def _scope_body(self, scope: _Scope, body: list[ast.stmt]) -> None:
        """A module's or function's statements. A name its top level rebinds (`a = dec1`,
        then `a = dec2`) and nothing else binds gets one location per assignment, so a read
        in the same scope sees the assignment before it (straight-line code runs in order)."""
        counts: dict[str, int] = {}
        for stmt in body:
            if isinstance(stmt, ast.Assign) and _names_only(stmt.targets):
                for target in stmt.targets:
                    counts[target.id] = counts.get(target.id, 0) + 1
        repeated = {name for name, count in counts.items() if count > 1}
        if repeated:
            repeated -= scope.globals | _bound_elsewhere(body, scope.kind == "module")
            scope.versioned = frozenset(repeated)
        walk(_Statements(self, scope), body)

    def _versioned_assign(self, scope: _Scope, targets: list[ast.Name], value_node: ast.expr) -> None:
        value = self.ex(scope, value_node)
        for target in targets:
            forget_name(scope.memory, target.id)
            where = self._name_store(scope, target.id)
            if value is not None:
                self.facts.append(("=", where, value))
            if target.id in scope.versioned:
                version = scope.versions[target.id] = scope.versions.get(target.id, 0) + 1
                if value is not None:
                    self.facts.append(("=", ("v", self.intern(f"{where[1]}#{version}")), value))

    def _delete(self, scope: _Scope, stmt: ast.Delete) -> None:
        """`del xs[0]`: the lists ``xs`` holds lose their positions."""
        for target in stmt.targets:
            if isinstance(target, ast.Subscript):
                base = self.ex(scope, target.value)
                if base is not None:
                    self.facts.append(("x", ("z", base)))

    def _simple(self, scope: _Scope, stmt: ast.stmt) -> None:
        """A statement without blocks (the walker hands compound ones to `_Statements`)."""
        if isinstance(stmt, ast.Assign):
            self._assign(scope, stmt.targets, stmt.value)
        elif isinstance(stmt, ast.Expr):
            self._effect(scope, stmt.value)
        elif isinstance(stmt, ast.Return):
            if isinstance(stmt.value, ast.Name) and self._hands_back(scope, stmt.value.id):
                self.facts.append(("P", scope.qualname, stmt.value.id))
            elif stmt.value is not None:
                self._returned(scope, self.ex(scope, stmt.value), scope.return_guards.get(id(stmt), ()))
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            value = self.ex(scope, stmt.value) if stmt.value is not None else None
            if isinstance(stmt, ast.AnnAssign) and scope.kind != "module":
                value = _join(value, self._annotation(scope, stmt.annotation))
            self._store(scope, stmt.target, value)
        elif isinstance(stmt, ast.Raise) and stmt.exc is not None:
            self._raise(scope, stmt.exc)
        elif isinstance(stmt, ast.Assert):
            self._effect(scope, stmt.test)  # the test twice: the facts list has always had it so
            for child in (stmt.test, stmt.msg):
                if child is not None:
                    self._effect(scope, child)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                self._effect(scope, target)

    def _definition(self, scope: _Scope, stmt: ast.stmt) -> None:
        if isinstance(stmt, FUNCTION_NODES):
            self._function(scope, stmt)
        elif isinstance(stmt, ast.ClassDef):
            self._class(scope, stmt)

    def _narrowing(self, scope: _Scope, test: ast.expr) -> None:
        """`if isinstance(param, C):` (alone or among `and`'s operands): the parameter may hold
        an instance of ``C`` or of any project class derived from it (a ``("+", classes)``
        value, `class_hierarchy`), whoever calls the function. A hook torch calls with each
        submodule, narrowed by type, has no other source of values."""
        params = self.defs.get(scope.qualname, ((),))[0] if scope.kind == "function" else ()
        for name, classes in isinstance_tests(test):
            if name.id not in params:
                continue
            param, checked = self.ex(scope, name), self._classes(scope, classes)
            if param is not None and param[0] == "v" and checked is not None:
                self.facts.append(("=", param, ("+", checked)))

    def _effect(self, scope: _Scope, node: ast.expr) -> None:
        value = self.ex(scope, node)
        if value is not None and value[0] != "v" and value[0] != "d":
            self.facts.append(("x", value))

    def _hands_back(self, scope: _Scope, name: str) -> bool:
        """Whether `return name` hands the caller's own argument back (`_passthrough_params`).
        Worked out at the function's first `return param`: most functions never return a bare
        parameter, and the walk reads the whole body, nested definitions included (on torch's
        tree, 4.9M nodes when every function was walked)."""
        function = scope.function
        if function is None:
            return False
        params = self.defs[scope.qualname][0]
        if name not in params:
            return False
        if scope.passthrough is None:
            scope.passthrough = _passthrough_params(function, params, scope.assigned)
        return name in scope.passthrough

    def _returned(self, scope: _Scope, value: Expr | None, guards: tuple[Guard, ...] = ()) -> None:
        """What the function returns; under `isinstance` tests on its parameters, at a location
        of its own with a ``Q`` fact naming the tests (`return_guards`)."""
        if value is None or scope.kind != "function":
            return
        location = f"{scope.qualname}.<return>"
        tests = tuple((name, self._classes(scope, classes)) for name, classes in guards)
        tests = tuple((name, classes) for name, classes in tests if classes is not None)
        if tests:
            scope.guarded += 1
            location = self.intern(f"{location}#{scope.guarded}")
            self.facts.append(("Q", location, tests))
        self.facts.append(("=", ("v", self.intern(location)), value))

    def _classes(self, scope: _Scope, node: ast.expr) -> Expr | None:
        """`C` or `(A, B)` of an `isinstance` test: the union of the names, None if none is one."""
        parts = node.elts if isinstance(node, ast.Tuple) else [node]
        named = tuple(e for e in (self.ex(scope, part) for part in parts) if e is not None and e[0] in ("g", "v"))
        return ("u", *named) if named else None

    def _assign(self, scope: _Scope, targets: list[ast.expr], value_node: ast.expr) -> None:
        elements = value_node.elts if isinstance(value_node, (ast.Tuple, ast.List)) else None
        pairwise = elements is not None and not any(isinstance(e, ast.Starred) for e in elements)
        unpacked = _same_width(targets, len(elements)) if pairwise and elements is not None else None
        if elements is not None and unpacked is not None:
            values = [self.ex(scope, element) for element in elements]
            for unpacked_target in unpacked:
                for inner, value in zip(unpacked_target.elts, values, strict=True):
                    self._store(scope, inner, value)
            return
        value = self.ex(scope, value_node)
        for target in targets:
            self._store(scope, target, value)

    def _store(self, scope: _Scope, target: ast.expr, value: Expr | None) -> None:
        if value is None:
            self._store_nothing(scope, target)
            self._remember(scope, target, None)
            return
        if isinstance(target, ast.Name):
            forget_name(scope.memory, target.id)
            self.facts.append(("=", self._name_store(scope, target.id), value))
        elif isinstance(target, ast.Attribute):
            base = self.ex(scope, target.value)
            if base is not None and base[0] in ("v", "g", "a"):
                self.facts.append(("=", _attribute(base, self.intern(target.attr)), value))
            self._remember(scope, target, value)
        elif isinstance(target, ast.Subscript) and (attribute := _instance_dict_key(target)) is not None:
            # `obj.__dict__["name"] = v` sets the attribute, bypassing __setattr__
            self._store(scope, ast.Attribute(attribute[0], attribute[1], ast.Store()), value)
        elif isinstance(target, ast.Subscript):
            base = self.ex(scope, target.value)
            where = self._element_of(scope, base, target.slice)
            if where is not None:
                self.facts.append(("=", where, value))
            self._remember(scope, target, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            after_star = False
            for index, element in enumerate(target.elts):
                if isinstance(element, ast.Starred):
                    after_star = True
                    self._store(scope, element.value, (":", value, "*"))
                else:
                    self._store(scope, element, ("[", value, None if after_star else str(index)))
        elif isinstance(target, ast.Starred):
            self._store(scope, target.value, value)

    def _remember(self, scope: _Scope, target: ast.expr, value: Expr | None) -> None:
        """After a store into a container or attribute: it alone is known (`value_memory`)."""
        if isinstance(target, (ast.Name, ast.Tuple, ast.List, ast.Starred)):
            return
        scope.memory.clear()
        path = access_path(target)
        if path is not None:
            scope.memory[path] = value

    def _recalled(self, scope: _Scope, node: ast.expr, read: Expr | None) -> Expr | None:
        """A read of a path the block just stored: ``("y", read, stored)`` for the solver."""
        if read is None or not scope.memory:
            return read
        path = access_path(node)
        if path is None or path not in scope.memory:
            return read
        return ("y", read, scope.memory[path])

    def _store_nothing(self, scope: _Scope, target: ast.expr) -> None:
        """A store of nothing the flow follows: the calls in the target; a slice store still
        moves a list's positions, a store into another module's global ends its constancy."""
        if isinstance(target, ast.Name):
            return
        self._effect(scope, target)  # x[f()] = 1, g().a = 1
        if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Slice):
            base = self.ex(scope, target.value)
            if base is not None:
                self.facts.append(("x", ("z", base)))
        elif isinstance(target, ast.Attribute):
            base = self.ex(scope, target.value)
            if base is not None and base[0] == "g":
                self.facts.append(("=", ("g", self.intern(f"{base[1]}.{target.attr}")), ("K",)))

    def _element_of(self, scope: _Scope, base: Expr | None, index: ast.expr) -> Expr | None:
        """The store target `base[index]` (None: the base holds nothing the flow follows)."""
        if isinstance(index, ast.Slice):
            for bound in (index.lower, index.upper, index.step):
                if bound is not None:
                    self._effect(scope, bound)
            return (":", base, slice_view(index)) if base is not None else None
        key = self._key_of(scope, index)
        return ("[", base, key) if base is not None else None

    def _key_of(self, scope: _Scope, index: ast.expr) -> str | Expr | None:
        """A container key: its constant, a name that may be a module constant, or None."""
        key = constant_key(index)
        if key is not None:
            return key
        value = self.ex(scope, index)
        if value is not None and value[0] in ("v", "g") and isinstance(index, (ast.Name, ast.Attribute)):
            return value
        if value is not None and value[0] != "d":
            self.facts.append(("x", value))
        return None

    def _raise(self, scope: _Scope, exc: ast.expr) -> None:
        value = self.ex(scope, exc)
        if value is None:
            return
        if isinstance(exc, ast.Call):
            self.facts.append(("x", value))
        else:
            self.facts.append(("x", ("r", value, self._key(scope, exc))))

    # -- definitions ---------------------------------------------------------------------------
    def _function(self, scope: _Scope, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        qualname = self._def_qualname(scope, node.name)
        kind = _method_kind(node) if scope.kind == "class" else "f"
        inner = self._function_scope(scope, qualname, node.args, kind)
        _local_names(node.body, inner.names, inner.globals)
        inner.imports = self._late_imports(node.body, inner)
        inner.names -= inner.imports.keys()
        self._declared |= inner.globals
        assigned = _assigned_in(node.body)
        inner.return_guards = return_guards(node.body, self.defs[qualname][0], assigned)
        inner.function, inner.assigned = node, assigned
        if kind == "m" and inner.self_loc is not None:
            self.facts.append(("=", ("v", inner.self_loc), ("i", scope.qualname)))
        elif kind == "c" and inner.self_loc is not None:
            self.facts.append(("=", ("v", inner.self_loc), ("d", scope.qualname)))
        self.facts.append(("=", self._name_store(scope, node.name), self._decorated(scope, node, qualname)))
        self._type_guard(inner, node)
        self._scope_body(inner, node.body)

    def _late_imports(self, body: list[ast.stmt], inner: _Scope) -> dict[str, str]:
        """Names a function binds only by importing them (`from pkg.mgr import Manager` in a
        method, a late import that breaks an import cycle): aliases of what they import, as a
        module's imports are, so the name reads as the imported one (a ``g`` expression)."""
        imported: dict[str, str | None] = {}
        params, _, vararg, kwarg, _ = self.defs[inner.qualname]
        other: set[str] = {*params, vararg, kwarg, *inner.globals}
        for stmt in statements(body):
            if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                other.update(_bound_by_statement(stmt))
                continue
            names = ImportMap(self.module, self.st.imports.is_package)
            names.add(stmt)
            for local, dotted in names.names.items():
                dotted = self.intern(canonical(dotted))
                imported[local] = dotted if imported.get(local, dotted) == dotted else None
        return {name: dotted for name, dotted in imported.items() if dotted is not None and name not in other}

    def _type_guard(self, inner: _Scope, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """`if not isinstance(param, C): raise ...` first in the body: every read of ``param``
        in the function sees an instance of ``C`` (a ``("G", location, class)`` fact, read by
        `capture_origins`, and a ``+`` narrowing for the solver, as `_narrowing`). Not when the
        function rebinds the parameter."""
        body = node.body[1:] if node.body and _is_docstring(node.body[0]) else node.body
        if not body or not isinstance(body[0], ast.If) or body[0].orelse:
            return
        test, then = body[0].test, body[0].body
        if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)) or not isinstance(then[-1], ast.Raise):
            return
        tested = isinstance_of_name(test.operand)
        if tested is None:
            return
        name = tested[0].id
        params = self.defs[inner.qualname][0]
        if name not in params or name in _assigned_in(node.body):
            return
        checked = self.ex(inner, tested[1])
        if checked is not None and checked[0] in ("g", "v"):
            location = self.intern(inner.loc(name))
            self.facts.append(("G", location, checked))
            self.facts.append(("=", ("v", location), ("+", checked)))  # narrows as `if isinstance(...)` does

    def _decorated(
        self, scope: _Scope, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, qualname: str
    ) -> Expr:
        """The value a definition binds: the function or class, through its decorators (calls
        the binder never names: the decorators and what they call)."""
        saved, scope.extra = scope.extra, True
        value: Expr = ("d", qualname)
        for decorator in reversed(node.decorator_list):
            applied = self.ex(scope, decorator)
            if applied is not None:
                value = ("k", applied, value, self._key(scope, decorator))
        scope.extra = saved
        return value

    def _function_scope(self, scope: _Scope, qualname: str, args: ast.arguments, kind: str) -> _Scope:
        """The scope of a function or lambda: its parameters, defaults and annotations bound."""
        positional = [*args.posonlyargs, *args.args]
        params = [a.arg for a in (*positional, *args.kwonlyargs)]
        vararg = args.vararg.arg if args.vararg else ""
        kwarg = args.kwarg.arg if args.kwarg else ""
        self.defs[qualname] = (tuple(params), len(positional), vararg, kwarg, kind)
        inner = _Scope(qualname, "function", scope, names={*params, vararg, kwarg} - {""}, key=qualname)
        if scope.kind == "class" and kind in "mcp" and positional:
            inner.self_loc = self.intern(inner.loc(positional[0].arg))
            inner.class_qualname = scope.qualname
        elif scope.kind == "function":
            inner.class_qualname, inner.self_loc = scope.class_qualname, scope.self_loc  # super() in a closure
        defaults = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
        defaults += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
        saved, scope.extra = scope.extra, True  # the binder does not visit defaults
        for arg, default in defaults:
            value = self.ex(scope, default)
            if value is not None:
                self.facts.append(("=", ("v", self.intern(inner.loc(arg.arg))), value))
        scope.extra = saved
        for arg in (*positional, *args.kwonlyargs):
            if arg.annotation is not None:
                value = self._annotation(scope, arg.annotation)
                if value is not None:
                    self.facts.append(("=", ("v", self.intern(inner.loc(arg.arg))), value))
        return inner

    def _class(self, scope: _Scope, node: ast.ClassDef) -> None:
        qualname = self._def_qualname(scope, node.name)
        for base in node.bases:
            self._effect(scope, base)
        body_names = {n for s in node.body for n in _bound_by(s)}
        inner = _Scope(
            qualname, "class", scope, names=body_names, key=scope.key, extra=True
        )  # the binder skips class bodies
        self.facts.append(("=", self._name_store(scope, node.name), self._decorated(scope, node, qualname)))
        walk(_Statements(self, inner), node.body)

    def _def_qualname(self, scope: _Scope, name: str) -> str:
        if scope.kind == "function":
            return self.intern(f"{scope.qualname}.<locals>.{name}")
        return self.intern(f"{scope.qualname}.{name}")

    def _annotation(self, scope: _Scope, node: ast.expr) -> Expr | None:
        """An annotation as a source of truth: `model: Transformer` holds a Transformer."""
        unquoted = unquoted_annotation(node)
        if unquoted is None:
            return None
        node = unquoted
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return _join(self._annotation(scope, node.left), self._annotation(scope, node.right))
        if isinstance(node, ast.Subscript):
            outer = dotted_parts(node.value)
            if outer and outer[-1] in ("Optional", "Union"):
                parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                found = None
                for part in parts:
                    found = _join(found, self._annotation(scope, part))
                return found
            return None
        if dotted_parts(node) is None:
            return None
        named = self.ex(scope, node)
        return ("n", named) if named is not None else None

    # -- expressions ---------------------------------------------------------------------------
    def ex(self, scope: _Scope, node: ast.expr | None) -> Expr | None:
        """The expression tuple for ``node`` (None: it holds nothing the flow follows and
        calls nothing)."""
        if node is None:
            return None
        handler = self._expr.get(type(node))
        if handler is not None:
            return handler(scope, node)
        children = [self.ex(scope, c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
        children = [c for c in children if c is not None and c[0] not in ("v", "g", "d")]
        return ("e", *children) if children else None

    def _union(self, scope: _Scope, values: list[ast.expr], effects: Sequence[ast.expr] = ()) -> Expr | None:
        parts = [p for p in (self.ex(scope, v) for v in values) if p is not None]
        parts += [p for p in (self.ex(scope, e) for e in effects) if p is not None and p[0] not in ("v", "g", "d")]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else ("u", *parts)

    def _subscript(self, scope: _Scope, node: ast.Subscript) -> Expr | None:
        """`x[k]` (a key's values, `value_containers`), `x[1:3]` (a view)."""
        base = self.ex(scope, node.value)
        if isinstance(node.slice, ast.Slice):
            for bound in (node.slice.lower, node.slice.upper, node.slice.step):
                if bound is not None:
                    self._effect(scope, bound)
            return (":", base, slice_view(node.slice)) if base is not None else None
        key = self._key_of(scope, node.slice)
        return self._recalled(scope, node, ("[", base, key) if base is not None else None)

    def _display(self, scope: _Scope, node: ast.List | ast.Tuple | ast.Set | ast.Dict) -> Expr | None:
        """`[f, g]`, `{"a": f}`: a container of its own, its entries per constant key
        (positions, for lists and tuples, until a starred element)."""
        entries: list[tuple] = []
        if isinstance(node, ast.Dict):
            for key_node, value_node in zip(node.keys, node.values, strict=True):
                value = self.ex(scope, value_node)
                if key_node is None:
                    if value is not None:
                        entries.append((None, value, 2))
                    continue
                key = self._key_of(scope, key_node)
                if value is not None:
                    entries.append((key, value, 0))
        else:
            positional = not isinstance(node, ast.Set)
            for index, element in enumerate(node.elts):
                if isinstance(element, ast.Starred):
                    positional = False
                    value = self.ex(scope, element.value)
                    if value is not None:
                        entries.append((None, value, 1))
                    continue
                value = self.ex(scope, element)
                if value is not None:
                    entries.append((str(index) if positional else None, value, 0))
        if not entries and isinstance(node, ast.Tuple):
            return None  # `()` never grows: nothing to hold
        # `xs = []`, `d = {}`: a container of its own even while empty, so what `append` or a
        # store puts in it stays one element (`pop()` gives the stored tuple, not its parts)
        return ("l", self._site(scope, node), tuple(entries))

    def _site(self, scope: _Scope, node: ast.expr, kind: str | None = None) -> str:
        kind = kind or {ast.List: "l", ast.Tuple: "t", ast.Set: "s"}.get(type(node), "d")
        _, line, column, _, _ = self._key(scope, node)
        return self.intern(f"%{kind}@{scope.key}:{line}:{column}")

    def _name_load(self, scope: _Scope, node: ast.Name) -> Expr | None:
        name = node.id
        current: _Scope | None = scope
        own = True
        while current is not None and current.kind != "module":
            if name in current.globals:
                break
            if (own or current.kind == "function") and name in current.imports:
                return ("g", self.intern(current.imports[name]))
            if (own or current.kind == "function") and name in current.names:
                version = current.versions.get(name) if own else None
                suffix = f"#{version}" if version else ""
                return ("v", self.intern(current.loc(name) + suffix))
            own = False
            current = current.parent
        module = current if current is not None else scope
        while module.parent is not None:
            module = module.parent
        if name in module.names:
            version = module.versions.get(name) if module is scope else None
            return ("v", self.intern(f"{self.module}.{name}#{version}" if version else f"{self.module}.{name}"))
        dotted = self.st.resolve_parts([name])
        if dotted:
            return ("g", self.intern(dotted))
        stars = self.st.imports.stars
        return ("w", tuple(stars), name) if stars else None

    def _name_store(self, scope: _Scope, name: str) -> Expr:
        if name in scope.globals or scope.kind == "module":
            return ("v", self.intern(f"{self.module}.{name}"))
        return ("v", self.intern(scope.loc(name)))

    def _attribute(self, scope: _Scope, node: ast.Attribute) -> Expr | None:
        base = self.ex(scope, node.value)
        if base is None:
            return None
        if base[0] == "g":
            return ("g", self.intern(canonical(f"{base[1]}.{node.attr}")))
        return self._recalled(scope, node, _attribute(base, self.intern(node.attr)))

    def _named(self, scope: _Scope, node: ast.NamedExpr) -> Expr | None:
        value = self.ex(scope, node.value)
        scope.names.add(node.target.id)
        self._store(scope, node.target, value)
        return value

    def _yield(self, scope: _Scope, node: ast.Yield | ast.YieldFrom) -> Expr | None:
        self._returned(scope, self.ex(scope, node.value))
        scope.memory.clear()
        return None

    def _await(self, scope: _Scope, node: ast.Await) -> Expr | None:
        value = self.ex(scope, node.value)
        scope.memory.clear()
        return value

    def _comprehension(
        self, scope: _Scope, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> Expr | None:
        scope.memory.clear()  # its elements are evaluated again after its calls
        for generator in node.generators:
            scope.names.update(bound_names(generator.target))
            self._store_loop(scope, generator.target, generator.iter)
            for test in generator.ifs:
                self._effect(scope, test)
        if isinstance(node, ast.DictComp):
            return self._union(scope, [node.value], [node.key])
        return self.ex(scope, node.elt)

    def _store_loop(self, scope: _Scope, target: ast.expr, iterated: ast.expr) -> None:
        """`for target in iterated`. Unpacking `zip(a, b)` or `enumerate(a)` into a tuple of
        the same width binds each name to its own argument's elements (`for i, (f, x) in
        enumerate(zip(fs, xs))`: ``f`` from ``fs`` alone), not to the union of all of them."""
        parts = self._unpacked_loop(scope, target, iterated)
        if parts is None:
            self._store(scope, target, self._iterated(scope, iterated))
            return
        for element, source in parts:
            if source is None:
                self._store(scope, element, None)  # enumerate's index
            else:
                self._store_loop(scope, element, source)

    def _unpacked_loop(
        self, scope: _Scope, target: ast.expr, iterated: ast.expr
    ) -> list[tuple[ast.expr, ast.expr | None]] | None:
        """Which argument of a `zip`/`enumerate` each element of ``target`` iterates, or None."""
        if not isinstance(target, (ast.Tuple, ast.List)) or _starred(target) or not isinstance(iterated, ast.Call):
            return None
        if any(isinstance(a, ast.Starred) for a in iterated.args) or any(k.arg is None for k in iterated.keywords):
            return None
        callee = self.ex(scope, iterated.func)
        name = callee[1] if callee is not None and callee[0] == "g" else None
        if (
            name == "zip"
            and len(iterated.args) == len(target.elts)
            and {k.arg for k in iterated.keywords} <= {"strict"}
        ):
            parts: list[tuple[ast.expr, ast.expr | None]] = list(zip(target.elts, iterated.args, strict=True))
        elif name == "enumerate" and len(iterated.args) == 1 and len(target.elts) == 2:
            parts = [(target.elts[0], None), (target.elts[1], iterated.args[0])]
        else:
            return None
        for keyword in iterated.keywords:
            self._effect(scope, keyword.value)
        scope.memory.clear()  # the call runs now
        self.facts.append(("x", ("o", name, self._key(scope, iterated))))
        return parts

    def _iterated(self, scope: _Scope, node: ast.expr) -> Expr | None:
        """What `for x in node` binds: the elements, or what an iterator object's __next__ returns."""
        value = self.ex(scope, node)
        return ("t", value, self._key(scope, node)) if value is not None else None

    def _lambda(self, scope: _Scope, node: ast.Lambda) -> Expr:
        scope.lambdas += 1
        name = f"<lambda{scope.lambdas}>"
        qualname = self._def_qualname(scope, name)
        inner = self._function_scope(scope, qualname, node.args, "f")
        inner.extra = True
        self._returned(inner, self.ex(inner, node.body))
        functions = self.st.summary.functions
        if qualname not in functions:
            display = qualname.removeprefix(f"{self.module}.")
            functions[qualname] = FunctionSummary(qualname, display, node.lineno, list(self.defs[qualname][0]))
        return ("d", qualname)

    def _key(self, scope: _Scope, node: ast.AST) -> tuple[str, int, int, int, int]:
        """A call site's key: its scope, start and end (chained calls share their start)."""
        return (scope.key, *self.st.span(node))

    def _call(self, scope: _Scope, node: ast.Call) -> Expr | None:
        callee = self.ex(scope, node.func)
        args = tuple(self._argument(scope, a) for a in node.args)
        kwargs = tuple((kw.arg, self.ex(scope, kw.value)) for kw in node.keywords)
        scope.memory.clear()  # the call runs now: it may change what any path holds
        name = callee[1] if callee is not None and callee[0] == "g" else None
        if name is not None:
            special = self._library_call(scope, node, name, args, kwargs)
            if special is not None:
                outside = ("o", name, self._key(scope, node))
                return ("u", outside, special[0]) if special[0] is not None else ("e", outside)
        call = ("c", callee, args, kwargs, self._key(scope, node), scope.extra)
        if callee is None:
            effects = [a for a in args if a is not None] + [v for _, v in kwargs if v is not None]
            return ("e", *effects) if effects else None
        if callee[0] == "a" and isinstance(node.func, ast.Attribute):
            return self._method_call(scope, node, node.func, call, args)
        return call

    def _argument(self, scope: _Scope, node: ast.expr) -> Expr | None:
        value = self.ex(scope, node)
        return ("*", value) if isinstance(node, ast.Starred) and value is not None else value

    def _library_call(
        self, scope: _Scope, node: ast.Call, name: str, args: tuple, kwargs: tuple
    ) -> tuple[Expr | None] | None:
        """A call of a library function the flow knows: what it returns, as a 1-tuple."""
        values = [a[1] if a[0] == "*" else a for a in args if a is not None]
        values += [v for _, v in kwargs if v is not None]
        if name == "super":
            if len(node.args) == 2 and not node.keywords and args[0] is not None and args[1] is not None:
                return (("S", args[0], args[1]),)  # super(Cls, obj): Cls's bases on obj's class
            if args or kwargs or scope.class_qualname is None or scope.self_loc is None:
                return (None,)
            return (("s", scope.class_qualname, scope.self_loc),)
        if name == "dict" and not args and kwargs:
            entries = tuple((repr(k), v, 0) if k is not None else (None, v, 2) for k, v in kwargs if v is not None)
            return (("l", self._site(scope, node), entries) if entries else None,)
        if name in _EMPTY_CONTAINERS and not node.args and not node.keywords:
            # `modules = set()`, as `[]` and `{}`: a container of its own even while empty
            return (("l", self._site(scope, node, _EMPTY_CONTAINERS[name]), ()),)
        if name in VIEWS:
            return (("V", *values) if values else None,)
        if name in ("eval", "exec"):
            return (self._evaluated_source(scope, node, name),)
        if name == "next":
            return (("*", ("u", *values)) if values else None,)
        if name in PASSTHROUGH:
            return (("u", *values) if values else None,)
        if name in PARTIAL and args and args[0] is not None:
            return (("p", args[0], args[1:], kwargs),)
        if name in CALLS_FIRST and len(args) > 1 and args[0] is not None:
            elements = ("u", *[a for a in args[1:] if a is not None])
            return (("c", args[0], (elements,), (), self._key(scope, node), True),)
        if name in CAPTURED_FIRST and args and args[0] is not None:
            first = node.args[0]
            for element in first.elts if isinstance(first, (ast.Tuple, ast.List)) else [first]:
                value = self.ex(scope, element)
                if value is not None:  # what calling the captured callable runs (binder: EntryRef)
                    self.facts.append(("x", ("c", value, (), (), self._key(scope, element), False)))
        return None

    def _evaluated_source(self, scope: _Scope, node: ast.Call, name: str) -> Expr | None:
        """`eval("f()")`, `exec("f()")` of a constant string in the caller's namespace: its
        expressions as if written at the call (calls the binder never names). A string that
        does not parse, or namespaces given explicitly, leave it unresolved."""
        if len(node.args) != 1 or node.keywords:
            return None
        source = node.args[0]
        if not isinstance(source, ast.Constant) or not isinstance(source.value, str):
            return None
        try:
            tree = ast.parse(source.value, mode="eval" if name == "eval" else "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        for inner in ast.walk(tree):
            if "lineno" in inner._attributes:
                ast.copy_location(inner, node)  # the end position too
        saved, scope.extra = scope.extra, True
        try:
            if isinstance(tree, ast.Expression):
                return self.ex(scope, tree.body)
            assert isinstance(tree, ast.Module)  # mode="exec"
            for stmt in tree.body:
                if isinstance(stmt, ast.Expr):
                    self._effect(scope, stmt.value)
            return None
        finally:
            scope.extra = saved

    def _method_call(self, scope: _Scope, node: ast.Call, func: ast.Attribute, call: Expr, args: tuple) -> Expr:
        """`xs.append(f)`, `d.update(...)`, `d.get(k)`: stores into and reads of containers
        (``func``: the call's `xs.append`)."""
        receiver = call[1][1]
        method = func.attr
        stored: Expr | None = None
        if method in STORE_METHODS and args:
            stored = args[-1]
        elif method == "extend" and args and args[0] is not None:
            stored = ("*", args[0][1] if args[0][0] == "*" else args[0])
        if stored is not None:
            self.facts.append(
                ("=", ("[", receiver, None), stored[1] if stored[0] == "*" and method != "extend" else stored)
            )
        elif method == "update":
            self._update(scope, receiver, node, func, call)
        elif method == "setdefault" and len(args) > 1 and args[1] is not None:
            self.facts.append(("=", ("[", receiver, self._key_of(scope, node.args[0])), args[1]))
        if method in SHIFT_METHODS:
            self.facts.append(("x", ("z", receiver)))
        if method in READ_METHODS:
            defaults = [a for a in args[1:] if a is not None] if method in _DEFAULT_READS else []
            return ("u", call, ("m", receiver, self.intern(method)), *defaults)
        return call

    def _update(self, scope: _Scope, receiver: Expr, node: ast.Call, func: ast.Attribute, call: Expr) -> None:
        """`d.update(other, k=v)`: ``other``'s entries key by key, ``v`` under "k"."""
        _, _, args, kwargs, _, _ = call
        for arg in args:
            if arg is not None:
                self.facts.append(("=", ("{", receiver), arg[1] if arg[0] == "*" else arg))
        for name, value in kwargs:
            if value is not None:
                target = ("[", receiver, repr(name)) if name is not None else ("{", receiver)
                self.facts.append(("=", target, value))
        self._remember_update(scope, node, func, kwargs)

    def _remember_update(self, scope: _Scope, node: ast.Call, func: ast.Attribute, kwargs: tuple) -> None:
        """`d.update({"a": f}, b=g)` on a path: its "a" and "b" hold just those now."""
        path = access_path(func.value)
        if path is None or len(node.args) > 1 or any(k.arg is None for k in node.keywords):
            return
        entries: list[tuple[str, Expr | None]] = [(repr(name), value) for name, value in kwargs]
        if node.args:
            given = node.args[0]
            if not isinstance(given, ast.Dict):
                return
            for key_node, value_node in zip(given.keys, given.values, strict=True):
                key = constant_key(key_node) if key_node is not None else None
                if key is None or not isinstance(value_node, (ast.Name, ast.Attribute, ast.Constant)):
                    return
                entries.append((key, self.ex(scope, value_node)))
        for key, value in entries:
            scope.memory[(*path, "[" + key)] = value


class _Statements(FlowState):
    """The recorder's transfer functions: `flow.walk` takes it through one scope's statements,
    and it hands each part to the recorder, which records the facts.

    Each loop runs once (a flow-insensitive fact recorded twice adds nothing). The memory of
    stores (`value_memory`) is forgotten before and after any statement but a straight one;
    an `if` keeps it into its test and starts each branch from what it was after the test.
    A name the scope's top level (no open frame) rebinds is versioned (`_versioned_assign`).
    A `try`'s handlers are recorded after its `finally` block, as the recorder always did
    (the order of the facts list, and what the memory holds at each handler, depend on it):
    the walk passes over them, then walks them again on their own, in order."""

    loop_passes = 1

    def __init__(self, recorder: FactRecorder, scope: _Scope) -> None:
        self.recorder = recorder
        self.scope = scope
        self.passing: ast.stmt | None = None  # the try whose handlers the walk passes over now
        self.handler_walks = 0  # how many handler walks are open: their statements are nested

    def before(self, stmt: ast.stmt) -> None:
        if self.passing is None and type(stmt) not in STRAIGHT and not isinstance(stmt, ast.If):
            self.scope.memory.clear()
            if isinstance(stmt, ast.Delete):
                self.recorder._delete(self.scope, stmt)

    def after(self, stmt: ast.stmt) -> None:
        if self.passing is not None:
            return
        if isinstance(stmt, TRY_NODES) and stmt.handlers:
            self.handler_walks += 1
            for handler in stmt.handlers:
                walk(self, handler.body)
            self.handler_walks -= 1
        if type(stmt) not in STRAIGHT:
            self.scope.memory.clear()

    def simple(self, stmt: ast.stmt) -> None:
        if self.passing is not None:
            return
        scope = self.scope
        top = not self.frames and not self.handler_walks
        if top and scope.versioned and isinstance(stmt, ast.Assign) and _names_only(stmt.targets):
            self.recorder._versioned_assign(scope, stmt.targets, stmt.value)
        else:
            self.recorder._simple(scope, stmt)

    def definition(self, stmt: ast.stmt) -> None:
        if self.passing is None:
            self.recorder._definition(self.scope, stmt)

    def header(self, expr: ast.expr, stmt: ast.stmt) -> None:
        """A test, context manager or match subject is evaluated; a `for`'s iterable is read
        with its target (`loop_target`); a case guard is not looked at."""
        if self.passing is not None or isinstance(stmt, (ast.For, ast.AsyncFor)):
            return
        if isinstance(stmt, ast.Match) and expr is not stmt.subject:
            return
        self.recorder._effect(self.scope, expr)
        if isinstance(stmt, ast.If):
            self.recorder._narrowing(self.scope, expr)

    def loop_target(self, stmt: ast.For | ast.AsyncFor) -> None:
        if self.passing is None:
            self.recorder._store_loop(self.scope, stmt.target, stmt.iter)

    def fork(self, stmt: ast.stmt) -> Any:
        if self.passing is None and isinstance(stmt, ast.If):
            return dict(self.scope.memory)
        return None

    def branch(self, stmt: ast.stmt, index: int, start: Any) -> None:
        if self.passing is not None:
            if stmt is self.passing and isinstance(stmt, TRY_NODES) and index == len(stmt.handlers):
                self.passing = None  # the try's `else`
        elif isinstance(stmt, TRY_NODES) and index < len(stmt.handlers):
            self.passing = stmt
        elif isinstance(stmt, ast.If) and index:
            self.scope.memory = dict(start)


def record_facts(st: ModuleState) -> None:
    """Record the value-flow facts of the file ``st`` holds into its summary."""
    FactRecorder(st).run()


def _attribute(base: Expr, attr: str) -> Expr:
    return ("a", base, attr)


def _join(first: Expr | None, second: Expr | None) -> Expr | None:
    if first is None:
        return second
    if second is None:
        return first
    return ("u", first, second)


def _local_names(body: list[ast.stmt], names: set[str], declared: set[str]) -> None:
    """One pass over a function's statements: the names it binds (as `assigned_names`, imports
    too) into ``names``, its `global`/`nonlocal` names into ``declared``."""
    for stmt in statements(body):
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                names.update(bound_names(target))
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            names.update(bound_names(stmt.target))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            names.update(n for item in stmt.items if item.optional_vars for n in bound_names(item.optional_vars))
        elif isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Global, ast.Nonlocal)):
            declared.update(stmt.names)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names if a.name != "*")
        elif hasattr(stmt, "handlers"):  # try, and try/except* where the grammar has it
            names.update(h.name for h in stmt.handlers if h.name)


def _bound_elsewhere(body: list[ast.stmt], module: bool) -> set[str]:
    """Names bound other than by a top-level `name = ...` of ``body`` (in blocks, loops,
    definitions; for a module, also by `global` in its functions)."""
    names: set[str] = set()
    top = {id(s) for s in body if isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets)}
    for stmt in all_statements(body) if module else statements(body):
        if id(stmt) in top:
            continue
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            names.update(stmt.names)
        elif isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            names.update(n for t in stmt.targets for n in bound_names(t))
        elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            names.update(bound_names(stmt.target))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            names.update(n for item in stmt.items if item.optional_vars for n in bound_names(item.optional_vars))
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in stmt.names)
        names.update(h.name for h in getattr(stmt, "handlers", ()) if h.name)
    return names


def _bound_by_statement(stmt: ast.stmt) -> list[str]:
    """The names one statement binds in its own scope (not in blocks it holds)."""
    if isinstance(stmt, ast.Assign):
        return [n for t in stmt.targets for n in bound_names(t)]
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        return list(bound_names(stmt.target))
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [n for item in stmt.items if item.optional_vars for n in bound_names(item.optional_vars)]
    if isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    return [h.name for h in getattr(stmt, "handlers", ()) if h.name]


def _loop_and_with_names(body: list[ast.stmt]) -> set[str]:
    """Names a module binds by `for` and `with` (its assignments are `module_assigned`)."""
    names: set[str] = set()
    for stmt in statements(body):
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            names.update(bound_names(stmt.target))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    names.update(bound_names(item.optional_vars))
    return names


def _instance_dict_key(target: ast.Subscript) -> tuple[ast.expr, str] | None:
    """The object and attribute `obj.__dict__["name"]` names (an identifier constant), or None."""
    holder, key = target.value, target.slice
    if not (isinstance(holder, ast.Attribute) and holder.attr == "__dict__"):
        return None
    if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.isidentifier():
        return holder.value, key.value
    return None


def _names_only(targets: list[ast.expr]) -> TypeGuard[list[ast.Name]]:
    """Every target is a plain name (`a = b = value`)."""
    return all(isinstance(t, ast.Name) for t in targets)


def _same_width(targets: list[ast.expr], width: int) -> list[ast.Tuple | ast.List] | None:
    """The targets, if each is a tuple or list of ``width`` elements none starred (`a, b = x, y`)."""
    found = [t for t in targets if isinstance(t, (ast.Tuple, ast.List)) and len(t.elts) == width and not _starred(t)]
    return found if len(found) == len(targets) else None


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _assigned_in(body: list[ast.stmt]) -> set[str]:
    """Names a function body binds anywhere (its nested scopes aside)."""
    names: set[str] = set()
    _local_names(body, names, set())
    return names


def _passthrough_params(
    node: ast.FunctionDef | ast.AsyncFunctionDef, params: tuple[str, ...], assigned: set[str]
) -> frozenset[str]:
    """The parameters a `return p` hands back to each caller as its own argument: never
    rebound in the body, by a walrus or by a nested function's `nonlocal`, in a function that
    is no generator (whose `return` value never reaches the caller).
    Typed identity helpers (Megatron's `apply_module(m)`, `not_none(x)`) are called with
    every module of a project: read context-insensitively, their return would be all of them."""
    rebound = set(assigned)
    for inner in ast.walk(node):
        if isinstance(inner, (ast.Yield, ast.YieldFrom)):
            return frozenset()
        if isinstance(inner, ast.Nonlocal):
            rebound.update(inner.names)
        elif isinstance(inner, ast.NamedExpr) and isinstance(inner.target, ast.Name):
            rebound.add(inner.target.id)
    return frozenset(params) - rebound


def _starred(target: ast.Tuple | ast.List) -> bool:
    return any(isinstance(e, ast.Starred) for e in target.elts)


def _method_kind(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    for decorator in node.decorator_list:
        name = decorator.id if isinstance(decorator, ast.Name) else getattr(decorator, "attr", "")
        if name in ("staticmethod", "classmethod", "property", "cached_property"):
            return {"staticmethod": "s", "classmethod": "c"}.get(name, "p")
    return "m"


def _bound_by(stmt: ast.stmt) -> list[str]:
    """Names a class-body statement binds."""
    if isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [n for t in stmt.targets for n in bound_names(t)]
    if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        return list(bound_names(stmt.target))
    return []
