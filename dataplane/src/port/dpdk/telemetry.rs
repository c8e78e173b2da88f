//! Commands on DPDK's telemetry socket (`rte_telemetry_register_cmd`), answered by Rust
//! closures: `dpdk-telemetry.py` and any other client of `/var/run/dpdk/<prefix>/
//! dpdk_telemetry.v2` reach ddpdk's own figures next to DPDK's (`/ethdev/stats`, ...).
//!
//! DPDK calls a command's callback on its telemetry thread, with no context pointer: one
//! trampoline looks the command up in a process-wide table of handlers. A command stays
//! registered with DPDK for the life of the EAL (DPDK has no unregister); [`unregister`]
//! makes it answer with an error instead, so a handler never outlives what it reads.
//!
//! DPDK 22.11's data model is a dict (or array) of scalars, where a value may also be an array
//! of scalars; [`TelValue::Dict`] nests, and nested dicts are flattened into names joined with
//! `/` (`core/0/frames_in`), the separator DPDK's own names use.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::{Arc, Mutex};

use dpdk_sys as sys;

/// A value a telemetry command answers with.
#[derive(Debug, Clone, PartialEq)]
pub enum TelValue {
    U64(u64),
    Int(i64),
    Str(String),
    /// Scalars (U64, Int or Str) of one kind; anything else is sent as strings.
    List(Vec<TelValue>),
    Dict(Vec<(String, TelValue)>),
}

/// What a command runs with its parameters (the text after the comma, "" when none).
pub type Handler = Arc<dyn Fn(&str) -> Result<TelValue, String> + Send + Sync>;

/// The handlers, by command; a command DPDK knows but that is not here answers an error.
static HANDLERS: Mutex<BTreeMap<String, Handler>> = Mutex::new(BTreeMap::new());
/// The commands registered with DPDK (once each: it refuses a second registration).
static REGISTERED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// DPDK's limits (rte_telemetry.h, telemetry_data.h in 22.11).
const MAX_STRING: usize = 127;
const MAX_COMMAND: usize = 56;
const MAX_DICT_ENTRIES: usize = 256;
const MAX_ARRAY_ENTRIES: usize = 512;
const EINVAL: c_int = 22;
const ENOMEM: c_int = 12;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Answers `cmd` (which starts with `/`, e.g. `/ddpdk/stats`) with `handler` from now on.
/// Needs a running EAL with telemetry (the default; not with `--no-telemetry`).
pub fn register(cmd: &str, help: &str, handler: Handler) -> Result<(), String> {
    let c_cmd = CString::new(cmd).map_err(|_| format!("telemetry command {cmd:?}: NUL"))?;
    let c_help = CString::new(help).map_err(|_| format!("telemetry help of {cmd}: NUL"))?;
    // DPDK 22.11 refuses (EINVAL) a command of 56 bytes or more, or with characters other
    // than letters, digits, `_` and `/`, and help of 128 bytes or more.
    let name_ok = cmd.len() < MAX_COMMAND
        && cmd.starts_with('/')
        && cmd
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '/');
    if !name_ok || help.len() > MAX_STRING {
        return Err(format!(
            "telemetry command {cmd}: a name DPDK refuses, or help over {MAX_STRING} bytes"
        ));
    }
    lock(&HANDLERS).insert(cmd.to_string(), handler);
    let mut registered = lock(&REGISTERED);
    if registered.iter().any(|c| c == cmd) {
        return Ok(());
    }
    // SAFETY: both strings are NUL-terminated and DPDK 22.11 copies both into its own table;
    // `trampoline` has the telemetry_cb signature and lives as long as the program.
    let rc = unsafe {
        sys::rte_telemetry_register_cmd(c_cmd.as_ptr(), Some(trampoline), c_help.as_ptr())
    };
    if rc != 0 {
        lock(&HANDLERS).remove(cmd);
        return Err(format!("rte_telemetry_register_cmd({cmd}): error {rc}"));
    }
    registered.push(cmd.to_string());
    Ok(())
}

/// `cmd` answers "not available" from now on (its owner is gone).
pub fn unregister(cmd: &str) {
    lock(&HANDLERS).remove(cmd);
}

/// The one callback DPDK calls for every command registered here.
unsafe extern "C" fn trampoline(
    cmd: *const c_char,
    params: *const c_char,
    d: *mut sys::rte_tel_data,
) -> c_int {
    // SAFETY: DPDK passes the NUL-terminated command it matched and its parameters (or NULL).
    let cmd = unsafe { CStr::from_ptr(cmd) }.to_string_lossy();
    let params = if params.is_null() {
        String::new()
    } else {
        // SAFETY: non-null, NUL-terminated, valid for this call.
        unsafe { CStr::from_ptr(params) }
            .to_string_lossy()
            .into_owned()
    };
    let handler = lock(&HANDLERS).get(cmd.as_ref()).cloned();
    let answer = match handler {
        // A panic in a handler must not cross into C (and unwind is abort here anyway).
        Some(h) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h(&params)))
            .unwrap_or_else(|_| Err("the handler failed".into())),
        None => Err("not available: the part of ddpdk that answers it has stopped".into()),
    };
    let value = answer.unwrap_or_else(|e| TelValue::Dict(vec![("error".into(), TelValue::Str(e))]));
    // SAFETY: `d` is the data structure DPDK passed for this call's answer.
    unsafe { fill(d, &value) }
}

/// Writes `v` into `d`. Returns 0, or a negative errno when DPDK refused an entry.
///
/// # Safety
/// `d` must be a valid `rte_tel_data` DPDK handed to a callback (or one from
/// `rte_tel_data_alloc`).
unsafe fn fill(d: *mut sys::rte_tel_data, v: &TelValue) -> c_int {
    match v {
        TelValue::Dict(entries) => {
            // SAFETY: per this function's contract.
            let rc = unsafe { sys::rte_tel_data_start_dict(d) };
            if rc != 0 {
                return rc;
            }
            let mut flat = Vec::new();
            flatten("", entries, &mut flat);
            for (name, value) in flat.iter().take(MAX_DICT_ENTRIES) {
                // SAFETY: `d` is a started dict. An entry DPDK refuses is left out rather than
                // failing the answer, which would leak the containers added so far.
                let _ = unsafe { add_to_dict(d, name, value) };
            }
            0
        }
        TelValue::List(items) => {
            // SAFETY: per this function's contract.
            unsafe { fill_array(d, items) }
        }
        scalar => {
            let text = CString::new(clip(&scalar_text(scalar))).unwrap_or_default();
            // SAFETY: `d` per the contract; the string is NUL-terminated and copied by DPDK.
            unsafe { sys::rte_tel_data_string(d, text.as_ptr()) }
        }
    }
}

/// Nested dicts as `(a/b/c, scalar or list)` pairs, in order.
fn flatten<'a>(
    prefix: &str,
    entries: &'a [(String, TelValue)],
    out: &mut Vec<(String, &'a TelValue)>,
) {
    for (k, v) in entries {
        let name = if prefix.is_empty() {
            sanitize(k)
        } else {
            format!("{prefix}/{}", sanitize(k))
        };
        match v {
            TelValue::Dict(inner) => flatten(&name, inner, out),
            other => out.push((name, other)),
        }
    }
}

/// DPDK accepts only alphanumerics, `_` and `/` in names.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '/' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn scalar_text(v: &TelValue) -> String {
    match v {
        TelValue::U64(x) => x.to_string(),
        TelValue::Int(x) => x.to_string(),
        TelValue::Str(s) => s.clone(),
        TelValue::List(_) | TelValue::Dict(_) => String::new(),
    }
}

/// At most DPDK's string length, cut at a character boundary, without NULs.
fn clip(s: &str) -> String {
    let mut end = s.len().min(MAX_STRING);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].replace('\0', "")
}

/// # Safety
/// `d` must be a started dict of a valid `rte_tel_data`.
unsafe fn add_to_dict(d: *mut sys::rte_tel_data, name: &str, v: &TelValue) -> c_int {
    let Ok(c_name) = CString::new(clip(name)) else {
        return -EINVAL;
    };
    let n = c_name.as_ptr();
    match v {
        TelValue::U64(x) => {
            // SAFETY: `d` is a started dict; DPDK copies the NUL-terminated name.
            unsafe { sys::rte_tel_data_add_dict_u64(d, n, *x) }
        }
        TelValue::Int(x) if i32::try_from(*x).is_ok() => {
            // SAFETY: as above.
            unsafe { sys::rte_tel_data_add_dict_int(d, n, *x as i32) }
        }
        TelValue::Int(_) | TelValue::Str(_) => {
            let text = CString::new(clip(&scalar_text(v))).unwrap_or_default();
            // SAFETY: as above; the value string is NUL-terminated and copied too.
            unsafe { sys::rte_tel_data_add_dict_string(d, n, text.as_ptr()) }
        }
        TelValue::List(items) => {
            // SAFETY: a fresh container, handed to the dict, which frees it (keep = 0); freed
            // here if it cannot be filled or added.
            unsafe {
                let c = sys::rte_tel_data_alloc();
                if c.is_null() {
                    return -ENOMEM;
                }
                let rc = fill_array(c, items);
                if rc != 0 {
                    sys::rte_tel_data_free(c);
                    return rc;
                }
                let rc = sys::rte_tel_data_add_dict_container(d, n, c, 0);
                // A positive rc (E2BIG: the name was cut) means the dict took the container.
                if rc < 0 {
                    sys::rte_tel_data_free(c);
                }
                rc
            }
        }
        TelValue::Dict(_) => 0, // flattened by the caller
    }
}

/// # Safety
/// `d` must be a valid `rte_tel_data` not yet started.
unsafe fn fill_array(d: *mut sys::rte_tel_data, items: &[TelValue]) -> c_int {
    let all_u64 = items.iter().all(|i| matches!(i, TelValue::U64(_)));
    let kind = if all_u64 && !items.is_empty() {
        sys::RTE_TEL_U64_VAL
    } else {
        sys::RTE_TEL_STRING_VAL
    };
    // SAFETY: per the contract.
    let rc = unsafe { sys::rte_tel_data_start_array(d, kind) };
    if rc != 0 {
        return rc;
    }
    for item in items.iter().take(MAX_ARRAY_ENTRIES) {
        let rc = match item {
            // SAFETY: `d` is a started array of the matching kind.
            TelValue::U64(x) if all_u64 => unsafe { sys::rte_tel_data_add_array_u64(d, *x) },
            other => {
                let text = CString::new(clip(&scalar_text(other))).unwrap_or_default();
                // SAFETY: as above; the string is copied.
                unsafe { sys::rte_tel_data_add_array_string(d, text.as_ptr()) }
            }
        };
        if rc != 0 {
            return rc;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_dicts_flatten_into_slash_names_dpdk_accepts() {
        let v = vec![
            (
                "core".to_string(),
                TelValue::Dict(vec![(
                    "0".into(),
                    TelValue::Dict(vec![("frames in".into(), TelValue::U64(3))]),
                )]),
            ),
            ("state".to_string(), TelValue::Str("ESTABLISHED".into())),
        ];
        let mut flat = Vec::new();
        flatten("", &v, &mut flat);
        let names: Vec<&str> = flat.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["core/0/frames_in", "state"]);
    }

    #[test]
    fn strings_are_clipped_at_a_character_boundary() {
        let s = "é".repeat(100); // 200 bytes
        let c = clip(&s);
        assert!(c.len() <= MAX_STRING);
        assert!(c.chars().all(|ch| ch == 'é'));
    }
}
