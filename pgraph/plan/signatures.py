"""Checks of kernel calls against kernel signatures: argument count (PG009), directions against
the declared accesses (PG010), dtypes (PG011), shapes (PG012), and scalars that would differ per
SPMD block (PG040)."""

from __future__ import annotations

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.expr import free_vars
from pgraph.ir.program import Arg, Dispatch, Kernel, Program
from pgraph.ir.queries import region_shape, root, tensor_of
from pgraph.kinds import DIRECTION_ACCESSES, AccessKind
from pgraph.plan.base import ProgramCheck

ACCESS_VERB = {AccessKind.READ: "reads it", AccessKind.WRITE: "writes it",
               AccessKind.ATOMIC: "accumulates into it (atomic_add)"}
#: Scalar dtypes without a C type the orchestration can pass (`add_scalar` takes arithmetic types).
NO_C_SCALAR = ("bf16", "f16")


class SignaturesCheck(ProgramCheck):
    """PG009-PG012 for every call; PG011 for a scalar parameter no C type can carry."""

    name = "signatures"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        for k in program.kernels.values():
            for prm in k.params:
                if not prm.is_tensor and prm.dtype in NO_C_SCALAR:
                    bag.add("PG011", f"scalar parameter '{prm.name}' of '{k.name}' is {prm.dtype}, which no C scalar "
                            "type carries", prm.span,
                            hint="pass it as f32 (the kernel converts), or as the raw bits in a u16")
        for d in program.dispatches:
            if d.call is None or d.kernel is None:
                continue
            kernel = program.kernels[d.kernel]
            if d.call.arity != len(kernel.params):
                bag.add("PG009", f"kernel '{kernel.name}' takes {len(kernel.params)} argument(s), this call passes "
                        f"{d.call.arity}", d.call.span, [Note(f"'{kernel.name}' declared here", kernel.span)])
                continue
            ok = all([self.arg(program, a, kernel, bag) for a in d.args])
            self.block_scalars(d, kernel, bag)
            if ok:
                self.accesses(program, d, kernel, bag)

    @staticmethod
    def arg(p: Program, arg: Arg, kernel: Kernel, bag: DiagnosticBag) -> bool:
        """PG011 dtype and PG012 shape of one tensor argument (False: the call has an error)."""
        if arg.region is None:
            return True
        param = arg.param
        note = [Note(f"parameter '{param.name}' declared here", param.span)]
        t = tensor_of(p, arg.region.tensor)
        assert t is not None
        if t.dtype != param.dtype:
            bag.add("PG011", f"'{arg.region.tensor}' is {t.dtype} but parameter '{param.name}' of '{kernel.name}' "
                    f"is {param.dtype}", arg.span, note, hint="pass a tensor of the declared dtype, or fix the kernel")
            return False
        if param.shape is None or (arg.region.dims is not None and len(arg.region.dims) != len(t.shape)):
            return True  # a rank mismatch is PG020 (regions)
        shape = region_shape(arg.region, t.shape)
        if shape is not None and any(n < 0 for n in shape):
            return False  # PG006 (regions.RangesCheck)
        if shape is not None and tuple(shape) != tuple(param.shape):
            bag.add("PG012", f"the region of '{arg.region.tensor}' has shape {list(shape)} but parameter "
                    f"'{param.name}' of '{kernel.name}' expects {list(param.shape)}", arg.span, note,
                    hint="single indices drop their dimension; `a +: n` keeps n")
            return False
        return True

    @staticmethod
    def block_scalars(d: Dispatch, kernel: Kernel, bag: DiagnosticBag) -> None:
        """PG040: a scalar argument that uses an SPMD block index (one payload for every block)."""
        blocks = {a.var for a in d.block_axes}
        for arg in d.args:
            used = free_vars(arg.scalar) & blocks if arg.scalar is not None else set()
            if used:
                bag.add("PG040", f"scalar '{arg.param.name}' of '{kernel.name}' uses SPMD block index "
                        f"{', '.join(sorted(used))}, but every block of '{d.name}' gets the same arguments",
                        arg.span, [Note(f"parameter '{arg.param.name}' declared here", arg.param.span)],
                        hint="pass what every block shares (the first tile, a base offset); the kernel derives its "
                             "own part from get_block_idx(args)")

    @staticmethod
    def accesses(p: Program, d: Dispatch, kernel: Kernel, bag: DiagnosticBag) -> None:
        """PG010: an access clause on a tensor not passed, or one the parameter's direction forbids."""
        by_root: dict[str, Arg] = {}
        for arg in d.args:
            if arg.region is not None:
                by_root.setdefault(root(p, arg.region.tensor), arg)
        untouched = {root(p, name): span for name, span in d.untouched}
        for name, span in d.untouched:
            if root(p, name) not in by_root:
                bag.add("PG010", f"'{name}' is marked untouched but is not passed to '{kernel.name}'", span,
                        hint="`untouched` names arguments of the call that the kernel neither reads nor writes")
        for acc in d.accesses:
            if not acc.explicit:
                continue
            bound = by_root.get(root(p, acc.region.tensor))
            if root(p, acc.region.tensor) in untouched:
                bag.add("PG010", f"'{acc.region.tensor}' is marked untouched, but the task {ACCESS_VERB[acc.kind]}",
                        acc.span, [Note("marked untouched here", untouched[root(p, acc.region.tensor)])],
                        hint="drop it from `untouched`, or drop the access clause")
            elif bound is None:
                bag.add("PG010", f"the task accesses '{acc.region.tensor}' but does not pass it to '{kernel.name}'",
                        acc.span, hint="a kernel touches only the tensors it is passed")
            elif acc.kind not in DIRECTION_ACCESSES[bound.param.direction]:
                bag.add("PG010", f"'{acc.region.tensor}' is passed as {bound.param.direction} ('{bound.param.name}') "
                        f"but the task {ACCESS_VERB[acc.kind]}", acc.span,
                        [Note(f"parameter '{bound.param.name}' declared here", bound.param.span)],
                        hint="the direction decides the runtime's edges: In reads, Out writes, InOut both, "
                             "atomic_add accumulates")
