//! oxicub facade
pub use oxicub_params as params;
