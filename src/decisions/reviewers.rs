//! Who a reviewer is (DESIGN.md rule 13: "a reviewer is an authenticated person, not a typed
//! name"). With `[[reviewer]]` tables in the job file, a decision is recorded as the reviewer
//! the operating system says is acting: the OS user running `recon decisions apply`, or the
//! owner of an inbox sub-folder. `--actor` may only repeat that name. Without the tables the
//! actor is `--actor` or the login name as typed, and the job may not ask for two reviewers
//! (the config refuses `approvals = 2`).
//!
//! What this does not protect against: anyone who can act as another OS user (root, a
//! `sudo` rule), write to another reviewer's inbox folder or change its owner, edit the job
//! file, or write to recon's database (a database administrator can insert decisions and
//! history rows directly). Those are the operating system's and the database's controls.

use crate::config::{DecisionSettings, Reviewer};
use crate::exit::{Failure, fail};
use crate::textsafe::{bad_name, same_name, visible};
use anyhow::Result;

/// The OS user `uid`'s login name, if the system knows it.
#[cfg(unix)]
pub fn login_of(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: `passwd` is a plain C struct of pointers and integers: all zeroes is a valid
    // value, which getpwuid_r / getpwnam_r overwrite.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes into `pwd` and `buf`, both live for the call, and sets `out`
    // to `&pwd` or null; the name is read before either is dropped.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points into `buf`, NUL-terminated by getpwuid_r.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// The uid of OS user `login`, if the system knows it.
#[cfg(unix)]
pub fn uid_of(login: &str) -> Option<u32> {
    let c = std::ffi::CString::new(login).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: `passwd` is a plain C struct of pointers and integers: all zeroes is a valid
    // value, which getpwuid_r / getpwnam_r overwrite.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: as in `login_of`; `c` lives for the call.
    let rc =
        unsafe { libc::getpwnam_r(c.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out) };
    (rc == 0 && !out.is_null()).then_some(pwd.pw_uid)
}

/// The real uid of this process.
#[cfg(unix)]
pub fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(not(unix))]
pub fn login_of(_uid: u32) -> Option<String> {
    None
}
#[cfg(not(unix))]
pub fn uid_of(_login: &str) -> Option<u32> {
    None
}
#[cfg(not(unix))]
pub fn current_uid() -> u32 {
    u32::MAX
}

/// The reviewer OS user `uid` is: by `uid`, or by `login` (the login's uid, or the uid's
/// login name).
pub fn of_uid(reviewers: &[Reviewer], uid: u32) -> Option<&Reviewer> {
    let login = std::cell::OnceCell::new();
    reviewers.iter().find(|r| {
        r.uid == Some(uid)
            || r.login.as_deref().is_some_and(|l| {
                uid_of(l) == Some(uid) || login.get_or_init(|| login_of(uid)).as_deref() == Some(l)
            })
    })
}

/// `uid` as people read it: `alice (uid 1001)`.
pub fn describe_uid(uid: u32) -> String {
    match login_of(uid) {
        Some(l) => format!("{} (uid {uid})", visible(&l)),
        None => format!("uid {uid}"),
    }
}

/// The name a decision is recorded as, from a name the caller already authenticated (the
/// CLI's [`acting`], an inbox folder's owner): a valid name ([`bad_name`]), not `recon`, and,
/// with `[[reviewer]]`, one of them, spelt as configured (so `Alice` and `alice` are one
/// reviewer).
pub fn canonical(settings: &DecisionSettings, actor: &str) -> Result<String> {
    if let Some(why) = bad_name(actor) {
        return Err(fail(
            Failure::Config,
            format!("actor {:?}: {why}", visible(actor)),
        ));
    }
    if actor.eq_ignore_ascii_case("recon") {
        return Err(fail(
            Failure::Config,
            "actor \"recon\": `recon` is recon's own name in the history",
        ));
    }
    if settings.reviewers.is_empty() {
        return Ok(actor.to_string());
    }
    match settings
        .reviewers
        .iter()
        .find(|r| same_name(&r.name, actor))
    {
        Some(r) => Ok(r.name.clone()),
        None => Err(fail(
            Failure::Config,
            format!(
                "actor {:?} is not a reviewer of this job (hint: [[reviewer]] in the job file)",
                visible(actor)
            ),
        )),
    }
}

/// Who is deciding, for `recon decisions apply`: with `[[reviewer]]`, the reviewer this
/// process's OS user is (`--actor`, if given, must name that same reviewer); without, the
/// `--actor` or the login name (`USER`, then `LOGNAME`).
pub fn acting(settings: &DecisionSettings, requested: Option<&str>) -> Result<String> {
    if settings.reviewers.is_empty() {
        let name = requested
            .map(str::to_string)
            .or_else(|| std::env::var("USER").ok())
            .or_else(|| std::env::var("LOGNAME").ok())
            .ok_or_else(|| {
                fail(
                    Failure::Config,
                    "--actor is missing and no login name is set (USER, LOGNAME): say who decides",
                )
            })?;
        return canonical(settings, &name);
    }
    let uid = current_uid();
    let Some(me) = of_uid(&settings.reviewers, uid) else {
        return Err(fail(
            Failure::Config,
            format!(
                "this process runs as OS user {}, which is no [[reviewer]] of this job: only a \
                 reviewer may apply decisions (hint: run it as yourself)",
                describe_uid(uid)
            ),
        ));
    };
    if let Some(r) = requested
        && !same_name(r, &me.name)
    {
        return Err(fail(
            Failure::Config,
            format!(
                "--actor {:?} is not you: OS user {} is reviewer {}",
                visible(r),
                describe_uid(uid),
                me.name
            ),
        ));
    }
    Ok(me.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(reviewers: Vec<Reviewer>) -> DecisionSettings {
        DecisionSettings {
            inbox: None,
            approvals: 2,
            approvals_succeeded: 2,
            reviewers,
            results_dir: "out/decisions".into(),
            apply_wait: crate::config::DEFAULT_APPLY_WAIT,
            max_file_bytes: 1 << 20,
            workbook: crate::workbook::WorkbookLimits::default(),
            dismiss_reasons: crate::config::default_dismiss_reasons(),
            write_off_limit: Default::default(),
        }
    }

    fn reviewer(name: &str, uid: u32) -> Reviewer {
        Reviewer {
            name: name.into(),
            login: None,
            uid: Some(uid),
        }
    }

    #[test]
    fn the_os_user_is_the_reviewer_and_actor_may_only_repeat_it() {
        let me = current_uid();
        let s = settings(vec![
            reviewer("Alice", me),
            reviewer("bob", me.wrapping_add(1)),
        ]);
        assert_eq!(acting(&s, None).unwrap(), "Alice");
        assert_eq!(acting(&s, Some("alice")).unwrap(), "Alice");
        let err = format!("{:#}", acting(&s, Some("bob")).unwrap_err());
        assert!(
            err.contains("is not you") && err.contains("reviewer Alice"),
            "{err}"
        );
        let nobody = settings(vec![reviewer("bob", me.wrapping_add(1))]);
        let err = format!("{:#}", acting(&nobody, None).unwrap_err());
        assert!(err.contains("no [[reviewer]]"), "{err}");
    }

    #[test]
    fn names_are_one_reviewer_whatever_the_spelling_and_strangers_are_refused() {
        let s = settings(vec![reviewer("alice", 1001), reviewer("bob", 1002)]);
        assert_eq!(canonical(&s, "ALICE").unwrap(), "alice");
        assert_eq!(canonical(&s, "ａｌｉｃｅ").unwrap(), "alice");
        for bad in ["alice\u{200B}", "bob ", "mallory", "recon", ""] {
            assert!(canonical(&s, bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            of_uid(&s.reviewers, 1002).map(|r| r.name.as_str()),
            Some("bob")
        );
        assert!(of_uid(&s.reviewers, 1003).is_none());
        // By login: root is uid 0 on every Unix.
        let by_login = settings(vec![Reviewer {
            name: "admin".into(),
            login: Some("root".into()),
            uid: None,
        }]);
        assert_eq!(
            of_uid(&by_login.reviewers, 0).map(|r| r.name.as_str()),
            Some("admin")
        );
    }
}
