//! The key-level review of a JSON file that a hook reads: a `package.json` whose `lint-staged`
//! key (or husky 4's `husky` key) names the commands the user's next `git commit` runs.
//! Protecting the whole file would make every `npm install` pending; protecting nothing lets a
//! command add `"lint-staged": {"*": "curl … | sh"}`. So only the keys a hook reads are
//! protected: a change is applied when each of them is as it was, and pending otherwise.
//!
//! Default-deny. The file is read with serde_json (RFC 8259, the grammar of Node's
//! `JSON.parse`, which lint-staged's and husky's configuration loaders use), and refused —
//! pending — wherever the two could read it differently, or this review could be fooled:
//!
//! - a duplicate key in any object (`JSON.parse` keeps the last one, and a reader that keeps the
//!   first would see another value): refused at every depth;
//! - text serde_json cannot read (a byte-order mark, bytes that are not UTF-8, a lone surrogate
//!   escape, nesting deeper than 128, comments, a trailing comma): refused, though Node may read
//!   some of it;
//! - a top level that is not an object.
//!
//! Equal values here are equal in Node: keys and strings are compared decoded (`"lint\u002dstaged"`
//! is `lint-staged`), and a number is compared as serde_json reads it (`1` and `1.0` differ here,
//! which only makes a change pending). The differential test against Node itself is
//! `fuzz::fuzz_the_package_json_review_against_node`.

use serde::de::{Deserialize, Deserializer, Error, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A JSON value read with every duplicate key refused.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("a number that is not finite"))
    }
    fn visit_str<E: Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E: Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::new();
        while let Some(Strict(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(A::Error::custom(format!("the key {k:?} appears twice in one object")));
            }
            let Strict(v) = map.next_value()?;
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

/// `bytes` read strictly as a JSON object (see the module docs).
///
/// # Errors
/// Why it was refused: not JSON serde_json reads, a duplicate key, not an object.
pub fn read_object(bytes: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Strict>(bytes) {
        Ok(Strict(Value::Object(m))) => Ok(m),
        Ok(_) => Err("its top level is not an object".into()),
        Err(e) => Err(format!("it is not JSON read strictly ({e})")),
    }
}

/// Whether a file that was `old` (its bytes; `None`: absent) and is `new` (`None`: removed)
/// keeps each of `keys` (top-level) as it was: absent in both, or present in both with equal
/// values.
///
/// # Errors
/// Why the change is pending: a key that changed (named), or a version that is not read
/// strictly ([`read_object`]).
pub fn keys_kept(old: Option<&[u8]>, new: Option<&[u8]>, keys: &[String]) -> Result<(), String> {
    let read = |b: Option<&[u8]>, when: &str| b.map(read_object).transpose().map_err(|e| format!("{when}, {e}"));
    let old = read(old, "before the run")?;
    let new = read(new, "after the run")?;
    for k in keys {
        let get = |m: &Option<Map<String, Value>>| m.as_ref().and_then(|m| m.get(k).cloned());
        if get(&old) != get(&new) {
            return Err(format!("its {k:?} key changed (a hook runs what it names)"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(old: Option<&str>, new: Option<&str>) -> Result<(), String> {
        keys_kept(old.map(str::as_bytes), new.map(str::as_bytes), &["lint-staged".into(), "husky".into()])
    }

    #[test]
    fn other_keys_change_freely_and_the_protected_ones_do_not() {
        let old = r#"{"name":"x","dependencies":{"a":"1"},"lint-staged":{"*.js":"eslint"}}"#;
        assert_eq!(kept(Some(old), Some(r#"{"name":"x","dependencies":{"a":"1","b":"2"},"lint-staged":{"*.js":"eslint"}}"#)), Ok(()));
        // Reformatted, keys reordered, escapes spelled otherwise: the same values.
        assert_eq!(kept(Some(old), Some("{\n  \"lint\\u002dstaged\": { \"*.js\": \"eslint\" },\n  \"name\": \"x\"\n}\n")), Ok(()));
        assert!(kept(Some(old), Some(r#"{"name":"x","lint-staged":{"*.js":"eslint; touch /tmp/p"}}"#)).unwrap_err().contains("lint-staged"));
        assert!(kept(Some(old), Some(r#"{"name":"x"}"#)).is_err(), "removed");
        assert!(kept(Some(old), Some(r#"{"lint-staged":{"*.js":"eslint"},"husky":{"hooks":{"pre-commit":"sh x"}}}"#)).unwrap_err().contains("husky"));
        // Created, removed: harmless without the keys.
        assert_eq!(kept(None, Some(r#"{"name":"new"}"#)), Ok(()));
        assert!(kept(None, Some(r#"{"lint-staged":{"*":"sh"}}"#)).is_err());
        assert_eq!(kept(Some(r#"{"name":"x"}"#), None), Ok(()));
        assert!(kept(Some(old), None).is_err());
    }

    #[test]
    fn what_a_reader_could_read_otherwise_is_refused() {
        let old = r#"{"name":"x"}"#;
        for bad in [
            // JSON.parse keeps the last of two; a reader keeping the first would see nothing.
            r#"{"lint-staged":{},"lint-staged":{"*":"sh"}}"#,
            r#"{"lint-staged":{"*":"a","*":"b"}}"#,
            r#"{"lint\u002dstaged":{"*":"sh"},"lint-staged":{}}"#,
            r#"{"a":{"b":1,"b":2}}"#,
            "\u{feff}{\"name\":\"x\"}",
            r#"{"name":"x",}"#,
            r#"{"name":"x"} // c"#,
            r#"["lint-staged"]"#,
            r#"{"s":"\ud800"}"#,
            "",
        ] {
            assert!(kept(Some(old), Some(bad)).is_err(), "{bad:?}");
        }
        assert!(keys_kept(Some(old.as_bytes()), Some(b"{\"name\":\"\xff\"}"), &["husky".into()]).is_err());
        // A file that was not strict JSON before the run: every change is pending.
        assert!(kept(Some(r#"{"a":1,"a":1}"#), Some(old)).is_err());
    }

    #[test]
    fn numbers_that_could_differ_in_node_count_as_changed() {
        for (a, b) in [("1", "1.0"), ("0", "-0"), ("9007199254740993", "9007199254740992")] {
            let v = |n: &str| format!(r#"{{"lint-staged":{{"n":{n}}}}}"#);
            assert!(kept(Some(&v(a)), Some(&v(b))).is_err(), "{a} {b}");
        }
    }
}
