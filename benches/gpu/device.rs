//! The GPU side of bench-gpu: context and stream, the shared generator compiled with NVRTC,
//! CUDA-event timing, the copy-bandwidth measurement that sets the floor, and a bare launch's
//! time (the decode-size rows' reference).

use std::sync::Arc;

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{CompileError, CompileOptions};

use crate::err::{BenchError, Context, Result};

/// The shared generator source, the same file the CUB and torch peers compile.
const GEN_SRC: &str = include_str!("../peers/gen.cuh");

/// Median and minimum of timed runs, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub median_ms: f64,
    pub min_ms: f64,
    pub reps: usize,
}

impl Timing {
    /// From raw per-run times (any order).
    pub fn from_ms(mut ms: Vec<f64>) -> Result<Timing> {
        if ms.is_empty() {
            return Err(BenchError::new("no timed runs"));
        }
        ms.sort_by(f64::total_cmp);
        let n = ms.len();
        let median = if n % 2 == 1 {
            ms[n / 2]
        } else {
            0.5 * (ms[n / 2 - 1] + ms[n / 2])
        };
        Ok(Timing {
            median_ms: median,
            min_ms: ms[0],
            reps: n,
        })
    }
}

/// Device copy bandwidth, counting bytes read plus bytes written.
#[derive(Clone, Copy, Debug)]
pub struct Bandwidth {
    /// Bytes read + written by one copy.
    pub bytes_moved: u64,
    pub memcpy: Timing,
    pub kernel: Timing,
}

impl Bandwidth {
    pub fn memcpy_gbs(&self) -> f64 {
        self.bytes_moved as f64 / (self.memcpy.median_ms * 1e6)
    }
    pub fn kernel_gbs(&self) -> f64 {
        self.bytes_moved as f64 / (self.kernel.median_ms * 1e6)
    }
    /// The floor's bandwidth: the better of the two copies (both are plain streaming copies, so
    /// the better one is the closer estimate of what the memory system delivers).
    pub fn best_gbs(&self) -> f64 {
        self.memcpy_gbs().max(self.kernel_gbs())
    }
}

pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub name: String,
    pub cc: (i32, i32),
    pub sm_count: u32,
    pub l2_bytes: u64,
    pub total_mem: u64,
    gen_f32: CudaFunction,
    gen_ramp: CudaFunction,
    gen_bf16: CudaFunction,
    gen_tie: CudaFunction,
    gen_u32: CudaFunction,
    gen_near: CudaFunction,
    gen_pl: CudaFunction,
    gen_route: CudaFunction,
    copy16: CudaFunction,
    empty: CudaFunction,
}

/// Compiles benches/peers/gen.cuh with NVRTC for compute capability `cc` (needs libnvrtc, no GPU).
pub fn compile_generator(cc: (i32, i32)) -> Result<cudarc::nvrtc::Ptx> {
    let arch: &'static str = Box::leak(format!("compute_{}{}", cc.0, cc.1).into_boxed_str());
    let opts = CompileOptions {
        arch: Some(arch),
        name: Some("gen.cuh".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(GEN_SRC, opts).map_err(|e| match e {
        CompileError::CompileError { log, .. } => BenchError::new(format!(
            "NVRTC failed on benches/peers/gen.cuh:\n{}",
            log.to_string_lossy()
        )),
        other => BenchError::new(format!("NVRTC failed on benches/peers/gen.cuh: {other}")),
    })
}

fn grid_for(n: u64) -> u32 {
    n.div_ceil(256).clamp(1, 65536) as u32
}

impl Gpu {
    /// Opens device 0. The caller has checked that the driver library is present.
    pub fn open() -> Result<Gpu> {
        let count = CudaContext::device_count().ctx("cuDeviceGetCount")?;
        if count < 1 {
            return Err(BenchError::new("the CUDA driver reports no GPU"));
        }
        let ctx = CudaContext::new(0).ctx("creating a CUDA context on device 0")?;
        // One stream, used in order: cudarc's per-allocation event tracking (for multi-stream
        // use) would only add event records around every launch.
        // SAFETY: everything in bench-gpu runs on the one stream created below.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().ctx("creating a stream")?;
        let name = ctx.name().ctx("cuDeviceGetName")?;
        let cc = ctx
            .compute_capability()
            .ctx("reading the compute capability")?;
        let attr = |a| ctx.attribute(a).ctx(format!("cuDeviceGetAttribute({a:?})"));
        let sm_count = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let l2_bytes = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64;
        let total_mem = ctx.total_mem().ctx("cuDeviceTotalMem")? as u64;

        // Compile for this device's own architecture (real code, no PTX JIT of a foreign arch).
        let ptx = compile_generator(cc)?;
        let module = ctx.load_module(ptx).ctx("loading the generator module")?;
        let f = |name: &str| {
            module
                .load_function(name)
                .ctx(format!("finding kernel {name}"))
        };
        Ok(Gpu {
            gen_f32: f("oxb_gen_f32")?,
            gen_ramp: f("oxb_gen_ramp_f32")?,
            gen_bf16: f("oxb_gen_bf16")?,
            gen_tie: f("oxb_gen_tie_bits")?,
            gen_u32: f("oxb_gen_u32")?,
            gen_near: f("oxb_gen_near_i32")?,
            gen_pl: f("oxb_gen_powerlaw_len")?,
            gen_route: f("oxb_gen_route_logits")?,
            copy16: f("oxb_copy16")?,
            empty: f("oxb_empty")?,
            ctx,
            stream,
            name,
            cc,
            sm_count,
            l2_bytes,
            total_mem,
        })
    }

    fn alloc<T: cudarc::driver::DeviceRepr>(&self, n: u64) -> Result<CudaSlice<T>> {
        // SAFETY: every buffer allocated here is fully written by a generator kernel (or a copy)
        // before anything reads it.
        unsafe { self.stream.alloc::<T>(n as usize) }.ctx(format!(
            "allocating {n} elements of {} bytes",
            std::mem::size_of::<T>()
        ))
    }

    /// Runs generator `kernel` (gen.cuh: `kernel(T* out, u64 n, u64 seed[, unsigned extra])`,
    /// which writes out[0..n)) into a new buffer of n elements.
    fn generate<T: cudarc::driver::DeviceRepr>(
        &self,
        kernel: &CudaFunction,
        name: &str,
        n: u64,
        seed: u64,
        extra: Option<u32>,
    ) -> Result<CudaSlice<T>> {
        let mut out = self.alloc::<T>(n)?;
        let cfg = LaunchConfig {
            grid_dim: (grid_for(n), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = self.stream.launch_builder(kernel);
        b.arg(&mut out).arg(&n).arg(&seed);
        if let Some(extra) = extra.as_ref() {
            b.arg(extra);
        }
        // SAFETY: the callers pass the generator with exactly these parameters (out, n, seed
        // and, where it takes one, the unsigned `extra`); it writes out[0..n), and `out` holds
        // n elements of its element type, or of a type of the same size that holds any bits
        // (gen_i32 and gen_tie_f32: 4-byte words into an i32 or f32 buffer).
        unsafe { b.launch(cfg) }.ctx(format!("launching {name}"))?;
        Ok(out)
    }

    /// n uniform f32 keys of stream `seed`, generated on the device.
    pub fn gen_f32(&self, n: u64, seed: u64) -> Result<CudaSlice<f32>> {
        self.generate(&self.gen_f32, "oxb_gen_f32", n, seed, None)
    }

    /// n f32 keys in ascending rows of `len` (`oxb_ramp_f32`), generated on the device.
    pub fn gen_ramp_f32(&self, n: u64, seed: u64, len: u32) -> Result<CudaSlice<f32>> {
        self.generate(&self.gen_ramp, "oxb_gen_ramp_f32", n, seed, Some(len))
    }

    /// The bits of n bf16 keys of stream `seed` (`oxb_bf16_bits`), generated on the device.
    pub fn gen_bf16_bits(&self, n: u64, seed: u64) -> Result<CudaSlice<u16>> {
        self.generate(&self.gen_bf16, "oxb_gen_bf16", n, seed, None)
    }

    /// n tie-heavy f32 keys of stream `seed` (`oxb_tie_bits`), generated on the device.
    pub fn gen_tie_f32(&self, n: u64, seed: u64) -> Result<CudaSlice<f32>> {
        // oxb_gen_tie_bits writes 4-byte words; an f32 buffer holds them bit for bit.
        self.generate(&self.gen_tie, "oxb_gen_tie_bits", n, seed, None)
    }

    /// n u32 keys in [0, mask] of stream `seed`, generated on the device.
    pub fn gen_u32(&self, n: u64, seed: u64, mask: u32) -> Result<CudaSlice<u32>> {
        self.generate(&self.gen_u32, "oxb_gen_u32", n, seed, Some(mask))
    }

    /// n uniform random int32 keys of stream `seed`: the u32 stream with the full mask,
    /// reinterpreted (the same bits as `gen_u32(n, seed, u32::MAX)`).
    pub fn gen_i32(&self, n: u64, seed: u64) -> Result<CudaSlice<i32>> {
        // oxb_gen_u32 writes 4-byte words; an i32 buffer holds them bit for bit.
        self.generate(&self.gen_u32, "oxb_gen_u32", n, seed, Some(u32::MAX))
    }

    /// n near-sorted int32 keys of stream `seed`, key i = i + rand(0, range) (`oxb_near_i32`),
    /// generated on the device.
    pub fn gen_near_i32(&self, n: u64, seed: u64, range: u32) -> Result<CudaSlice<i32>> {
        self.generate(&self.gen_near, "oxb_gen_near_i32", n, seed, Some(range))
    }

    /// The first n power-law segment lengths of stream `seed`, generated on the device.
    pub fn gen_powerlaw_len(&self, n: u64, seed: u64, max_exp: u32) -> Result<CudaSlice<u32>> {
        self.generate(&self.gen_pl, "oxb_gen_powerlaw_len", n, seed, Some(max_exp))
    }

    /// Router logits of stream `seed`, row-major [tokens x experts] (`oxb_route_logit`; experts
    /// a power of two), generated on the device.
    pub fn gen_route_logits(&self, tokens: u64, seed: u64, experts: u32) -> Result<CudaSlice<f32>> {
        let n = tokens * u64::from(experts);
        self.generate(
            &self.gen_route,
            "oxb_gen_route_logits",
            n,
            seed,
            Some(experts),
        )
    }

    /// The time of a bare launch: the empty kernel `oxb_empty` (one block of 128 threads) timed
    /// as the implementations are (`time_runs`, `warmup` then `reps` runs, the median). Measured
    /// at each call, right after the row it is compared with: the launch time moves between
    /// runs and within one (clocks, the host), so a single measurement misleads.
    pub fn bare_launch(&self, warmup: usize, reps: usize) -> Result<Timing> {
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        self.time_runs(warmup, reps, 1, |_| {
            // SAFETY: oxb_empty takes no parameters and touches no memory.
            unsafe { self.stream.launch_builder(&self.empty).launch(cfg) }
                .map(|_| ())
                .ctx("launching oxb_empty")
        })
    }

    /// Copies a device buffer to the host (and waits for it).
    pub fn to_host<T: cudarc::driver::DeviceRepr>(&self, buf: &CudaSlice<T>) -> Result<Vec<T>> {
        let v = self
            .stream
            .clone_dtoh(buf)
            .ctx("copying a result to the host")?;
        self.stream.synchronize().ctx("waiting for the stream")?;
        Ok(v)
    }

    fn timing_event(&self) -> Result<CudaEvent> {
        self.ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .ctx("creating a timing event")
    }

    /// Runs `op(rotation)` `warmup` times, then `reps` times, each between two CUDA events on the
    /// stream; `rotation` cycles through 0..rotations so the op can use a different (identical)
    /// copy of its input each run. `op` must enqueue its work on `self.stream`.
    pub fn time_runs(
        &self,
        warmup: usize,
        reps: usize,
        rotations: usize,
        mut op: impl FnMut(usize) -> Result<()>,
    ) -> Result<Timing> {
        let rot = rotations.max(1);
        for i in 0..warmup {
            op(i % rot)?;
        }
        self.stream.synchronize().ctx("waiting after the warm-up")?;
        let mut events = Vec::with_capacity(2 * reps);
        for _ in 0..2 * reps {
            events.push(self.timing_event()?);
        }
        for r in 0..reps {
            events[2 * r]
                .record(&self.stream)
                .ctx("recording an event")?;
            op(r % rot)?;
            events[2 * r + 1]
                .record(&self.stream)
                .ctx("recording an event")?;
        }
        self.stream
            .synchronize()
            .ctx("waiting for the timed runs")?;
        let mut ms = Vec::with_capacity(reps);
        for r in 0..reps {
            let t = events[2 * r]
                .elapsed_ms(&events[2 * r + 1])
                .ctx("reading an event time")?;
            ms.push(f64::from(t));
        }
        Timing::from_ms(ms)
    }

    /// Device-to-device copy bandwidth: one large buffer (1 GiB, less on a small card) copied by
    /// cuMemcpyDtoDAsync and by a plain 16-byte-per-thread copy kernel; 3 warm-ups and 20 timed
    /// copies each; bytes moved = bytes read + bytes written.
    pub fn bandwidth(&self) -> Result<Bandwidth> {
        let bytes: u64 = (1u64 << 30).min(self.total_mem / 8) & !0xFFFF;
        let src = self.gen_u32(bytes / 4, 1, u32::MAX)?;
        let mut dst = self.alloc::<u32>(bytes / 4)?;
        let memcpy = self.time_runs(3, 20, 1, |_| {
            self.stream
                .memcpy_dtod(&src, &mut dst)
                .ctx("cuMemcpyDtoDAsync")
        })?;
        let n16 = bytes / 16;
        let cfg = LaunchConfig {
            // A few resident blocks per SM, grid-stride: enough loads in flight to saturate HBM.
            grid_dim: (self.sm_count * 8, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let kernel = self.time_runs(3, 20, 1, |_| {
            let mut b = self.stream.launch_builder(&self.copy16);
            b.arg(&src).arg(&mut dst).arg(&n16);
            // SAFETY: oxb_copy16(const uint4* src, uint4* dst, u64 n16) touches n16 16-byte words
            // of each buffer; both hold `bytes` bytes (a multiple of 16) and are 256-byte aligned.
            unsafe { b.launch(cfg) }
                .map(|_| ())
                .ctx("launching oxb_copy16")
        })?;
        Ok(Bandwidth {
            bytes_moved: 2 * bytes,
            memcpy,
            kernel,
        })
    }
}
