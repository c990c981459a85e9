#!/usr/bin/env python3
"""PyTorch peer for oxicub's GPU benchmark: `python3 torch_peers.py PLAN`.

Reads the plan that bench-gpu wrote (one workload per line:
name kind seed p1 p2 p3 warmup reps rotations), runs the workloads that PyTorch has an
operation for, and prints one JSON line per workload on stdout (the protocol of
benches/gpu/peers.rs). Progress goes to stderr.

Inputs come from the shared generator benches/peers/gen.cuh, compiled here by NVRTC through
cupy.RawModule: the same source that nvcc builds into the CUB peer and that bench-gpu compiles,
so every implementation sees bit-identical inputs. The arrays are handed to torch through DLPack
(no copy).

What each kind runs (timed with torch.cuda.Event on the current stream; warm-up first, so
torch's caching allocator serves the outputs without cudaMalloc in the timed runs):
  topk        torch.topk(x, k)                       (sorted=True, torch's default)
  batched     torch.topk(x.view(S, L), k, dim=1)
  batched_ramp the same on ascending rows (gen.cuh: oxb_ramp_f32)
  batched_bf16 the same on bf16 keys (gen.cuh: oxb_bf16_bits)
  batched_ties torch.topk(x.view(S, L), k, dim=1) on tie-heavy rows (gen.cuh: oxb_tie_bits),
              digested with each row's index set (torch does not say which of equal keys it
              keeps); the keys alone as keys_digest
  batched_ragged torch.topk(torch.where(col < lens[:, None], x, -inf), k, dim=1): the usual
              masking of a padded [S x L] score matrix by per-row lengths (int32 on the device,
              gen.cuh: oxb_ragged_len), timed with the mask
  segsort     torch.sort(x.view(S, L), dim=1)        (uniform segments)
  segsort_pl  torch has no segmented sort: a stable sort of the keys, then a stable sort of the
              segment ids gathered in that order, then a gather of the keys: the usual two-pass
              lexicographic sort by (segment, key). The segment-id array is built before timing.
  segsort_pairs    s, idx = torch.sort(x.view(S, L), dim=1, stable=True), then the values
              v.view(S, L).gather(1, idx); v = arange(S * L) as int32 (value i = i, the key's
              global position; the same bits as the u32 values of the other peers)
  segsort_argsort  torch.sort(x.view(S, L), dim=1, stable=True): keys and int64 indices
  locality_near    torch.sort(x, stable=True) of int32 keys i + rand(0, R) (gen.cuh: oxb_near_i32)
  locality_random  torch.sort(x, stable=True) of random int32 keys (oxb_u32, full mask, as int32)
  set_*       not available in torch (no multiset operations): reported as unsupported.
  batched_set_* the same, pair by pair: reported as unsupported.
  merge       not available in torch (no merge of sorted arrays): reported as unsupported.
  route_deepseek_v3  the eager router of DeepSeek-V3's model code (HF modeling_deepseek MoEGate,
              noaux_tc), excluded experts as -inf: s = logits.sigmoid(); c = s + bias;
              group scores = the sum of each group's two best c; the best 4 groups
              (topk(sorted=False)); c outside them -inf; ids = c.topk(8, sorted=False);
              weights = s.gather(ids), renormalised (+ 1e-20), times 2.5. Bias: f32 zeros.
  route_softmax      p = logits.softmax(-1, dtype=float32); w, ids = p.topk(8); w / w.sum(-1)
              (Mixtral / Qwen). Both: logits f32 [T x 256] (gen.cuh: oxb_route_logit); the ids
              cast to int32, each token's sorted ascending for the digest.

Result digest (same as common.cuh and benches/gpu/gen.rs): over 32-bit words w[0..n),
sum_i fmix64((i << 32) | w[i]) mod 2^64, printed as "n:%016x"; top-k results are put in
canonical form first (each row's k keys sorted descending), routing results too (each token's
k ids sorted ascending). Sorts with values are digested as
one sequence: the keys, then the values' little-endian 32-bit words (int64: low word first).
"""
import json
import os
import sys
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

U64 = np.uint64


def fmix64(z):
    """The SplitMix64 output function on a uint64 array (numpy wraps modulo 2^64)."""
    z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
    return z ^ (z >> U64(31))


def digest_words(w):
    """Digest of a uint32 numpy array: sum_i fmix64((i << 32) | w[i]) mod 2^64."""
    w = np.ascontiguousarray(w, dtype=np.uint32)
    with np.errstate(over="ignore"):
        i = np.arange(w.size, dtype=np.uint64)
        total = int(fmix64((i << U64(32)) | w.astype(np.uint64)).sum(dtype=np.uint64))
    return "%d:%016x" % (w.size, total)


def digest_f32(a):
    return digest_words(np.ascontiguousarray(a, dtype=np.float32).view(np.uint32))


def digest_pairs(keys, values):
    """Keys (4-byte) then values (4- or 8-byte, as little-endian 32-bit words) as one digest."""
    k = np.ascontiguousarray(keys).reshape(-1)
    v = np.ascontiguousarray(values).reshape(-1)
    if k.itemsize != 4 or v.itemsize not in (4, 8) or k.size != v.size:
        raise ValueError("digest_pairs: keys %s x %d, values %s x %d" % (k.dtype, k.size, v.dtype, v.size))
    # CUDA hosts are little-endian: an int64's uint32 view is (low, high), as in the other peers.
    return digest_words(np.concatenate([k.view(np.uint32), v.view(np.uint32)]))


def canonical_topk(values, rows, k):
    """Each row's k keys sorted descending, rows in order (flattened)."""
    v = np.asarray(values, dtype=np.float32).reshape(rows, k)
    return (-np.sort(-v, axis=1)).reshape(-1)


def ragged_lens(seed, rows, length, k):
    """Row lengths of a ragged batched workload (gen.cuh: oxb_ragged_len), as int64 numpy."""
    i = np.arange(rows, dtype=np.uint64)
    with np.errstate(over="ignore"):
        r = fmix64(U64(seed + 1) + (i + U64(1)) * U64(0x9E3779B97F4A7C15)) >> U64(40)
        return (k + (((r * r) >> U64(24)) * U64(length - k) >> U64(24))).astype(np.int64)


def digest_ties(keys, indices, rows, k):
    """Keys then index sets (common.cuh: digest_ties), and the keys alone."""
    keys = canonical_topk(keys, rows, k)
    at = np.sort(np.asarray(indices).reshape(rows, k), axis=1).reshape(-1).astype(np.uint32)
    words = np.concatenate([keys.view(np.uint32), at])
    return digest_words(words), digest_f32(keys)


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def log(msg):
    sys.stderr.write("torch_peers: %s\n" % msg)
    sys.stderr.flush()


class Item:
    def __init__(self, line):
        f = line.split()
        if len(f) != 9:
            raise ValueError("bad plan line: %r" % line)
        self.name, self.kind = f[0], f[1]
        self.seed, self.p1, self.p2, self.p3 = (int(x) for x in f[2:6])
        self.warmup, self.reps, self.rotations = (int(x) for x in f[6:9])


class Gen:
    """The shared generator (gen.cuh) through cupy's NVRTC; results as torch tensors."""

    def __init__(self, torch, cp):
        self.torch, self.cp = torch, cp
        with open(os.path.join(HERE, "gen.cuh")) as f:
            self.mod = cp.RawModule(code=f.read())
        self.k_f32 = self.mod.get_function("oxb_gen_f32")
        self.k_u32 = self.mod.get_function("oxb_gen_u32")
        self.k_pl = self.mod.get_function("oxb_gen_powerlaw_len")
        self.k_ramp = self.mod.get_function("oxb_gen_ramp_f32")
        self.k_bf16 = self.mod.get_function("oxb_gen_bf16")
        self.k_tie = self.mod.get_function("oxb_gen_tie_bits")
        self.k_near = self.mod.get_function("oxb_gen_near_i32")
        self.k_route = self.mod.get_function("oxb_gen_route_logits")

    @staticmethod
    def grid(n):
        return (max(1, min((n + 255) // 256, 65536)),)

    def f32(self, n, seed):
        out = self.cp.empty(n, dtype=self.cp.float32)
        self.k_f32(self.grid(n), (256,), (out, U64(n), U64(seed)))
        return self._to_torch(out)

    def ramp_f32(self, n, seed, length):
        out = self.cp.empty(n, dtype=self.cp.float32)
        self.k_ramp(self.grid(n), (256,), (out, U64(n), U64(seed), np.uint32(length)))
        return self._to_torch(out)

    def bf16(self, n, seed):
        """n bf16 keys (oxb_bf16_bits), as a torch bfloat16 tensor."""
        out = self.cp.empty(n, dtype=self.cp.uint16)
        self.k_bf16(self.grid(n), (256,), (out, U64(n), U64(seed)))
        return self._to_torch(out.view(self.cp.int16)).view(self.torch.bfloat16)

    def tie_f32(self, n, seed):
        """n tie-heavy f32 keys (oxb_tie_bits), as a torch float32 tensor."""
        out = self.cp.empty(n, dtype=self.cp.uint32)
        self.k_tie(self.grid(n), (256,), (out, U64(n), U64(seed)))
        return self._to_torch(out.view(self.cp.float32))

    def u32(self, n, seed, mask):
        out = self.cp.empty(n, dtype=self.cp.uint32)
        self.k_u32(self.grid(n), (256,), (out, U64(n), U64(seed), np.uint32(mask)))
        return out

    def near_i32(self, n, seed, rng):
        """n int32 keys i + rand(0, rng) (oxb_near_i32), as a cupy array."""
        out = self.cp.empty(n, dtype=self.cp.int32)
        self.k_near(self.grid(n), (256,), (out, U64(n), U64(seed), np.uint32(rng)))
        return out

    def route_logits(self, tokens, experts, seed):
        """Router logits [tokens x experts] (oxb_route_logit), as a torch tensor."""
        n = tokens * experts
        out = self.cp.empty(n, dtype=self.cp.float32)
        self.k_route(self.grid(n), (256,), (out, U64(n), U64(seed), np.uint32(experts)))
        return self._to_torch(out).view(tokens, experts)

    def i32(self, n, seed):
        """n random int32 keys: the u32 stream with the full mask, reinterpreted (a cupy array)."""
        return self.u32(n, seed, 0xFFFFFFFF).view(self.cp.int32)

    def powerlaw_lens(self, n, seed, max_exp):
        out = self.cp.empty(n, dtype=self.cp.uint32)
        self.k_pl(self.grid(n), (256,), (out, U64(n), U64(seed), np.uint32(max_exp)))
        return self.cp.asnumpy(out)

    def _to_torch(self, arr):
        # cupy launched on its current stream; make the data visible to torch's stream first.
        self.cp.cuda.get_current_stream().synchronize()
        return self.torch.from_dlpack(arr)


def time_runs(torch, item, op):
    """Warm-up, then item.reps runs between CUDA events; returns (median_ms, min_ms, last result)."""
    rot = max(1, item.rotations)
    res = None
    for i in range(item.warmup):
        res = op(i % rot)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(item.reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(item.reps)]
    for r in range(item.reps):
        starts[r].record()
        res = op(r % rot)
        ends[r].record()
    torch.cuda.synchronize()
    ms = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    m = len(ms)
    median = ms[m // 2] if m % 2 else 0.5 * (ms[m // 2 - 1] + ms[m // 2])
    return median, ms[0], res


def result(item, median, mn, digest, note, **extra):
    emit({"workload": item.name, "impl": "torch", "status": "ok", "median_ms": median, "min_ms": mn,
          "reps": item.reps, "rotations": item.rotations, "digest": digest, "note": note, **extra})


# DeepSeek-V3's groups, kept groups and weight scale (the plan kind carries them: workloads.rs).
V3_GROUPS, V3_TOP_GROUPS, V3_SCALE = 8, 4, 2.5


def route_deepseek_v3(torch, logits, bias, k):
    """DeepSeek-V3's MoEGate (noaux_tc) in eager torch, as the model code writes it."""
    t, e = logits.shape
    s = logits.sigmoid()
    c = s + bias
    group_scores = c.view(t, V3_GROUPS, e // V3_GROUPS).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = group_scores.topk(V3_TOP_GROUPS, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(t, V3_GROUPS, e // V3_GROUPS).reshape(t, -1)
    c = c.masked_fill(~score_mask.bool(), float("-inf"))
    idx = c.topk(k, dim=-1, sorted=False)[1]
    w = s.gather(1, idx)
    w = w / (w.sum(dim=-1, keepdim=True) + 1e-20) * V3_SCALE
    return idx, w


def route_softmax(torch, logits, k):
    """Softmax top-k, renormalised (Mixtral / Qwen), in eager torch."""
    p = logits.softmax(dim=-1, dtype=torch.float32)
    w, idx = p.topk(k, dim=-1)
    w = w / w.sum(dim=-1, keepdim=True)
    return idx, w


def canonical_ids(idx):
    """Each token's ids (torch's int64) cast to int32, sorted ascending, as uint32 words."""
    return np.sort(idx.cpu().numpy().astype(np.int32), axis=1).reshape(-1).view(np.uint32)


def run_item(torch, gen, it):
    rot = max(1, it.rotations)
    if it.kind == "generator":
        n = it.p1
        f = gen.f32(n, it.seed).cpu().numpy()
        u = gen.cp.asnumpy(gen.u32(n, it.seed + 1, 0xFFFFFFFF))
        pl = gen.powerlaw_lens(n, it.seed + 2, it.p2)
        near = gen.cp.asnumpy(gen.near_i32(n, it.seed + 3, it.p3))
        route = gen.route_logits(n // 256, 256, it.seed + 4).reshape(-1).cpu().numpy()
        emit({"workload": it.name, "impl": "torch", "status": "ok", "digest_f32": digest_f32(f),
              "digest_u32": digest_words(u), "digest_powerlaw": digest_words(pl),
              "digest_near": digest_words(near.view(np.uint32)), "digest_route": digest_f32(route)})
    elif it.kind == "topk":
        n, k = it.p1, it.p2
        xs = [gen.f32(n, it.seed) for _ in range(rot)]
        med, mn, res = time_runs(torch, it, lambda r: torch.topk(xs[r], k).values)
        keys = canonical_topk(res.cpu().numpy(), 1, k)
        result(it, med, mn, digest_f32(keys), "torch.topk(x, k), sorted")
    elif it.kind in ("batched", "batched_ramp"):
        s, length, k = it.p1, it.p2, it.p3
        make = gen.f32 if it.kind == "batched" else lambda n, seed: gen.ramp_f32(n, seed, length)
        xs = [make(s * length, it.seed).view(s, length) for _ in range(rot)]
        med, mn, res = time_runs(torch, it, lambda r: torch.topk(xs[r], k, dim=1).values)
        keys = canonical_topk(res.cpu().numpy(), s, k)
        result(it, med, mn, digest_f32(keys), "torch.topk(x.view(S, L), k, dim=1), sorted")
    elif it.kind == "batched_bf16":
        s, length, k = it.p1, it.p2, it.p3
        xs = [gen.bf16(s * length, it.seed).view(s, length) for _ in range(rot)]
        med, mn, res = time_runs(torch, it, lambda r: torch.topk(xs[r], k, dim=1).values)
        # Non-negative bf16 keys: their bits order like their values.
        bits = res.view(torch.int16).cpu().numpy().view(np.uint16).astype(np.uint32)
        keys = -np.sort(-bits.astype(np.int64), axis=1)
        result(it, med, mn, digest_words(keys.reshape(-1).astype(np.uint32)),
               "torch.topk(x.view(S, L), k, dim=1) on bfloat16, sorted")
    elif it.kind == "batched_ties":
        s, length, k = it.p1, it.p2, it.p3
        xs = [gen.tie_f32(s * length, it.seed).view(s, length) for _ in range(rot)]
        med, mn, res = time_runs(torch, it, lambda r: torch.topk(xs[r], k, dim=1))
        digest, keys_digest = digest_ties(res.values.cpu().numpy(), res.indices.cpu().numpy(), s, k)
        result(it, med, mn, digest, "torch.topk(x.view(S, L), k, dim=1), sorted; which of equal keys it keeps is "
               "not specified", keys_digest=keys_digest)
    elif it.kind == "batched_ragged":
        s, length, k = it.p1, it.p2, it.p3
        xs = [gen.f32(s * length, it.seed).view(s, length) for _ in range(rot)]
        lens = torch.from_numpy(ragged_lens(it.seed, s, length, k).astype(np.int32)).cuda()
        col = torch.arange(length, device="cuda", dtype=torch.int32)
        neg = torch.tensor(float("-inf"), device="cuda")
        med, mn, res = time_runs(
            torch, it, lambda r: torch.topk(torch.where(col < lens[:, None], xs[r], neg), k, dim=1).values)
        keys = canonical_topk(res.cpu().numpy(), s, k)
        result(it, med, mn, digest_f32(keys),
               "torch.topk(torch.where(col < lens[:, None], x, -inf), k, dim=1), sorted, lengths int32 on the device")
    elif it.kind == "segsort":
        s, length = it.p1, it.p2
        xs = [gen.f32(s * length, it.seed).view(s, length) for _ in range(rot)]
        med, mn, res = time_runs(torch, it, lambda r: torch.sort(xs[r], dim=1).values)
        result(it, med, mn, digest_f32(res.reshape(-1).cpu().numpy()), "torch.sort(x.view(S, L), dim=1)")
    elif it.kind == "segsort_pl":
        s = it.p1
        lens = gen.powerlaw_lens(s, it.seed, it.p2).astype(np.int64)
        n = int(lens.sum())
        xs = [gen.f32(n, it.seed) for _ in range(rot)]
        seg = torch.repeat_interleave(torch.arange(s, device="cuda", dtype=torch.int32),
                                      torch.from_numpy(lens).cuda())

        def op(r):
            v, p = torch.sort(xs[r], stable=True)
            _, p2 = torch.sort(seg[p], stable=True)
            return v[p2]

        med, mn, res = time_runs(torch, it, op)
        result(it, med, mn, digest_f32(res.cpu().numpy()),
               "two stable torch.sort passes (key, then segment id) + gathers, %d keys" % n)
    elif it.kind == "segsort_pairs":
        s, length = it.p1, it.p2
        n = s * length
        xs = [gen.f32(n, it.seed).view(s, length) for _ in range(rot)]
        vs = [torch.arange(n, device="cuda", dtype=torch.int32).view(s, length) for _ in range(rot)]

        def op(r):
            keys, idx = torch.sort(xs[r], dim=1, stable=True)
            return keys, vs[r].gather(1, idx)

        med, mn, (keys, values) = time_runs(torch, it, op)
        result(it, med, mn, digest_pairs(keys.reshape(-1).cpu().numpy(), values.reshape(-1).cpu().numpy()),
               "torch.sort(x.view(S, L), dim=1, stable=True) + v.view(S, L).gather(1, idx), int32 values")
    elif it.kind == "segsort_argsort":
        s, length = it.p1, it.p2
        xs = [gen.f32(s * length, it.seed).view(s, length) for _ in range(rot)]
        med, mn, (keys, idx) = time_runs(torch, it, lambda r: torch.sort(xs[r], dim=1, stable=True))
        if idx.dtype != torch.int64:
            raise TypeError("torch.sort returned %s indices" % idx.dtype)
        result(it, med, mn, digest_pairs(keys.reshape(-1).cpu().numpy(), idx.reshape(-1).cpu().numpy()),
               "torch.sort(x.view(S, L), dim=1, stable=True), int64 indices")
    elif it.kind in ("locality_near", "locality_random"):
        n = it.p1
        if it.kind == "locality_near":
            xs = [gen._to_torch(gen.near_i32(n, it.seed, it.p2)) for _ in range(rot)]
        else:
            xs = [gen._to_torch(gen.i32(n, it.seed)) for _ in range(rot)]
        med, mn, res = time_runs(torch, it, lambda r: torch.sort(xs[r], stable=True).values)
        result(it, med, mn, digest_words(res.cpu().numpy().view(np.uint32)),
               "torch.sort(x, stable=True), int32 keys")
    elif it.kind in ("route_deepseek_v3", "route_softmax"):
        t, e, k = it.p1, it.p2, it.p3
        xs = [gen.route_logits(t, e, it.seed) for _ in range(rot)]
        if it.kind == "route_deepseek_v3":
            bias = torch.zeros(e, device="cuda", dtype=torch.float32)
            med, mn, (idx, _) = time_runs(torch, it, lambda r: route_deepseek_v3(torch, xs[r], bias, k))
            note = ("eager DeepSeek-V3 MoEGate (noaux_tc, excluded experts -inf): sigmoid + bias, "
                    "group top-2 sums, top-4 groups, top-8, gather, renormalise, x2.5")
        else:
            med, mn, (idx, _) = time_runs(torch, it, lambda r: route_softmax(torch, xs[r], k))
            note = "softmax(dtype=float32), topk(8), renormalise"
        result(it, med, mn, digest_words(canonical_ids(idx)), note)
    elif it.kind.startswith(("set_", "batched_set_")):
        emit({"workload": it.name, "impl": "torch", "status": "unsupported",
              "note": "torch has no multiset intersection/union/difference"})
    elif it.kind == "merge":
        emit({"workload": it.name, "impl": "torch", "status": "unsupported",
              "note": "torch has no merge of sorted arrays"})
    else:
        emit({"workload": it.name, "impl": "torch", "status": "unsupported", "note": "kind " + it.kind})


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: torch_peers.py PLAN\n")
        return 2
    with open(sys.argv[1]) as f:
        items = [Item(line) for line in f if line.strip() and not line.startswith("#")]
    try:
        import cupy as cp
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        gen = Gen(torch, cp)
        log("torch %s, cupy %s, %s" % (torch.__version__, cp.__version__, torch.cuda.get_device_name(0)))
    except Exception as e:  # report every workload, so the table says why torch is missing
        for it in items:
            emit({"workload": it.name, "impl": "torch", "status": "error", "note": "setup failed: %s" % e})
        return 1
    failures = 0
    for it in items:
        log(it.name)
        try:
            run_item(torch, gen, it)
        except Exception as e:
            failures += 1
            traceback.print_exc(file=sys.stderr)
            emit({"workload": it.name, "impl": "torch", "status": "error", "note": "%s: %s" % (type(e).__name__, e)})
        finally:
            # Return this workload's memory (torch's cache and cupy's pool) before the next one.
            torch.cuda.empty_cache()
            cp.get_default_memory_pool().free_all_blocks()
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
