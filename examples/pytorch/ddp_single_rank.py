#!/usr/bin/env python3
"""A small DistributedDataParallel job on the NCCL backend, for gpuxray to capture NCCL through.

By default one process, world size 1: MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK=0 and
WORLD_SIZE=1 are set when missing. A small MLP wrapped in DistributedDataParallel trains for a few
steps (DDP all-reduces the gradients, in buckets, during each backward), then the script makes a few
explicit dist.all_reduce calls. Nothing is downloaded.

NCCL runs the collectives of a one-rank communicator as local copies, without telling its profiler
plugin (NCCL 2.28, enqueue.cc: taskAppend), so a world-size-1 trace holds the communicator but no
NCCL operations. --world-size N starts N processes of this script (each with RANK, LOCAL_RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and waits for them. With fewer GPUs than ranks they share GPU 0:
each sets its own NCCL_HOSTID, so that NCCL takes them for different hosts (it refuses two ranks on
one GPU of one host) and connects them with its socket transport over the loopback interface
(NCCL_NET=Socket, NCCL_SOCKET_IFNAME=lo, unless set): a test set-up for one GPU, not a way to train.

    python3 ddp_single_rank.py [--steps 10] [--explicit-all-reduces 3] [--world-size 1]

Prints key=value lines (rank 0 plain, other ranks with a "rankR." prefix): torch=, nccl_version=,
world_size=, rank=, shared_gpu=, steps=, explicit_all_reduces=, min_all_reduces= (steps plus
explicit: DDP all-reduces at least one bucket per step), seconds= (the steps and the explicit
all-reduces), final_loss=; the parent of --world-size N > 1 prints world_size= and rank_exit=.
"""

import argparse
import os
import socket
import subprocess
import sys
import time


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--explicit-all-reduces", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--world-size", type=int, default=1, help="processes to start (default 1: this one)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds the parent waits for its ranks")
    parser.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)  # set by the parent
    return parser.parse_args()


def run_ranks(args: argparse.Namespace) -> int:
    """The parent of --world-size N: starts the ranks and waits; stops the rest when one fails."""
    port = free_port()
    children = []
    for rank in range(args.world_size):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   LOCAL_RANK=str(rank), WORLD_SIZE=str(args.world_size), LOCAL_WORLD_SIZE=str(args.world_size))
        children.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), *sys.argv[1:],
                                          "--rank", str(rank)], env=env))
    start = time.monotonic()
    failed_at = None
    killed = False
    while any(c.poll() is None for c in children):
        now = time.monotonic()
        if failed_at is None and any(c.returncode not in (None, 0) for c in children):
            failed_at = now
        if not killed and (now - start > args.timeout or (failed_at is not None and now - failed_at > 15)):
            print("ddp_single_rank: " + ("time limit reached" if failed_at is None else "a rank failed")
                  + "; stopping the other ranks", file=sys.stderr)
            for c in children:
                if c.poll() is None:
                    c.terminate()
            killed = True
        time.sleep(0.05)
    print(f"world_size={args.world_size}")
    print("rank_exit=" + ",".join(str(c.returncode) for c in children))
    return 0 if all(c.returncode == 0 for c in children) else 1


def run_rank(args: argparse.Namespace) -> int:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = str(free_port())
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", os.environ["RANK"])
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    prefix = f"rank{rank}." if rank != 0 else ""

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel

    if not torch.cuda.is_available():
        print("ddp_single_rank: no CUDA device", file=sys.stderr)
        return 1
    shared_gpu = world_size > 1 and torch.cuda.device_count() < world_size
    if shared_gpu:
        # Read by NCCL when PyTorch creates the communicator, below.
        os.environ["NCCL_HOSTID"] = f"gpuxray-ddp-example-{os.getppid()}-rank{rank}"
        for name, value in (("NCCL_NET", "Socket"), ("NCCL_SOCKET_IFNAME", "lo"), ("NCCL_IB_DISABLE", "1"),
                            ("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"), ("NCCL_NVLS_ENABLE", "0"),
                            ("NCCL_MNNVL_ENABLE", "0")):
            os.environ.setdefault(name, value)
    device = torch.device("cuda", 0 if shared_gpu else int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
    try:  # device_id makes PyTorch create the NCCL communicator now (PyTorch 2.3+)
        dist.init_process_group("nccl", rank=rank, world_size=world_size, device_id=device)
    except TypeError:
        dist.init_process_group("nccl", rank=rank, world_size=world_size)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, args.hidden), nn.GELU(), nn.Linear(args.hidden, 1024)).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index])
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    generator = torch.Generator(device=device).manual_seed(1 + rank)
    inputs = torch.randn(args.batch, 1024, device=device, generator=generator)
    targets = torch.randn(args.batch, 1024, device=device, generator=generator)

    torch.cuda.synchronize()
    start = time.perf_counter()
    loss = torch.zeros((), device=device)
    for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
    total = torch.ones(1 << 20, device=device)
    for _ in range(args.explicit_all_reduces):
        dist.all_reduce(total)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start

    nccl = torch.cuda.nccl.version()
    nccl_text = ".".join(str(part) for part in nccl) if isinstance(nccl, tuple) else str(nccl)
    lines = [
        f"torch={torch.__version__}",
        f"nccl_version={nccl_text}",
        f"world_size={world_size}",
        f"rank={rank}",
        f"cuda_device={device.index}",
        f"shared_gpu={int(shared_gpu)}",
        f"steps={args.steps}",
        f"explicit_all_reduces={args.explicit_all_reduces}",
        f"min_all_reduces={args.steps + args.explicit_all_reduces}",
        f"all_reduce_result={total[0].item():.0f}",
        f"seconds={seconds:.4f}",
        f"final_loss={loss.item():.5f}",
    ]
    print("\n".join(prefix + line for line in lines), flush=True)
    dist.destroy_process_group()
    return 0


def main() -> int:
    args = parse_args()
    if args.world_size > 1 and args.rank is None:
        return run_ranks(args)
    return run_rank(args)


if __name__ == "__main__":
    sys.exit(main())
