//! The listed layout on backends with host-memory arguments ([`Host`], [`AnyBackend`]): the
//! list's slices joined into one buffer, run as the offsets layout. (The host is the oracle;
//! [`AnyBackend`] copies to the device anyway, so joining costs it nothing more.)
//!
//! [`Host`]: crate::Host
//! [`AnyBackend`]: crate::AnyBackend

use super::{LayoutArg, SegmentArgs};

/// The slices of a list joined into one buffer, with the offsets of each.
pub(crate) struct Joined<T> {
    /// The slices, one after another.
    pub(crate) items: Vec<T>,
    begin: Vec<i64>,
    end: Vec<i64>,
}

impl<T: Copy> Joined<T> {
    pub(crate) fn new(lists: &[&[T]]) -> Joined<T> {
        let total: usize = lists.iter().map(|s| s.len()).sum();
        let mut items = Vec::with_capacity(total);
        let (mut begin, mut end) = (Vec::with_capacity(lists.len()), Vec::new());
        for list in lists {
            begin.push(items.len() as i64);
            items.extend_from_slice(list);
            end.push(items.len() as i64);
        }
        Joined { items, begin, end }
    }

    /// The call's segmented arguments with the offsets of the joined buffer as the layout.
    pub(crate) fn args<'s>(&'s self, args: &SegmentArgs<&'s [i64]>) -> SegmentArgs<&'s [i64]> {
        SegmentArgs {
            layout: LayoutArg::Offsets {
                begin: &self.begin[..],
                end: &self.end[..],
            },
            ..*args
        }
    }
}
