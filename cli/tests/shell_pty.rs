//! The interactive shell as a person meets it: `ddpdk -i` with a real pseudo-terminal on its
//! standard input and output, where rustyline edits lines. Every other test drives the shell
//! from a pipe or a file, which takes a different path (no line editor), so none of them saw
//! `ddpdk -i` abort at a terminal the moment it loaded its history file.

use std::path::Path;
use std::process::Command;

use rexpect::session::{spawn_command, PtySession};

const BIN: &str = env!("CARGO_BIN_EXE_ddpdk");
const PROMPT: &str = "ddpdk> ";
/// Generous: a debug build initialises the EAL and two net_ring ports before the prompt.
const TIMEOUT_MS: u64 = 30_000;

/// `ddpdk -i` on a net_ring pair (no NIC, no hugepages) with `home` as its HOME, under a pty.
fn shell(home: &Path) -> PtySession {
    let mut c = Command::new(BIN);
    c.args([
        "-l",
        "0-1",
        "--no-huge",
        "-m",
        "256",
        "--no-shconf",
        "--no-pci",
        "--log-level=*:error",
        "--",
        "-i",
        "--ring-pair",
    ])
    .env("HOME", home)
    .env("TERM", "xterm");
    let mut p = spawn_command(c, Some(TIMEOUT_MS)).expect("spawn ddpdk -i under a pty");
    p.exp_string(PROMPT)
        .expect("the prompt at a terminal (the shell must not abort on start)");
    p
}

/// Ends the session with `quit` and waits for the process to exit.
fn quit(mut p: PtySession) -> String {
    p.send_line("quit").expect("send quit");
    let rest = p.exp_eof().expect("ddpdk exits after quit");
    assert!(
        !rest.contains("panicked") && !rest.contains("not implemented"),
        "the shell panicked:\n{rest}"
    );
    rest
}

/// At a terminal: the prompt comes, a command runs, Tab completes from the shell grammar, and
/// the history is saved to `~/.ddpdk_history` and offered again (Up) by the next run.
#[test]
fn interactive_shell_at_a_terminal_has_prompt_history_and_completion() {
    let home = std::env::temp_dir().join(format!("ddpdk-pty-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home).expect("temporary HOME");

    // First run: a command typed whole, then one completed by Tab ("show con" + Tab -> "show
    // config ", which only completion can write, since "fwd" alone is not a command).
    let mut p = shell(&home);
    p.send_line("show config fwd").expect("type a command");
    p.exp_string("packet forwarding - ports=2")
        .expect("the command's output");
    p.exp_string(PROMPT).expect("the next prompt");
    p.send("show con\t").expect("type and press Tab");
    p.flush().expect("flush");
    p.exp_string("config ").expect("Tab completed the word");
    p.send_line("fwd").expect("finish the completed command");
    p.exp_string("packet forwarding - ports=2")
        .expect("the completed command ran");
    p.exp_string(PROMPT).expect("the next prompt");
    // A line with a key is run but never written to the history file.
    p.send_line("ipsec sa add out 1000 aead_algo aes-128-gcm aead_key 0x00112233")
        .expect("a line with a key");
    p.exp_string("not a DDP endpoint").expect("refused here");
    p.exp_string(PROMPT).expect("the next prompt");
    p.send_line("show port info 0").expect("a third command");
    p.exp_string("Infos for port 0").expect("port info");
    p.exp_string(PROMPT).expect("the next prompt");
    quit(p);

    let history = std::fs::read_to_string(home.join(".ddpdk_history")).expect("history file");
    assert!(
        history.lines().any(|l| l == "show port info 0")
            && history.lines().any(|l| l == "show config fwd")
            && history.lines().last() == Some("quit"),
        "history file holds the session's commands:\n{history}"
    );
    assert!(
        !history.contains("aead_key"),
        "a key in the history:\n{history}"
    );

    // Second run: Up recalls the first run's commands, newest first ("quit", then the one
    // before it), and Enter runs the recalled line.
    let mut p = shell(&home);
    p.send("\x1b[A").expect("press Up");
    p.flush().expect("flush");
    p.exp_string("quit")
        .expect("Up recalls the previous run's last line");
    p.send("\x1b[A").expect("press Up again");
    p.flush().expect("flush");
    p.exp_string("show port info 0")
        .expect("Up again recalls the line before it");
    p.send_line("").expect("press Enter");
    p.exp_string("Infos for port 0")
        .expect("the recalled command ran");
    p.exp_string(PROMPT).expect("the next prompt");
    quit(p);

    let _ = std::fs::remove_dir_all(&home);
}
