"""Rules about the run itself rather than about CUDA graphs: bad input and stale suppressions."""

from graphlint.registry import Rule, declare

PARSE_ERROR = declare(
    Rule(
        code="GL000",
        name="parse-error",
        summary=(
            "A file could not be analysed: a syntax error, bytes that are not UTF-8, a binary "
            "file, a file that could not be read or that vanished during the run."
        ),
        why=(
            "A file graphlint cannot read is a file it cannot vouch for. The run goes on with "
            "every other file, and the reason is reported so the gap is visible in CI."
        ),
        example="""
            def step(x)
                return x.item()
        """,
        use_instead="""
            def step(x):
                return x
        """,
    )
)

UNUSED_SUPPRESSION = declare(
    Rule(
        code="GL001",
        name="unused-suppression",
        severity="warning",
        summary=(
            "A `# noqa: GLxxx` or `# graphlint: ignore[GLxxx]` comment names a graphlint code "
            "that no finding on that line carries (only codes enabled in the run are judged; "
            "a bare `# noqa` and other tools' codes are left alone)."
        ),
        why=(
            "A suppression that no longer suppresses anything hides the next real hazard on "
            "that line. Removing it keeps suppressions meaningful."
        ),
        example="""
            with torch.cuda.graph(g):
                y = model(x)  # noqa: GL101
        """,
        use_instead="""
            with torch.cuda.graph(g):
                y = model(x)
        """,
    )
)
