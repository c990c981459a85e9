"""The torch.distributed peer of benches/sharded.rs: two processes (one per GPU, NCCL), each
holding half the columns of [rows x total] f32 logits; all_gather_into_tensor of the shards,
the rank-major result joined into rows (torch.cat), then torch.topk(k, sorted=True) on every
rank. Times per call with CUDA events over a loop, median of 5 loops (as the Rust bench).

    python3 benches/peers/torch_sharded.py [--rows 256] [--total 256000] [--out FILE]
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ITERS, LOOPS = 20, 5


def rank_main(rank, args, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=torch.device("cuda", rank))
    half = args.total // 2
    gen = torch.Generator(device="cuda").manual_seed(1 + rank)
    shard = torch.rand(args.rows, half, device="cuda", generator=gen)
    gathered = torch.empty(2, args.rows, half, device="cuda")
    lines = []
    for k in (50, 2048):
        def call():
            dist.all_gather_into_tensor(gathered, shard)
            whole = torch.cat([gathered[0], gathered[1]], dim=1)
            return torch.topk(whole, k, dim=1, sorted=True)

        for _ in range(3):
            call()
        times = []
        for _ in range(LOOPS):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            dist.barrier()
            start.record()
            for _ in range(ITERS):
                call()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / ITERS)
        times.sort()
        t = torch.tensor([times[LOOPS // 2]], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        lines.append(f"| {k} | {t.item():.4f} |")
    if rank == 0:
        name = torch.cuda.get_device_name(0)
        text = (f"# torch.distributed all_gather + cat + topk, 2 GPUs ({name}), "
                f"[{args.rows} x {args.total}] f32, torch {torch.__version__}, "
                f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}\n\n| k | ms |\n| ---: | ---: |\n"
                + "\n".join(lines) + "\n")
        print(text)
        with open(args.out, "w") as f:
            f.write(text)
    dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--total", type=int, default=256000)
    parser.add_argument("--out", default="torch_sharded.md")
    args = parser.parse_args()
    mp.spawn(rank_main, args=(args, 29500 + os.getpid() % 1000), nprocs=2)
