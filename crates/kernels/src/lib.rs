//! oxicub-kernels
