// Family segment_heads: segments described by their heads (a bitfield of head flags, or the
// sorted list of head indices) turned into begin and end offsets and their number, on the
// device and in stream order (the host never reads them).
//
// Head flags (bit j % 32 of word j / 32 marks a head at key j; key 0 always starts a segment;
// bits past num_keys are ignored) take three stages over chunks of SH_WORDS_PER_THREAD words a
// thread: COUNT (each chunk's heads), SCAN (one block: the chunks' exclusive sums, the total)
// and WRITE (each head's begin, and the end of the segment before it). Head indices (sorted,
// unique, each in 0..num_keys, a head at 0 optional) take INDICES (a thread per head: checked,
// its begin and the end before it) and FINISH (one thread: the count, the first begin and the
// last end, or the offending values of the smallest invalid head).
//
// begin and end hold p.begin_len and p.end_len offsets: an offset past them is not written
// (the count is, and the host reports it above the capacity).
namespace oxicub {

// Word `w` of the flags with key 0 flagged and the bits past the keys cleared (0 past the
// words).
__device__ __forceinline__ u32 sh_flag_word(const u32* flags, u64 w, u64 words, u64 n) {
    if (w >= words) {
        return 0u;
    }
    u32 bits = flags[w];
    if (w == 0) {
        bits |= 1u;
    }
    const u32 tail = (u32)(n & 31u);
    if (w == words - 1 && tail != 0u) {
        bits &= (1u << tail) - 1u;
    }
    return bits;
}

// Writes a head at key `key` as segment `at`: its begin, and the end of segment `at - 1`.
__device__ __forceinline__ void sh_write_head(const SegmentHeadsParams& p, u64 at, i64 key) {
    i64* begin = reinterpret_cast<i64*>(p.begin);
    i64* end = reinterpret_cast<i64*>(p.end);
    if (at < p.begin_len) {
        begin[at] = key;
    }
    if (at > 0 && at - 1 < p.end_len) {
        end[at - 1] = key;
    }
}

// The number of segments: into the caller's count, the status word, and the last end
// (num_keys) written.
__device__ __forceinline__ void sh_write_count(const SegmentHeadsParams& p, u64 total) {
    reinterpret_cast<i64*>(p.count)[0] = (i64)total;
    reinterpret_cast<u64*>(p.status)[SH_STATUS_COUNT] = total;
    if (total > 0 && total - 1 < p.end_len) {
        reinterpret_cast<i64*>(p.end)[total - 1] = (i64)p.num_keys;
    }
}

template <u32 BLOCK_THREADS>
__device__ __forceinline__ void segment_heads(const SegmentHeadsParams& p) {
    __shared__ u64 warp_totals[BLOCK_THREADS / 32];
    constexpr u64 CHUNK_WORDS = (u64)BLOCK_THREADS * SH_WORDS_PER_THREAD;
    u64* status = reinterpret_cast<u64*>(p.status);
    u64* chunk_counts = reinterpret_cast<u64*>(p.chunk_counts);
    const u64 n = p.num_keys;
    // Head flags: the words covering the keys, in chunks of CHUNK_WORDS.
    const u64 words = (n + 31) / 32;
    const u64 chunks = (words + CHUNK_WORDS - 1) / CHUNK_WORDS;

    if (p.stage == SH_STAGE_FLAGS_COUNT || p.stage == SH_STAGE_FLAGS_WRITE) {
        const u32* flags = reinterpret_cast<const u32*>(p.input);
        // A block per chunk; the loop's bound is the block's, so every thread scans together.
        for (u64 chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
            const u64 first = chunk * CHUNK_WORDS + (u64)threadIdx.x * SH_WORDS_PER_THREAD;
            u32 bits[SH_WORDS_PER_THREAD];
            u64 heads = 0;
#pragma unroll
            for (u32 i = 0; i < SH_WORDS_PER_THREAD; ++i) {
                bits[i] = sh_flag_word(flags, first + i, words, n);
                heads += (u64)__popc(bits[i]);
            }
            u64 total;
            const u64 below = block_exclusive_sum<BLOCK_THREADS, u64>(heads, warp_totals, &total);
            if (p.stage == SH_STAGE_FLAGS_COUNT) {
                if (threadIdx.x == 0) {
                    chunk_counts[chunk] = total;
                }
                continue;
            }
            u64 at = chunk_counts[chunk] + below;
#pragma unroll
            for (u32 i = 0; i < SH_WORDS_PER_THREAD; ++i) {
                u32 b = bits[i];
                while (b != 0u) {
                    const u64 key = (first + i) * 32 + (u64)(__ffs(b) - 1);
                    sh_write_head(p, at, (i64)key);
                    ++at;
                    b &= b - 1u;
                }
            }
        }
        return;
    }
    if (p.stage == SH_STAGE_FLAGS_SCAN) {
        // One block: the chunks' exclusive sums in place, a tile of BLOCK_THREADS at a time
        // (WRITE writes every head's begin, the first's included).
        u64 carry = 0;
        for (u64 base = 0; base < chunks; base += BLOCK_THREADS) {
            const u64 i = base + threadIdx.x;
            const u64 x = i < chunks ? chunk_counts[i] : 0ull;
            u64 total;
            const u64 below = block_exclusive_sum<BLOCK_THREADS, u64>(x, warp_totals, &total);
            if (i < chunks) {
                chunk_counts[i] = carry + below;
            }
            carry += total;
        }
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            sh_write_count(p, carry);
        }
        return;
    }
    const i64* heads = reinterpret_cast<const i64*>(p.input);
    const u64 count = p.num_inputs;
    if (p.stage == SH_STAGE_INDICES) {
        const u64 stride = grid_threads(BLOCK_THREADS);
        for (u64 i = global_thread_index(BLOCK_THREADS); i < count; i += stride) {
            const i64 head = heads[i];
            u32 fault = 0;
            if (n == 0) {
                // No keys: only a head at 0 (given for the omitted-or-given first segment).
                fault = head != 0 ? SH_FAULT_OUTSIDE : 0u;
            } else if (head < 0 || (u64)head >= n) {
                fault = SH_FAULT_OUTSIDE;
            } else if (i > 0 && head <= heads[i - 1]) {
                fault = SH_FAULT_NOT_ABOVE;
            }
            if (fault != 0u) {
                // The smallest position wins: its code, inverted, is the largest.
                atomicMax(&status[SH_STATUS_INVALID], ~((i << 8) | (u64)fault));
                continue;
            }
            if (head > 0) {
                // Segment 0 starts at key 0; a given head at 0 is not a second one.
                const u64 at = i + 1 - (heads[0] == 0 ? 1 : 0);
                sh_write_head(p, at, head);
            }
        }
        return;
    }
    if (p.stage == SH_STAGE_INDICES_FINISH) {
        if (blockIdx.x != 0 || threadIdx.x != 0) {
            return;
        }
        const u64 invalid = status[SH_STATUS_INVALID];
        if (invalid != 0) {
            // The offending head and the one before it, for the host's message; no segment.
            const u64 at = (~invalid) >> 8;
            status[SH_STATUS_VALUE] = (u64)heads[at];
            status[SH_STATUS_PREVIOUS] = at > 0 ? (u64)heads[at - 1] : 0ull;
            reinterpret_cast<i64*>(p.count)[0] = 0;
            status[SH_STATUS_COUNT] = 0;
            return;
        }
        u64 total = 0;
        if (n > 0) {
            total = count + 1 - (count > 0 && heads[0] == 0 ? 1 : 0);
            sh_write_head(p, 0, 0);
        }
        sh_write_count(p, total);
    }
}

}  // namespace oxicub
