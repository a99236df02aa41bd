//! Restart strategies: which children a supervisor stops and starts again when one of them is
//! to be restarted.
//!
//! Children are kept in start order. When child `i` (of `len`) must be restarted, the strategy
//! names a contiguous range of them, [`Strategy::affected`]: the supervisor stops the running
//! ones in that range in reverse start order, drops the temporary ones among them, and starts
//! the rest again in start order.
//!
//! | strategy     | range               |
//! |--------------|---------------------|
//! | `OneForOne`  | `i..i + 1`          |
//! | `OneForAll`  | `0..len`            |
//! | `RestForOne` | `i..len`            |

use std::ops::Range;

/// Which children a supervisor restarts when one of them ends and is to be restarted: OTP's
/// `one_for_one`, `one_for_all` and `rest_for_one`.
///
/// Children are stopped in reverse start order and started again in start order.
///
/// | strategy     | stopped when child C is restarted      | started again               |
/// |--------------|----------------------------------------|-----------------------------|
/// | `OneForOne`  | none (C has ended)                     | C                           |
/// | `OneForAll`  | every other child, last started first  | all children, in order      |
/// | `RestForOne` | the children started after C, reversed | C and those after it        |
///
/// Temporary children stopped this way are not started again: they leave the child list, as
/// in OTP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Restart only the child that ended. Use it when the children are independent.
    #[doc(alias = "one_for_one")]
    #[default]
    OneForOne,
    /// Restart every child. Use it when each child depends on all the others.
    #[doc(alias = "one_for_all")]
    OneForAll,
    /// Restart the child that ended and every child started after it. Use it when each child
    /// depends on the ones started before it.
    #[doc(alias = "rest_for_one")]
    RestForOne,
}

impl Strategy {
    /// The children, as indices in start order, that restarting child `failed` of `len`
    /// involves. `failed` must be below `len`.
    pub(crate) fn affected(self, failed: usize, len: usize) -> Range<usize> {
        debug_assert!(failed < len, "child {failed} of {len}");
        match self {
            Strategy::OneForOne => failed..failed + 1,
            Strategy::OneForAll => 0..len,
            Strategy::RestForOne => failed..len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Strategy;

    #[test]
    fn each_strategy_names_its_range() {
        assert_eq!(Strategy::OneForOne.affected(1, 4), 1..2);
        assert_eq!(Strategy::OneForAll.affected(1, 4), 0..4);
        assert_eq!(Strategy::RestForOne.affected(1, 4), 1..4);
        assert_eq!(Strategy::RestForOne.affected(3, 4), 3..4);
        assert_eq!(Strategy::default(), Strategy::OneForOne);
    }
}
