// Rule: where a parameter's values live is oxicub's to say: a user type cannot implement
// `ValuesOn` (a parameter that reported one value to the front check and another to the
// kernels would get past it).
use oxicub::params::{role, Bounds, Param, ParamKind};
use oxicub::{Host, ValuesOn};

struct MyK;

impl Param for MyK {
    type Role = role::K;
    const KIND: ParamKind = ParamKind::Uniform;
    const STATIC_BOUNDS: Bounds = Bounds::new(0, 8);
    fn runtime_bounds(&self) -> Bounds {
        Bounds::exactly(1)
    }
    fn host_value(&self) -> Option<i64> {
        Some(1)
    }
}

impl ValuesOn<Host> for MyK {}

fn main() {}
