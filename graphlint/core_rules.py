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
            import torch

            with torch.cuda.graph(g):
                y = model(x)  # noqa: GL101
        """,
        use_instead="""
            import torch

            with torch.cuda.graph(g):
                y = model(x)
        """,
    )
)

INTERNAL_ERROR = declare(
    Rule(
        code="GL002",
        name="internal-error",
        summary=(
            "graphlint itself failed while analysing one file, one capture region or one "
            "function (a bug in graphlint, not in your code). The message names the step "
            "and the exception; `--verbose` prints the traceback."
        ),
        why=(
            "An analysis that fails silently is worse than none: the hazards it would have "
            "found are missing from the report and nobody knows. The failure is reported on "
            "the file it happened in, every other file and region is still checked, and the "
            "run exits with status 2 after printing everything else, so CI notices. It cannot "
            "be deselected or suppressed; please report it with the traceback."
        ),
        example="""
            # any file: the finding is about graphlint, not about the code
        """,
        use_instead="""
            # report the traceback (`graphlint check --verbose`) to graphlint's maintainers
        """,
    )
)
