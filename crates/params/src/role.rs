//! What a numeric parameter *is*: the role it plays in an algorithm's signature.
//!
//! Every numeric parameter type carries its role as a type argument, so a value built for
//! `segment_sizes` cannot be passed as `k` (the mismatch is a compile error), and every runtime
//! error names the parameter it is about.

use crate::Bounds;
use core::fmt::Debug;

/// A run-time identifier of a [`Role`], used to look up guarantees in `const` context.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(u8)]
pub enum RoleId {
    /// [`K`].
    K = 0,
    /// [`SegmentSize`].
    SegmentSize = 1,
    /// [`NumSegments`].
    NumSegments = 2,
    /// [`NumItems`].
    NumItems = 3,
    /// [`TotalItems`].
    TotalItems = 4,
    /// [`KeyMultiplicity`].
    KeyMultiplicity = 5,
    /// [`UnsortedPositions`].
    UnsortedPositions = 6,
    /// [`Experts`].
    Experts = 7,
    /// [`Groups`].
    Groups = 8,
    /// [`TopGroups`].
    TopGroups = 9,
}

impl RoleId {
    /// How many roles exist; the length of a [`RoleTable`].
    pub const COUNT: usize = 10;

    /// Every role, in [`RoleId`] order.
    pub const ALL: [RoleId; RoleId::COUNT] = [
        RoleId::K,
        RoleId::SegmentSize,
        RoleId::NumSegments,
        RoleId::NumItems,
        RoleId::TotalItems,
        RoleId::KeyMultiplicity,
        RoleId::UnsortedPositions,
        RoleId::Experts,
        RoleId::Groups,
        RoleId::TopGroups,
    ];

    /// The parameter's name as algorithms spell it in their signatures and errors.
    pub const fn name(self) -> &'static str {
        match self {
            RoleId::K => "k",
            RoleId::SegmentSize => "segment_sizes",
            RoleId::NumSegments => "num_segments",
            RoleId::NumItems => "num_items",
            RoleId::TotalItems => "total_items",
            RoleId::KeyMultiplicity => "key_multiplicity",
            RoleId::UnsortedPositions => "unsorted_positions",
            RoleId::Experts => "experts",
            RoleId::Groups => "groups",
            RoleId::TopGroups => "top_groups",
        }
    }
}

/// One set of bounds per role, indexed by `RoleId as usize`.
pub type RoleTable = [Bounds; RoleId::COUNT];

/// The role of a numeric parameter: which argument of an algorithm it feeds.
///
/// All roles are counts, so their domain is [`Bounds::COUNTS`]; static bounds outside it are
/// compile errors.
///
/// ```
/// use oxicub::params::role::{Role, K};
/// assert_eq!(K::NAME, "k");
/// ```
pub trait Role: Copy + Default + Debug + Send + Sync + 'static {
    /// Which role this is, for `const` lookups.
    const ID: RoleId;
    /// The parameter's name in signatures and error messages.
    const NAME: &'static str = Self::ID.name();
}

macro_rules! roles {
    ($($(#[$doc:meta])* $ty:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Default, Debug, PartialEq, Eq, Hash)]
        pub struct $ty;
        impl Role for $ty {
            const ID: RoleId = RoleId::$ty;
        }
    )*};
}

roles! {
    /// `k`: how many items a top-k selection returns (per segment in batched algorithms).
    K;
    /// `segment_sizes`: how many items each segment holds.
    SegmentSize;
    /// `num_segments`: how many segments a batched or segmented call processes.
    NumSegments;
    /// `num_items`: how many items a single-problem algorithm processes.
    NumItems;
    /// `total_items`: how many items all segments hold together (sizes temporary storage).
    TotalItems;
    /// `key_multiplicity`: how many times one key occurs within one sorted input of a set
    /// operation (1: no duplicates, which selects the cheaper Merge Path partitioning).
    KeyMultiplicity;
    /// `unsorted_positions`: how many positions of a set operation's inputs hold a key below
    /// (in the inputs' order) the key before it (0: sorted, which skips the check).
    UnsortedPositions;
    /// `experts`: how many experts a MoE router chooses among (a token row's length).
    Experts;
    /// `groups`: how many groups a MoE router's experts form (1: no groups).
    Groups;
    /// `top_groups`: how many groups a MoE router keeps per token.
    TopGroups;
}
