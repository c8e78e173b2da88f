//! The interactive command language, testpmd style. Each shell line is parsed with clap, so the
//! grammar, its errors and `help` come from one declaration.

use std::fmt;
use std::str::FromStr;

use clap::{Parser, Subcommand, ValueEnum};
use ddpdk_dataplane::fwd::FwdMode;

/// `N` or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortTarget {
    All,
    Port(u16),
}

impl FromStr for PortTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(PortTarget::All);
        }
        s.parse::<u16>()
            .map(PortTarget::Port)
            .map_err(|_| format!("'{s}' is not a port id or 'all'"))
    }
}

impl fmt::Display for PortTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortTarget::All => f.write_str("all"),
            PortTarget::Port(p) => write!(f, "{p}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PortShow {
    /// Device, driver, MAC, queues, link.
    Info,
    /// testpmd-style counters with rates since the last show.
    Stats,
    /// Extended (driver) statistics.
    Xstats,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Io,
    Rxonly,
    Txonly,
}

impl From<ModeArg> for FwdMode {
    fn from(m: ModeArg) -> FwdMode {
        match m {
            ModeArg::Io => FwdMode::Io,
            ModeArg::Rxonly => FwdMode::RxOnly,
            ModeArg::Txonly => FwdMode::TxOnly,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TxFirst {
    /// Send one burst on every stream before forwarding (seeds `io` loops).
    #[value(name = "tx_first")]
    TxFirst,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HelpSection {
    Control,
    Display,
    Config,
    Ports,
    All,
}

/// One shell command.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum Command {
    /// Start packet forwarding on the data lcores.
    Start {
        #[arg(value_enum)]
        tx_first: Option<TxFirst>,
    },
    /// Stop packet forwarding and print the forwarding statistics.
    Stop,
    /// Display information.
    Show {
        #[command(subcommand)]
        what: ShowCmd,
    },
    /// Clear counters.
    Clear {
        #[command(subcommand)]
        what: ClearCmd,
    },
    /// Change the configuration (forwarding stopped).
    Set {
        #[command(subcommand)]
        what: SetCmd,
    },
    /// Show help, for one section or all.
    Help {
        #[arg(value_enum)]
        section: Option<HelpSection>,
    },
    /// Stop forwarding, close the ports and exit.
    #[command(alias = "exit")]
    Quit,
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ShowCmd {
    /// show port (info|stats|xstats) (N|all)
    Port {
        #[arg(value_enum)]
        what: PortShow,
        target: PortTarget,
    },
    /// show config fwd
    Config {
        #[command(subcommand)]
        what: ShowConfigCmd,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ShowConfigCmd {
    /// The forwarding mode and the (port, queue, lcore) streams.
    Fwd,
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ClearCmd {
    /// clear port stats (N|all)
    Port {
        #[command(subcommand)]
        what: ClearPortCmd,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum ClearPortCmd {
    /// Reset the port's counters.
    Stats { target: PortTarget },
}

#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
pub enum SetCmd {
    /// set fwd (io|rxonly|txonly)
    Fwd {
        #[arg(value_enum)]
        mode: ModeArg,
    },
}

#[derive(Debug, Parser)]
#[command(
    name = "ddpdk>",
    no_binary_name = true,
    disable_help_subcommand = true,
    disable_help_flag = true,
    disable_version_flag = true
)]
struct Line {
    #[command(subcommand)]
    cmd: Command,
}

/// Parses one shell line. `Ok(None)` for a blank line or a comment (`#`).
/// Errors are one line, meant to be printed as they are.
pub fn parse_line(line: &str) -> Result<Option<Command>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let words = line.split_whitespace();
    Line::try_parse_from(words)
        .map(|l| Some(l.cmd))
        .map_err(|e| {
            let rendered = e.render().to_string();
            let first = rendered
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("bad command");
            let first = first.trim_start_matches("error: ").trim();
            format!("Bad command '{line}': {first} (try 'help')")
        })
}

/// The help text of a section.
pub fn help(section: Option<HelpSection>) -> String {
    const CONTROL: &str = "\
Control:
  start [tx_first]                     Start forwarding (tx_first: send one burst first).
  stop                                 Stop forwarding and print forwarding statistics.
  quit | exit                          Stop, close all ports and exit.
";
    const DISPLAY: &str = "\
Display:
  show port info (N|all)               Device, driver, socket, MAC, queues, link.
  show port stats (N|all)              Counters and the rates since the last show.
  show port xstats (N|all)             Extended statistics of the driver.
  show config fwd                      Forwarding mode, burst, and the lcore streams.
";
    const CONFIG: &str = "\
Configuration:
  set fwd (io|rxonly|txonly)           Forwarding engine for the next start.
";
    const PORTS: &str = "\
Ports:
  clear port stats (N|all)             Reset the counters of a port.
";
    match section {
        None => "\
Help is available for the following sections:

  help control                         Start and stop forwarding.
  help display                         Displaying port, stats and configuration.
  help config                          Configuration.
  help ports                           Port counters.
  help all                             All of the above.
"
        .to_string(),
        Some(HelpSection::Control) => CONTROL.into(),
        Some(HelpSection::Display) => DISPLAY.into(),
        Some(HelpSection::Config) => CONFIG.into(),
        Some(HelpSection::Ports) => PORTS.into(),
        Some(HelpSection::All) => [CONTROL, DISPLAY, CONFIG, PORTS].join("\n"),
    }
}

/// The words that may follow `words` (the complete words typed so far), for tab completion.
pub fn next_words(words: &[&str]) -> Vec<&'static str> {
    const PORT_ARGS: &[&str] = &["all", "0", "1"];
    match words {
        [] => vec![
            "start", "stop", "show", "clear", "set", "help", "quit", "exit",
        ],
        ["start"] => vec!["tx_first"],
        ["show"] => vec!["port", "config"],
        ["show", "port"] => vec!["info", "stats", "xstats"],
        ["show", "port", _] => PORT_ARGS.to_vec(),
        ["show", "config"] => vec!["fwd"],
        ["clear"] => vec!["port"],
        ["clear", "port"] => vec!["stats"],
        ["clear", "port", "stats"] => PORT_ARGS.to_vec(),
        ["set"] => vec!["fwd"],
        ["set", "fwd"] => vec!["io", "rxonly", "txonly"],
        ["help"] => vec!["control", "display", "config", "ports", "all"],
        _ => Vec::new(),
    }
}

/// Completion candidates for the partial `line` (cursor at its end): the start offset of the
/// word being completed and the matching words.
pub fn complete(line: &str) -> (usize, Vec<&'static str>) {
    // The word being completed starts after the last whitespace character, whatever its width
    // in UTF-8 (a no-break space is two bytes).
    let start = line
        .char_indices()
        .rfind(|(_, c)| c.is_whitespace())
        .map_or(0, |(i, c)| i + c.len_utf8());
    let done: Vec<&str> = line[..start].split_whitespace().collect();
    let partial = &line[start..];
    let cands = next_words(&done)
        .into_iter()
        .filter(|w| w.starts_with(partial))
        .collect();
    (start, cands)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> Command {
        parse_line(line).expect("parses").expect("not blank")
    }

    #[test]
    fn every_command_parses() {
        assert_eq!(ok("start"), Command::Start { tx_first: None });
        assert_eq!(
            ok("start tx_first"),
            Command::Start {
                tx_first: Some(TxFirst::TxFirst)
            }
        );
        assert_eq!(ok("stop"), Command::Stop);
        for (w, k) in [
            ("info", PortShow::Info),
            ("stats", PortShow::Stats),
            ("xstats", PortShow::Xstats),
        ] {
            assert_eq!(
                ok(&format!("show port {w} all")),
                Command::Show {
                    what: ShowCmd::Port {
                        what: k,
                        target: PortTarget::All
                    }
                }
            );
            assert_eq!(
                ok(&format!("show port {w} 3")),
                Command::Show {
                    what: ShowCmd::Port {
                        what: k,
                        target: PortTarget::Port(3)
                    }
                }
            );
        }
        assert_eq!(
            ok("clear port stats 1"),
            Command::Clear {
                what: ClearCmd::Port {
                    what: ClearPortCmd::Stats {
                        target: PortTarget::Port(1)
                    }
                }
            }
        );
        assert_eq!(
            ok("clear port stats all"),
            Command::Clear {
                what: ClearCmd::Port {
                    what: ClearPortCmd::Stats {
                        target: PortTarget::All
                    }
                }
            }
        );
        assert_eq!(
            ok("show config fwd"),
            Command::Show {
                what: ShowCmd::Config {
                    what: ShowConfigCmd::Fwd
                }
            }
        );
        for (w, m) in [
            ("io", ModeArg::Io),
            ("rxonly", ModeArg::Rxonly),
            ("txonly", ModeArg::Txonly),
        ] {
            assert_eq!(
                ok(&format!("set fwd {w}")),
                Command::Set {
                    what: SetCmd::Fwd { mode: m }
                }
            );
        }
        assert_eq!(ok("help"), Command::Help { section: None });
        assert_eq!(
            ok("help display"),
            Command::Help {
                section: Some(HelpSection::Display)
            }
        );
        assert_eq!(ok("quit"), Command::Quit);
        assert_eq!(ok("exit"), Command::Quit);
        assert_eq!(ok("   show   port stats   0  "), ok("show port stats 0"));
    }

    #[test]
    fn blank_lines_and_comments_are_not_commands() {
        assert_eq!(parse_line(""), Ok(None));
        assert_eq!(parse_line("   "), Ok(None));
        assert_eq!(parse_line("# a comment"), Ok(None));
    }

    #[test]
    fn bad_lines_give_one_line_errors() {
        for bad in [
            "frobnicate",
            "show",
            "show port",
            "show port stats",
            "show port stats x",
            "show port stats 70000",
            "show port frob 0",
            "set fwd mac",
            "start now",
            "clear port stats",
            "quit now",
            "help nothing",
        ] {
            let e = parse_line(bad).expect_err(bad);
            assert!(!e.contains('\n'), "multi-line error for {bad:?}: {e}");
            assert!(e.starts_with(&format!("Bad command '{bad}'")), "{e}");
        }
        let e = parse_line("show port stats x").expect_err("bad port");
        assert!(e.contains("'x' is not a port id or 'all'"), "{e}");
    }

    #[test]
    fn help_sections_name_their_commands() {
        assert!(help(Some(HelpSection::Display)).contains("show port stats (N|all)"));
        assert!(help(Some(HelpSection::Control)).contains("start [tx_first]"));
        let all = help(Some(HelpSection::All));
        for cmd in [
            "start",
            "stop",
            "quit",
            "show port xstats",
            "show config fwd",
            "set fwd",
            "clear port stats",
        ] {
            assert!(all.contains(cmd), "help all lacks {cmd}");
        }
    }

    #[test]
    fn completion_follows_the_grammar() {
        assert_eq!(complete("sh"), (0, vec!["show"]));
        assert_eq!(complete("show port s"), (10, vec!["stats"]));
        assert_eq!(complete("show port stats "), (16, vec!["all", "0", "1"]));
        assert_eq!(complete("set fwd "), (8, vec!["io", "rxonly", "txonly"]));
        assert_eq!(complete("st"), (0, vec!["start", "stop"]));
        assert!(complete("quit ").1.is_empty());
        // Multi-byte whitespace before the cursor must not split a character.
        assert_eq!(complete("show\u{a0}po"), (6, vec!["port"]));
        assert_eq!(complete("show\u{3000}"), (7, vec!["port", "config"]));
        // Every completed command is one the parser accepts.
        for line in [
            "show port info all",
            "clear port stats all",
            "set fwd rxonly",
            "start tx_first",
            "help all",
        ] {
            assert!(parse_line(line).is_ok(), "{line}");
        }
    }
}
