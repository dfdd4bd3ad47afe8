"""The one cost model (pgraph/ir/cost_model.py) shared by `plan`'s modelled critical path and `sim`.

Expected values by hand from the figures of pgraph/ir/a2a3_timing.toml (dispatch 4.5 us + 0.1 us
per block, doorbell 0.14, setup 0.349, FIN 0.6, completion 3.0; per-core cap 66.7 GB/s, cube
13.3 TFLOP/s) and the Qwen3-14B q_proj tile (docs/upstream.md §7.2), never from the code's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.backends.report import report_facts
from pgraph.backends.sim.config import load_config
from pgraph.backends.sim.cost import CostModel
from pgraph.commands.sim import load_graph
from pgraph.ir.cost_model import block_work, default_figures, roofline_us
from pgraph.kinds import Core
from pgraph.pipeline import Options, plan_program
from tests.conftest import HEAD_SPEC

HOP = 4.5 + 0.14 + 0.349 + 0.6 + 3.0   # per task, plus 0.1 us per block claimed


def test_modelled_path_by_hand(tmp_path: Path) -> None:
    spec = tmp_path / "c.pgl"
    spec.write_text("tensor x : f32[16, 64] external\ntensor y : f32[16, 64] external\n"
                    "kernel k aiv (o : out f32[16, 64])\nkernel c aiv (i : in f32[16, 64], o : out f32[16, 64])\n"
                    "cost k = 7\ncost c = 2\n"
                    "entry e { manual scope { spmd a[i in 0..96] { call k(x) }\n at b deps(a) { call c(x, y) } } }\n")
    plan, bag = plan_program(spec, Options())
    assert plan is not None, [d.message for d in bag.items]
    mod = report_facts(plan)["critical_path"]["modelled"]
    # a: 96 AIV blocks on 48 AIV cores = 2 waves of 7, one claim of 48 blocks; b: 1 block of 2
    assert [s["task"] for s in mod["path"]] == ["a", "b"]
    assert mod["length_us"] == pytest.approx(2 * 7 + HOP + 0.1 * 48 + 2 + HOP + 0.1)


def test_q_proj_block_by_hand_and_the_simulator_agrees() -> None:
    # one q_proj block: its wq tile 1024 x 512 bf16 = 1,048,576 B, its normed slice [16, 1024] bf16 shared
    # by the 10 blocks of that k-split, its f32 accumulator [16, 512] shared by the 5 of that n-tile;
    # 2*16*512*1024 FLOPs. Bytes at the 66.7 GB/s per-core cap dominate the FLOPs at 13.3 TFLOP/s.
    plan, _ = plan_program(HEAD_SPEC, Options(layers=2))
    assert plan is not None
    inst = next(i for i in plan.graph.instances if i.dispatch == "q_proj")
    work = block_work(plan.program, plan.graph, inst, plan.program.kernels["q_proj"])
    nbytes = 1_048_576 + 32_768 / 10 + 32_768 / 5
    assert work.bytes == pytest.approx(nbytes) and work.flops == 2 * 16 * 512 * 1024
    alone = max(nbytes / 66.7e3, 2 * 16 * 512 * 1024 / 13.3e6)
    assert roofline_us(work, Core.AIC, default_figures()) == pytest.approx(alone)
    # the simulator charges the same block (one cost model)
    graph, _ = load_graph(HEAD_SPEC, Options(layers=2))
    assert graph is not None
    q = next(t for t in graph.tasks if t.dispatch == "q_proj")
    assert CostModel(load_config()).alone_us(q) == pytest.approx(alone)
