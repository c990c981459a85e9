//! oxicub-algorithms

// Owned by the lead: the per-algorithm front checks (parameters x environment).
pub mod contract;
