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

ALIGNMENT_HAZARD = declare(
    Rule(
        code="GL502",
        name="alignment-hazard",
        summary=(
            "A pointer handed to a graph (a parameterized launch, or static input re-pointing) is "
            "less aligned than the pointer the kernel was captured with, where a capture at that "
            "alignment picks another kernel."
        ),
        why=(
            "Kernels are chosen by alignment: a vectorized kernel captured on a 16-byte aligned "
            "input issues 16-byte loads. Pointed at a 4-byte aligned view it reads misaligned "
            "memory: a fault, or silently wrong values."
        ),
        example="""
            graph = capture(fn, x)            # x is 256-byte aligned
            launch(graph, base[1:].view(...)) # a view 4 bytes in
        """,
        use_instead="""
            graph = capture(fn, x)
            launch(graph, base[1:].clone())   # a fresh, aligned copy
        """,
    )
)

UNORDERED_ACCESS = declare(
    Rule(
        code="GL504",
        name="unordered-cross-stream-access",
        summary=(
            "Two graph nodes touch overlapping memory, at least one writes, and no dependency path "
            "orders them (typically a side stream not joined before its result is read)."
        ),
        why="The nodes may run in either order, or at once, on every replay: a data race baked into the graph.",
        example="""
            with torch.cuda.stream(side):
                torch.mul(a, 3.0, out=x)
            y = x + b  # read before the join
            torch.cuda.current_stream().wait_stream(side)
        """,
        use_instead="""
            with torch.cuda.stream(side):
                torch.mul(a, 3.0, out=x)
            torch.cuda.current_stream().wait_stream(side)
            y = x + b
        """,
    )
)

GRAPH_POOL_MEMORY = declare(
    Rule(
        code="GL508",
        name="graph-pool-memory",
        severity="info",
        summary=(
            "Not a hazard: the bytes a captured graph's private memory pool holds, and how much a "
            "parameterized launch (outputs from the default pool) would give back."
        ),
        why=(
            "Each graph keeps its intermediates and outputs in a private pool for its whole life; "
            "many graphs (one per batch size) multiply that memory."
        ),
        example="""
            graphs = {bs: capture(model, x[:bs]) for bs in sizes}  # one pool each
        """,
        use_instead="""
            pool = torch.cuda.graph_pool_handle()
            graphs = {bs: capture(model, x[:bs], pool=pool) for bs in sorted(sizes, reverse=True)}
        """,
    )
)

STALE_OUTPUT_READ = declare(
    Rule(
        code="GL503",
        name="stale-output-read",
        summary=(
            "An output of replay k (a view, a `detach()`, a graphed callable's return value) read "
            "after replay k+1 overwrote it; or the static output tensor itself kept across replays "
            "(`kept.append(static_out)`): one list, dict or deque holding that very object, directly "
            "or in tuples, two or more times."
        ),
        why=(
            "Every replay writes its outputs into the same memory; a handle kept from an earlier "
            "replay silently shows the newest values, and so does every entry of a list that kept "
            "the static output itself. What the runtime check sees of the kept case: the same "
            "static output object (the tensor the capture made, not a view or copy) held in one "
            "list, dict (values) or deque, directly or in tuples, whose count of it grew from one "
            "replay to a later one and reached two (so from the third replay on). What it cannot "
            "see: a single kept reference read later (it always holds the newest values; GL201 "
            "finds that in the source), copies, attributes and module globals, a tuple on its own or "
            "another object holding it, and references held only in C++. It scans the heap only when "
            "the output's reference count reached a new high since the previous replay, at most "
            "eight times per output."
        ),
        example="""
            first = graphed(a)
            second = graphed(b)
            compare(first, second)  # first now holds b's result
            for batch in batches:
                static_in.copy_(batch)
                g.replay()
                kept.append(static_out)  # every entry is the last batch's result
        """,
        use_instead="""
            first = graphed(a).clone()
            second = graphed(b)
            compare(first, second)
            for batch in batches:
                static_in.copy_(batch)
                g.replay()
                kept.append(static_out.clone())
        """,
    )
)

REPLAY_ON_UNCHANGED_INPUTS = declare(
    Rule(
        code="GL506",
        name="replay-on-unchanged-inputs",
        severity="warning",
        summary=(
            "A replay whose static inputs were not written since the previous replay, in a graph "
            "replayed more than once that neither writes its own inputs nor draws random numbers."
        ),
        why="The graph recomputes on the same inputs: new data never reached the static input buffers.",
        example="""
            for batch in loader:
                static_x = batch  # rebinding, not copying
                g.replay()
        """,
        use_instead="""
            for batch in loader:
                static_x.copy_(batch)
                g.replay()
        """,
    )
)

FIXED_ADDRESS_REPOINTED = declare(
    Rule(
        code="GL507",
        name="fixed-address-repointed",
        severity="warning",
        summary=(
            "A parameterized launch would move a pointer that must stay fixed: a buffer a NCCL, "
            "symmetric-memory or NVSHMEM kernel uses (registered at its address), or a tensor in "
            "memory the graph itself writes (its private pool, parameters it updates)."
        ),
        why=(
            "Communication kernels find their peers' buffers by the addresses registered at "
            "setup: a re-pointed collective reads or writes memory the other ranks do not know, "
            "and communication is silently corrupted. A kernel re-pointed at memory the graph "
            "overwrites during the same replay reads values that change under it. The launcher "
            "never moves such pointers: it copies those tensors through the graph's static "
            "buffers instead and says so."
        ),
        example="""
            def step(x):
                y = layer(x)
                dist.all_reduce(y)  # NCCL kernel: y's buffer is registered
                return y

            launcher = ParameterizedLauncher(step, [x])
            launcher(launcher.outputs[0])  # an input inside the graph's own pool
        """,
        use_instead="""
            launcher = ParameterizedLauncher(step, [x])  # all-reduced output cloned, the rest re-pointed
            (y,) = launcher(x_new)                       # a tensor the graph does not write
        """,
    )
)

SANITIZER_INACTIVE = declare(
    Rule(
        code="GL500",
        name="sanitizer-inactive",
        severity="info",
        summary=(
            "Not a hazard, and never a clean run: the runtime sanitizer did not run (no CUDA device, torch, "
            "CUDA or cuda-bindings versions outside the tested matrix, a program that ended without handing "
            "its report back), ran on untested versions because GRAPHLINT_SANITIZE_UNTESTED=1 was set, or "
            "refused to analyse a graph; the message says which and why."
        ),
        why=(
            "An empty report from a sanitizer that did not look is not evidence that the program is "
            "safe. CI must be able to tell `no findings` from `nothing was checked`."
        ),
        example="""
            # CI on a CPU runner: every test passes, the report is empty
            pytest --graphlint-sanitize=error --graphlint-report findings.json
        """,
        use_instead="""
            # run the sanitized job on a GPU runner with the tested versions, or say that an
            # inactive sanitizer is acceptable here
            pytest --graphlint-sanitize=error --graphlint-sanitize-allow-inactive
        """,
    )
)

GRAPHED_GRAD_ALIAS = declare(
    Rule(
        code="GL509",
        name="graphed-grad-aliases-static-buffer",
        severity="error",
        summary=(
            "Parameters' `.grad` are aliases of a `make_graphed_callables` backward graph's static gradient "
            "buffer while gradients accumulate over several backward passes: the next backward replay "
            "overwrites the accumulated sum (pytorch#181723)."
        ),
        why=(
            "When a parameter has no `.grad`, autograd adopts the graphed backward's output tensor as its "
            "`.grad` instead of copying it. The next replay writes the new gradient into that same memory "
            "and the accumulation adds it onto itself: after four accumulated steps the gradient is twice "
            "the last one, not the sum, silently. Zeroing `.grad` in place keeps the alias (the result is "
            "then twice the gradient); only clearing it to None breaks it. The sanitizer reports it at the "
            "backward() call, naming each parameter once per backward graph; it sees only graphs made by "
            "make_graphed_callables while the sanitizer is installed."
        ),
        example="""
            model = torch.cuda.make_graphed_callables(model, (x,))
            for i, (x, y) in enumerate(batches):
                loss_fn(model(x), y).backward()  # accumulates into the static buffer
                if (i + 1) % 4 == 0:
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=False)
        """,
        use_instead="""
            model = torch.cuda.make_graphed_callables(model, (x,))
            for x, y in batches:
                optimizer.zero_grad(set_to_none=True)  # no alias survives into the next backward
                loss_fn(model(x), y).backward()
                optimizer.step()
            # to accumulate, keep the sums yourself and clear .grad after each backward:
            #     sums[p] += p.grad; p.grad = None
        """,
    )
)

SHARED_POOL_REPLAY_ORDER = declare(
    Rule(
        code="GL510",
        name="shared-pool-replay-order",
        severity="error",
        summary=(
            "Graphs captured into one memory pool (`pool=`, `graph_pool_handle()`, another graph's `pool()`) "
            "are replayed in an order other than their capture order, or at once on two streams, while their "
            "memory overlaps: the replay, both graphs' capture lines and the shared bytes are named."
        ),
        why=(
            "A pool hands memory freed during one capture to the next capture. Graph B's output can live where "
            "graph A's intermediate lived, which is sound only if, on every replay, A finishes reading that "
            "memory before B writes it: the capture order, one graph at a time. Replay B before A, or both on "
            "two unordered streams, and A silently reads B's values. The sanitizer tracks which graph last "
            "wrote each pooled range and which streams replayed them; a stream or event wait made since the "
            "other replay counts as ordering them (it cannot tell which streams a wait joins), so it misses "
            "some races rather than report ordered ones."
        ),
        example="""
            pool = torch.cuda.graph_pool_handle()
            with torch.cuda.graph(g1, pool=pool):
                h = x * 2              # an intermediate in the pool
            with torch.cuda.graph(g2, pool=pool):
                y = h + 1              # g2 reads g1's memory
            del h                      # its block goes back to the pool
            with torch.cuda.graph(g3, pool=pool):
                z = x * 3              # and may be handed to z
            g1.replay(); g3.replay(); g2.replay()   # g2 reads z's values, not h's
        """,
        use_instead="""
            # replay graphs that share a pool in the order they were captured, on one stream
            g1.replay()
            g2.replay()
            # or give each graph its own pool (the default) when their order varies
        """,
    )
)

STALE_MEMORY_REACHED_OUTPUT = declare(
    Rule(
        code="GL511",
        name="stale-memory-reached-output",
        severity="error",
        summary=(
            "`--poison` only: a replay read static-input memory that nothing had written since the previous "
            "replay, `--poison` had filled it with NaN, and the NaN reached a replay output the program read: "
            "the output, the replay, the capture line and the stale input are named, at the reading line."
        ),
        why=(
            "A graph reads its static inputs at fixed addresses. A program that refills only part of one (the "
            "live rows of a padded batch, the prefill half of a position buffer) leaves the rest holding the "
            "previous step's values, and the replay computes plausible numbers from them: no error, only "
            "wrong results. `--poison` fills every refilled input with NaN after each replay, so what the next "
            "refill misses is NaN when the graph reads it; eager code that reads a poisoned input gets its "
            "old values back first, and padding rows the program slices off are never read, so a clean "
            "program computes what it always did. Padding masked by multiplying with zeros is reported too "
            "(NaN times 0 is NaN): that result holds only while the stale values happen to be finite; select "
            "with `where`, `masked_fill` or a slice instead. Integer inputs are restored before the replay (a "
            "poisoned index faults the device) and counted in the summary, not judged."
        ),
        example="""
            g = torch.cuda.CUDAGraph()
            static_x = torch.zeros(8, 16, device="cuda")
            with torch.cuda.graph(g):
                static_y = static_x.sum(dim=1)
            for x in batches:                     # 8 rows, then 5
                static_x[: len(x)].copy_(x)       # rows 5..7 keep the last batch's values
                g.replay()
                total = static_y.sum().item()     # sums all 8 rows: 3 of them stale
        """,
        use_instead="""
            g = torch.cuda.CUDAGraph()
            static_x = torch.zeros(8, 16, device="cuda")
            with torch.cuda.graph(g):
                static_y = static_x.sum(dim=1)
            for x in batches:
                static_x[: len(x)].copy_(x)
                g.replay()
                total = static_y[: len(x)].sum().item()  # only the live rows
        """,
    )
)

REPLAY_DIVERGES_FROM_EAGER = declare(
    Rule(
        code="GL512",
        name="replay-diverges-from-eager",
        severity="error",
        summary=(
            "`--compare-eager` only: a replay's outputs differ from running its captured `with` block eagerly "
            "on what the program holds at that replay; the first operator whose output differs is named at "
            "its Python line."
        ),
        why=(
            "A graph replays the kernels, addresses and host values of its capture. When the program has since "
            "changed a Python value the block read (a temperature, a scale, a step count), or bound a new "
            "tensor to a name or attribute the block read instead of copying into the captured one, the replay "
            "computes from what the capture saw while the code says otherwise: no error, only wrong numbers. "
            "`--compare-eager` runs the block's own source again before each replay, in a copy of its "
            "frame's namespace, with every tensor it writes in place and the random state put back after, "
            "so the program computes what it always did. At the first difference it launches prefixes of "
            "the graph to find the first operator whose output differs. A block that draws random numbers, "
            "trains, returns or launches kernels outside PyTorch's operators is refused (GL500) with the "
            "reason. Names bound in a loop around the block (one graph per batch size) are read as they were "
            "at the capture."
        ),
        example="""
            import torch

            x = torch.randn(1024, device="cuda")
            scale = 2.0
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * scale    # the capture freezes 2.0 into the kernel
            scale = 0.5          # the code now says 0.5
            g.replay()           # y is still x * 2.0
        """,
        use_instead="""
            import torch

            x = torch.randn(1024, device="cuda")
            scale = torch.full((), 2.0, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                y = x * scale    # reads the tensor on every replay
            scale.fill_(0.5)     # written in place: the replay sees it
            g.replay()
        """,
    )
)
