//! Segments described by their heads (the seed's `FromFlags` and `FromIndices` forms): the
//! keys cut into consecutive segments, each starting at a head. On the host they become the
//! offsets layout here; every head is checked, so a malformed description is an error naming
//! the argument and the position, never a silently different cut.

use crate::Error;

/// The begin and end offsets of the segments that head flags describe: `flags` is a bitfield
/// of `u32` words (bit `j % 32` of word `j / 32` set: a segment starts at key `j`), covering
/// `num_keys` keys (`ceil(num_keys / 32)` words at least; bits past `num_keys` are ignored).
/// Key 0 always starts a segment, whatever its bit; `num_keys = 0` gives no segment.
///
/// ```
/// use oxicub::segments::offsets_from_head_flags;
///
/// // Heads at 0, 3 and 33 over 40 keys.
/// let flags = [0b1000u32 | 1, 0b10];
/// let (begin, end) = offsets_from_head_flags(&flags, 40)?;
/// assert_eq!((begin, end), (vec![0, 3, 33], vec![3, 33, 40]));
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn offsets_from_head_flags(
    flags: &[u32],
    num_keys: usize,
) -> Result<(Vec<i64>, Vec<i64>), Error> {
    let words = num_keys.div_ceil(32);
    if flags.len() < words {
        return Err(Error::BufferTooSmall {
            arg: "flags",
            len: flags.len(),
            required: words,
            required_from: "ceil(num_keys / 32) words of head flags",
        });
    }
    let mut begin = Vec::new();
    for (w, &word) in flags[..words].iter().enumerate() {
        let mut bits = if w == 0 { word | 1 } else { word };
        while bits != 0 {
            let at = w * 32 + bits.trailing_zeros() as usize;
            if at >= num_keys {
                break;
            }
            begin.push(at as i64);
            bits &= bits - 1;
        }
    }
    Ok(ends_of(begin, num_keys))
}

/// The begin and end offsets of the segments that head indices describe: `heads` is the sorted
/// list of unique positions where a segment starts, each in `1..num_keys` (a head at 0 may be
/// given or omitted: key 0 always starts a segment). Unsorted or repeated heads, and heads
/// past the keys, are [`Error::InvalidArgument`] naming `heads` and the position.
///
/// ```
/// use oxicub::segments::offsets_from_head_indices;
///
/// let (begin, end) = offsets_from_head_indices(&[4, 19], 25)?;
/// assert_eq!((begin, end), (vec![0, 4, 19], vec![4, 19, 25]));
/// assert!(offsets_from_head_indices(&[4, 4], 25).is_err());
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn offsets_from_head_indices(
    heads: &[i64],
    num_keys: usize,
) -> Result<(Vec<i64>, Vec<i64>), Error> {
    let mut begin = Vec::with_capacity(heads.len() + 1);
    if num_keys > 0 {
        begin.push(0i64);
    }
    for (i, &head) in heads.iter().enumerate() {
        let reason = if head < 0 || head as u64 >= num_keys as u64 {
            if head == 0 && num_keys == 0 {
                continue; // the omitted-or-given head at 0 of no keys
            }
            Some(outside_reason(i as u64, head, num_keys as u64))
        } else if i > 0 && head <= heads[i - 1] {
            Some(not_above_reason(i as u64, head, heads[i - 1]))
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Error::InvalidArgument {
                arg: "heads",
                reason,
            });
        }
        if head > 0 {
            begin.push(head);
        }
    }
    Ok(ends_of(begin, num_keys))
}

/// Why head `i` (`head`) is invalid: outside the keys.
pub(super) fn outside_reason(i: u64, head: i64, num_keys: u64) -> String {
    format!("heads[{i}] = {head} is outside 0..{num_keys} (keys.len())")
}

/// Why head `i` (`head`) is invalid: not above the one before it (`previous`).
pub(super) fn not_above_reason(i: u64, head: i64, previous: i64) -> String {
    format!(
        "heads[{i}] = {head} is not above heads[{}] = {previous} (heads must be sorted and \
         unique)",
        i.saturating_sub(1)
    )
}

/// The end offsets of consecutive segments starting at `begin`, the last ending at `num_keys`.
fn ends_of(begin: Vec<i64>, num_keys: usize) -> (Vec<i64>, Vec<i64>) {
    let mut end: Vec<i64> = begin.iter().skip(1).copied().collect();
    if !begin.is_empty() {
        end.push(num_keys as i64);
    }
    (begin, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_indices_describe_the_same_segments() {
        let heads = [4i64, 19, 22, 56, 61, 78, 81, 84, 94, 97];
        let mut flags = [0u32; 4];
        for &h in &heads {
            flags[h as usize / 32] |= 1 << (h % 32);
        }
        let from_flags = offsets_from_head_flags(&flags, 100).expect("flags");
        let from_indices = offsets_from_head_indices(&heads, 100).expect("indices");
        assert_eq!(from_flags, from_indices);
        assert_eq!(from_indices.0.len(), 11);
        // A head at 0 given explicitly is the same.
        let mut with_zero = vec![0i64];
        with_zero.extend_from_slice(&heads);
        assert_eq!(
            offsets_from_head_indices(&with_zero, 100).expect("indices"),
            from_indices
        );
    }

    #[test]
    fn bad_heads_are_named_errors() {
        for heads in [&[5i64, 3][..], &[3, 3], &[-1], &[10]] {
            let err = offsets_from_head_indices(heads, 10).expect_err("bad heads");
            assert!(
                matches!(err, Error::InvalidArgument { arg: "heads", .. }),
                "{heads:?}: {err}"
            );
        }
        let err = offsets_from_head_flags(&[1], 33).expect_err("short flags");
        assert!(matches!(
            err,
            Error::BufferTooSmall {
                arg: "flags",
                required: 2,
                ..
            }
        ));
        // Bits past the keys are ignored; no keys, no segments.
        assert_eq!(
            offsets_from_head_flags(&[u32::MAX], 3).expect("flags"),
            (vec![0, 1, 2], vec![1, 2, 3])
        );
        assert_eq!(
            offsets_from_head_flags(&[], 0).expect("flags"),
            (vec![], vec![])
        );
        assert_eq!(
            offsets_from_head_indices(&[0], 0).expect("indices"),
            (vec![], vec![])
        );
    }
}
