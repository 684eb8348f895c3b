"""Fix operations carried out on the file's concrete syntax tree (libcst).

Analysis reads the stdlib `ast` for speed; a fix is a transformation of the libcst tree,
found by the span the analysis gave the node, so everything the transformation does not
touch (comments, trailing commas, parentheses, line breaks, CRLF endings) is rendered back
exactly as it was. Only files with fixes to apply or to show are parsed here.

Text edits, for the JSON and SARIF reports and the language server, are derived from the
transformation: the smallest changed span between the file and the file with that one fix
applied (`with_edits`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from graphlint.findings import Edit, Finding
from graphlint.fixing.ops import (
    AppendMethodCall,
    FixOperation,
    InsertStatementAfter,
    RenameAttribute,
    ReplaceAssignWithCopy,
    SetKeyword,
)

Rewrite = Callable[[cst.CSTNode], "cst.CSTNode | cst.FlattenSentinel"]


class FixError(Exception):
    """A fix cannot be carried out on this text; the file must be left as it is."""


# The node kinds each operation may name: a span shared by several nodes (an argument and
# its value) resolves to the outermost node of the right kind.
_KINDS: dict[type, tuple[type, ...]] = {
    AppendMethodCall: (cst.BaseExpression,),
    ReplaceAssignWithCopy: (cst.Assign,),
    SetKeyword: (cst.Call,),
    InsertStatementAfter: (cst.BaseSmallStatement, cst.BaseCompoundStatement),
    RenameAttribute: (cst.Attribute,),
}


class _Locator(cst.CSTVisitor):
    """Finds the node each operation names, by its span, and the node that holds it."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, operations: Iterable[FixOperation]) -> None:
        super().__init__()
        self.wanted: dict[tuple[int, int, int, int], list[FixOperation]] = {}
        for operation in operations:
            self.wanted.setdefault(operation.span, []).append(operation)
        self.found: dict[FixOperation, tuple[cst.CSTNode, cst.CSTNode | None]] = {}
        self._stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        position = self.get_metadata(PositionProvider, node, None)
        if position is not None:
            span = (position.start.line, position.start.column + 1, position.end.line, position.end.column + 1)
            for operation in self.wanted.get(span, ()):
                if operation not in self.found and isinstance(node, _KINDS[type(operation)]):
                    self.found[operation] = (node, self._stack[-1] if self._stack else None)
        self._stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()


class _Rewriter(cst.CSTTransformer):
    """Replaces each chosen original node by its rewrite of the (already updated) node."""

    def __init__(self, rewrites: dict[int, tuple[cst.CSTNode, list[Rewrite]]]) -> None:
        super().__init__()
        self.rewrites = rewrites

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[override]
        entry = self.rewrites.get(id(original_node))
        if entry is None:
            return updated_node
        result: cst.CSTNode | cst.FlattenSentinel[cst.CSTNode] = updated_node
        for rewrite in entry[1]:
            if isinstance(result, cst.FlattenSentinel):
                raise FixError("two fixes rewrite one statement")
            result = rewrite(result)
        return result


class ParsedSource:
    """One file's libcst tree and the nodes its fix operations name, parsed once."""

    def __init__(self, text: str, operations: Iterable[FixOperation]) -> None:
        locator = _Locator(operations)
        try:
            self.module = cst.parse_module(text)
            # no copy: the rewrite recognises the located nodes by identity in this very tree
            MetadataWrapper(self.module, unsafe_skip_copy=True).visit(locator)
        except Exception as error:  # ParserSyntaxError, RecursionError on very deep nesting, ...
            raise FixError(
                f"libcst cannot parse the file: {(str(error) or type(error).__name__).splitlines()[0]}"
            ) from None
        self.found = locator.found

    def render(self, operations: Iterable[FixOperation]) -> str:
        """The file's text with ``operations`` carried out (they must not overlap)."""
        rewrites: dict[int, tuple[cst.CSTNode, list[Rewrite]]] = {}
        for operation in operations:
            located = self.found.get(operation)
            if located is None:
                line, column = operation.span[:2]
                raise FixError(
                    f"the fix at line {line}, column {column} names code that is not there "
                    "(the file changed since it was checked)"
                )
            node, rewrite = _rewrite_for(operation, *located, self.module.config_for_parsing)
            rewrites.setdefault(id(node), (node, []))[1].append(rewrite)
        try:
            return self.module.visit(_Rewriter(rewrites)).code
        except FixError:
            raise
        except Exception as error:  # a rewrite libcst cannot place or render
            raise FixError(f"the fix cannot be applied: {type(error).__name__}: {error}") from None


def apply_operations(text: str, operations: list[FixOperation]) -> str:
    """``text`` with every operation carried out in one pass; FixError if one cannot be."""
    return ParsedSource(text, operations).render(operations)


def _rewrite_for(
    operation: FixOperation, node: cst.CSTNode, parent: cst.CSTNode | None, config: cst.PartialParserConfig
) -> tuple[cst.CSTNode, Rewrite]:
    """The node to rewrite for ``operation`` (the statement line, for an insertion after it) and how."""
    if isinstance(operation, AppendMethodCall):
        return node, lambda updated: _method_call(updated, operation.method)
    if isinstance(operation, ReplaceAssignWithCopy):
        return node, _copy_into
    if isinstance(operation, SetKeyword):
        value = _parse_expression(operation.value, config)
        return node, lambda updated: _set_keyword(updated, operation.keyword, value)
    if isinstance(operation, RenameAttribute):
        if not operation.attr.isidentifier():
            raise FixError(f"the fix's attribute `{operation.attr}` is not a Python name")
        return node, lambda updated: updated.with_changes(attr=cst.Name(operation.attr))
    line = _parse_statement(operation.code, config)
    if isinstance(node, cst.BaseCompoundStatement):
        return node, lambda updated: cst.FlattenSentinel([updated, line])
    if isinstance(parent, cst.SimpleStatementLine) and parent.body[-1] is node:
        return parent, lambda updated: cst.FlattenSentinel([updated, line])
    if not isinstance(line, cst.SimpleStatementLine):
        raise FixError(f"the fix's statement `{operation.code.splitlines()[0]}` cannot share a line")
    return node, lambda updated: _after_on_same_line(updated, line.body[0])


def _parse_expression(code: str, config: cst.PartialParserConfig) -> cst.BaseExpression:
    try:
        return cst.parse_expression(code, config)
    except Exception:
        raise FixError(f"the fix's value `{code}` is not a Python expression") from None


def _parse_statement(code: str, config: cst.PartialParserConfig) -> cst.SimpleStatementLine | cst.If:
    """One simple statement, or an `if` without `else` guarding simple ones (`if x is not None: ...`)."""
    try:
        statement = cst.parse_statement(code, config)
    except Exception:
        statement = None
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
        return statement
    if isinstance(statement, cst.If) and statement.orelse is None and isinstance(statement.body, cst.IndentedBlock):
        if all(isinstance(inner, cst.SimpleStatementLine) for inner in statement.body.body):
            return statement
    raise FixError(f"the fix's statement `{code}` is not one simple statement or an `if` guarding some")


def _atom(node: cst.BaseExpression) -> cst.BaseExpression:
    """``node``, parenthesised unless it already binds tighter than an attribute access."""
    if node.lpar or isinstance(node, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _method_call(node: cst.CSTNode, method: str) -> cst.Call:
    assert isinstance(node, cst.BaseExpression)
    return cst.Call(func=cst.Attribute(value=_atom(node), attr=cst.Name(method)))


def _copy_into(node: cst.CSTNode) -> cst.Expr:
    """``target = value`` -> ``target.copy_(value)``, keeping the statement's semicolon."""
    assert isinstance(node, cst.Assign)
    if len(node.targets) != 1:
        raise FixError("a chained assignment cannot become one copy")
    value = node.value
    if isinstance(value, (cst.Tuple, cst.Yield)) and not value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    call = cst.Call(
        func=cst.Attribute(value=_atom(node.targets[0].target), attr=cst.Name("copy_")), args=[cst.Arg(value)]
    )
    return cst.Expr(value=call, semicolon=node.semicolon)


def _after_on_same_line(node: cst.CSTNode, new: cst.BaseSmallStatement) -> cst.FlattenSentinel:
    """Insert ``new`` after a small statement that shares its line (``a; b`` or ``if c: a``)."""
    assert isinstance(node, cst.BaseSmallStatement)
    separator = cst.Semicolon(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(" "))
    return cst.FlattenSentinel([node.with_changes(semicolon=separator), new.with_changes(semicolon=node.semicolon)])


def _set_keyword(node: cst.CSTNode, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """Set ``keyword=value`` on the call: in place when passed, else as a new last argument."""
    assert isinstance(node, cst.Call)
    args = list(node.args)
    for index, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            args[index] = arg.with_changes(value=value)
            return node.with_changes(args=args)
    no_space = cst.SimpleWhitespace("")
    new = cst.Arg(value=value, keyword=cst.Name(keyword), equal=cst.AssignEqual(no_space, no_space))
    if not args:
        return node.with_changes(args=[new])
    last = args[-1]
    separator = _separator(node)
    comma = last.comma
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        # one argument a line, trailing comma: the new one gets a line of its own after it
        if isinstance(separator, cst.ParenthesizedWhitespace):
            closing = comma.whitespace_after  # its comment stays on the last argument's line
            between = closing.with_changes(indent=separator.indent, last_line=separator.last_line)
            last = last.with_changes(comma=comma.with_changes(whitespace_after=between))
            new = new.with_changes(comma=cst.Comma(no_space, _line_break(closing)))
            return node.with_changes(args=[*args[:-1], last, new])
    # otherwise right after the last argument: its trailing comma and the space before `)` move behind the new one
    new = new.with_changes(comma=comma, whitespace_after_arg=last.whitespace_after_arg)
    last = last.with_changes(comma=cst.Comma(no_space, separator), whitespace_after_arg=no_space)
    return node.with_changes(args=[*args[:-1], last, new])


def _separator(call: cst.Call) -> cst.BaseParenthesizableWhitespace:
    """The whitespace between two of the call's arguments, without any comment it holds."""
    args = call.args
    previous = args[-2].comma if len(args) >= 2 else cst.MaybeSentinel.DEFAULT
    whitespace = previous.whitespace_after if isinstance(previous, cst.Comma) else call.whitespace_before_args
    if isinstance(whitespace, cst.ParenthesizedWhitespace):
        return _line_break(whitespace)
    return cst.SimpleWhitespace(" ")


def _line_break(indent_from: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
    """A plain line break (no comment, no blank lines) indented like ``indent_from``."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=(), indent=indent_from.indent, last_line=indent_from.last_line
    )


def text_edit(before: str, after: str) -> Edit | None:
    """The one edit that turns ``before`` into ``after``: the span between their common ends,
    widened to whole words (`False` -> `True`, not `Fals` -> `Tru`) and whole CRLF line ends."""
    if before == after:
        return None
    start = _common_prefix(before, after)
    suffix = _common_prefix(before[start:][::-1], after[start:][::-1])
    end, new_end = len(before) - suffix, len(after) - suffix
    while start > 0 and (
        before[start - 1 : start + 1] == "\r\n"
        or (_is_word(before[start - 1]) and _is_word(_firsts(before, after, start, end, new_end)))
    ):
        start -= 1
    while end < len(before) and (
        before[end - 1 : end + 1] == "\r\n"
        or (_is_word(before[end]) and _is_word(_lasts(before, after, start, end, new_end)))
    ):
        end, new_end = end + 1, new_end + 1
    line, column = _line_column(before, start)
    end_line, end_column = _line_column(before, end)
    return Edit(line, column, end_line, end_column, after[start:new_end])


def _firsts(before: str, after: str, start: int, end: int, new_end: int) -> str:
    """The first character of the replaced text and of its replacement (either may be empty)."""
    return before[start:end][:1] + after[start:new_end][:1]


def _lasts(before: str, after: str, start: int, end: int, new_end: int) -> str:
    return before[start:end][-1:] + after[start:new_end][-1:]


def _is_word(chars: str) -> bool:
    """Whether any of ``chars`` belongs in an identifier or a number."""
    return any(char.isalnum() or char == "_" for char in chars)


def _common_prefix(a: str, b: str) -> int:
    limit = min(len(a), len(b))
    low, high = 0, limit
    while low < high:  # the longest prefix that matches, by halving: string compares run in C
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _line_column(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def with_edits(findings: list[Finding], sources: Mapping[str, bytes]) -> list[Finding]:
    """``findings`` with the text edits of their fixes filled in, from each file's libcst tree.

    Only files whose findings carry fix operations are parsed. A fix that cannot be carried
    out on the text at hand (the file is gone or changed, libcst cannot read it) keeps no
    edits, so tooling sees that there is nothing to apply.
    """
    wanted: dict[str, list[int]] = {}
    for index, finding in enumerate(findings):
        if finding.fix is not None and finding.fix.operations and not finding.fix.edits:
            wanted.setdefault(finding.path, []).append(index)
    result = list(findings)
    for path, indexes in wanted.items():
        text = fixable_text(sources.get(path))
        fixes = {findings[i].fix.operations for i in indexes}  # type: ignore[union-attr]
        edits = _edits_of(text, fixes) if text is not None else {}
        for i in indexes:
            fix = findings[i].fix
            assert fix is not None
            result[i] = replace(findings[i], fix=replace(fix, edits=edits.get(fix.operations, ())))
    return result


def _edits_of(text: str, fixes: set[tuple[FixOperation, ...]]) -> dict[tuple[FixOperation, ...], tuple[Edit, ...]]:
    try:
        parsed = ParsedSource(text, [operation for operations in fixes for operation in operations])
    except FixError:
        return {}
    edits: dict[tuple[FixOperation, ...], tuple[Edit, ...]] = {}
    for operations in fixes:
        try:
            edit = text_edit(text, parsed.render(operations))
        except FixError:
            continue
        edits[operations] = (edit,) if edit is not None else ()
    return edits


def fixable_text(data: bytes | None) -> str | None:
    """The text `--fix` edits (a BOM dropped); None where it would not fix (no file, not UTF-8)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
