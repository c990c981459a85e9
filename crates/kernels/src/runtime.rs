//! The kernel runtime of one CUDA context: compiles (through the caches), loads and launches.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;
use cudarc::driver::sys::CUfunction_attribute as FnAttr;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaStream, DeviceRepr, DeviceSlice, DriverError, LaunchConfig,
    PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use crate::cache::{cached_cubin, CacheConfig, CubinOrigin};
use crate::codegen::KernelParams;
use crate::device::{DeviceFacts, DeviceLimits};
use crate::health::ContextHealth;
use crate::{KernelError, KernelSpec};

/// A kernel loaded into a context, ready to launch.
///
/// ```no_run
/// use oxicub::kernels::{open_context, KernelRuntime, KernelSpec, KeyType, TransformOp};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let kernel = runtime.kernel(&KernelSpec::transform_keys(KeyType::U64, TransformOp::Decode))?;
/// assert!(kernel.max_threads_per_block() >= kernel.spec().block_threads());
/// # Ok::<(), oxicub::kernels::KernelError>(())
/// ```
#[derive(Clone, Debug)]
pub struct LoadedKernel {
    spec: KernelSpec,
    function: CudaFunction,
    max_threads_per_block: u32,
    /// Blocks of `spec.block_threads()` threads that fit on one SM at once (registers, shared
    /// memory), from the driver's occupancy calculator.
    resident_per_sm: u32,
    origin: CubinOrigin,
    /// The spec's name, recorded as the runtime's last launch.
    name: Arc<str>,
    /// The dynamic shared memory the function may use per block, as set on the driver (48 KiB
    /// less the static shared memory until raised); shared by the clones of one loaded kernel.
    dynamic_limit: Arc<DynamicSharedLimit>,
}

/// A function's dynamic shared memory limit (`CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`)
/// as set on the driver. Read, raise and record happen under one lock: two threads raising
/// the limit to different sizes at once must not leave the smaller on the driver and the
/// larger recorded, or every later launch of the larger size would skip the raise and fail.
#[derive(Debug)]
struct DynamicSharedLimit(Mutex<u32>);

impl DynamicSharedLimit {
    fn new(bytes: u32) -> DynamicSharedLimit {
        DynamicSharedLimit(Mutex::new(bytes))
    }

    /// Makes the limit at least `bytes`: where it is below, `set` sets the driver's attribute
    /// to `bytes`, and only once that succeeded is it recorded. The limit only grows.
    fn raise<E>(&self, bytes: u32, set: impl FnOnce(u32) -> Result<(), E>) -> Result<(), E> {
        // A poisoned lock only means a thread panicked inside `set`; the value recorded is
        // still the driver's (it is written after a successful set).
        let mut limit = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if bytes > *limit {
            set(bytes)?;
            *limit = bytes;
        }
        Ok(())
    }
}

impl LoadedKernel {
    /// The spec it was built from.
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// Where its CUBIN came from when it was first loaded in this runtime.
    pub fn origin(&self) -> CubinOrigin {
        self.origin
    }

    /// The largest block this kernel can be launched with (from its register use).
    pub fn max_threads_per_block(&self) -> u32 {
        self.max_threads_per_block
    }
}

/// Compiles, caches, loads and launches kernels on one CUDA context. Reads the device facts
/// once; cheap to share behind an `Arc`.
///
/// ```no_run
/// use oxicub::kernels::{open_context, KernelRuntime, KernelSpec, KeyType, TransformOp};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// println!("{}: {} SMs", runtime.facts().name, runtime.facts().sm_count);
/// let kernel = runtime.kernel(&KernelSpec::transform_keys(KeyType::F32, TransformOp::Encode))?;
/// println!("{:?}", kernel.origin());
/// # Ok::<(), oxicub::kernels::KernelError>(())
/// ```
#[derive(Debug)]
pub struct KernelRuntime {
    ctx: Arc<CudaContext>,
    facts: DeviceFacts,
    cache: CacheConfig,
    loaded: Mutex<HashMap<KernelSpec, LoadedKernel>>,
    /// max_active_clusters's answers by (kernel, dynamic shared bytes, blocks per cluster): a
    /// driver query costs microseconds of host time, on every call that asks.
    active_clusters: Mutex<HashMap<(KernelSpec, u32, u32), u32>>,
    /// Whether the context is still usable, and the kernel launched last.
    health: Arc<ContextHealth>,
    /// Device buffers the launchers allocated ([`KernelRuntime::device_allocations`]).
    allocations: AtomicU64,
}

/// The launch parameter block. `#[repr(transparent)]` over a [`KernelParams`] struct.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct ParamBlock<P>(P);

// SAFETY: `KernelParams` is implemented only by `kernel_params!`, which declares `#[repr(C)]`
// structs of `u32`/`u64` fields with explicit padding fields, so the value is plain old data
// with no uninitialised bytes; the C++ side is generated from the same field list and
// `static_assert`s its size and alignment. `ParamBlock` is `repr(transparent)`.
unsafe impl<P: KernelParams> DeviceRepr for ParamBlock<P> {}

/// When a launch may begin relative to the kernel before it on its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LaunchOrder {
    /// Once the previous kernel has completed (a plain launch).
    AfterCompletion,
    /// On sm_90 and later (with a CUDA 12.0 driver or newer), a programmatic dependent launch:
    /// it may begin while the previous kernel still runs, once each of its blocks has executed
    /// `griddepcontrol.launch_dependents` (or exited), and it must execute
    /// `griddepcontrol.wait` before it touches memory the previous kernel reads or writes.
    /// Otherwise, a plain launch.
    Programmatic,
}

impl KernelRuntime {
    /// A runtime on `ctx` with the cache configured from the environment
    /// ([`CacheConfig::from_env`]).
    pub fn new(ctx: Arc<CudaContext>) -> Result<KernelRuntime, KernelError> {
        KernelRuntime::with_cache(ctx, CacheConfig::from_env())
    }

    /// A runtime on `ctx` with an explicit cache configuration.
    pub fn with_cache(
        ctx: Arc<CudaContext>,
        cache: CacheConfig,
    ) -> Result<KernelRuntime, KernelError> {
        let facts = DeviceFacts::read(&ctx)?;
        Ok(KernelRuntime {
            health: Arc::new(ContextHealth::new(ctx.ordinal())),
            ctx,
            facts,
            cache,
            loaded: Mutex::new(HashMap::new()),
            active_clusters: Mutex::new(HashMap::new()),
            allocations: AtomicU64::new(0),
        })
    }

    /// This runtime as on a device with at most `bytes` of shared memory per block (opt-in):
    /// [`DeviceFacts::shared_per_block_optin`] is lowered to it (never raised), so the launch
    /// plans choose what such a device runs and the launches are checked against it. For
    /// testing the fallbacks of smaller GPUs on a larger one (sm_86 and sm_89 have 99 KiB,
    /// sm_75 64 KiB; docs/design/batched_topk.md, "Stream tier").
    ///
    /// ```no_run
    /// use oxicub::kernels::{open_context, KernelRuntime};
    ///
    /// let runtime = KernelRuntime::new(open_context(0)?)?.with_shared_memory_limit(99 * 1024);
    /// assert!(runtime.facts().shared_per_block_optin <= 99 * 1024);
    /// # Ok::<(), oxicub::kernels::KernelError>(())
    /// ```
    pub fn with_shared_memory_limit(mut self, bytes: u32) -> KernelRuntime {
        let facts = &mut self.facts;
        facts.shared_per_block_optin = facts.shared_per_block_optin.min(bytes);
        facts.shared_per_block = facts.shared_per_block.min(bytes);
        self
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The device's facts.
    pub fn facts(&self) -> &DeviceFacts {
        &self.facts
    }

    /// The cache configuration.
    pub fn cache_config(&self) -> &CacheConfig {
        &self.cache
    }

    /// How many device buffers the launchers of this runtime have allocated (scratch, status
    /// words, per-segment tables, workspaces) since it was made: a steady state whose calls run
    /// in a workspace ([`crate::DeviceWorkspace`]) leaves it unchanged.
    ///
    /// ```no_run
    /// use oxicub::kernels::{open_context, KernelRuntime};
    ///
    /// let runtime = KernelRuntime::new(open_context(0)?)?;
    /// assert_eq!(runtime.device_allocations(), 0);
    /// # Ok::<(), oxicub::kernels::KernelError>(())
    /// ```
    pub fn device_allocations(&self) -> u64 {
        self.allocations.load(Ordering::Relaxed)
    }

    /// Counts one device allocation of a launcher.
    pub(crate) fn count_allocation(&self) {
        self.allocations.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether the kernel for `spec` is loaded in this runtime (a call of [`Self::kernel`]
    /// for it loads nothing).
    pub fn is_loaded(&self, spec: &KernelSpec) -> bool {
        self.lock_loaded().contains_key(spec)
    }

    /// The kernel for `spec`: already loaded, or compiled (through the caches), checked
    /// against the device's limits and loaded now.
    pub fn kernel(&self, spec: &KernelSpec) -> Result<LoadedKernel, KernelError> {
        if let Some(kernel) = self.lock_loaded().get(spec) {
            return Ok(kernel.clone());
        }
        self.health.check()?;
        self.check_spec_resources(spec)?;
        let (cubin, origin) = cached_cubin(spec, self.facts.arch, &self.cache)?;
        let module = self.during(
            "cuModuleLoadData",
            self.ctx.load_module(Ptx::from_binary(cubin.to_vec())),
        )?;
        let function = self.during(
            "cuModuleGetFunction",
            module.load_function(&spec.entry_name()),
        )?;
        let max_threads = self.during(
            "cuFuncGetAttribute",
            function.get_attribute(FnAttr::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        )?;
        let fallback = (self.facts.max_threads_per_sm / spec.block_threads().max(1)).max(1);
        let resident_per_sm = function
            .occupancy_max_active_blocks_per_multiprocessor(spec.block_threads(), 0, None)
            .map_or(fallback, |blocks| blocks.clamp(1, fallback));
        let kernel = LoadedKernel {
            spec: spec.clone(),
            function,
            max_threads_per_block: u32::try_from(max_threads).unwrap_or(0),
            resident_per_sm,
            origin,
            name: Arc::from(spec.to_string()),
            // The driver's default: 48 KiB less the static shared memory.
            dynamic_limit: Arc::new(DynamicSharedLimit::new(
                u32::try_from((48 * 1024u64).saturating_sub(spec.static_shared_bytes()))
                    .unwrap_or(0),
            )),
        };
        Ok(self
            .lock_loaded()
            .entry(spec.clone())
            .or_insert(kernel)
            .clone())
    }

    fn lock_loaded(&self) -> std::sync::MutexGuard<'_, HashMap<KernelSpec, LoadedKernel>> {
        // A poisoned lock only means another thread panicked while inserting; the map is intact.
        self.loaded
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Checks a spec against this device's limits before compiling it.
    fn check_spec_resources(&self, spec: &KernelSpec) -> Result<(), KernelError> {
        spec.validate()?;
        let limit = |resource, requested: u64, limit: u32| {
            if requested > u64::from(limit) {
                Err(KernelError::Resources {
                    kernel: spec.to_string(),
                    resource,
                    requested,
                    limit: u64::from(limit),
                })
            } else {
                Ok(())
            }
        };
        limit(
            "threads per block",
            u64::from(spec.block_threads()),
            self.facts.max_threads_per_block,
        )?;
        limit(
            "bytes of shared memory per block",
            spec.static_shared_bytes(),
            self.facts.shared_per_block,
        )
    }

    /// The error of a failed driver call `call` on this runtime's context: a sticky error (a
    /// kernel fault) marks the context unusable, and it and every later call of the runtime
    /// fail with [`KernelError::ContextPoisoned`], naming the kernel launched last; any other
    /// error is [`KernelError::Driver`]. For code that makes its own driver calls on the
    /// context (copies, synchronisation) and wants a fault reported as such.
    pub fn driver_error(&self, call: &'static str, source: DriverError) -> KernelError {
        self.health.driver_error(call, source)
    }

    /// `result` of the driver call `call`, its error through [`KernelRuntime::driver_error`].
    pub(crate) fn during<T>(
        &self,
        call: &'static str,
        result: Result<T, DriverError>,
    ) -> Result<T, KernelError> {
        self.health.during(call, result)
    }

    /// The context's health, for what makes driver calls after the launcher returns.
    pub(crate) fn health(&self) -> &Arc<ContextHealth> {
        &self.health
    }

    /// Checks that a buffer lives in this runtime's context.
    pub fn check_buffer<T>(
        &self,
        buffer: &'static str,
        slice: &impl DeviceSlice<T>,
    ) -> Result<(), KernelError> {
        let ctx = slice.stream().context();
        if ctx == &self.ctx {
            Ok(())
        } else {
            Err(KernelError::WrongContext {
                buffer,
                expected: self.ctx.ordinal(),
                found: ctx.ordinal(),
            })
        }
    }

    /// A grid for `items` items, one per thread per iteration of a grid-stride loop: enough
    /// blocks to fill the device once with as many blocks as are resident together (more only
    /// to reach `min_blocks`), fewer when there is less work.
    pub(crate) fn grid_blocks(&self, kernel: &LoadedKernel, items: u64, min_blocks: u64) -> u32 {
        let block = u64::from(kernel.spec.block_threads());
        let resident_per_sm = u64::from(kernel.resident_per_sm);
        let fill = u64::from(self.facts.sm_count).max(1) * resident_per_sm;
        let needed = items.div_ceil(block);
        let blocks = needed.min(fill).max(min_blocks).max(1);
        u32::try_from(blocks.min(u64::from(self.facts.max_grid_x))).unwrap_or(u32::MAX)
    }

    /// The one place where kernels are launched.
    ///
    /// Callers (the typed launchers in [`crate::families`]) build `params` from device buffers
    /// whose context, length and element type they have checked, and keep the buffers' stream
    /// guards alive until this returns.
    pub(crate) fn launch<P: KernelParams>(
        &self,
        stream: &CudaStream,
        kernel: &LoadedKernel,
        grid_blocks: u32,
        params: P,
    ) -> Result<(), KernelError> {
        self.launch_with_shared(
            stream,
            kernel,
            grid_blocks,
            0,
            params,
            LaunchOrder::AfterCompletion,
        )
    }

    /// [`KernelRuntime::launch`] with `dynamic_shared_bytes` of dynamic shared memory per block
    /// (the function's limit is raised first when the request is above the default 48 KiB),
    /// ordered after the previous kernel on `stream` as `order` says.
    pub(crate) fn launch_with_shared<P: KernelParams>(
        &self,
        stream: &CudaStream,
        kernel: &LoadedKernel,
        grid_blocks: u32,
        dynamic_shared_bytes: u32,
        params: P,
        order: LaunchOrder,
    ) -> Result<(), KernelError> {
        let config = self.checked_config(stream, kernel, grid_blocks, dynamic_shared_bytes)?;
        // Programmatic launches need sm_90 and cuLaunchKernelEx (a 12.0 driver): without
        // them, a plain launch (the kernel's griddepcontrol.wait then returns at once).
        if order == LaunchOrder::Programmatic && self.launches_with_attributes() {
            let attribute = sys::CUlaunchAttribute {
                id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                pad: [0; 4],
                value: sys::CUlaunchAttributeValue {
                    programmaticStreamSerializationAllowed: 1,
                },
            };
            return self.launch_with_attribute(stream, kernel, config, params, attribute);
        }
        let block_params = ParamBlock(params);
        let mut launch = stream.launch_builder(&kernel.function);
        launch.arg(&block_params);
        // SAFETY: the entry point generated for `kernel.spec` takes exactly one argument,
        // `const oxicub::<P::CXX_NAME>` by value, whose layout is asserted equal to `P`'s (see
        // `ParamBlock`). The device pointers inside `params` come from buffers of this context
        // that the caller checked to hold the lengths in `params`, and the kernels only access
        // indices below those lengths. The block size is within the function's limit, and the
        // dynamic shared memory is within the function's limit (raised above) and the device's;
        // kernels that use none are launched with 0 bytes.
        self.during("cuLaunchKernel", unsafe { launch.launch(config) })?;
        self.health.launched(&kernel.name);
        Ok(())
    }

    /// Whether launches can carry attributes ([`DeviceFacts::launches_with_attributes`]).
    pub(crate) fn launches_with_attributes(&self) -> bool {
        self.facts.launches_with_attributes()
    }

    /// The limits launch plans take into account.
    pub(crate) fn limits(&self) -> DeviceLimits {
        DeviceLimits::of(&self.facts)
    }

    /// [`KernelRuntime::launch_with_shared`] in clusters of `cluster_blocks` consecutive blocks
    /// (which share their shared memory), after the previous kernel on `stream`. Needs
    /// [`KernelRuntime::launches_with_attributes`] and a grid that is a multiple of
    /// `cluster_blocks`.
    pub(crate) fn launch_clustered<P: KernelParams>(
        &self,
        stream: &CudaStream,
        kernel: &LoadedKernel,
        grid_blocks: u32,
        dynamic_shared_bytes: u32,
        params: P,
        cluster_blocks: u32,
    ) -> Result<(), KernelError> {
        if !self.launches_with_attributes()
            || cluster_blocks == 0
            || grid_blocks % cluster_blocks != 0
        {
            return Err(KernelError::InvalidSpec {
                kernel: kernel.spec.to_string(),
                reason: format!(
                    "a launch of {grid_blocks} blocks in clusters of {cluster_blocks} needs sm_90 \
                     and a CUDA 12 driver, and whole clusters"
                ),
            });
        }
        let config = self.checked_config(stream, kernel, grid_blocks, dynamic_shared_bytes)?;
        self.launch_with_attribute(
            stream,
            kernel,
            config,
            params,
            cluster_attribute(cluster_blocks),
        )
    }

    /// How many clusters of `cluster_blocks` blocks of `kernel`, with `dynamic_shared_bytes`
    /// each, can be resident at once (0 where clusters cannot be launched or none fits).
    pub(crate) fn max_active_clusters(
        &self,
        stream: &CudaStream,
        kernel: &LoadedKernel,
        dynamic_shared_bytes: u32,
        cluster_blocks: u32,
    ) -> Result<u32, KernelError> {
        if !self.launches_with_attributes() || cluster_blocks == 0 {
            return Ok(0);
        }
        let key = (kernel.spec.clone(), dynamic_shared_bytes, cluster_blocks);
        let known = |map: &HashMap<(KernelSpec, u32, u32), u32>| map.get(&key).copied();
        if let Some(clusters) = self.active_clusters.lock().ok().and_then(|map| known(&map)) {
            return Ok(clusters);
        }
        let config = self.checked_config(stream, kernel, cluster_blocks, dynamic_shared_bytes)?;
        let mut attribute = cluster_attribute(cluster_blocks);
        let config = extended_config(&config, stream, &mut attribute);
        let mut clusters: std::ffi::c_int = 0;
        self.during("cuCtxSetCurrent", self.ctx.bind_to_thread())?;
        // SAFETY: `clusters` and `config` (with its one attribute) outlive the call; the
        // function belongs to this runtime's context, which is current on this thread, and its
        // dynamic shared memory limit covers the configuration's (raised by checked_config).
        let result = unsafe {
            sys::cuOccupancyMaxActiveClusters(&mut clusters, kernel.function.cu_function(), &config)
        };
        self.during("cuOccupancyMaxActiveClusters", result.result())?;
        let clusters = u32::try_from(clusters).unwrap_or(0);
        if let Ok(mut map) = self.active_clusters.lock() {
            map.insert(key, clusters);
        }
        Ok(clusters)
    }

    /// Whether a block of `spec` with `dynamic_shared_bytes` of dynamic shared memory (and its
    /// static shared memory) fits the device's per-block limit: checked before every launch,
    /// and by callers that would rather not compile a kernel that cannot launch.
    pub(crate) fn shared_memory_fits(&self, spec: &KernelSpec, dynamic_shared_bytes: u32) -> bool {
        self.limits().fits(spec, dynamic_shared_bytes)
    }

    /// The checks every launch makes (the stream's context, the block size, the grid, the
    /// shared memory against the device's limit), and the function's dynamic shared memory
    /// limit raised to `dynamic_shared_bytes` where it is below: the launch configuration.
    fn checked_config(
        &self,
        stream: &CudaStream,
        kernel: &LoadedKernel,
        grid_blocks: u32,
        dynamic_shared_bytes: u32,
    ) -> Result<LaunchConfig, KernelError> {
        self.health.check()?;
        if stream.context() != &self.ctx {
            return Err(KernelError::WrongContext {
                buffer: "stream",
                expected: self.ctx.ordinal(),
                found: stream.context().ordinal(),
            });
        }
        let block = kernel.spec.block_threads();
        if block > kernel.max_threads_per_block {
            return Err(KernelError::Resources {
                kernel: kernel.spec.to_string(),
                resource: "threads per block",
                requested: u64::from(block),
                limit: u64::from(kernel.max_threads_per_block),
            });
        }
        if grid_blocks == 0 || grid_blocks > self.facts.max_grid_x {
            return Err(KernelError::Resources {
                kernel: kernel.spec.to_string(),
                resource: "blocks in the grid",
                requested: u64::from(grid_blocks),
                limit: u64::from(self.facts.max_grid_x),
            });
        }
        if !self.shared_memory_fits(&kernel.spec, dynamic_shared_bytes) {
            return Err(KernelError::Resources {
                kernel: kernel.spec.to_string(),
                resource: "bytes of shared memory per block",
                requested: u64::from(dynamic_shared_bytes) + kernel.spec.static_shared_bytes(),
                limit: u64::from(self.facts.shared_per_block_optin),
            });
        }
        kernel.dynamic_limit.raise(dynamic_shared_bytes, |bytes| {
            let bytes = i32::try_from(bytes).unwrap_or(i32::MAX);
            let attribute = FnAttr::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            let set = kernel.function.set_attribute(attribute, bytes);
            self.during("cuFuncSetAttribute", set)
        })?;
        Ok(LaunchConfig {
            grid_dim: (grid_blocks, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: dynamic_shared_bytes,
        })
    }

    /// A launch through cuLaunchKernelEx with one launch attribute (cudarc's launch builder
    /// takes none), on sm_90 and later. The caller has checked `config` (a 1-D grid of 1-D
    /// blocks) with `checked_config`.
    fn launch_with_attribute<P: KernelParams>(
        &self,
        stream: &CudaStream,
        kernel: &LoadedKernel,
        config: LaunchConfig,
        params: P,
        mut attribute: sys::CUlaunchAttribute,
    ) -> Result<(), KernelError> {
        let config = extended_config(&config, stream, &mut attribute);
        let mut block_params = ParamBlock(params);
        let mut arguments = [(&mut block_params as *mut ParamBlock<P>).cast::<c_void>()];
        self.during("cuCtxSetCurrent", self.ctx.bind_to_thread())?;
        // SAFETY: as in `launch_with_shared`: the entry point takes exactly one argument, the
        // parameter block, whose layout is `P`'s; `arguments` points at it and outlives the
        // call (the driver copies the parameters before returning); the configuration's block
        // size, grid and shared memory were checked by the caller against the function's and
        // the device's limits; `attribute` outlives the call; the stream belongs to this
        // runtime's context, which is current on this thread.
        let result = unsafe {
            sys::cuLaunchKernelEx(
                &config,
                kernel.function.cu_function(),
                arguments.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        self.during("cuLaunchKernelEx", result.result())?;
        self.health.launched(&kernel.name);
        Ok(())
    }
}

/// `config` (a 1-D grid of 1-D blocks) on `stream` with one launch attribute, for
/// cuLaunchKernelEx and the occupancy queries; `attribute` must outlive the result's use.
fn extended_config(
    config: &LaunchConfig,
    stream: &CudaStream,
    attribute: &mut sys::CUlaunchAttribute,
) -> sys::CUlaunchConfig {
    sys::CUlaunchConfig {
        gridDimX: config.grid_dim.0,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: config.block_dim.0,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: config.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: attribute,
        numAttrs: 1,
    }
}

/// The launch attribute for clusters of `blocks` consecutive blocks along x.
fn cluster_attribute(blocks: u32) -> sys::CUlaunchAttribute {
    sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value: sys::CUlaunchAttributeValue {
            clusterDim: sys::CUlaunchAttributeValue_union__bindgen_ty_1 {
                x: blocks,
                y: 1,
                z: 1,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Barrier;

    use super::DynamicSharedLimit;

    /// Threads raising one function's limit to different sizes at once leave the driver's
    /// attribute (here a stand-in that a raise overwrites, as cuFuncSetAttribute does) at the
    /// largest size, and the recorded limit equal to it.
    #[test]
    fn concurrent_raises_leave_the_driver_and_the_record_equal() {
        let sizes = [100_000u32, 160_000, 120_000, 200_000];
        for _ in 0..200 {
            let limit = DynamicSharedLimit::new(48 * 1024);
            let driver = AtomicU32::new(48 * 1024);
            let start = Barrier::new(sizes.len());
            std::thread::scope(|scope| {
                for bytes in sizes {
                    let (limit, driver, start) = (&limit, &driver, &start);
                    scope.spawn(move || {
                        start.wait();
                        limit
                            .raise(bytes, |bytes| {
                                // Let another thread run between the check and the set.
                                std::thread::yield_now();
                                driver.store(bytes, Ordering::SeqCst);
                                Ok::<(), ()>(())
                            })
                            .expect("the stand-in never fails");
                    });
                }
            });
            let recorded = *limit.0.lock().expect("no panic");
            assert_eq!(recorded, driver.load(Ordering::SeqCst));
            assert_eq!(recorded, 200_000);
        }
    }

    /// A failed raise records nothing: the next launch tries again.
    #[test]
    fn a_failed_raise_is_not_recorded() {
        let limit = DynamicSharedLimit::new(48 * 1024);
        assert_eq!(
            limit.raise(100_000, |_| Err("driver error")),
            Err("driver error")
        );
        let mut calls = 0;
        limit
            .raise(100_000, |_| {
                calls += 1;
                Ok::<(), ()>(())
            })
            .expect("set");
        limit.raise(90_000, |_| Err(())).expect("no raise needed");
        assert_eq!((calls, *limit.0.lock().expect("no panic")), (1, 100_000));
    }
}
