"""`gnomon shard MODEL --devices SYSTEM [--ranks N] [--top K] [--json] [--plan FILE] [--torchrec-plan FILE]`:
embedding sharding plans for a recommender's training step, fastest predicted first (`gnomon.shard`), the chosen
one exported for TorchRec."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gnomon.cost.sharding.plan import Placement, ShardingError
from gnomon.errors import GnomonError
from gnomon.files import check_readable, check_writable, writing

__all__ = ["add_shard_parser", "read_plan"]


def add_shard_parser(verbs: Any, add_model_arguments: Any) -> None:
    parser = verbs.add_parser(
        "shard", help="choose how a recommender's embedding tables are sharded across devices, by predicted step time"
    )
    add_model_arguments(parser)
    parser.add_argument("--devices", required=True, help="the system: 8xh100, 4xa100, 2xlocal, a .toml file, ...")
    parser.add_argument("--ranks", type=int, help="devices of the system to use (default: all)")
    parser.add_argument("--batch", type=int, help="samples per rank (default: the file's example batch)")
    parser.add_argument("--loss", help="train a model that returns no loss with this one (bce_with_logits, mse, ...)")
    parser.add_argument(
        "--zipf", type=float, help="the tables' ids from a power law of this exponent (hot rows; default: uniform)"
    )
    parser.add_argument("--top", type=int, default=5, help="plans to show (default: 5)")
    parser.add_argument("--json", action="store_true", help="print the plans as JSON")
    parser.add_argument("--plan", type=Path, help="price this plan (a JSON assignment, or a `--json` output's chosen)")
    parser.add_argument(
        "--torchrec-plan",
        type=Path,
        metavar="FILE",
        help="write the chosen plan as TorchRec's ParameterShardings (torch.save of {table: ParameterSharding}, for "
        "DistributedModelParallel's EmbeddingModuleShardingPlan)",
    )
    parser.add_argument(
        "--device-type", default="cuda", choices=("cuda", "cpu"), help="--torchrec-plan's device type (default cuda)"
    )
    parser.set_defaults(run=_cmd_shard)


def _cmd_shard(args: argparse.Namespace) -> None:
    from gnomon.input_shapes import input_shapes_of
    from gnomon.sharding import dumps, render, shard

    if args.top < 1:
        raise GnomonError(f"--top must be at least 1, got {args.top}")
    if args.batch is not None and args.batch < 1:
        raise GnomonError(f"--batch must be at least 1, got {args.batch}")
    if args.zipf is not None and args.zipf < 0:
        raise GnomonError(f"--zipf must be 0 or more, got {args.zipf}")
    check_readable(args.model)
    if args.torchrec_plan is not None:
        check_writable(args.torchrec_plan, "--torchrec-plan")
    plan = read_plan(args.plan) if args.plan is not None else None
    result = shard(
        args.model, devices=args.devices, ranks=args.ranks, loss=args.loss,
        input_shapes=input_shapes_of(args.input_shape), plan=plan, batch=args.batch, zipf=args.zipf,
    )  # fmt: skip
    print(dumps(result, args.top) if args.json else render(result, args.top))
    if args.torchrec_plan is not None:
        import torch

        shardings = result.parameter_shardings(args.device_type)
        with writing(args.torchrec_plan, "--torchrec-plan", "wb") as stream:
            torch.save(shardings, stream)
        if not args.json:
            print(f"wrote {args.torchrec_plan} (TorchRec's ParameterShardings of the chosen plan, {args.device_type})")


def read_plan(path: Path) -> dict[str, Placement]:
    """A plan file: {table: {"kind": ..., "devices": [...]}}, or a `gnomon shard --json` output (its chosen plan)."""
    check_readable(path)
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ShardingError(f"{path}: not a JSON plan ({e})") from e
    if isinstance(data, dict) and "chosen" in data:
        data = data["chosen"]
    if isinstance(data, dict) and "assignment" in data:
        data = data["assignment"]
    if not isinstance(data, dict) or not data:
        raise ShardingError(f'{path}: a plan maps each table to {{"kind": ..., "devices": [...]}}')
    plan: dict[str, Placement] = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
            raise ShardingError(f'{path}: table {name}: expected {{"kind": ..., "devices": [...]}}')
        devices = entry.get("devices")
        if not isinstance(devices, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in devices):
            raise ShardingError(f"{path}: table {name}: devices must be a list of device numbers")
        try:
            plan[str(name)] = Placement(entry["kind"], tuple(devices))
        except ShardingError as e:
            raise ShardingError(f"{path}: table {name}: {e}") from e
    return plan
