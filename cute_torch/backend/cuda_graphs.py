"""mode="reduce-overhead": the rewritten graphs replayed as CUDA graphs.

torch.compile(model, backend="cute", mode="reduce-overhead") records each forward, backward and
inference graph into the CUDA graph trees that Inductor's mode of the same name uses
(torch._inductor.cudagraph_trees), so a step's host work for a graph becomes one replay: our
ops' own host time (10-20 us a call) and the graph's views stop counting once the graph is
recorded. Which inputs keep their address from call to call (and so are not copied into the
graph's buffers before each replay) is decided as Inductor decides it: the parameters and
buffers in the forward (and what Dynamo marks static: a compiled optimizer's parameters, gradients
and state), everything but the tangents in the backward. A graph that cannot be recorded (a CPU
tensor in it, an input it mutates whose address is not fixed, an op that reads a value back to the host)
runs as it would without the mode, and torch logs why ("skipping cudagraphs due to ..."); a
backward whose forward was not recorded is not recorded either.

With fallback="inductor" the same mode is Inductor's own: compile_fx with its cudagraphs on.
"""

from __future__ import annotations

# torch.compile's modes, and whether each records CUDA graphs. max-autotune's kernel search is
# Inductor's; our kernels choose their configurations themselves, so the mode means its graphs.
MODES = {None: False, "default": False, "reduce-overhead": True, "max-autotune": True,
         "max-autotune-no-cudagraphs": False}


def wants_graphs(mode: str | None) -> bool:
    """Whether torch.compile's `mode` records CUDA graphs; an unknown mode is an error."""
    if mode not in MODES:
        known = ", ".join(repr(m) for m in MODES if m)
        raise ValueError(f"cute backend: unknown mode {mode!r}; known: {known}")
    return MODES[mode]


class CudaGraphs:
    """Wraps the compiled graphs of one Dynamo graph (its forward, backward and inference
    graphs) in CUDA graph trees. `dynamo_inputs` is the Dynamo graph's input count."""

    def __init__(self, dynamo_inputs: int):
        self.dynamo_inputs = dynamo_inputs
        self.forward_recorded = True
        self.device_index = None

    def wrap(self, kind: str, gm, example_inputs, make_run):
        """The boxed callable `make_run()` gives for the rewritten graph `gm` ("forward",
        "backward" or "inference"), recorded and replayed; or that callable itself where the
        graph cannot be recorded. `gm` is read before make_run (which may retarget its nodes)."""
        from torch._dynamo.backends.cudagraphs import find_input_mutations, get_device_index
        from torch._inductor.compile_fx import get_static_input_idxs
        from torch._inductor.cudagraph_trees import cudagraphify_impl, get_manager
        from torch._inductor.cudagraph_utils import get_placeholder_info, log_cudagraph_skip_and_bump_counter
        from torch._inductor.utils import count_tangents, num_fw_fixed_arguments

        backward = kind == "backward"
        if backward and not self.forward_recorded:
            return make_run()
        if backward:
            fixed = count_tangents(gm)                    # saved activations: the forward graph's memory
            static = list(range(fixed))
        else:
            fixed = num_fw_fixed_arguments(self.dynamo_inputs, len(example_inputs))
            static = get_static_input_idxs(fixed)         # the parameters and buffers
        placeholders, mutated = get_placeholder_info(gm.graph), find_input_mutations(gm.graph)
        skip = _skip_reason(gm, fixed, static, placeholders, mutated)
        if skip:
            log_cudagraph_skip_and_bump_counter(skip)   # "skipping cudagraphs due to ..."
            run = make_run()
            if not backward:
                self.forward_recorded = False
                return run
            # The forward was recorded: its generation of the trees still ends at this backward.
            manager = get_manager(self.device_index or 0, create_if_none_exists=False)
            if manager is None:
                return run

            def run_backward(inputs):
                manager.set_to_running_backward()
                return run(inputs)
            run_backward._boxed_call = True
            return run_backward
        device_index = get_device_index(gm)
        if not backward:
            self.device_index = device_index
        replay = cudagraphify_impl(
            _emptying(make_run()), example_inputs, static, device_index=device_index, is_backward=backward,
            is_inference=kind == "inference", stack_traces=_stack_traces(gm), placeholders=placeholders,
            mutated_input_idxs=mutated)
        replay._boxed_call = True
        return replay


def _skip_reason(gm, fixed: int, static: list, placeholders, mutated: set):
    """Why `gm` cannot be recorded, as torch's check_for_skip says, except that the inputs it
    mutates (`mutated`, by index) may be any whose address stays fixed (`static`: parameters and
    buffers, and what Dynamo marks static, such as a compiled optimizer's parameters, gradients
    and state), as Inductor's own trees allow: a compiled optimizer step mutates nothing else."""
    from torch._dynamo import config
    from torch._dynamo.backends.cudagraphs import check_for_skip
    from torch._inductor.cudagraph_utils import get_mutation_stack_trace
    with config.patch(cudagraph_backend_support_input_mutation=True):
        skip = check_for_skip(gm, fixed)
    moving = mutated - set(static)
    return skip or (get_mutation_stack_trace(placeholders, moving) if moving else None)


def _emptying(run):
    """`run` as the trees call a graph: a boxed callable that empties the list it is given (its
    inputs then live only as long as the graph needs them), as Inductor's compiled graphs do."""
    def call(args: list):
        inputs = list(args)
        args.clear()
        return run(inputs)
    call._boxed_call = True
    return call


def _stack_traces(gm) -> list:
    """The user's line of each graph output (torch names it when a replay's output was overwritten)."""
    outputs = next(iter(reversed(gm.graph.nodes))).args[0]
    return [getattr(node, "stack_trace", None) for node in outputs] if isinstance(outputs, (list, tuple)) else []
