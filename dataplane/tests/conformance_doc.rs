//! `CONFORMANCE.md` (at the workspace root) maps every MUST, SHOULD and their negations of
//! RFC 5043 and RFC 5041, and the RFC 9260 rules the SCTP endpoint implements, to the tests
//! that prove them. This test keeps that map honest: every backticked name in its table rows
//! that looks like a test name (lowercase snake_case with an underscore, not a path) must be
//! defined as `fn NAME(` in some `.rs` file of the workspace's crates, and the tables of RFC
//! 5043 and RFC 5041 must not be empty.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::Path;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../CONFORMANCE.md");
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
/// The crates whose sources may define the tests the document cites.
const CRATES: [&str; 5] = ["dataplane", "control", "cli", "benches", "dpdk-sys"];

/// A backticked span that names a test: lowercase snake_case with at least one underscore
/// (so no path, no `::`, no `.`, no `/`, no space).
fn looks_like_a_test_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.contains('_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The table rows of the document: lines that start with `|`, without the separator rows.
fn table_rows(doc: &str) -> impl Iterator<Item = &str> {
    doc.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|') && !l.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ')))
}

/// The backticked spans of a line.
fn backticked(line: &str) -> impl Iterator<Item = &str> {
    line.split('`').skip(1).step_by(2)
}

/// Every `NAME` of `fn NAME(` in the `.rs` files under `dir`, skipping `target` directories.
fn collect_fns(dir: &Path, out: &mut HashSet<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                collect_fns(&path, out);
            }
        } else if name.ends_with(".rs") {
            let Ok(text) = fs::read_to_string(&path) else {
                continue;
            };
            for (at, _) in text.match_indices("fn ") {
                let before = text[..at].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                let rest = &text[at + 3..];
                let end = rest
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                if end > 0 && rest[end..].starts_with('(') {
                    out.insert(rest[..end].to_string());
                }
            }
        }
    }
}

/// How many rule rows (first cell a section number) each `## ` heading of the document has.
fn rule_rows_under(doc: &str, heading: &str) -> usize {
    let mut inside = false;
    let mut rows = 0;
    for line in doc.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            inside = h.contains(heading);
            continue;
        }
        let line = line.trim();
        if inside && line.starts_with('|') {
            let first = line.trim_start_matches('|').trim_start();
            if first.starts_with(|c: char| c.is_ascii_digit()) {
                rows += 1;
            }
        }
    }
    rows
}

#[test]
fn every_test_the_conformance_document_cites_exists() {
    let doc = fs::read_to_string(DOC).unwrap();
    let cited: BTreeSet<&str> = table_rows(&doc)
        .flat_map(backticked)
        .filter(|s| looks_like_a_test_name(s))
        .collect();
    assert!(!cited.is_empty(), "CONFORMANCE.md cites no test at all");

    let mut defined = HashSet::new();
    for krate in CRATES {
        collect_fns(&Path::new(WORKSPACE).join(krate), &mut defined);
    }
    let missing: Vec<&str> = cited
        .iter()
        .copied()
        .filter(|name| !defined.contains(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "CONFORMANCE.md cites {} test(s) that no `fn NAME(` defines:\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

#[test]
fn both_ddp_rfcs_have_rule_rows() {
    let doc = fs::read_to_string(DOC).unwrap();
    for rfc in ["RFC 5043", "RFC 5041"] {
        assert!(
            rule_rows_under(&doc, rfc) > 0,
            "CONFORMANCE.md has no rule rows under a `## ` heading naming {rfc}"
        );
    }
}

#[test]
fn the_name_filter_takes_test_names_only() {
    for yes in ["ordered_data_is_refused_5043_10", "a_b", "rfc5041_7_1_x"] {
        assert!(looks_like_a_test_name(yes), "{yes}");
    }
    for no in [
        "dataplane/src/ddp/tx.rs",
        "Connection::max_sizes",
        "ConnConfig",
        "a.b_c",
        "two words_x",
        "_leading",
        "plain",
        "--ipsec-socket",
    ] {
        assert!(!looks_like_a_test_name(no), "{no}");
    }
    let row = "| 5.1 | \"MUST appear\" | `a_test_1`, `sctp::Config`, `x/y_z.rs` |";
    assert_eq!(
        backticked(row).collect::<Vec<_>>(),
        ["a_test_1", "sctp::Config", "x/y_z.rs"]
    );
}
