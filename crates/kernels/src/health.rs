//! Whether a runtime's CUDA context is still usable.
//!
//! A kernel that faults (an illegal address, a trap) leaves a *sticky* error: the context is
//! unusable for the rest of the process, and every later driver call on it returns that error,
//! whatever the call does. Launches are asynchronous, so the fault surfaces in some later call,
//! which without care reports it under its own name. The runtime records the kernel it launched
//! last; the first driver call that returns a sticky error marks the context poisoned, and from
//! then on every call of the runtime fails at once with the same
//! [`KernelError::ContextPoisoned`], which names the error, the call that saw it and that
//! kernel.

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::sys::CUresult;
use cudarc::driver::DriverError;

use crate::KernelError;

/// Whether a driver error leaves the context unusable (the CUDA driver API's sticky errors:
/// a kernel's memory fault, trap, assertion, illegal instruction, timeout, or an uncorrectable
/// ECC error).
pub(crate) fn is_sticky(code: CUresult) -> bool {
    matches!(
        code,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
            | CUresult::CUDA_ERROR_ASSERT
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUresult::CUDA_ERROR_INVALID_PC
            | CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
    )
}

/// A runtime's view of its context: the kernel it launched last, and the error that poisoned
/// the context once one did. Shared (behind an `Arc`) with what the runtime hands out that
/// makes driver calls later (a batched call's status).
#[derive(Debug)]
pub(crate) struct ContextHealth {
    ordinal: usize,
    last_launch: Mutex<Option<Arc<str>>>,
    poisoned: Mutex<Option<KernelError>>,
}

/// A lock whose holder never panics; a poisoned one is taken as it is.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ContextHealth {
    /// The health of a fresh context of device `ordinal`.
    pub(crate) fn new(ordinal: usize) -> ContextHealth {
        ContextHealth {
            ordinal,
            last_launch: Mutex::new(None),
            poisoned: Mutex::new(None),
        }
    }

    /// Records a launch that the driver accepted (`kernel`: the spec's name).
    pub(crate) fn launched(&self, kernel: &Arc<str>) {
        *lock(&self.last_launch) = Some(Arc::clone(kernel));
    }

    /// Fails with the poisoning error once the context is poisoned.
    pub(crate) fn check(&self) -> Result<(), KernelError> {
        match &*lock(&self.poisoned) {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }

    /// The error of the driver call `call` that failed with `source`: on a poisoned context,
    /// the poisoning error; else a sticky error poisons the context (and is kept and returned
    /// from then on), and any other is the call's own [`KernelError::Driver`].
    pub(crate) fn driver_error(&self, call: &'static str, source: DriverError) -> KernelError {
        let mut poisoned = lock(&self.poisoned);
        if poisoned.is_none() && !is_sticky(source.0) {
            return KernelError::Driver { call, source };
        }
        poisoned
            .get_or_insert_with(|| KernelError::ContextPoisoned {
                ordinal: self.ordinal,
                call,
                source,
                last_launch: lock(&self.last_launch).as_deref().map(str::to_owned),
            })
            .clone()
    }

    /// `result` of the driver call `call`, its error through [`ContextHealth::driver_error`].
    pub(crate) fn during<T>(
        &self,
        call: &'static str,
        result: Result<T, DriverError>,
    ) -> Result<T, KernelError> {
        result.map_err(|source| self.driver_error(call, source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first sticky error poisons the context: it names the call that saw it and the
    /// kernel launched last, and every later check and failure returns the same error. Other
    /// errors before it are the call's own and poison nothing.
    #[test]
    fn a_sticky_error_poisons_the_context_for_every_later_call() {
        let health = ContextHealth::new(0);
        let kernel: Arc<str> =
            Arc::from("oxicub::batched_topk<oxicub::KeyF32, 256, 3, 0, 1, 2048>");
        health.launched(&kernel);
        let out_of_memory = DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
        let error = health.driver_error("cuMemAllocAsync", out_of_memory);
        assert!(matches!(
            error,
            KernelError::Driver {
                call: "cuMemAllocAsync",
                ..
            }
        ));
        assert!(health.check().is_ok());

        let fault = DriverError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
        let poisoned = |error: &KernelError| match error {
            KernelError::ContextPoisoned {
                ordinal: 0,
                call,
                source,
                last_launch: Some(last),
            } => (*call, source.0, last.clone()),
            other => panic!("expected ContextPoisoned, got {other:?}"),
        };
        let expected = (
            "cuMemcpyDtoHAsync",
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
            kernel.to_string(),
        );
        let first = health.driver_error("cuMemcpyDtoHAsync", fault);
        assert_eq!(poisoned(&first), expected);
        // A later launch of another kernel, a later sticky error and every check report the
        // first.
        health.launched(&Arc::from("oxicub::transform_keys<oxicub::KeyU32, 256, 0>"));
        let launch_failed = DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED);
        assert_eq!(
            poisoned(&health.driver_error("cuLaunchKernel", launch_failed)),
            expected
        );
        assert_eq!(poisoned(&health.check().unwrap_err()), expected);
        assert_eq!(
            poisoned(
                &health
                    .during::<()>("cuMemAllocAsync", Err(out_of_memory))
                    .unwrap_err()
            ),
            expected
        );
        let message = first.to_string();
        assert!(message.contains("unusable"), "{message}");
        assert!(message.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{message}");
        assert!(message.contains(&*kernel), "{message}");
        assert!(message.contains("cuMemcpyDtoHAsync"), "{message}");
    }

    #[test]
    fn only_the_drivers_sticky_errors_poison() {
        for code in [
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
            CUresult::CUDA_ERROR_LAUNCH_FAILED,
            CUresult::CUDA_ERROR_ASSERT,
            CUresult::CUDA_ERROR_MISALIGNED_ADDRESS,
        ] {
            assert!(is_sticky(code), "{code:?}");
        }
        for code in [
            CUresult::CUDA_ERROR_OUT_OF_MEMORY,
            CUresult::CUDA_ERROR_INVALID_VALUE,
            CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
            CUresult::CUDA_ERROR_NOT_READY,
        ] {
            assert!(!is_sticky(code), "{code:?}");
        }
        // With no launch recorded, the error says so.
        let health = ContextHealth::new(1);
        let error = health.driver_error(
            "cuStreamSynchronize",
            DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED),
        );
        assert!(matches!(
            error,
            KernelError::ContextPoisoned {
                ordinal: 1,
                last_launch: None,
                ..
            }
        ));
        assert!(error.to_string().contains("another library"), "{error}");
    }
}
