//! Declared normalisations and the line diff used in reports. Pure.
//!
//! Order of application (identical for the bare and the sandboxed output):
//! 1. `paths` (always): the run's own directories → `<WS>`, `<OUTSIDE>`, `<CACHE>`, `<HOME>`;
//! 2. the command's own `replace` rules, in order;
//! 3. `tmpnames`, `timestamps`, `durations`, `pids`, `hashes`;
//! 4. `sort`.

use std::sync::OnceLock;

use regex::Regex;

use crate::schema::{Normalisation, Replace};

/// The directories of one run that `paths` replaces, longest first when applied.
#[derive(Debug, Clone, Default)]
pub struct PathContext {
    /// `(path, token)` pairs, e.g. `("/var/tmp/lgcompat-root/runs/12/ws", "<WS>")`.
    pub paths: Vec<(String, String)>,
}

impl PathContext {
    /// Adds a path (ignored when empty or `/`).
    pub fn add(&mut self, path: &str, token: &str) {
        let p = path.trim_end_matches('/');
        if !p.is_empty() {
            self.paths.push((p.to_string(), token.to_string()));
        }
    }
}

struct Builtins {
    sandbox_scratch: Regex,
    tmpnames: Regex,
    iso: Regex,
    clock: Regex,
    weekday: Regex,
    month_day: Regex,
    epoch: Regex,
    time_run: Regex,
    dur_bash: Regex,
    dur_words: Regex,
    dur_units: Regex,
    dur_run: Regex,
    pid_word: Regex,
    pid_job: Regex,
    pid_proc: Regex,
    hashes: Regex,
}

fn builtins() -> &'static Builtins {
    static B: OnceLock<Builtins> = OnceLock::new();
    B.get_or_init(|| {
        let r = |s: &str| Regex::new(s).expect("static regex");
        Builtins {
            // Full level: /tmp/.localgpt-cache; Standard: /tmp/localgpt-sandbox-u<uid>/run-<pid>-
            // <n>-<16 hex>, or a mkdtemp /tmp/localgpt-sandbox-XXXXXX when that parent is unusable
            // (then a sub-directory per cache variable).
            sandbox_scratch: r(r"/tmp/(\.localgpt-cache|localgpt-sandbox-u\d+/run-\d+-\d+-[0-9a-f]{16}|localgpt-sandbox-[A-Za-z0-9]{6})"),
            tmpnames: r(r"\btmp(\.[A-Za-z0-9]{10}|[a-z0-9_]{8})\b"),
            iso: r(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}[:_]\d{2}(?:[:_]\d{2}(?:[.,_]\d+)?)?(?:Z|\s?[+-]\d{2}:?\d{2}\b)?)?"),
            clock: r(r"\b\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\b"),
            weekday: r(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\b,?"),
            month_day: r(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+\d{1,2}\b"),
            epoch: r(r"\b1[6-9]\d{8}(?:\.\d+)?\b"),
            time_run: r(r"<TIME>(?:[ ,]+(?:<TIME>|[+-]\d{4}\b|UTC\b|GMT\b|[A-Z]{3,4}\b|\d{4}\b))+"),
            dur_bash: r(r"\b\d+m\d+(?:\.\d+)?s\b"),
            dur_words: r(r"(?i)\b(duration_ms|duration|elapsed|took|time)([ :=]+)\d+(?:\.\d+)?"),
            dur_units: r(r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds|second|min|m|h)\b"),
            dur_run: r(r"<DUR>(?:[ ,]+<DUR>)+"),
            pid_word: r(r"(?i)\b(pid|ppid|process)([ =:#]+)\d+"),
            pid_job: r(r"(?m)^(\[\d+\][+-]?\s+)\d+"),
            pid_proc: r(r"/proc/\d+"),
            hashes: r(r"\b[0-9a-f]{7,64}\b"),
        }
    })
}

/// Applies the declared normalisations to one output text.
#[must_use]
pub fn normalise(text: &str, which: &[Normalisation], replace: &[Replace], ctx: &PathContext) -> String {
    let b = builtins();
    let mut s = text.to_string();
    // 1. paths (always)
    let mut paths = ctx.paths.clone();
    paths.sort_by_key(|b| std::cmp::Reverse(b.0.len()));
    for (p, tok) in &paths {
        s = s.replace(p.as_str(), tok);
    }
    s = b.sandbox_scratch.replace_all(&s, "<CACHE>").into_owned();
    // 2. the command's own rules
    for r in replace {
        if let Ok(re) = Regex::new(&format!("(?m){}", r.re)) {
            s = re.replace_all(&s, r.with.as_str()).into_owned();
        }
    }
    // 3. named normalisations
    let has = |n: Normalisation| which.contains(&n);
    if has(Normalisation::Tmpnames) {
        s = b.tmpnames.replace_all(&s, "<TMPNAME>").into_owned();
    }
    if has(Normalisation::Durations) {
        s = b.dur_bash.replace_all(&s, "<DUR>").into_owned();
        s = b.dur_units.replace_all(&s, "<DUR>").into_owned();
        s = b.dur_words.replace_all(&s, "${1}${2}<DUR>").into_owned();
        s = b.dur_run.replace_all(&s, "<DUR>").into_owned();
    }
    if has(Normalisation::Timestamps) {
        s = b.iso.replace_all(&s, "<TIME>").into_owned();
        s = b.clock.replace_all(&s, "<TIME>").into_owned();
        s = b.month_day.replace_all(&s, "<TIME>").into_owned();
        s = b.weekday.replace_all(&s, "<TIME>").into_owned();
        s = b.epoch.replace_all(&s, "<TIME>").into_owned();
        s = b.time_run.replace_all(&s, "<TIME>").into_owned();
    }
    if has(Normalisation::Pids) {
        s = b.pid_word.replace_all(&s, "${1}${2}<PID>").into_owned();
        s = b.pid_job.replace_all(&s, "${1}<PID>").into_owned();
        s = b.pid_proc.replace_all(&s, "/proc/<PID>").into_owned();
    }
    if has(Normalisation::Hashes) {
        s = b.hashes.replace_all(&s, "<HASH>").into_owned();
    }
    if has(Normalisation::Sort) {
        let trailing = s.ends_with('\n');
        let mut lines: Vec<&str> = s.lines().collect();
        lines.sort_unstable();
        let mut out = lines.join("\n");
        if trailing {
            out.push('\n');
        }
        s = out;
    }
    s
}

/// A short line diff of `a` (bare) against `b` (sandboxed): `-` lines only bare, `+` lines only
/// sandboxed, at most `max_lines` lines of output.
#[must_use]
pub fn diff_lines(a: &str, b: &str, max_lines: usize) -> String {
    let la: Vec<&str> = a.lines().collect();
    let lb: Vec<&str> = b.lines().collect();
    // trim common prefix and suffix, then LCS on the middle (bounded)
    let mut pre = 0;
    while pre < la.len() && pre < lb.len() && la[pre] == lb[pre] {
        pre += 1;
    }
    let mut suf = 0;
    while suf < la.len() - pre && suf < lb.len() - pre && la[la.len() - 1 - suf] == lb[lb.len() - 1 - suf] {
        suf += 1;
    }
    let ma = &la[pre..la.len() - suf];
    let mb = &lb[pre..lb.len() - suf];
    let mut out = Vec::new();
    if ma.len() * mb.len() <= 250_000 {
        let (n, m) = (ma.len(), mb.len());
        let mut t = vec![vec![0u32; m + 1]; n + 1];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                t[i][j] = if ma[i] == mb[j] { t[i + 1][j + 1] + 1 } else { t[i + 1][j].max(t[i][j + 1]) };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && ma[i] == mb[j] {
                i += 1;
                j += 1;
            } else if j < m && (i == n || t[i][j + 1] >= t[i + 1][j]) {
                out.push(format!("+{}", mb[j]));
                j += 1;
            } else {
                out.push(format!("-{}", ma[i]));
                i += 1;
            }
        }
    } else {
        out.extend(ma.iter().map(|l| format!("-{l}")));
        out.extend(mb.iter().map(|l| format!("+{l}")));
    }
    if out.is_empty() {
        return if a == b { String::new() } else { "(differs only in trailing newline or line endings)".into() };
    }
    let total = out.len();
    if total > max_lines {
        out.truncate(max_lines);
        out.push(format!("… {} more diff line(s)", total - max_lines));
    }
    if pre > 0 {
        out.insert(0, format!("@@ after {pre} identical line(s)"));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use Normalisation::*;

    fn ctx() -> PathContext {
        let mut c = PathContext::default();
        c.add("/var/tmp/lgc/runs/3/ws", "<WS>");
        c.add("/var/tmp/lgc/runs/3", "<RUN>");
        c.add("/home/u", "<HOME>");
        c
    }

    #[test]
    fn paths_longest_first_and_sandbox_scratch() {
        let t = "/var/tmp/lgc/runs/3/ws/a /var/tmp/lgc/runs/3/x /home/u/.cargo /tmp/.localgpt-cache/pip /tmp/localgpt-sandbox-Ab12Cd/npm";
        assert_eq!(normalise(t, &[Paths], &[], &ctx()), "<WS>/a <RUN>/x <HOME>/.cargo <CACHE>/pip <CACHE>/npm");
        let t = "/tmp/localgpt-sandbox-u1001/run-4242-0-0123456789abcdef/pip-cache /tmp/localgpt-sandbox-u123456/run-1-22-fedcba9876543210/x";
        assert_eq!(normalise(t, &[Paths], &[], &ctx()), "<CACHE>/pip-cache <CACHE>/x");
    }

    #[test]
    fn only_declared_normalisations_apply() {
        let t = "commit 3f2a9c1d at 2024-01-02T03:04:05Z took 0.25s pid 4242\n";
        assert_eq!(normalise(t, &[Paths], &[], &ctx()), t);
        assert_eq!(normalise(t, &[Hashes], &[], &ctx()), "commit <HASH> at 2024-01-02T03:04:05Z took 0.25s pid 4242\n");
        assert_eq!(
            normalise(t, &[Hashes, Timestamps, Durations, Pids], &[], &ctx()),
            "commit <HASH> at <TIME> took <DUR> pid <PID>\n"
        );
    }

    #[test]
    fn timestamps_in_common_formats() {
        let n = |t: &str| normalise(t, &[Timestamps], &[], &PathContext::default());
        assert_eq!(n("Date:   Sat Nov 22 03:12:00 2025 +0000"), "Date:   <TIME>");
        assert_eq!(n("-rw-r--r-- 1 u u 5 Nov 22 03:10 f"), "-rw-r--r-- 1 u u 5 <TIME> f");
        assert_eq!(n("2025-11-22 03:10:00.123456789 +0000"), "<TIME>");
        assert_eq!(n("Sat Nov 22 03:12:00 UTC 2025"), "<TIME>");
        assert_eq!(n("mtime 1732245120"), "mtime <TIME>");
        assert_eq!(n("version 1.2.3"), "version 1.2.3");
        assert_eq!(n("_logs/2026-11-22T03_29_45_789Z-debug-0.log"), "_logs/<TIME>-debug-0.log");
    }

    #[test]
    fn durations_and_pids() {
        let n = |t: &str, w: &[Normalisation]| normalise(t, w, &[], &PathContext::default());
        assert_eq!(n("real\t0m0.003s\nuser\t0m0.001s", &[Durations]), "real\t<DUR>\nuser\t<DUR>");
        assert_eq!(n("# duration_ms 12.5\nRan 3 tests in 0.001s", &[Durations]), "# duration_ms <DUR>\nRan 3 tests in <DUR>");
        assert_eq!(n("Finished `dev` profile in 0.52s", &[Durations]), "Finished `dev` profile in <DUR>");
        assert_eq!(n("[1] 12345\n[2]+ 999 Done", &[Pids]), "[1] <PID>\n[2]+ <PID> Done");
        assert_eq!(n("PID=77 /proc/77/status", &[Pids]), "PID=<PID> /proc/<PID>/status");
    }

    #[test]
    fn tmpnames_replace_and_sort() {
        let n = |t: &str, w: &[Normalisation], r: &[Replace]| normalise(t, w, r, &PathContext::default());
        assert_eq!(n("/tmp/tmp.AbCdEf1234 /tmp/tmpk2j_x9qa", &[Tmpnames], &[]), "/tmp/<TMPNAME> /tmp/<TMPNAME>");
        assert_eq!(n("b\nc\na\n", &[Sort], &[]), "a\nb\nc\n");
        let r = [Replace { re: r"^took \d+$".into(), with: "took N".into() }];
        assert_eq!(n("x\ntook 42\n", &[], &r), "x\ntook N\n");
    }

    #[test]
    fn diff_shows_changed_lines_only() {
        let d = diff_lines("a\nb\nc\nd\n", "a\nB\nc\nd\ne\n", 10);
        assert_eq!(d, "@@ after 1 identical line(s)\n+B\n-b\n+e");
        assert_eq!(diff_lines("x", "x\n", 10), "(differs only in trailing newline or line endings)");
        let long = diff_lines("", &"z\n".repeat(50), 5);
        assert!(long.ends_with("… 45 more diff line(s)"), "{long}");
        assert_eq!(diff_lines("same\n", "same\n", 5), "");
    }
}
