//! One error type for bench-gpu: a message that says what was being done and what failed.

use std::fmt;

#[derive(Debug)]
pub struct BenchError(String);

impl BenchError {
    pub fn new(msg: impl Into<String>) -> Self {
        BenchError(msg.into())
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

pub type Result<T> = std::result::Result<T, BenchError>;

/// `.ctx("what we were doing")` on any fallible call: keeps the cause, adds the context.
pub trait Context<T> {
    fn ctx(self, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| BenchError(format!("{what}: {e}")))
    }
}
