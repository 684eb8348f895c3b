"""GL5xx: findings of the runtime sanitizer, declared like every other rule."""

from graphlint.registry import Rule, declare

UNSTABLE_CAPTURE = declare(
    Rule(
        code="GL501",
        name="unstable-capture",
        summary=(
            "Two captures of the same callable on inputs of equal shapes give different node sets, "
            "kernels, launch shapes or argument layouts."
        ),
        why=(
            "The graph you replay is one of several the code can produce: kernel choice depends on "
            "addresses, alignment, values or Python state at capture. Re-pointing or reusing it "
            "for other inputs is not safe, and the captured behaviour is an accident of the sample."
        ),
        example="""
            def step(x):
                if step.calls % 2:  # Python state decides the graph
                    return x * 2
                step.calls += 1
                return x + x
        """,
        use_instead="""
            def step(x):
                return x * 2
        """,
    )
)

BAKED_HOST_VALUE = declare(
    Rule(
        code="GL505",
        name="capture-baked-host-value",
        summary=(
            "A non-pointer kernel argument differs between two captures of equal shapes: a host "
            "value (a Python float, a random draw, a counter) frozen into the graph."
        ),
        why="Every replay reuses the value of the capture, whatever the host-side code would compute now.",
        example="""
            def step(x):
                return x * random.random()
        """,
        use_instead="""
            def step(x, scale):  # scale: a device tensor updated before each replay
                return x * scale
        """,
    )
)
