//! The email read in 30 seconds on a phone (issue 32): the demo's alert, rendered by a real
//! browser (Debian's headless `chromium`, installed when missing) at phone width (390 px) and
//! laptop width (900 px). The page must not scroll sideways and the first case must be on
//! the first screen; the plain-text part says the same in the same order.
//!
//! The email itself has no script (its Content-Security-Policy forbids one). The test
//! composes a page of its own that shows the email in an iframe of exactly the width and
//! height of the screen (headless Chromium's window is never narrower than 500 px) and
//! measures it from outside. Set `RECON_EMAIL_SCREENSHOTS=DIR` to keep a screenshot of each
//! width in DIR, to look at.

use crate::report::{Part, parse_message};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `chromium`, installing Debian's package when it is missing.
fn chromium() -> &'static Path {
    static FOUND: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        let found = || {
            ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
                .into_iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
        };
        if let Some(p) = found() {
            return p;
        }
        crate::support::apt_install("chromium", "the email rendering tests");
        found().expect(
            "no chromium and apt-get could not install it: apt-get install -y chromium \
             (the email rendering tests need it)",
        )
    })
}

/// What the browser measured of the email in a `width` × `height` screen.
#[derive(Debug, serde::Deserialize)]
struct Measured {
    /// The screen's width (the iframe's viewport, scroll bar included).
    width: f64,
    /// The width the page's content can use (the viewport without a scroll bar).
    client_width: f64,
    /// The width of the page's content: more than `client_width` scrolls sideways.
    scroll_width: f64,
    /// The screen's height.
    height: f64,
    /// Where the first case's block starts and ends (None: there is none).
    case_top: Option<f64>,
    case_bottom: Option<f64>,
    /// Where the bottom of each first-screen element is (None: the email has none): the total
    /// at risk, how to decide, the first case's next step.
    total_bottom: Option<f64>,
    how_bottom: Option<f64>,
    next_bottom: Option<f64>,
    /// The first case's next step as the browser shows it.
    next_text: Option<String>,
    /// The lowest contrast of any visible text against the background behind it (WCAG's
    /// formula, computed by the browser from the styles it applied), and whose text it is.
    min_contrast: f64,
    min_contrast_of: String,
}

fn headless(profile: &Path) -> Command {
    let mut c = Command::new(chromium());
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// Renders `html` in a `width` × `height` screen and measures it; with `screenshot`, also
/// writes a PNG of that screen there.
fn render(html: &str, (width, height): (u32, u32), screenshot: Option<&Path>) -> Measured {
    let dir = tempfile::tempdir().expect("tempdir");
    let srcdoc = html.replace('&', "&amp;").replace('"', "&quot;");
    let page = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"></head>\
         <body style=\"margin:0\"><iframe id=\"mail\" width=\"{width}\" height=\"{height}\" \
         style=\"border:0;display:block\" srcdoc=\"{srcdoc}\"></iframe>\n<script>\n\
         const frame = document.getElementById('mail');\n\
         function rgb(s) {{ const m = s.match(/[\\d.]+/g).map(Number);\n\
           return {{r: m[0], g: m[1], b: m[2], a: m.length > 3 ? m[3] : 1}}; }}\n\
         function lum(c) {{ const f = v => {{ v /= 255;\n\
             return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }};\n\
           return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); }}\n\
         function behind(w, el) {{ for (let e = el; e; e = e.parentElement) {{\n\
             const b = rgb(w.getComputedStyle(e).backgroundColor); if (b.a > 0) return b; }}\n\
           return {{r: 255, g: 255, b: 255, a: 1}}; }}\n\
         function measure() {{\n\
           const w = frame.contentWindow, d = frame.contentDocument, e = d.documentElement;\n\
           const c = d.getElementById('case-1');\n\
           const r = c ? c.getBoundingClientRect() : null;\n\
           const bottom = el => el ? el.getBoundingClientRect().bottom : null;\n\
           const next = c ? c.querySelector('.next') : null;\n\
           let min = 99, of = '';\n\
           for (const el of d.body.querySelectorAll('*')) {{\n\
             const own = Array.from(el.childNodes).filter(n => n.nodeType === 3)\n\
               .map(n => n.textContent).join('').trim();\n\
             if (!own || el.getClientRects().length === 0) continue;\n\
             const a = lum(rgb(w.getComputedStyle(el).color)), b = lum(behind(w, el));\n\
             const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);\n\
             if (ratio < min) {{ min = ratio; of = own.slice(0, 60); }}\n\
           }}\n\
           const out = document.createElement('pre');\n\
           out.id = 'measured';\n\
           out.textContent = JSON.stringify({{width: w.innerWidth, client_width: e.clientWidth,\n\
             scroll_width: e.scrollWidth, height: w.innerHeight,\n\
             case_top: r && r.top, case_bottom: r && r.bottom,\n\
             total_bottom: bottom(d.getElementById('total')),\n\
             how_bottom: bottom(d.getElementById('how-to-decide')),\n\
             next_bottom: bottom(next), next_text: next && next.textContent,\n\
             min_contrast: min, min_contrast_of: of}});\n\
           document.body.appendChild(out);\n\
         }}\n\
         if (frame.contentDocument && frame.contentDocument.readyState === 'complete' &&\n\
             frame.contentDocument.getElementById('case-1')) measure();\n\
         else frame.addEventListener('load', measure);\n\
         </script></body></html>\n"
    );
    let path = dir.path().join("page.html");
    std::fs::write(&path, page).expect("page");
    let url = format!("file://{}", path.display());
    // The window is taller than the screen it shows (the headless window counts its frame).
    let window = format!("--window-size={},{}", width.max(500) + 20, height + 200);
    let out = headless(&dir.path().join("profile"))
        .arg(&window)
        .args(["--virtual-time-budget=5000", "--dump-dom"])
        .arg(&url)
        .stderr(Stdio::null())
        .output()
        .expect("chromium runs");
    let dom = String::from_utf8_lossy(&out.stdout);
    let json = dom
        .split("<pre id=\"measured\">")
        .nth(1)
        .and_then(|s| s.split("</pre>").next())
        .unwrap_or_else(|| panic!("chromium measured nothing ({}): {dom}", out.status));
    let measured: Measured = serde_json::from_str(&json.replace("&quot;", "\""))
        .unwrap_or_else(|e| panic!("{e}: {json}"));
    if let Some(png) = screenshot {
        let status = headless(&dir.path().join("profile-shot"))
            .arg(&window)
            .arg(format!("--screenshot={}", png.display()))
            .arg(&url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("chromium runs");
        assert!(
            status.success() && png.exists(),
            "screenshot {}",
            png.display()
        );
    }
    measured
}

/// The demo's alert: (the HTML body, the plain-text body).
async fn demo_email() -> (String, String) {
    let (_tmp, report) = crate::cases::demo().await;
    let eml = std::fs::read_to_string(report.out_dir.join("email.eml")).expect("email.eml");
    let (_, parts) = parse_message(&eml);
    let body = |kind: &str| {
        parts
            .iter()
            .find(|p: &&Part| {
                p.header("content-type").starts_with(kind)
                    && !p.header("content-disposition").starts_with("attachment")
            })
            .unwrap_or_else(|| panic!("no {kind} part"))
            .text()
    };
    (body("text/html"), body("text/plain"))
}

#[tokio::test]
async fn the_demo_email_reads_on_a_phone_and_a_laptop_without_sideways_scrolling() {
    let (html, _) = demo_email().await;
    let shots = std::env::var_os("RECON_EMAIL_SCREENSHOTS").map(PathBuf::from);
    for (width, height) in [(390, 844), (900, 1000)] {
        let png = shots.as_ref().map(|d| d.join(format!("email-{width}.png")));
        let m = render(&html, (width, height), png.as_deref());
        assert_eq!(
            (m.width, m.height),
            (f64::from(width), f64::from(height)),
            "the screen measured is the one asked for: {m:?}"
        );
        assert!(
            m.scroll_width <= m.client_width,
            "at {width} px the email scrolls sideways: {m:?}"
        );
        let (top, bottom) = (
            m.case_top.expect("the demo has cases"),
            m.case_bottom.expect("bottom"),
        );
        assert!(
            top >= 0.0 && bottom <= m.height,
            "at {width} px the first case is not (wholly) on the first screen: {m:?}"
        );
        // Issue 42: the first screen is the morning's to-do list: the total at risk, how to
        // decide, and the first case's next step, all above the fold.
        for (what, at) in [
            ("the total at risk", m.total_bottom),
            ("how to decide", m.how_bottom),
            ("the first case's next step", m.next_bottom),
        ] {
            let at = at.unwrap_or_else(|| panic!("the email has no {what}: {m:?}"));
            assert!(
                at <= m.height,
                "at {width} px {what} is below the first screen: {m:?}"
            );
        }
        // The next step the browser shows is the demo's first case's, from the one table.
        let next = m.next_text.clone().unwrap_or_default();
        assert!(
            next.starts_with("Next: ")
                && recon::report::actions::TABLE
                    .iter()
                    .any(|(_, s)| next.ends_with(s.next)),
            "{next:?}"
        );
        // WCAG AA (4.5:1) for every text the browser shows, against what is behind it.
        assert!(
            m.min_contrast >= 4.5,
            "at {width} px {:?} has contrast {:.2}:1, under WCAG AA's 4.5:1",
            m.min_contrast_of,
            m.min_contrast
        );
    }
}

/// Nothing above the first case names a run id, a server path or a hash (issue 42): the
/// email's head is for a finance reader; the run's facts are at its end.
#[tokio::test]
async fn above_the_cases_there_is_no_run_id_path_or_hash() {
    let (html, text) = demo_email().await;
    for (body, first_case) in [(&html, "id=\"case-1\""), (&text, "\n1. ")] {
        let head = &body[..body.find(first_case).expect("a first case")];
        for bad in ["run ", "sha256", "/out/", "sample-data", "/tmp/"] {
            assert!(!head.contains(bad), "{bad:?} above the cases: {head}");
        }
        assert!(
            !head
                .split(|c: char| !c.is_ascii_hexdigit())
                .any(|w| w.len() >= 32),
            "a hash above the cases: {head}"
        );
        // ... and they are at the end, for whoever needs them.
        assert!(body.contains("sha256"), "the Run section names the inputs");
    }
}

#[tokio::test]
async fn a_wide_table_would_be_caught() {
    // The measurement itself: a page wider than a phone scrolls sideways, a first case below
    // the first screen is not on it.
    let wide = "<!DOCTYPE html><html><body><div style=\"width:700px\">x</div>\
                <div id=\"case-1\">case</div></body></html>";
    let m = render(wide, (390, 844), None);
    assert!(m.scroll_width > m.client_width, "{m:?}");
    let low = "<!DOCTYPE html><html><body><div style=\"height:1200px\"></div>\
               <div id=\"case-1\">case</div></body></html>";
    let m = render(low, (390, 844), None);
    assert!(m.case_top.expect("case") > m.height, "{m:?}");
}

#[tokio::test]
async fn the_plain_text_part_says_the_same_in_the_same_order() {
    let (html, text) = demo_email().await;
    let lines: Vec<&str> = text.lines().collect();
    // The headline first: how many cases, the money at risk by severity, what recon resolved
    // and what waits, then the most severe case, all within a phone's first screen of text.
    assert!(lines[1].ends_with("cases to decide, 2 critical"), "{text}");
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in {text}"))
    };
    // The to-do list first: the total, how to decide, then the first case with its next
    // step; the money by severity and the counts after the cases.
    assert!(at("Total at risk:") < at("How to decide:"));
    assert!(at("How to decide:") < at("1. CRITICAL"));
    assert!(at("1. CRITICAL") < at("   Next: "));
    assert!(at("1. CRITICAL") < 20, "{text}");
    assert!(at("1. CRITICAL") < at("Money at risk by severity:"));
    assert!(at("Money at risk by severity:") < at("Counts per outcome:"));
    // The same cases in the same order in both parts.
    let keys = |body: &str| -> Vec<String> {
        body.split("case C-")
            .skip(1)
            .map(|s| s[..16].to_string())
            .collect()
    };
    assert!(!keys(&text).is_empty());
    assert_eq!(keys(&text), keys(&html));
    // Lines a phone shows without breaking mid-word: the headline and each case's first two
    // lines are short.
    for l in &lines[..at("How to decide:")] {
        assert!(l.chars().count() <= 72, "{l:?}");
    }
}
