//! oxicub-algorithms
