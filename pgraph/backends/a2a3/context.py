"""Emission state: the C++ identifiers of spec names, TaskId storages, printers, visibility checks."""

from __future__ import annotations

from pgraph.ir import program as ir
from pgraph.kinds import CarryKind, InternalError, Storage

from .cexpr import CxxPrinter, Interval
from .kernel_config import FuncIds
from .layout import Path, alloc_ident, alloc_path, build_tree, dispatch_path, is_reserved, plan_storage, unique
from .writer import Writer


class Context:
    """Names, TaskId storages and expression printers shared by the task and block emitters."""

    def __init__(self, program: ir.Program, header: list[str]) -> None:
        self.p = program
        self.header = header
        self.w = Writer(level=1)
        self.names: set[str] = set()
        self.tensor_c: dict[str, str] = {}
        self.scalar_c: dict[str, str] = {}
        #: (tensor, axis) of each runtime dimension -> the C++ int64_t read at the entry
        self.dim_c: dict[tuple[str, int], str] = {}
        self.var_c: dict[str, str] = {}
        self.task_counter = 0
        self.barrier_counter = 0
        self.alloc_counter = 0
        self.ids = FuncIds(program)
        self.printers: list[CxxPrinter] = []
        self.decls: list[tuple[int, str]] = []
        self.assign_names()
        self.storage, self.carry_store, self.loop_parent = plan_storage(program, self.names)
        self.tree = build_tree(program)
        #: allocation site identifiers of the layout tree -> their groups
        self.alloc_keys: dict[str, ir.AllocKey] = {}
        for t in program.tensors.values():
            if t.storage is Storage.ALLOC and t.scope is not None:
                key = ir.alloc_key(program, t)
                self.alloc_keys[alloc_ident(key)] = key

    # ---- names ----
    def assign_names(self) -> None:
        """Function-wide names: `ext_<name>` for external tensors, the spec name otherwise."""
        for t in self.p.tensors.values():
            if t.storage is Storage.EXTERNAL:
                self.tensor_c[t.name] = unique(f"ext_{t.name}", self.names)
        for s in self.p.scalars.values():
            self.scalar_c[s.name] = unique(s.name, self.names)
        for t in self.p.tensors.values():
            if t.storage is not Storage.EXTERNAL:
                self.tensor_c[t.name] = unique(t.name, self.names)
        for c in self.p.carries.values():
            if c.kind is CarryKind.TENSOR:
                self.tensor_c[c.name] = unique(c.name, self.names)
        for t in self.p.tensors.values():
            for axis in range(len(t.shape)):
                if t.storage is Storage.EXTERNAL and t.is_runtime(axis):
                    self.dim_c[(t.name, axis)] = unique(f"{t.name}_dim{axis}", self.names)

    def declared(self, name: str) -> None:
        """Remember that the last written line declares `name` (see Emitter.mark_unused)."""
        self.decls.append((len(self.w.lines) - 1, name))

    def var(self, name: str) -> str:
        """The C++ name of a loop/task/block index variable (same spec name, same C++ name)."""
        got = self.var_c.get(name)
        if got is None:
            taken = self.names | set(self.var_c.values())
            got = self.var_c[name] = unique(name, taken)
        return got

    def unique_name(self, want: str, generated: bool = False) -> str:
        """A fresh function-wide identifier (never an index variable's name)."""
        got = unique(want, self.names | set(self.var_c.values()), generated)
        self.names.add(got)
        return got

    def local_name(self, want: str, taken: set[str]) -> str:
        """A loop-local identifier: no function-wide name, keyword, or C++ name in `taken`."""
        out, n = want, 2
        while out in self.names or out in taken or is_reserved(out):
            out = f"{want}_{n}"
            n += 1
        return out

    def printer(self, ranges: dict[str, Interval], identity: list[str] | tuple[str, ...] = ()) -> CxxPrinter:
        """An expression printer for index variables with `ranges` (plus scalars)."""
        names = dict(self.scalar_c)
        for v in ranges:
            names[v] = v if v in identity else self.var(v)
        pr = CxxPrinter(names, ranges, self.dim_c)
        self.printers.append(pr)
        return pr

    def tensor_ref(self, name: str, d: ir.Dispatch | None = None, path: Path | None = None) -> str:
        """C++ name of a tensor or tensor carry, checking it is declared in an enclosing block."""
        decl = self.decl_path(name)
        if path is None and d is not None:
            path = dispatch_path(self.p, d)
        if decl is None or (path is not None and path[:len(decl)] != decl):
            where = f"{d.span.location()}: '{d.name}'" if d is not None else "a loop carry"
            raise InternalError(f"{where} uses tensor '{name}' outside the scope that allocates it "
                                "(PG037 should have rejected it)")
        return self.tensor_c[name]

    def decl_path(self, name: str) -> Path | None:
        """The block path declaring a tensor's C++ name (None: a block that is never emitted)."""
        carry = self.p.carries.get(name)
        if carry is not None and carry.kind is CarryKind.TENSOR:
            lp = next(lp for lp in self.p.loops if carry in lp.carries)
            return self.loop_parent.get(lp.id)
        t = self.p.tensors[name]
        if t.storage is Storage.VIEW and t.base is not None:
            t = self.p.tensors[t.base]  # a view is declared right after its base's allocation
        if t.storage is Storage.EXTERNAL or t.scope is None:
            return ()
        return alloc_path(self.p, ir.alloc_key(self.p, t))
