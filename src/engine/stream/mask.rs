//! Sets of rules as one 64-bit word ([`RuleMask`]), for the masks that a
//! push reads for all rules at once. Bit arithmetic only: it knows nothing
//! of what a rule is.

use std::ops::{BitAnd, BitAndAssign, BitOr, BitOrAssign, Not, Range};

/// A set of rules (by index in the plan), one bit each, so that a push
/// combines the per-byte masks of all rules in a few instructions.
///
/// Rule `i` is bit `i` for `i < 63`. Bit 63 is **shared**: it stands for
/// rule 63 and every rule after it. With at most 64 rules it is simply
/// rule 63's bit; with more, a set that holds it may hold any rule from 63
/// on, and [`Self::iter`] lists them all (a push then looks at each of them
/// on its own). A set thus never holds fewer rules than were put in, only
/// more, and looking at a rule that has nothing to do is always safe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RuleMask(u64);

impl RuleMask {
    /// No rule.
    pub(super) const EMPTY: Self = Self(0);
    /// Every bit: every rule, whatever their number.
    pub(super) const ALL: Self = Self(u64::MAX);
    /// The bit that rules 63 and after share.
    const SHARED: u64 = 1 << 63;

    /// The set of rule `i` (with the rules that share its bit, from 63 on).
    #[inline]
    pub(super) fn of(i: usize) -> Self {
        Self(1 << i.min(63))
    }

    /// Every one of the `count` rules of a plan.
    #[inline]
    pub(super) fn first(count: usize) -> Self {
        if count >= 64 {
            Self::ALL
        } else {
            Self((1u64 << count) - 1)
        }
    }

    /// Adds rule `i`.
    #[inline]
    pub(super) fn insert(&mut self, i: usize) {
        *self |= Self::of(i);
    }

    /// Whether rule `i` may be in the set: for a rule from 63 on, whether
    /// the shared bit is.
    #[inline]
    pub(super) fn contains(self, i: usize) -> bool {
        !(self & Self::of(i)).is_empty()
    }

    /// Whether the set holds no rule.
    #[inline]
    pub(super) fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether, among `count` rules, the set holds the bit that several
    /// rules share (there are more than 64, and one from 63 on may be in it).
    #[inline]
    pub(super) fn has_shared(self, count: usize) -> bool {
        count > 64 && self.0 & Self::SHARED != 0
    }

    /// The set without the shared bit when, among `count` rules, several
    /// share it: the rules with a bit of their own, which [`Self::bits`]
    /// lists exactly.
    #[inline]
    pub(super) fn without_shared(self, count: usize) -> Self {
        if count > 64 {
            Self(self.0 & !Self::SHARED)
        } else {
            self
        }
    }

    /// The indices of the bits set, lowest first: the set's rules when no
    /// bit is shared (see [`Self::without_shared`]; [`Self::iter`] lists
    /// every rule).
    #[inline]
    pub(super) fn bits(self) -> Bits {
        Bits(self.0)
    }

    /// The rules of the set among `count`, by increasing index: those with
    /// a bit of their own, then every rule from 63 on if the shared bit is
    /// set.
    #[inline]
    pub(super) fn iter(self, count: usize) -> RuleIter {
        if self.has_shared(count) {
            RuleIter {
                bits: self.without_shared(count).bits(),
                tail: 63..count,
            }
        } else {
            RuleIter {
                bits: self.bits(),
                tail: 0..0,
            }
        }
    }
}

impl BitOr for RuleMask {
    type Output = Self;

    #[inline]
    fn bitor(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl BitOrAssign for RuleMask {
    #[inline]
    fn bitor_assign(&mut self, other: Self) {
        self.0 |= other.0;
    }
}

impl BitAnd for RuleMask {
    type Output = Self;

    #[inline]
    fn bitand(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }
}

impl BitAndAssign for RuleMask {
    #[inline]
    fn bitand_assign(&mut self, other: Self) {
        self.0 &= other.0;
    }
}

/// The complement: every rule not in the set (the shared bit flips as one).
impl Not for RuleMask {
    type Output = Self;

    #[inline]
    fn not(self) -> Self {
        Self(!self.0)
    }
}

/// Iterator of [`RuleMask::bits`]: the indices of the bits set, lowest
/// first.
pub(super) struct Bits(u64);

impl Iterator for Bits {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(i)
    }
}

/// Iterator of [`RuleMask::iter`]: the rules with a bit of their own, then
/// those sharing the last one.
pub(super) struct RuleIter {
    bits: Bits,
    tail: Range<usize>,
}

impl Iterator for RuleIter {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        match self.bits.next() {
            Some(i) => Some(i),
            None => self.tail.next(),
        }
    }
}
