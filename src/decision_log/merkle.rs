//! RFC 6962 / RFC 9162 §2.1 Merkle tree hashing: leaf and node hashes, tree
//! roots, inclusion and consistency proofs and their verification, and an
//! append-only compact tree; pure computation that never touches files or the
//! network.

use sha2::{Digest, Sha256};

/// A SHA-256 hash: a leaf hash, an interior node hash or a tree root.
pub type Hash = [u8; 32];

/// The leaf hash of `data`: SHA-256(0x00 || data) (RFC 6962 §2.1).
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(data);
    h.finalize().into()
}

/// The hash of an interior node: SHA-256(0x01 || left || right) (RFC 6962 §2.1).
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x01]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The root of the empty tree: SHA-256 of the empty string.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// The Merkle tree hash (RFC 6962 §2.1 MTH) over `leaves`, which are leaf
/// hashes already (see [`leaf_hash`]).
pub fn root(leaves: &[Hash]) -> Hash {
    // Pairing left to right level by level, an odd last node moving up
    // unchanged, builds the same tree as MTH's split at the largest power of
    // two, without recursion and in O(n) hashes.
    let mut level: Vec<Hash> = match leaves {
        [] => return empty_root(),
        [only] => return *only,
        _ => leaves.to_vec(),
    };
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| match pair {
                [left, right] => node_hash(left, right),
                [single] => *single,
                // `chunks(2)` yields one or two elements only.
                _ => empty_root(),
            })
            .collect();
    }
    level.first().copied().unwrap_or_else(empty_root)
}

/// The largest power of two strictly below `n`, for `n >= 2` (RFC 6962's `k`).
fn split(n: usize) -> usize {
    // `max(1)` keeps `ilog2` defined for the n < 2 no caller passes.
    1 << n.saturating_sub(1).max(1).ilog2()
}

/// The audit path (RFC 6962 §2.1.1 PATH) of the leaf at `index` in the tree
/// over `leaves`, from the leaf's sibling up to the root's child; `None` when
/// `index` is not below the number of leaves.
pub fn inclusion_proof(leaves: &[Hash], index: u64) -> Option<Vec<Hash>> {
    let m = usize::try_from(index).ok()?;
    if m >= leaves.len() {
        return None;
    }
    let mut proof = Vec::new();
    path(m, leaves, &mut proof);
    Some(proof)
}

/// PATH(m, D[n]) appended to `out`; the recursion depth is the tree height.
fn path(m: usize, leaves: &[Hash], out: &mut Vec<Hash>) {
    let n = leaves.len();
    if n <= 1 {
        return;
    }
    let k = split(n);
    let (left, right) = leaves.split_at(k);
    if m < k {
        path(m, left, out);
        out.push(root(right));
    } else {
        path(m - k, right, out);
        out.push(root(left));
    }
}

/// Whether `proof` shows the leaf hash `leaf` at `index` in the tree of `size`
/// leaves whose root is `root` (RFC 9162 §2.1.3.2).
pub fn verify_inclusion(leaf: &Hash, index: u64, size: u64, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let mut fn_ = index;
    let mut sn = size - 1;
    let mut r = *leaf;
    for p in proof {
        if sn == 0 {
            return false;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            while fn_ & 1 == 0 && fn_ != 0 {
                fn_ >>= 1;
                sn >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    sn == 0 && r == *root
}

/// The consistency proof (RFC 6962 §2.1.2 PROOF) that the tree over the
/// first `old_size` of `leaves` is a prefix of the tree over all of them;
/// `None` when `old_size` exceeds the number of leaves, empty when
/// `old_size` is 0 or all of them (nothing to prove).
pub fn consistency_proof(leaves: &[Hash], old_size: u64) -> Option<Vec<Hash>> {
    let m = usize::try_from(old_size).ok()?;
    if m > leaves.len() {
        return None;
    }
    let mut proof = Vec::new();
    if m > 0 {
        subproof(m, leaves, true, &mut proof);
    }
    Some(proof)
}

/// SUBPROOF(m, D[n], b) appended to `out`, for 0 < m <= n.
fn subproof(m: usize, leaves: &[Hash], whole: bool, out: &mut Vec<Hash>) {
    let n = leaves.len();
    if m >= n {
        // The old tree is this whole subtree: its root is known to the
        // verifier when it is the old tree's root itself (`whole`).
        if !whole {
            out.push(root(leaves));
        }
        return;
    }
    let k = split(n);
    let (left, right) = leaves.split_at(k);
    if m <= k {
        subproof(m, left, whole, out);
        out.push(root(right));
    } else {
        subproof(m - k, right, false, out);
        out.push(root(left));
    }
}

/// Whether `proof` shows that the tree of `old_size` leaves with root
/// `old_root` is a prefix of the tree of `new_size` leaves with root
/// `new_root` (RFC 9162 §2.1.4.2).
///
/// Equal sizes need equal roots and an empty proof. An empty old tree is a
/// prefix of every tree, with an empty proof; unlike Go's
/// transparency-dev/merkle, its root must also be [`empty_root`], so that a
/// malformed checkpoint of size 0 is not taken as consistent.
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) -> bool {
    if new_size < old_size {
        return false;
    }
    if old_size == 0 {
        return proof.is_empty()
            && *old_root == empty_root()
            && (new_size != 0 || *new_root == *old_root);
    }
    if old_size == new_size {
        return proof.is_empty() && old_root == new_root;
    }
    let Some((first, rest)) = proof.split_first() else {
        return false;
    };
    // An old tree that is a perfect subtree of the new one is a node of it,
    // so its root is the start of the path instead of a proof element.
    let (start, path) = if old_size.is_power_of_two() {
        (old_root, proof)
    } else {
        (first, rest)
    };
    let mut fn_ = old_size - 1;
    let mut sn = new_size - 1;
    while fn_ & 1 == 1 {
        fn_ >>= 1;
        sn >>= 1;
    }
    let mut fr = *start;
    let mut sr = *start;
    for c in path {
        if sn == 0 {
            return false;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while fn_ & 1 == 0 && fn_ != 0 {
                fn_ >>= 1;
                sn >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    fr == *old_root && sr == *new_root && sn == 0
}

/// An append-only compact tree (the "frontier": one perfect subtree root per
/// set bit of size) giving the root of all leaves pushed so far in O(log n).
#[derive(Debug, Clone, Default)]
pub struct Frontier {
    /// The roots of the perfect subtrees, left to right, tallest first.
    subtrees: Vec<Hash>,
    size: u64,
}

impl Frontier {
    /// The frontier of the empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a leaf hash (see [`leaf_hash`]).
    pub fn push(&mut self, leaf: Hash) {
        let mut node = leaf;
        // Each trailing set bit of the old size is a perfect subtree as tall
        // as `node` now is: merging with it carries one level up.
        let mut carry = self.size;
        while carry & 1 == 1 {
            let Some(left) = self.subtrees.pop() else {
                break;
            };
            node = node_hash(&left, &node);
            carry >>= 1;
        }
        self.subtrees.push(node);
        // 2^64 leaves cannot be pushed in practice; saturating keeps the
        // count from wrapping to an empty-looking tree.
        self.size = self.size.saturating_add(1);
    }

    /// The number of leaves pushed.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The root of the tree over all leaves pushed, [`empty_root`] before the
    /// first.
    pub fn root(&self) -> Hash {
        let mut nodes = self.subtrees.iter().rev();
        let Some(last) = nodes.next() else {
            return empty_root();
        };
        nodes.fold(*last, |right, left| node_hash(left, &right))
    }
}

#[cfg(test)]
#[path = "merkle_tests.rs"]
pub(crate) mod tests;
