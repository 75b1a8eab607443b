#!/usr/bin/env python3
"""A small PyTorch training job for gpuxray to capture: a few transformer encoder layers on
synthetic tokens, trained for a few steps with AdamW under bf16 autocast.

Every operator gets an NVTX range (torch.autograd.profiler.emit_nvtx), and each step is wrapped in
an NVTX range "step N" of its own. Nothing is downloaded. Runs in a few seconds on one H200.

    python3 train_transformer.py [--steps 20] [--layers 4] [--d-model 512] [--seq 256] [--batch 16]

Prints key=value lines at the end (steps=, seconds=, step_ms=, final_loss=) for scripts/gpu-check.sh.
"""

import argparse
import sys
import time

import torch
import torch.nn as nn


class TinyLM(nn.Module):
    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, seq: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.zeros(1, seq, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, dropout=0.1,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[:, : tokens.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1], device=tokens.device)
        x = self.encoder(x, mask=mask, is_causal=True)
        return self.head(self.norm(x))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--no-nvtx", action="store_true", help="leave out emit_nvtx (the step ranges stay)")
    parser.add_argument("--profiler-range", metavar="A-B",
                        help="call torch.cuda.profiler.start() before step A and stop() after step B")
    args = parser.parse_args()
    profiler_first, profiler_last = (int(x) for x in args.profiler_range.split("-")) if args.profiler_range else (-1, -1)

    if not torch.cuda.is_available():
        print("train_transformer: no CUDA device", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    torch.manual_seed(0)
    model = TinyLM(args.vocab, args.d_model, args.heads, args.layers, args.seq).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loss_fn = nn.CrossEntropyLoss()
    # Synthetic data: a fixed pool of batches, made on the GPU.
    generator = torch.Generator(device=device).manual_seed(1)
    batches = [torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=device, generator=generator)
               for _ in range(4)]

    def step(n: int) -> torch.Tensor:
        torch.cuda.nvtx.range_push(f"step {n}")
        tokens = batches[n % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
            loss = loss_fn(logits.reshape(-1, args.vocab).float(), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        torch.cuda.nvtx.range_pop()
        return loss

    nvtx = torch.autograd.profiler.emit_nvtx(enabled=not args.no_nvtx)
    torch.cuda.synchronize()
    start = time.perf_counter()
    first_step_s = None
    with nvtx:
        for n in range(args.steps):
            if n == profiler_first:
                torch.cuda.profiler.start()
            loss = step(n)
            if n == profiler_last:
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()
            if n == 0:
                torch.cuda.synchronize()
                first_step_s = time.perf_counter() - start
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    later = (seconds - first_step_s) / (args.steps - 1) if args.steps > 1 else seconds
    print(f"torch={torch.__version__} cuda={torch.version.cuda} device=\"{torch.cuda.get_device_name(0)}\"")
    print(f"parameters={sum(p.numel() for p in model.parameters())}")
    print(f"steps={args.steps}")
    print(f"seconds={seconds:.4f}")
    print(f"first_step_ms={first_step_s * 1e3:.2f}")
    print(f"step_ms={later * 1e3:.3f}")
    print(f"final_loss={loss.item():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
