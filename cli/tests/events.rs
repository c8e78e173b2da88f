//! Issue 17 item 4: with `--json`, the DDP shell reports what happens as one JSON object a
//! line on stdout (`{"event": ...}`), for scripts: associations up and down, sessions accepted,
//! established and terminated, STags revoked.

#![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

#[path = "common/procs.rs"]
mod procs;

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");

fn script(name: &str, body: &str) -> procs::Script {
    procs::script("ev", name, body)
}

/// The `{"event": ...}` objects among `stdout`'s lines, in order; every stdout line must be
/// JSON (notes go to stderr).
fn events(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .unwrap_or_else(|_| panic!("not JSON on stdout: {l:?}\n{stdout}"))
        })
        .filter(|v| v.get("event").is_some())
        .collect()
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

fn kinds(ev: &[serde_json::Value]) -> Vec<&str> {
    ev.iter().map(|e| e["event"].as_str().unwrap()).collect()
}

#[test]
fn the_json_shell_reports_association_session_and_stag_events() {
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ddpdk-ev-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("memif.sock");
    let eal = |role: &str, lcores: &str| {
        procs::memif_eal(
            role,
            lcores,
            &format!("ddpdk-ev-{role}-{pid}"),
            &sock,
            512,
            false,
        )
    };
    let server_cmds = script(
        "server",
        "mr reg 65536 remote-write\nsession offer last\nwait closed 55\nmr dereg last\nquit\n",
    );
    let client_cmds = script(
        "client",
        "assoc open 198.18.0.2\nsession open 1 1 hello\nsend tagged 1 1 offer 0 4096 4\n\
         session close 1 1\nassoc close 1\nquit\n",
    );
    let mut server = procs::spawn(
        BIN,
        &eal("server", "0@0,1@1"),
        &[
            "--ip",
            "198.18.0.2",
            "--listen",
            "--json",
            "--cmdline-file",
            path(&server_cmds),
        ],
    );
    let (_, server_err) = procs::read_until(server.stderr.take().unwrap(), "the server", |l| {
        l.contains("DDP endpoint on port")
    });
    let client = procs::spawn(
        BIN,
        &eal("client", "0@1,1@0"),
        &[
            "--ip",
            "198.18.0.1",
            "--json",
            "--cmdline-file",
            path(&client_cmds),
        ],
    )
    .wait_with_output()
    .unwrap();
    let server = server.wait_with_output().unwrap();
    let serr = server_err.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let cout = String::from_utf8_lossy(&client.stdout).into_owned();
    let sout = String::from_utf8_lossy(&server.stdout).into_owned();
    assert_eq!(
        client.status.code(),
        Some(0),
        "{cout}{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert_eq!(server.status.code(), Some(0), "{sout}{serr}");

    let c = events(&cout);
    let s = events(&sout);
    // The client: its association up, the session the peer accepted, both ends closed.
    let ck = kinds(&c);
    let at = |k: &[&str], what: &str| {
        k.iter()
            .position(|x| *x == what)
            .unwrap_or_else(|| panic!("no {what} in {k:?}"))
    };
    assert!(
        at(&ck, "association_up") < at(&ck, "session_established"),
        "{ck:?}"
    );
    assert!(
        at(&ck, "session_established") < at(&ck, "session_terminated"),
        "{ck:?}"
    );
    assert!(
        at(&ck, "session_terminated") < at(&ck, "association_down"),
        "{ck:?}"
    );
    let up = &c[at(&ck, "association_up")];
    assert_eq!(up["peer"], "198.18.0.2", "{up}");
    assert_eq!(up["assoc"], 1, "{up}");
    assert!(up["mulpdu"].as_u64().is_some_and(|m| m > 0), "{up}");
    let est = &c[at(&ck, "session_established")];
    assert_eq!(
        (&est["assoc"], &est["stream"]),
        (&1.into(), &1.into()),
        "{est}"
    );
    // The server: accepted the association and the session, saw them end, revoked its STag
    // with every data core acknowledging.
    let sk = kinds(&s);
    assert!(
        at(&sk, "association_accepted") < at(&sk, "session_accepted"),
        "{sk:?}"
    );
    assert!(
        at(&sk, "session_accepted") < at(&sk, "association_down"),
        "{sk:?}"
    );
    assert!(
        at(&sk, "association_down") < at(&sk, "stag_revoked"),
        "{sk:?}"
    );
    let acc = &s[at(&sk, "association_accepted")];
    assert_eq!(acc["peer"], "198.18.0.1", "{acc}");
    let revoked = &s[at(&sk, "stag_revoked")];
    assert!(
        revoked["stag"]
            .as_str()
            .is_some_and(|s| s.starts_with("0x")),
        "STags as everywhere else: {revoked}"
    );
    // One data core (lcore 1; the main lcore runs the shell).
    assert_eq!(revoked["cores_acknowledged"], 1, "{revoked}");
    assert_eq!(
        s[at(&sk, "association_down")]["reason"],
        "shutdown",
        "{sk:?}"
    );
}
