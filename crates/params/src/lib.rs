//! oxicub-params
