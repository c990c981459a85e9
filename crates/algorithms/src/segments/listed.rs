//! The listed layout on backends with host-memory arguments ([`Host`], [`AnyBackend`]): the
//! list's slices joined into one buffer, run as the offsets layout. (The host is the oracle;
//! [`AnyBackend`] copies to the device anyway, so joining costs it nothing more.)
//!
//! [`Host`]: crate::Host
//! [`AnyBackend`]: crate::AnyBackend

use super::{LayoutArg, SegmentArgs};
use crate::backend::Buffer;
use crate::Error;

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
    pub(crate) fn args<'s>(
        &'s self,
        args: &SegmentArgs<&'s [i64], &'s [i32]>,
    ) -> SegmentArgs<&'s [i64], &'s [i32]> {
        SegmentArgs {
            layout: LayoutArg::Offsets {
                begin: &self.begin[..],
                end: &self.end[..],
            },
            ..*args
        }
    }
}

/// The number of keys of a listed call's slices joined (saturating: the front check then
/// refuses it as too many).
pub(crate) fn joined_len(segments: &[impl Buffer]) -> usize {
    segments
        .iter()
        .fold(0usize, |sum, segment| sum.saturating_add(segment.len()))
}

/// The values of a listed call: a view per segment, each of its segment's length.
pub(crate) fn check_values(segments: &[impl Buffer], values: &[impl Buffer]) -> Result<(), Error> {
    Error::check_len("values", values.len(), segments.len(), "segments.len()")?;
    for (segment, value) in segments.iter().zip(values) {
        Error::check_len(
            "values",
            value.len(),
            segment.len(),
            "the length of each values[i] must be that of segments[i]",
        )?;
    }
    Ok(())
}
