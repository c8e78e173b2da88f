//! Issue 16 item 3: the SCTP protocol parameters are settable, as in every SCTP stack
//! (RFC 9260 §16): `--sctp NAME=VALUE` at start-up, `set sctp NAME VALUE` in the shell,
//! `show config sctp`; limits refused with an error that names the rule; a setting takes
//! effect on the associations made after it.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

fn eal() -> Vec<String> {
    [
        "-l",
        "0-1",
        "--no-huge",
        "-m",
        "256",
        "--no-shconf",
        "--no-pci",
        "--log-level=*:error",
        // --no-shconf keeps each process's ring device its own.
        "--vdev=net_ring0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn a_bad_sctp_option_is_refused_before_the_eal_runs() {
    for (arg, want) in [
        ("path_max_retries=5", "one of: rto_initial_ms"),
        ("sack_delay_ms=600", "1..=500"),
        ("max_burst", "NAME=VALUE"),
        ("rto_min_ms=70000", "rto_min <= rto_max"),
        // As the other options say a negative number (docs/usage.md).
        (
            "max_burst=-1",
            "-1 is negative: it takes a whole number from 1 to 65535",
        ),
    ] {
        let o = Command::new(BIN)
            .args(eal())
            .args(["--", "--ip", "198.18.0.1", "--sctp", arg])
            .stdin(Stdio::null())
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "--sctp {arg}: {err}");
        assert!(err.contains(want), "--sctp {arg}: {err}");
    }
}

#[test]
fn shell_sets_shows_and_applies_sctp_parameters_9260_16() {
    let mut child = Command::new(BIN)
        .args(eal())
        .args(["--", "--ip", "198.18.0.1", "--sctp", "max_burst=6", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Nobody is at 198.18.0.9: with Max.Init.Retransmits 1 and RTO.Initial 20 ms an
    // association fails after two INITs, in about 60 ms, where the defaults wait 8 of them.
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(
            b"show config sctp\nset sctp max_burst 8\nset sctp sack_delay_ms 600\n\
              set sctp hb_interval_ms -5\n\
              set sctp rto_min_ms 20\nset sctp rto_initial_ms 20\n\
              set sctp max_init_retransmits 1\nshow config sctp\n\
              assoc open 198.18.0.9\nassoc open 198.18.0.9\nquit\n",
        )
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "the refused set fails the run:\n{out}"
    );
    let value = |text: &str, name: &str| -> Option<u64> {
        text.lines()
            .find(|l| l.trim_start().starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let shows: Vec<&str> = out
        .split("SCTP parameters (new associations):")
        .skip(1)
        .collect();
    assert_eq!(shows.len(), 2, "{out}");
    assert_eq!(value(shows[0], "max_burst"), Some(6), "--sctp max_burst=6");
    assert_eq!(value(shows[0], "max_init_retransmits"), Some(8));
    assert_eq!(
        value(shows[1], "max_burst"),
        Some(8),
        "set sctp max_burst 8"
    );
    assert_eq!(value(shows[1], "max_init_retransmits"), Some(1));
    assert_eq!(value(shows[1], "sack_delay_ms"), Some(200), "600 refused");
    assert!(out.contains("600 is outside 1..=500 ms"), "{out}");
    // Refused as a negative number, not as an unknown option of the shell's parser.
    assert!(
        out.contains("-5 is negative: it takes a whole number"),
        "{out}"
    );
    // Both opens end by Max.Init.Retransmits; the second is a new association, not refused
    // as a second one to the same peer (the first is closed).
    assert_eq!(
        out.matches("closed: no answer to INIT or COOKIE ECHO")
            .count(),
        2,
        "{out}"
    );
    assert!(!out.contains("exists already"), "{out}");
}
