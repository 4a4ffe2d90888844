//! The command line and environment block a Windows process is started with (pure; tested on
//! any OS).

/// One argument quoted as the Microsoft C runtime (and Rust's `std::env::args`) splits it:
/// backslashes are literal except before a quote, where they are doubled.
#[must_use]
pub fn quote_arg(arg: &str) -> String {
    if !arg.is_empty() && !arg.contains([' ', '\t', '\n', '\x0b', '"']) {
        return arg.to_string();
    }
    let mut out = String::from("\"");
    let mut backslashes = 0usize;
    for c in arg.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.push_str(&"\\".repeat(backslashes * 2 + 1));
                out.push('"');
                backslashes = 0;
            }
            _ => {
                out.push_str(&"\\".repeat(backslashes));
                out.push(c);
                backslashes = 0;
            }
        }
    }
    out.push_str(&"\\".repeat(backslashes * 2));
    out.push('"');
    out
}

/// The command line for `argv`. One argument is a shell command: `cmd.exe /d /s /c "CMD"`
/// (`/d`: no AutoRun commands from the registry; `/s`: only the outer quotes are removed, the
/// command is passed as written). Several are a program and its arguments, each quoted.
#[must_use]
pub fn command_line(argv: &[String]) -> String {
    match argv {
        [one] => format!("cmd.exe /d /s /c \"{one}\""),
        many => many.iter().map(|a| quote_arg(a)).collect::<Vec<_>>().join(" "),
    }
}

/// A `CREATE_UNICODE_ENVIRONMENT` block: `NAME=value\0…\0\0`, sorted by name without regard
/// to case as Windows expects; names that are empty or contain `=` are left out.
#[must_use]
pub fn env_block(vars: &[(String, String)]) -> Vec<u16> {
    let mut v: Vec<&(String, String)> = vars.iter().filter(|(k, _)| !k.is_empty() && !k.contains('=')).collect();
    v.sort_by_key(|(k, _)| k.to_uppercase());
    v.dedup_by(|a, b| a.0.eq_ignore_ascii_case(&b.0));
    let mut out: Vec<u16> = Vec::new();
    for (k, val) in v {
        out.extend(format!("{k}={val}").encode_utf16());
        out.push(0);
    }
    if out.is_empty() {
        out.push(0);
    }
    out.push(0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip_through_the_c_runtime_rules() {
        assert_eq!(quote_arg("plain"), "plain");
        assert_eq!(quote_arg(""), "\"\"");
        assert_eq!(quote_arg("a b"), "\"a b\"");
        assert_eq!(quote_arg(r#"say "hi""#), r#""say \"hi\"""#);
        assert_eq!(quote_arg(r"C:\dir\"), r"C:\dir\");
        assert_eq!(quote_arg(r"C:\my dir\"), r#""C:\my dir\\""#);
        assert_eq!(quote_arg(r#"a\"b"#), r#""a\\\"b""#);
        assert_eq!(command_line(&["echo hi".into()]), "cmd.exe /d /s /c \"echo hi\"");
        assert_eq!(command_line(&["git".into(), "commit".into(), "-m".into(), "a message".into()]), "git commit -m \"a message\"");
    }

    #[test]
    fn the_environment_block_is_sorted_and_terminated() {
        let b = env_block(&[("b".into(), "2".into()), ("A".into(), "1".into()), ("=C:".into(), "x".into()), ("a".into(), "dup".into())]);
        assert_eq!(String::from_utf16_lossy(&b), "A=1\0b=2\0\0");
        assert_eq!(env_block(&[]), vec![0, 0]);
    }
}
