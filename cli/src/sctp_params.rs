//! The SCTP protocol parameters an operator sets, as every SCTP stack exposes them (RFC 9260
//! §16; usrsctp's sysctls, Linux's `net.sctp.*`): `--sctp NAME=VALUE` at start-up, `set sctp
//! NAME VALUE` in the shell (for associations made after it, as a sysctl does), `show config
//! sctp`. The endpoint is single-homed: Path.Max.Retrans reports its one path inactive (§8.2)
//! while Association.Max.Retrans is what ends the association (§8.1).

use std::time::Duration;

use ddpdk_dataplane::sctp::Config;

/// One settable parameter: its name, what it is in RFC 9260's words, its unit and range.
#[derive(Debug)]
pub struct Param {
    pub name: &'static str,
    pub what: &'static str,
    pub unit: &'static str,
    pub min: u64,
    pub max: u64,
    get: fn(&Config) -> u64,
    set: fn(&mut Config, u64),
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Every settable parameter, in the order `show config sctp` prints them.
pub const PARAMS: &[Param] = &[
    Param {
        name: "rto_initial_ms",
        what: "RTO.Initial (§6.3.1)",
        unit: "ms",
        min: 1,
        max: 3_600_000,
        get: |c| ms(c.rto_initial),
        set: |c, v| c.rto_initial = Duration::from_millis(v),
    },
    Param {
        name: "rto_min_ms",
        what: "RTO.Min (§6.3.1 C6)",
        unit: "ms",
        min: 1,
        max: 3_600_000,
        get: |c| ms(c.rto_min),
        set: |c, v| c.rto_min = Duration::from_millis(v),
    },
    Param {
        name: "rto_max_ms",
        what: "RTO.Max (§6.3.1 C7)",
        unit: "ms",
        min: 1,
        max: 3_600_000,
        get: |c| ms(c.rto_max),
        set: |c, v| c.rto_max = Duration::from_millis(v),
    },
    Param {
        name: "max_init_retransmits",
        what: "Max.Init.Retransmits (§5.1)",
        unit: "",
        min: 1,
        max: 255,
        get: |c| u64::from(c.max_init_retransmits),
        set: |c, v| c.max_init_retransmits = v as u32,
    },
    Param {
        name: "assoc_max_retrans",
        what: "Association.Max.Retrans (§8.1)",
        unit: "",
        min: 1,
        max: 255,
        get: |c| u64::from(c.assoc_max_retrans),
        set: |c, v| c.assoc_max_retrans = v as u32,
    },
    Param {
        name: "path_max_retrans",
        what: "Path.Max.Retrans (§8.2): the path is reported inactive",
        unit: "",
        min: 1,
        max: 255,
        get: |c| u64::from(c.path_max_retrans),
        set: |c, v| c.path_max_retrans = v as u32,
    },
    Param {
        name: "valid_cookie_life_ms",
        what: "Valid.Cookie.Life (§5.1.3)",
        unit: "ms",
        min: 1,
        max: 3_600_000,
        get: |c| ms(c.valid_cookie_life),
        set: |c, v| c.valid_cookie_life = Duration::from_millis(v),
    },
    Param {
        name: "hb_interval_ms",
        what: "HB.interval (§8.3), 0: no heartbeats",
        unit: "ms",
        min: 0,
        max: 3_600_000,
        get: |c| c.hb_interval.map_or(0, ms),
        set: |c, v| c.hb_interval = (v > 0).then(|| Duration::from_millis(v)),
    },
    Param {
        name: "sack_delay_ms",
        what: "delayed SACK timeout (§6.2: at most 500 ms)",
        unit: "ms",
        min: 1,
        max: 500,
        get: |c| ms(c.sack_delay),
        set: |c, v| c.sack_delay = Duration::from_millis(v),
    },
    Param {
        name: "sack_freq",
        what: "a SACK at least every this many DATA packets (§6.2 SHOULD: 2)",
        unit: "",
        min: 1,
        max: 65_535,
        get: |c| u64::from(c.sack_freq),
        set: |c, v| c.sack_freq = v as u32,
    },
    Param {
        name: "max_burst",
        what: "Max.Burst (§6.1 D)",
        unit: "packets",
        min: 1,
        max: 65_535,
        get: |c| u64::from(c.max_burst),
        set: |c, v| c.max_burst = v as u32,
    },
    Param {
        name: "a_rwnd",
        what: "the receive window advertised at most (§6.2)",
        unit: "bytes",
        min: 1500,
        max: 1 << 30,
        get: |c| u64::from(c.a_rwnd),
        set: |c, v| c.a_rwnd = v as u32,
    },
];

fn find(name: &str) -> Result<&'static Param, String> {
    PARAMS.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = PARAMS.iter().map(|p| p.name).collect();
        format!("no SCTP parameter {name:?} (one of: {})", names.join(", "))
    })
}

/// `value` as parameter `p`'s: a whole number within its range, a count of bytes with a
/// binary unit for one in bytes (`a_rwnd=4M`, as `--region-bytes 4M`). One too large for any
/// number is out of range too, not "not a whole number".
fn value_of(p: &Param, name: &str, value: &str) -> Result<u64, String> {
    if p.unit == "bytes" {
        return crate::options::bytes::<u64>(p.min, p.max)(value)
            .map_err(|e| format!("SCTP parameter {name} ({}): {value}: {e}", p.what));
    }
    let out_of_range = || {
        format!(
            "SCTP parameter {name} ({}): {value} is outside {}..={}{}",
            p.what,
            p.min,
            p.max,
            unit_suffix(p)
        )
    };
    match value.parse::<u64>() {
        Ok(v) if (p.min..=p.max).contains(&v) => Ok(v),
        Ok(_) => Err(out_of_range()),
        Err(_) if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
            Err(out_of_range())
        }
        // As the command line's options say it (docs/usage.md), by the same rule.
        Err(_) if crate::options::is_negative(value) => Err(format!(
            "SCTP parameter {name} ({}): {value} is negative: it takes a whole number from {} \
             to {}{}",
            p.what,
            p.min,
            p.max,
            unit_suffix(p)
        )),
        Err(_) => Err(format!(
            "SCTP parameter {name}: {value:?} is not a whole number"
        )),
    }
}

/// Sets `name` to `value` in `cfg`: a number within the parameter's range, and a result the
/// association accepts (`Config::validate`: RTO.Min <= RTO.Initial <= RTO.Max, ...).
pub fn set(cfg: &mut Config, name: &str, value: &str) -> Result<(), String> {
    let p = find(name)?;
    let v = value_of(p, name, value)?;
    let mut next = *cfg;
    (p.set)(&mut next, v);
    check(&next).map_err(|e| format!("SCTP parameter {name} = {v}: {e}"))?;
    *cfg = next;
    Ok(())
}

/// What the association checks (`Config::validate`), and RTO.Initial within [RTO.Min,
/// RTO.Max], which it would otherwise clamp silently (§6.3.1 C6, C7).
fn check(cfg: &Config) -> Result<(), String> {
    cfg.validate()?;
    if cfg.rto_initial < cfg.rto_min || cfg.rto_initial > cfg.rto_max {
        return Err(format!(
            "need rto_min_ms <= rto_initial_ms <= rto_max_ms (now {} <= {} <= {})",
            ms(cfg.rto_min),
            ms(cfg.rto_initial),
            ms(cfg.rto_max)
        ));
    }
    Ok(())
}

/// Applies `NAME=VALUE` assignments, each within its range, then checks the result as a
/// whole: the order of the options does not matter.
pub fn apply(cfg: &mut Config, assignments: &[String]) -> Result<(), String> {
    let mut next = *cfg;
    for a in assignments {
        let (name, value) = a
            .split_once('=')
            .ok_or_else(|| format!("--sctp {a:?}: expected NAME=VALUE"))?;
        let (name, value) = (name.trim(), value.trim());
        let p = find(name)?;
        let v = value_of(p, name, value)?;
        (p.set)(&mut next, v);
    }
    check(&next).map_err(|e| format!("--sctp: {e}"))?;
    *cfg = next;
    Ok(())
}

fn unit_suffix(p: &Param) -> String {
    if p.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", p.unit)
    }
}

/// `show config sctp`: one line per parameter.
pub fn show_text(cfg: &Config) -> String {
    let mut s = String::from("SCTP parameters (new associations):\n");
    for p in PARAMS {
        s += &format!(
            "  {:<22} {:>10}{:<8} {}\n",
            p.name,
            (p.get)(cfg),
            unit_suffix(p),
            p.what
        );
    }
    s
}

/// `show config sctp` with `--json`: name to value.
pub fn show_json(cfg: &Config) -> serde_json::Value {
    let map: serde_json::Map<String, serde_json::Value> = PARAMS
        .iter()
        .map(|p| (p.name.to_string(), serde_json::Value::from((p.get)(cfg))))
        .collect();
    serde_json::json!({ "sctp_config": map })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // in a test, a failed unwrap is a failed test

    use super::*;

    /// A number too large for any parameter is out of range, not "not a whole number".
    #[test]
    fn a_huge_number_is_out_of_range() {
        let mut c = Config::default();
        let e = apply(&mut c, &["rto_min_ms=99999999999999999999999".into()]).unwrap_err();
        assert!(e.contains("is outside"), "{e}");
        let e = set(&mut c, "rto_min_ms", "99999999999999999999999").unwrap_err();
        assert!(e.contains("is outside"), "{e}");
        let e = set(&mut c, "rto_min_ms", "12a").unwrap_err();
        assert!(e.contains("not a whole number"), "{e}");
    }

    /// A parameter in bytes takes binary units, as every byte count of the command line and
    /// the shell does (`--sctp a_rwnd=4M` was "not a whole number"); junk and counts out of
    /// its range are refused, saying the range.
    #[test]
    fn a_parameter_in_bytes_takes_binary_units() {
        let mut c = Config::default();
        apply(&mut c, &["a_rwnd=4M".into()]).unwrap();
        assert_eq!(c.a_rwnd, 4 << 20);
        set(&mut c, "a_rwnd", "64K").unwrap();
        assert_eq!(c.a_rwnd, 64 << 10);
        set(&mut c, "a_rwnd", "1500").unwrap();
        assert_eq!(c.a_rwnd, 1500);
        let e = set(&mut c, "a_rwnd", "2G").unwrap_err();
        assert!(e.contains("a_rwnd") && e.contains("out of range"), "{e}");
        let e = set(&mut c, "a_rwnd", "4MB").unwrap_err();
        assert!(e.contains("1000 or of 1024"), "{e}");
        assert_eq!(c.a_rwnd, 1500, "a refused setting changes nothing");
    }

    #[test]
    fn every_parameter_round_trips_through_its_name() {
        for p in PARAMS {
            let mut c = Config::default();
            // A value inside the range that validate accepts in every field.
            let v = match p.name {
                "rto_initial_ms" | "rto_min_ms" => 1000,
                "rto_max_ms" => 60_000,
                "a_rwnd" => 65_536,
                "hb_interval_ms" => 0,
                _ => p.min.max(2),
            };
            set(&mut c, p.name, &v.to_string()).unwrap();
            assert_eq!((p.get)(&c), v, "{}", p.name);
        }
    }

    #[test]
    fn limits_are_refused_with_the_rule() {
        let mut c = Config::default();
        let before = c;
        let e = set(&mut c, "sack_delay_ms", "501").unwrap_err();
        assert!(e.contains("§6.2") && e.contains("1..=500"), "{e}");
        let e = set(&mut c, "rto_min_ms", "120000").unwrap_err();
        assert!(e.contains("rto_min <= rto_max"), "{e}");
        let e = set(&mut c, "max_burst", "x").unwrap_err();
        assert!(e.contains("whole number"), "{e}");
        let e = set(&mut c, "path_max_retries", "5").unwrap_err();
        assert!(e.contains("one of: rto_initial_ms"), "{e}");
        assert_eq!(c, before, "a refused setting changes nothing");
        let e = apply(&mut c, &["max_burst".into()]).unwrap_err();
        assert!(e.contains("NAME=VALUE"), "{e}");
        // The order of the assignments does not matter, only the result.
        apply(
            &mut c,
            &["rto_min_ms=2000".into(), "rto_initial_ms=3000".into()],
        )
        .unwrap();
        assert_eq!(c.rto_initial, Duration::from_secs(3));
        let e = apply(&mut c, &["rto_max_ms=1000".into()]).unwrap_err();
        assert!(e.contains("rto_min <= rto_max"), "{e}");
        let e = apply(&mut c, &["rto_initial_ms=1000".into()]).unwrap_err();
        assert!(
            e.contains("rto_min_ms <= rto_initial_ms <= rto_max_ms"),
            "{e}"
        );
        apply(
            &mut c,
            &["max_burst=16".into(), "hb_interval_ms=5000".into()],
        )
        .unwrap();
        assert_eq!(c.max_burst, 16);
        assert_eq!(c.hb_interval, Some(Duration::from_secs(5)));
        assert!(show_text(&c).contains("max_burst"));
        assert_eq!(show_json(&c)["sctp_config"]["max_burst"], 16);
    }
}
