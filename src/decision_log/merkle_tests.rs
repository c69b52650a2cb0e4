//! Tests of the RFC 6962 tree against the published vectors of
//! transparency-dev/merkle and against its own definitions.

use super::*;
use proptest::prelude::*;

/// A 32-byte hash from hex.
fn h(hex_text: &str) -> Hash {
    hex::decode(hex_text).unwrap().try_into().unwrap()
}

// The vectors below are copied from github.com/transparency-dev/merkle (the
// successor of the certificate-transparency-go `merkle` package):
// `testonly/constants.go` (LeafInputs, NodeHashes, RootHashes, CompactTrees,
// EmptyRootHash), `proof/verify_test.go` (inclusionProofs, consistencyProofs,
// sha256SomeHash and the corruption probes) and `proof/proof_test.go`
// (the node ids of TestInclusion and TestConsistency, resolved here through
// NodeHashes).

/// testonly.LeafInputs().
pub(crate) const LEAF_INPUTS: [&str; 8] = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
];

/// testonly.NodeHashes(): level (0 = leaves), then index within the level.
const NODE_HASHES: [&[&str]; 4] = [
    &[
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
        "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
    ],
    &[
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    ],
    &[
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    &["5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"],
];

/// testonly.RootHashes(), indexed by tree size.
const ROOT_HASHES: [&str; 9] = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
];

/// verify_test.go's sha256SomeHash: a hash that is no node of these trees.
const SOME_HASH: &str = "abacaba000000000000000000000000000000000000000000060061e00123456";

/// verify_test.go's inclusionProofs: (1-based leaf, tree size, proof).
const INCLUSION_PROOFS: [(u64, u64, &[&str]); 5] = [
    (1, 1, &[]),
    (
        1,
        8,
        &[
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        &[
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        3,
        3,
        &["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    ),
    (
        2,
        5,
        &[
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
];

/// verify_test.go's consistencyProofs: (old size, new size, proof).
const CONSISTENCY_PROOFS: [(u64, u64, &[&str]); 5] = [
    (1, 1, &[]),
    (
        1,
        8,
        &[
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ],
    ),
    (
        6,
        8,
        &[
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
    (
        2,
        5,
        &[
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ],
    ),
    (
        6,
        7,
        &[
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ],
    ),
];

/// The leaf hashes of the eight test leaves.
fn leaves() -> Vec<Hash> {
    LEAF_INPUTS
        .iter()
        .map(|input| leaf_hash(&hex::decode(input).unwrap()))
        .collect()
}

/// NodeHashes()[level][index], the node proof_test.go calls id(level, index).
fn id(level: usize, index: usize) -> Hash {
    h(NODE_HASHES[level][index])
}

fn hashes(list: &[&str]) -> Vec<Hash> {
    list.iter().map(|x| h(x)).collect()
}

#[test]
fn hashing_matches_the_published_node_hashes() {
    assert_eq!(empty_root(), h(ROOT_HASHES[0]));
    let leaves = leaves();
    for (level, nodes) in NODE_HASHES.iter().enumerate() {
        let width = 1usize << level;
        for (index, want) in nodes.iter().enumerate() {
            let subtree = &leaves[index * width..(index + 1) * width];
            assert_eq!(root(subtree), h(want), "node ({level}, {index})");
        }
    }
    assert_eq!(node_hash(&id(0, 0), &id(0, 1)), id(1, 0));
}

#[test]
fn roots_match_the_published_roots() {
    let leaves = leaves();
    for (size, want) in ROOT_HASHES.iter().enumerate() {
        assert_eq!(root(&leaves[..size]), h(want), "size {size}");
    }
}

#[test]
fn frontier_matches_the_published_roots_and_compact_trees() {
    // testonly.CompactTrees(): the frontier's subtree roots after each push.
    let compact: [&[(usize, usize)]; 9] = [
        &[],
        &[(0, 0)],
        &[(1, 0)],
        &[(1, 0), (0, 2)],
        &[(2, 0)],
        &[(2, 0), (0, 4)],
        &[(2, 0), (1, 2)],
        &[(2, 0), (1, 2), (0, 6)],
        &[(3, 0)],
    ];
    let mut frontier = Frontier::new();
    assert_eq!(frontier.root(), empty_root());
    assert_eq!(frontier.size(), 0);
    for (size, leaf) in leaves().into_iter().enumerate() {
        frontier.push(leaf);
        let size = size + 1;
        assert_eq!(frontier.size(), size as u64);
        assert_eq!(frontier.root(), h(ROOT_HASHES[size]), "size {size}");
        let want: Vec<Hash> = compact[size].iter().map(|&(l, i)| id(l, i)).collect();
        assert_eq!(frontier.subtrees, want, "size {size}");
    }
}

#[test]
fn inclusion_proofs_match_the_published_vectors() {
    let leaves = leaves();
    for (leaf, size, want) in INCLUSION_PROOFS {
        let index = leaf - 1;
        let tree = &leaves[..size as usize];
        let proof = inclusion_proof(tree, index).unwrap();
        assert_eq!(proof, hashes(want), "leaf {index} of {size}");
        let root_hash = h(ROOT_HASHES[size as usize]);
        assert!(verify_inclusion(
            &leaves[index as usize],
            index,
            size,
            &proof,
            &root_hash
        ));
        assert_no_corrupt_inclusion_verifies(
            &leaves[index as usize],
            index,
            size,
            &proof,
            &root_hash,
        );
    }
}

/// verify_test.go's corruptInclusionProof: none of these may verify.
/// Edits of `proof` that no verifier may accept (verify_test.go's
/// corruptions): each of `extras` appended and prepended, `bit` flipped in
/// the first byte of each component, the last component removed.
fn edited_proofs(proof: &[Hash], extras: &[(Hash, &str)], bit: u8) -> Vec<(Vec<Hash>, String)> {
    let mut out = Vec::new();
    for (extra, name) in extras {
        let mut trailing = proof.to_vec();
        trailing.push(*extra);
        out.push((trailing, format!("trailing {name}")));
        let mut preceding = vec![*extra];
        preceding.extend_from_slice(proof);
        out.push((preceding, format!("preceding {name}")));
    }
    for i in 0..proof.len() {
        let mut flipped = proof.to_vec();
        flipped[i][0] ^= bit;
        out.push((flipped, format!("proof[{i}] bit {}", bit.trailing_zeros())));
    }
    if let Some((_, shorter)) = proof.split_last() {
        out.push((shorter.to_vec(), "last component removed".into()));
    }
    out
}

fn assert_no_corrupt_inclusion_verifies(
    leaf: &Hash,
    index: u64,
    size: u64,
    proof: &[Hash],
    root_hash: &Hash,
) {
    let some = h(SOME_HASH);
    let garbage = [0u8; 32];
    let mut probes: Vec<(u64, u64, Hash, Hash, Vec<Hash>, String)> = vec![
        (
            index.wrapping_sub(1),
            size,
            *leaf,
            *root_hash,
            proof.to_vec(),
            "index - 1".into(),
        ),
        (
            index + 1,
            size,
            *leaf,
            *root_hash,
            proof.to_vec(),
            "index + 1".into(),
        ),
        (
            index ^ 2,
            size,
            *leaf,
            *root_hash,
            proof.to_vec(),
            "index ^ 2".into(),
        ),
        (
            index,
            size * 2,
            *leaf,
            *root_hash,
            proof.to_vec(),
            "size * 2".into(),
        ),
        (
            index,
            size / 2,
            *leaf,
            *root_hash,
            proof.to_vec(),
            "size / 2".into(),
        ),
        (
            index,
            size,
            leaf_hash(b"WrongLeaf"),
            *root_hash,
            proof.to_vec(),
            "wrong leaf".into(),
        ),
        (
            index,
            size,
            *leaf,
            empty_root(),
            proof.to_vec(),
            "empty root".into(),
        ),
        (
            index,
            size,
            *leaf,
            some,
            proof.to_vec(),
            "random root".into(),
        ),
    ];
    for (edited, what) in edited_proofs(proof, &[(garbage, "garbage"), (*root_hash, "root")], 8) {
        probes.push((index, size, *leaf, *root_hash, edited, what));
    }
    if proof.len() > 1 {
        let mut inserted = vec![proof[0], some];
        inserted.extend_from_slice(&proof[1..]);
        probes.push((
            index,
            size,
            *leaf,
            *root_hash,
            inserted,
            "inserted component".into(),
        ));
    }
    for (index, size, leaf, root_hash, proof, what) in probes {
        assert!(
            !verify_inclusion(&leaf, index, size, &proof, &root_hash),
            "{what} verified"
        );
    }
}

#[test]
fn inclusion_rejects_impossible_positions() {
    // verify_test.go TestVerifyInclusion and TestVerifyInclusionSingleEntry.
    let some = h(SOME_HASH);
    for (index, size) in [(0, 0), (0, 1), (1, 0), (2, 1)] {
        assert!(!verify_inclusion(&some, index, size, &[], &empty_root()));
    }
    let data = leaf_hash(b"data");
    assert!(verify_inclusion(&data, 0, 1, &[], &data));
    assert!(!verify_inclusion(&data, 0, 1, &[], &empty_root()));
    assert!(!verify_inclusion(&empty_root(), 0, 1, &[], &data));
    assert!(!verify_inclusion(&data, u64::MAX, u64::MAX, &[], &data));
    assert_eq!(inclusion_proof(&leaves(), 8), None);
    assert_eq!(inclusion_proof(&[], 0), None);
    assert_eq!(inclusion_proof(&leaves()[..7], u64::MAX), None);
}

#[test]
fn inclusion_paths_match_the_published_node_ids() {
    // proof_test.go TestInclusion over the trees of at most eight leaves;
    // l7 is the rehashed l = hash(i, j) of the size-7 tree.
    let (a, b, c, d, e, f, j) = (
        id(0, 0),
        id(0, 1),
        id(0, 2),
        id(0, 3),
        id(0, 4),
        id(0, 5),
        id(0, 6),
    );
    let (g, hh, i, k) = (id(1, 0), id(1, 1), id(1, 2), id(2, 0));
    let l7 = node_hash(&i, &j);
    let cases: [(usize, u64, Vec<Hash>); 15] = [
        (1, 0, vec![]),
        (2, 0, vec![b]),
        (2, 1, vec![a]),
        (3, 1, vec![a, c]),
        (7, 0, vec![b, hh, l7]),
        (7, 1, vec![a, hh, l7]),
        (7, 2, vec![d, g, l7]),
        (7, 3, vec![c, g, l7]),
        (7, 4, vec![f, j, k]),
        (7, 5, vec![e, j, k]),
        (7, 6, vec![i, k]),
        (4, 2, vec![d, g]),
        (5, 3, vec![c, g, e]),
        (6, 3, vec![c, g, i]),
        (6, 4, vec![f, k]),
    ];
    let leaves = leaves();
    for (size, index, want) in cases {
        assert_eq!(
            inclusion_proof(&leaves[..size], index),
            Some(want),
            "{index} of {size}"
        );
    }
}

#[test]
fn consistency_proofs_match_the_published_vectors() {
    let leaves = leaves();
    for (old, new, want) in CONSISTENCY_PROOFS {
        let proof = consistency_proof(&leaves[..new as usize], old).unwrap();
        assert_eq!(proof, hashes(want), "{old} to {new}");
        let (old_root, new_root) = (h(ROOT_HASHES[old as usize]), h(ROOT_HASHES[new as usize]));
        assert!(verify_consistency(old, new, &old_root, &new_root, &proof));
        if !proof.is_empty() {
            assert_no_corrupt_consistency_verifies(old, new, &old_root, &new_root, &proof);
        }
    }
}

/// verify_test.go's corruptConsistencyProof: none of these may verify.
fn assert_no_corrupt_consistency_verifies(
    old: u64,
    new: u64,
    old_root: &Hash,
    new_root: &Hash,
    proof: &[Hash],
) {
    let garbage = [0u8; 32];
    let wrong_root = leaf_hash(b"WrongRoot");
    let with = |front: &[Hash], back: &[Hash]| -> Vec<Hash> {
        front.iter().chain(proof).chain(back).copied().collect()
    };
    let p = proof.to_vec();
    let mut probes: Vec<(u64, u64, Hash, Hash, Vec<Hash>, String)> = vec![
        (
            old - 1,
            new,
            *old_root,
            *new_root,
            p.clone(),
            "old - 1".into(),
        ),
        (
            old + 1,
            new,
            *old_root,
            *new_root,
            p.clone(),
            "old + 1".into(),
        ),
        (
            old ^ 2,
            new,
            *old_root,
            *new_root,
            p.clone(),
            "old ^ 2".into(),
        ),
        (
            old,
            new * 2,
            *old_root,
            *new_root,
            p.clone(),
            "new * 2".into(),
        ),
        (
            old,
            new / 2,
            *old_root,
            *new_root,
            p.clone(),
            "new / 2".into(),
        ),
        (
            old,
            new,
            wrong_root,
            *new_root,
            p.clone(),
            "wrong old root".into(),
        ),
        (
            old,
            new,
            *old_root,
            wrong_root,
            p.clone(),
            "wrong new root".into(),
        ),
        (
            old,
            new,
            *new_root,
            *old_root,
            p.clone(),
            "swapped roots".into(),
        ),
        (old, new, *old_root, *new_root, vec![], "empty proof".into()),
        (
            old,
            new,
            *old_root,
            *new_root,
            with(&[proof[0]], &[]),
            "preceding proof[0]".into(),
        ),
    ];
    let extras = [
        (garbage, "garbage"),
        (*old_root, "old root"),
        (*new_root, "new root"),
    ];
    for (edited, what) in edited_proofs(proof, &extras, 16) {
        probes.push((old, new, *old_root, *new_root, edited, what));
    }
    for (old, new, old_root, new_root, proof, what) in probes {
        assert!(
            !verify_consistency(old, new, &old_root, &new_root, &proof),
            "{what} verified"
        );
    }
}

#[test]
fn consistency_edge_cases() {
    // verify_test.go TestVerifyConsistency; where Go lets an empty old tree
    // have any root, this one needs the empty root.
    let root1 = leaf_hash(b"don't care 1");
    let root2 = leaf_hash(b"don't care 2");
    let empty = empty_root();
    let cases: [(u64, u64, Hash, Hash, Vec<Hash>, bool); 15] = [
        (0, 0, root1, root2, vec![], false),
        (1, 1, root1, root2, vec![], false),
        (0, 0, empty, empty, vec![], true),
        (0, 1, empty, root2, vec![], true),
        (0, 1, root1, root2, vec![], false),
        (0, 0, root1, root1, vec![], false),
        (1, 1, root2, root2, vec![], true),
        (1, 0, root1, root2, vec![], false),
        (2, 1, root1, root2, vec![], false),
        (1, 2, root1, root2, vec![], false),
        (0, 0, empty, root2, vec![], false),
        (1, 1, empty, root2, vec![], false),
        (0, 0, empty, empty, vec![empty], false),
        (0, 1, empty, empty, vec![empty], false),
        (1, 1, empty, empty, vec![empty], false),
    ];
    for (old, new, old_root, new_root, proof, want) in cases {
        assert_eq!(
            verify_consistency(old, new, &old_root, &new_root, &proof),
            want,
            "{old} to {new}"
        );
    }
    assert_eq!(consistency_proof(&leaves(), 9), None);
    assert_eq!(consistency_proof(&leaves(), u64::MAX), None);
    assert_eq!(consistency_proof(&leaves(), 0), Some(vec![]));
    assert_eq!(consistency_proof(&leaves(), 8), Some(vec![]));
    assert_eq!(consistency_proof(&[], 0), Some(vec![]));
}

#[test]
fn consistency_paths_match_the_published_node_ids() {
    // proof_test.go TestConsistency over the trees of at most eight leaves.
    let (b, c, d, e, f, j, leaf7) = (
        id(0, 1),
        id(0, 2),
        id(0, 3),
        id(0, 4),
        id(0, 5),
        id(0, 6),
        id(0, 7),
    );
    let (g, hh, i, k, l8) = (id(1, 0), id(1, 1), id(1, 2), id(2, 0), id(2, 1));
    let l7 = node_hash(&i, &j);
    let cases: [(u64, usize, Vec<Hash>); 22] = [
        (1, 2, vec![b]),
        (1, 4, vec![b, hh]),
        (1, 6, vec![b, hh, i]),
        (2, 3, vec![c]),
        (2, 8, vec![hh, l8]),
        (3, 7, vec![c, d, g, l7]),
        (4, 7, vec![l7]),
        (5, 7, vec![e, f, j, k]),
        (6, 7, vec![i, j, k]),
        (7, 8, vec![j, leaf7, i, k]),
        (1, 1, vec![]),
        (2, 2, vec![]),
        (3, 3, vec![]),
        (4, 4, vec![]),
        (5, 5, vec![]),
        (7, 7, vec![]),
        (8, 8, vec![]),
        (2, 4, vec![hh]),
        (3, 5, vec![c, d, g, e]),
        (3, 6, vec![c, d, g, i]),
        (4, 6, vec![i]),
        (1, 7, vec![b, hh, l7]),
    ];
    let leaves = leaves();
    for (old, new, want) in cases {
        let proof = consistency_proof(&leaves[..new], old);
        assert_eq!(proof.as_ref(), Some(&want), "{old} to {new}");
        let (old_root, new_root) = (h(ROOT_HASHES[old as usize]), h(ROOT_HASHES[new]));
        assert!(verify_consistency(
            old, new as u64, &old_root, &new_root, &want
        ));
    }
}

/// Builds a tree of `size` leaves three ways (root, frontier, audit path)
/// and checks they agree.
fn big_tree(size: u32) {
    let leaves: Vec<Hash> = (0..size).map(|i| leaf_hash(&i.to_be_bytes())).collect();
    let mut frontier = Frontier::new();
    for leaf in &leaves {
        frontier.push(*leaf);
    }
    let want = root(&leaves);
    assert_eq!(frontier.root(), want);
    let index = u64::from(size / 3 * 2);
    let proof = inclusion_proof(&leaves, index).unwrap();
    assert_eq!(proof.len(), (size - 1).ilog2() as usize + 1);
    assert!(verify_inclusion(
        &leaves[index as usize],
        index,
        u64::from(size),
        &proof,
        &want
    ));
}

#[test]
fn a_big_tree() {
    big_tree((1 << 17) + 3);
}

// Unoptimised SHA-256 makes this take half a minute in a debug build; in
// release it takes well under a second.
#[test]
#[ignore = "slow in debug builds: run with --release -- --ignored"]
fn a_million_leaves() {
    big_tree(1 << 20);
}

/// Distinct leaf hashes for a tree of `size` leaves.
fn tree(size: usize, seed: u64) -> Vec<Hash> {
    (0..size as u64)
        .map(|i| leaf_hash(&[seed.to_be_bytes(), i.to_be_bytes()].concat()))
        .collect()
}

proptest! {
    // Each case builds every proof of a tree of up to 200 leaves: few cases
    // cover the sizes well enough.
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn every_proof_verifies_and_no_corrupted_one_does(
        size in 1usize..200,
        seed in any::<u64>(),
        pick in any::<prop::sample::Index>(),
        byte in 0usize..32,
    ) {
        let leaves = tree(size, seed);
        let n = size as u64;
        let whole = root(&leaves);
        let mut frontier = Frontier::new();
        prop_assert_eq!(frontier.root(), root(&[]));
        for (i, leaf) in leaves.iter().enumerate() {
            frontier.push(*leaf);
            prop_assert_eq!(frontier.root(), root(&leaves[..=i]));
            prop_assert_eq!(frontier.size(), i as u64 + 1);
        }
        for index in 0..n {
            let leaf = &leaves[index as usize];
            let proof = inclusion_proof(&leaves, index).unwrap();
            prop_assert!(verify_inclusion(leaf, index, n, &proof, &whole));
            if n > 1 {
                prop_assert!(!verify_inclusion(leaf, (index + 1) % n, n, &proof, &whole));
            }
            prop_assert!(!verify_inclusion(leaf, index + n, n, &proof, &whole));
            if !proof.is_empty() {
                let mut flipped = proof.clone();
                flipped[pick.index(proof.len())][byte] ^= 1;
                prop_assert!(!verify_inclusion(leaf, index, n, &flipped, &whole));
            }
        }
        for old in 0..=n {
            let old_root = root(&leaves[..old as usize]);
            let proof = consistency_proof(&leaves, old).unwrap();
            prop_assert!(verify_consistency(old, n, &old_root, &whole, &proof));
            if !proof.is_empty() {
                let mut flipped = proof.clone();
                flipped[pick.index(proof.len())][byte] ^= 1;
                prop_assert!(!verify_consistency(old, n, &old_root, &whole, &flipped));
                prop_assert!(!verify_consistency(old, n, &whole, &old_root, &proof));
            }
        }
    }
}
