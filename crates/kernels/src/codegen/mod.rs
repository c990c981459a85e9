//! What the host generates for the device: the kernel specs and their translation units
//! ([`spec`]), the parameter structs ([`params`]) and the constants both sides share
//! ([`constants`]), each declared once in Rust.

pub(crate) mod constants;
pub(crate) mod params;
pub(crate) mod spec;

pub(crate) use constants::{device_constants, CxxConstant, DeviceConstant, DeviceConstants};
pub(crate) use params::{kernel_params, KernelParams};
pub(crate) use spec::{FamilyTable, TemplateArg};
