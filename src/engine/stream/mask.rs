//! Sets of rules as one 64-bit word, for the masks that a push reads for
//! all rules at once. Bit arithmetic only: it knows nothing of what a rule
//! is.

/// Rule `i`'s bit in [`LivePlan::first_mask`](super::plan::LivePlan::first_mask).
#[inline]
pub(super) fn rule_bit(i: usize) -> u64 {
    1 << i.min(63)
}

/// The rules of `mask` (bits as [`rule_bit`] sets them) among `count`.
#[inline]
pub(super) fn rules_in(mask: u64, count: usize) -> RuleIter {
    let shared = rule_bit(63);
    if count > 64 && mask & shared != 0 {
        RuleIter {
            bits: mask & !shared,
            tail: 63..count,
        }
    } else {
        RuleIter {
            bits: mask,
            tail: 0..0,
        }
    }
}

/// Iterator of [`rules_in`]: the rules with a bit of their own, then those
/// sharing the last one.
pub(super) struct RuleIter {
    bits: u64,
    tail: std::ops::Range<usize>,
}

impl Iterator for RuleIter {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.bits != 0 {
            let i = self.bits.trailing_zeros() as usize;
            self.bits &= self.bits - 1;
            return Some(i);
        }
        self.tail.next()
    }
}
