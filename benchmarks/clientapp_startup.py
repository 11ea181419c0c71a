"""Per-message start-up of a site's Flower ClientApp: what fits adds to each message.

    python benchmarks/clientapp_startup.py [--repeats 7] [--before SRC] [--out record.json]

Flower 1.42 starts a new ``flwr-clientapp`` process for every message.  That process
imports Flower itself (not fits' to change), then loads ``fits.deploy.flower:client_app``
and answers the message: import fits' modules, read the site's file, replay what set the
site up, answer.  This script measures that fits part for one message of each kind.

1. It runs a small synthesis (the demo design, 3 sites) and a FedNewton fit and a FedLSA
   fit through the ClientApp handler, recording, for one site, each request and the
   site's ``context.state`` before it (serialized as a SuperNode keeps it).
2. For each recorded message it starts fresh Python processes that first import what a
   ``flwr-clientapp`` process has already imported when it loads the app
   (``flwr.supernode.runtime.run_clientapp``), then time, with ``perf_counter``, the
   import of ``fits.deploy.flower`` and the answer to the message.  Median of
   ``--repeats`` processes.

``--before SRC`` times a second copy of fits (a source tree, e.g. ``git archive`` of an
earlier commit) in alternation with this one, on the same recorded messages.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

CHILD = r"""
import json, sys, time
import numpy as np
import flwr.supernode.runtime.run_clientapp  # what a flwr-clientapp process has imported
from flwr.app import Context, Message as FlowerMessage
from flwr.common.serde import recorddict_from_proto
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict
from flwr.supercore.task_identity import TaskIdentity
for attr, value in (("_run_id", 1), ("_node_id", 1), ("_task_id", 1)):
    setattr(TaskIdentity, attr, value)
folder = sys.argv[1]
meta = json.loads(open(folder + "/meta.json").read())
proto = ProtoRecordDict()
proto.ParseFromString(open(folder + "/state.bin", "rb").read())
arrays = dict(np.load(folder + "/arrays.npz"))
start = time.perf_counter()
from fits.deploy.flower import _handle, to_records
from fits.federation.protocol import Message
state = recorddict_from_proto(proto)
msg = FlowerMessage(to_records(Message(meta["type"], arrays, meta["config"])),
                    dst_node_id=1, message_type="query.fits_" + meta["type"])
ctx = Context(1, 1, meta["node_config"], state, meta["run_config"])
_handle(msg, ctx)
import fits
assert fits.__file__.startswith(sys.argv[2]), (fits.__file__, sys.argv[2])
print(json.dumps({"seconds": time.perf_counter() - start,
                  "modules": sorted(m for m in sys.modules if m.split(".")[0] in
                                    ("pandas", "scipy", "sklearn", "pyarrow", "fits"))}))
"""


class RecordingGrid:
    """Flower's Grid interface over the ClientApp handler, keeping one site's requests
    and its serialized state before each (see tests/test_flower_analysis.py)."""

    def __init__(self, node_configs, keep_node_name: str, folder: Path):
        self.run_config: dict = {}
        from flwr.app import RecordDict
        from flwr.common.serde import recorddict_to_proto

        self.nodes = {3000 + k: cfg for k, cfg in enumerate(node_configs)}
        self.states = {n: recorddict_to_proto(RecordDict()).SerializeToString() for n in self.nodes}
        self.replies = {}
        self.keep = keep_node_name
        self.folder = folder
        self.recorded: dict[str, Path] = {}

    def get_node_ids(self):
        return list(self.nodes)

    def push_messages(self, messages):
        from flwr.app import Context
        from flwr.common.serde import recorddict_from_proto, recorddict_to_proto
        from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

        from fits.deploy.flower import _handle, from_records

        ids = []
        for msg in messages:
            mid = uuid.uuid4().hex
            msg.metadata.__dict__["_message_id"] = mid
            node = msg.metadata.dst_node_id
            fits_type = msg.metadata.message_type.removeprefix("query.fits_")
            cfg = self.nodes[node]
            if cfg["name"] == self.keep and fits_type not in self.recorded:
                where = self.folder / fits_type
                where.mkdir()
                (where / "state.bin").write_bytes(self.states[node])
                request = from_records(fits_type, msg.content)
                np.savez(where / "arrays.npz", **request.arrays)
                meta = {"type": fits_type, "config": request.config, "node_config": cfg,
                        "run_config": self.run_config}  # fmt: skip
                (where / "meta.json").write_text(json.dumps(meta))
                self.recorded[fits_type] = where
            proto = ProtoRecordDict()
            proto.ParseFromString(self.states[node])
            ctx = Context(1, node, cfg, recorddict_from_proto(proto), self.run_config)
            self.replies[mid] = _handle(msg, ctx)
            self.states[node] = recorddict_to_proto(ctx.state).SerializeToString()
            ids.append(mid)
        return ids

    def pull_messages(self, message_ids):
        return [self.replies.pop(m) for m in message_ids if m in self.replies]


def record(folder: Path, rows: int) -> dict[str, Path]:
    """Run a synthesis, a FedNewton fit and a FedLSA fit; keep one site's messages."""
    from flwr.supercore.task_identity import TaskIdentity

    from fits.datasets import PAPER_SHARES, federated_split, simulate
    from fits.deploy.flower import format_kinds
    from fits.flower_app import run_task

    for attr, value in (("_run_id", 1), ("_node_id", 1), ("_task_id", 1)):
        setattr(TaskIdentity, attr, value)
    data = simulate(rows, seed=0)
    clients, _ = federated_split(data.frame, PAPER_SHARES[:3], seed=0)
    configs = []
    for k, frame in enumerate(clients):
        path = folder / f"site{k + 1}.csv"
        frame.to_csv(path, index=False)
        configs.append({"data-path": str(path), "name": f"site{k + 1}", "seed": f"0/{k}"})
    messages = folder / "messages"
    messages.mkdir()
    grid = RecordingGrid(configs, "site1", messages)
    out = folder / "synthetic.csv"
    run_task(grid, {"output": str(out), "rows": 2000, "seed": 0, "kinds": format_kinds(data.kinds),
                    "order": ",".join(data.order)})  # fmt: skip
    frame = clients[0]
    numeric = [c for c in frame.columns if data.kinds.get(c) == "continuous"]
    target = numeric[0]
    spec = {"method": "fedlsa", "options": {"target": target, "rounds": 3, "local_steps": 5,
                                            "n_bootstrap": 200, "seed": 0}}  # fmt: skip
    grid.run_config = {"task": "analyze"}
    run_task(grid, {"task": "analyze", "analysis": json.dumps(spec),
                    "output": str(folder / "lsa.json")})  # fmt: skip
    binary = [c for c in frame.columns if frame[c].nunique() == 2]
    if binary:
        for c in binary[:1]:
            for k, f in enumerate(clients):
                g = f.copy()
                g[c] = (g[c] == frame[c].iloc[0]).astype(int)
                g.to_csv(configs[k]["data-path"], index=False)
        spec = {"method": "fednewton", "options": {"target": binary[0], "mu": 1.0, "seed": 0}}
        run_task(grid, {"task": "analyze", "analysis": json.dumps(spec),
                        "output": str(folder / "glm.json")})  # fmt: skip
    return grid.recorded


def time_message(where: Path, src: Path | None, python: str) -> dict:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    done = subprocess.run(  # cwd: not this checkout, which `python -c` would put first
        [python, "-c", CHILD, str(where), str(src or Path(__file__).resolve().parents[1])],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=where,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--before", type=Path, default=None, help="source tree of the 'before'")
    ap.add_argument("--out", default=None)
    ap.add_argument("--types", default="", help="comma-separated message types (default all)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fits-startup-") as tmp:
        recorded = record(Path(tmp), args.rows)
        if args.types:
            recorded = {k: v for k, v in recorded.items() if k in args.types.split(",")}
        here = Path(__file__).resolve().parents[1]
        trees = {"after": here} if args.before is None else {"before": args.before, "after": here}
        times: dict[str, dict[str, list[float]]] = {t: {} for t in trees}
        modules: dict[str, dict[str, list[str]]] = {t: {} for t in trees}
        for _ in range(args.repeats):
            for kind, where in recorded.items():
                for tree, src in trees.items():  # alternate: the same load for both
                    got = time_message(where, src, sys.executable)
                    times[tree].setdefault(kind, []).append(got["seconds"])
                    modules[tree][kind] = got["modules"]
    record_ = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "repeats": args.repeats,
        "load_average_end": [round(x, 1) for x in os.getloadavg()],
        "median_seconds": {
            t: {k: round(statistics.median(v), 3) for k, v in d.items()} for t, d in times.items()
        },
        "heavy_modules": {
            t: {
                k: sorted(
                    {
                        m.split(".")[0] + ("." + m.split(".")[1] if "." in m else "")
                        for m in v
                        if m.startswith(("scipy.", "sklearn", "pyarrow"))
                    }
                )
                for k, v in d.items()
            }  # fmt: skip
            for t, d in modules.items()
        },
        "fits_modules": {
            t: {k: sorted(m for m in v if m.startswith("fits")) for k, v in d.items()}
            for t, d in modules.items()
        },
    }
    text = json.dumps(record_, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(json.dumps(record_["median_seconds"], indent=2))  # noqa: T201
    print(json.dumps(record_["heavy_modules"], indent=2))  # noqa: T201
    return record_


if __name__ == "__main__":
    main()
