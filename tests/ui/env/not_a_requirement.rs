// Rule: `require!` takes requirement markers, not values of another kind.
use oxicub::require;

fn main() {
    let _env = require!(true);
}
