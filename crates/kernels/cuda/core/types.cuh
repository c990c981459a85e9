// oxicub core: the integer types and the grid indexing every kernel uses. Compiled by NVRTC with
// no system or CUDA headers: everything in cuda/core is a builtin type or intrinsic.
namespace oxicub {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;

// Index of this thread in a 1-D grid, in 64 bits so grid-stride loops never overflow.
__device__ __forceinline__ u64 global_thread_index(u32 block_threads) {
    return (u64)blockIdx.x * (u64)block_threads + (u64)threadIdx.x;
}

// Number of threads in a 1-D grid, in 64 bits.
__device__ __forceinline__ u64 grid_threads(u32 block_threads) {
    return (u64)gridDim.x * (u64)block_threads;
}

// The unsigned word that carries a 4- or 8-byte value (or source index) through a kernel: values
// are moved as bits, never interpreted.
template <int VALUE_BYTES> struct ValuePayload { typedef u32 Type; };
template <> struct ValuePayload<8> { typedef u64 Type; };

// The word that carries a value of 1, 2, 4 or 8 bytes (moved as bits, never interpreted).
template <int BYTES> struct ValueWord { typedef u64 Type; };
template <> struct ValueWord<1> { typedef u8 Type; };
template <> struct ValueWord<2> { typedef u16 Type; };
template <> struct ValueWord<4> { typedef u32 Type; };

}  // namespace oxicub
