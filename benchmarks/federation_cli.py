"""`fits federate local` (Flower, loopback) against in-process synthesis, on real data.

    python benchmarks/federation_cli.py --dataset adult --data-dir ../shared/datasets \
        [--batch-size 0] [--seed 0] [--round-cost-bytes 0] [--process-per-message] \
        [--rows N] [--out record.json]

The dataset's training split (80%, ``fits.datasets.federated_split`` with the paper's ten
shares) is written to one CSV per site.  Then, from those files, with the same seed and
as many synthetic rows as the training split has:

* in process: ``FITSSynthesizer("knn", seed=...)`` fit and sampled, the table written
  (timed), with the in-process default batch (and with ``--same-batch`` once more at
  ``--batch-size``; a KNN table does not depend on the batch);
* networked: the real ``fits federate local`` command (a SuperLink and one SuperNode
  per file on 127.0.0.1, every process stopped at the end), with ``--batch-size``
  (0: the ServerApp's default) and ``--round-cost-bytes`` (also given to the in-process
  run: the same parameters), timed from start to exit; with ``--audit`` the coordinator
  records every site reply, from which the message rounds are counted by type.

The tables are compared (read back from their files) and the machine's load average
recorded at start and end (the ratio is only as good as the machine was quiet).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from fits import FITSSynthesizer
from fits.datasets import PAPER_SHARES, federated_split, load_adult, load_bike
from fits.io import read_table


def _cpu(who: int) -> float:
    """User + system CPU seconds of this process (its threads) or of its waited-for
    children (and theirs): ``resource.RUSAGE_SELF`` or ``RUSAGE_CHILDREN``."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


CPU: dict[str, float] = {}


def _in_process(tables, rows, seed, batch_size, out: Path, cost: int = 0) -> tuple[float, int]:
    cpu = _cpu(resource.RUSAGE_SELF)
    start = time.perf_counter()
    synth = FITSSynthesizer("knn", seed=seed, batch_size=batch_size or None, round_cost_bytes=cost)
    synth.fit(tables)
    batch = int(synth.coordinator.batch_size)
    synth.sample_to_file(out, rows)
    CPU[out.stem] = _cpu(resource.RUSAGE_SELF) - cpu
    return time.perf_counter() - start, batch


def main() -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="adult", choices=["adult", "bike"])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=0)
    ap.add_argument(
        "--same-batch",
        action="store_true",
        help="also time in process at --batch-size (KNN tables do not depend on the batch)",
    )
    ap.add_argument(
        "--only-same-batch",
        action="store_true",
        help="time in process only at --batch-size (needed with --round-cost-bytes: which "
        "columns take one round depends on the batch)",
    )
    ap.add_argument("--round-cost-bytes", type=int, default=0)
    ap.add_argument("--rows", type=int, default=0, help="synthetic rows (0: the training rows)")
    ap.add_argument(
        "--process-per-message",
        action="store_true",
        help="Flower's default: a new ClientApp process per message (no warm site process)",
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    data = (load_adult if args.dataset == "adult" else load_bike)(args.data_dir)
    clients, _ = federated_split(data.frame, PAPER_SHARES, seed=args.seed)
    rows = args.rows or sum(len(c) for c in clients)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fits-fed-cli-") as tmp:
        folder = Path(tmp)
        files = []
        for k, frame in enumerate(clients):
            files.append(folder / f"site{k + 1:02d}.csv")
            frame.to_csv(files[-1], index=False)
        tables = {p.stem: read_table(p) for p in files}
        cost = args.round_cost_bytes
        if args.only_same_batch:  # one in-process run, at --batch-size
            local_s, local_batch = _in_process(
                tables, rows, args.seed, args.batch_size, folder / "in-process.csv", cost
            )
            local_default_s, local_default_batch = local_s, local_batch
        else:
            local_default_s, local_default_batch = _in_process(
                tables, rows, args.seed, 0, folder / "in-process-default.csv", cost
            )
        if args.only_same_batch:
            pass
        elif args.same_batch and args.batch_size and args.batch_size != local_default_batch:
            local_s, local_batch = _in_process(
                tables, rows, args.seed, args.batch_size, folder / "in-process.csv", cost
            )
        else:
            local_s, local_batch = local_default_s, local_default_batch
            (folder / "in-process-default.csv").rename(folder / "in-process.csv")
        fits = str(Path(sys.executable).with_name("fits"))
        cmd = [fits, "federate", "local", *map(str, files), "--rows", str(rows)]
        cmd += ["--seed", str(args.seed), "--out", str(folder / "networked.csv")]
        cmd += ["--batch-size", str(args.batch_size), "--round-cost-bytes", str(cost)]
        cmd += ["--audit", str(folder / "audit.jsonl")]
        if args.process_per_message:
            cmd.append("--process-per-message")
        start = time.perf_counter()
        cpu = _cpu(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        networked_s = time.perf_counter() - start
        # every process of the federation is a descendant that fits federate local waits
        # for (SuperLink, SuperNodes, warm site processes); Flower's own helpers that it
        # does not wait for (the ServerApp process) are missing from this count
        networked_cpu = _cpu(resource.RUSAGE_CHILDREN) - cpu
        if done.returncode != 0:
            raise SystemExit(f"fits federate local failed: {done.stderr[-3000:]}")
        a = read_table(folder / "in-process.csv")
        b = read_table(folder / "networked.csv")
        equal = a.equals(b)
        replies = [json.loads(line) for line in (folder / "audit.jsonl").read_text().splitlines()]
    first = replies[0]["site"]
    by_type = Counter(r["type"] for r in replies if r["site"] == first)
    rounds = sum(by_type.values())
    largest = max(len(c) for c in clients)
    net_batch = args.batch_size or max(64, min(2**26 // largest, rows))
    record = {
        "dataset": args.dataset,
        "command": " ".join(
            [
                "fits federate local",
                "site01.csv ... site10.csv",
                "--rows",
                str(rows),
                "--seed",
                str(args.seed),
                "--batch-size",
                str(args.batch_size),
                "--round-cost-bytes",
                str(cost),
                *(["--process-per-message"] if args.process_per_message else []),
            ]
        ),  # fmt: skip
        "sites": {p.stem: len(c) for p, c in zip(files, clients, strict=True)},
        "rows_synthesized": rows,
        "in_process_seconds": round(local_s, 1),
        "in_process_batch": local_batch,
        "in_process_default_batch_seconds": round(local_default_s, 1),
        "in_process_default_batch": local_default_batch,
        "networked_seconds": round(networked_s, 1),
        "networked_batch": net_batch,
        "in_process_cpu_seconds": round(CPU.get("in-process", CPU.get("in-process-default", 0)), 1),
        "networked_cpu_seconds_waited_for": round(networked_cpu, 1),
        "networked_rounds": rounds,
        "networked_rounds_by_type": dict(by_type),
        "uploaded_bytes": sum(r["bytes"] for r in replies),
        "networked_seconds_per_round": round(networked_s / rounds, 1),
        "ratio_networked_to_in_process": round(networked_s / local_s, 1),
        "ratio_to_in_process_default": round(networked_s / local_default_s, 1),
        "tables_equal": bool(equal),
        "load_average_start": [round(x, 1) for x in load_start],
        "load_average_end": [round(x, 1) for x in os.getloadavg()],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, "
        f"Python {platform.python_version()}",
    }
    text = json.dumps(record, indent=2)
    print(text)  # noqa: T201
    if args.out:
        Path(args.out).write_text(text + "\n")
    return record


if __name__ == "__main__":
    main()
