"""``python -m oracle``: run generated cases against Kafka Streams, or replay a case file.

    python -m oracle run --cases 200 --seed 1 --engine direct [--cases-dir oracle/cases] [--shape process|fk_join|global_table]
    python -m oracle replay oracle/cases/<id>.json [--engine spark]

``run`` prints one line per differing case (with its minimized case file) and ends with
``N agree, M differ``; its exit code is 1 when a case differs. ``--shape process`` draws every
case with a processor of the menu (`oracle.processors`), ``--shape fk_join`` every case with a
foreign-key join, ``--shape global_table`` a stream joined with a global table. ``replay`` runs a case file's
case again on both systems and prints the differences (exit code 1 when there are any).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from oracle.generator import SHAPES_APART, Case
from oracle.harness import KafkaOracle, compare, outcomes, run_cases, write_case


def _run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    with KafkaOracle() as kafka:
        run = run_cases(kafka, args.seed, args.cases, args.engine, shape=args.shape)
    for d in run.differences:
        path = write_case(Path(args.cases_dir), d.minimized, d.kafka, d.streamsdsl, args.engine,
                          {"seed": args.seed, "index": d.index, **({"shape": args.shape} if args.shape else {})})
        print(f"case {d.index} ({d.case.recipe['shape']}) differs: {path}")
        for problem in d.problems:
            print(f"    {problem}")
    print(f"{run.agree} agree, {len(run.differences)} differ ({args.engine} engine, seed {args.seed}, "
          f"{time.monotonic() - started:.0f} s)")
    return 1 if run.differences else 0


def _replay(args: argparse.Namespace) -> int:
    data = json.loads(Path(args.case).read_text())
    case = Case.from_json(data)
    with KafkaOracle() as kafka:
        k, s = outcomes(kafka, case, args.engine or data["engine"])
    problems = compare(k, s, case.recipe)
    print(json.dumps({"kafka": k.to_json(), "streamsdsl": s.to_json()}, indent=1))
    for problem in problems:
        print(problem)
    print("agree" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oracle", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run generated cases")
    run.add_argument("--cases", type=int, default=100)
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--engine", choices=["direct", "spark"], default="direct")
    run.add_argument("--cases-dir", default=str(Path(__file__).resolve().parent / "cases"))
    run.add_argument("--shape", choices=list(SHAPES_APART), default=None,
                     help="only cases of this shape (default: every shape, processors in PROCESS_SHARE of them, "
                     "foreign-key joins in FK_SHARE of the others)")
    replay = sub.add_parser("replay", help="replay a case file")
    replay.add_argument("case")
    replay.add_argument("--engine", choices=["direct", "spark"])
    args = parser.parse_args(argv)
    # streamsdsl logs every dropped record (as Kafka Streams does); the metrics count them here.
    logging.getLogger("streamsdsl").setLevel(logging.ERROR)
    return _run(args) if args.command == "run" else _replay(args)


if __name__ == "__main__":
    sys.exit(main())
