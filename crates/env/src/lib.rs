//! oxicub-env
