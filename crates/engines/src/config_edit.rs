//! `nvidia-ctk config --set KEY=VALUE`: lossless edits of the toolkit's own config.toml.
//!
//! A PURE text transform, like [`crate`]: text (and the path it came from, for
//! messages) in, text out; the binary reads and writes the file. Edits go through
//! `toml_edit::DocumentMut`, so comments, blank lines and key order survive, and a key set to the
//! value it already has leaves the text byte for byte unchanged.
//!
//! Keys are dotted paths (`nvidia-container-cli.root`, `features.allow-ldconfig-from-container`).
//! Only keys the defaults ([`Config::default`]) have are accepted, and the value's type is the
//! default's: a bool (Go's `ParseBool` forms, as upstream: `true`/`false`, `1`/`0`, `t`/`f`,
//! `TRUE`, `True`, ...; a bare `--set KEY` means true), a string, or a string list (items
//! separated by the list separator, `:` by default, and by `,`; an empty value is the empty
//! list).
//! The result must load with [`Config::parse`], so edits the loader refuses (a container ldconfig
//! without `features.allow-ldconfig-from-container`) are refused with its error.

use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, Item, Table, TableLike, Value};

use crate::set_value;
use nvct_formats::config::{Config, ConfigError};

/// The type of a config value, taken from its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    String,
    List,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Bool => "a boolean",
            Kind::String => "a string",
            Kind::List => "a list of strings",
        })
    }
}

/// One `--set` argument: `KEY=VALUE`, or a bare `KEY` (`value` is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub key: String,
    pub value: Option<String>,
}

impl Assignment {
    /// Splits `KEY=VALUE` at the first `=`.
    pub fn parse(arg: &str) -> Result<Assignment, EditError> {
        let (key, value) = match arg.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.to_string())),
            None => (arg.trim(), None),
        };
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(EditError::Assignment {
                arg: arg.to_string(),
            });
        }
        Ok(Assignment {
            key: key.to_string(),
            value,
        })
    }
}

/// Errors of config edits; each names the key (and the file where one is involved).
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("--set {arg:?}: expected KEY=VALUE with KEY a dotted path such as nvidia-container-cli.root")]
    Assignment { arg: String },
    #[error("unknown config key {key:?} (`nvidia-ctk config default` shows every key)")]
    UnknownKey { key: String },
    #[error("config key {key:?} is a table, not a value; set one of its keys")]
    NotAValue { key: String },
    #[error("config key {key}: {value:?} is not a boolean (true or false; 1, t, TRUE ... as Go's ParseBool)")]
    BadBool { key: String, value: String },
    #[error("config key {key} needs a value ({kind}): --set {key}=VALUE")]
    MissingValue { key: String, kind: Kind },
    #[error(transparent)]
    Toml(#[from] crate::Error),
    #[error("{path}: `{table}` is not a table; cannot set {key}")]
    NotATable {
        path: PathBuf,
        table: String,
        key: String,
    },
    #[error("the edited config is refused: {0}")]
    Invalid(#[source] ConfigError),
    #[error(
        "--set {key}= would leave no low-level runtime, and the shim could start no container; \
         name at least one (--set {key}=runc,crun is the default)"
    )]
    NoRuntimes { key: String },
}

/// The type of `key`, from the defaults; unknown keys and tables are refused by name.
pub fn kind_of(key: &str) -> Result<Kind, EditError> {
    let schema = toml::Table::try_from(Config::default()).expect("the default config serializes");
    let unknown = || EditError::UnknownKey {
        key: key.to_string(),
    };
    let parts: Vec<&str> = key.split('.').collect();
    let (last, parents) = parts.split_last().ok_or_else(unknown)?;
    let mut table = &schema;
    for p in parents {
        table = match table.get(*p) {
            Some(toml::Value::Table(t)) => t,
            _ => return Err(unknown()),
        };
    }
    match table.get(*last) {
        Some(toml::Value::Boolean(_)) => Ok(Kind::Bool),
        Some(toml::Value::String(_)) => Ok(Kind::String),
        Some(toml::Value::Array(_)) => Ok(Kind::List),
        Some(toml::Value::Table(_)) => Err(EditError::NotAValue {
            key: key.to_string(),
        }),
        _ => Err(unknown()),
    }
}

/// The TOML value of an assignment, typed like the key's default.
pub fn typed_value(a: &Assignment, separator: &str) -> Result<Value, EditError> {
    let kind = kind_of(&a.key)?;
    match (kind, a.value.as_deref()) {
        (Kind::Bool, None) => Ok(Value::from(true)),
        // Go's strconv.ParseBool, as upstream's `--set` takes them.
        (Kind::Bool, Some(v)) => match v.trim() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Value::from(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Value::from(false)),
            _ => Err(EditError::BadBool {
                key: a.key.clone(),
                value: v.to_string(),
            }),
        },
        (_, None) => Err(EditError::MissingValue {
            key: a.key.clone(),
            kind,
        }),
        (Kind::String, Some(v)) => Ok(Value::from(v)),
        // Upstream splits on the separator (default `:`) and on `,`.
        (Kind::List, Some(v)) => {
            let items = v
                .split(separator)
                .flat_map(|s| s.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty());
            Ok(Value::Array(items.collect::<Array>()))
        }
    }
}

/// The shim's list of low-level runtimes: never set empty.
const RUNTIMES_KEY: &str = "nvidia-container-runtime.runtimes";

/// Applies `sets` in order (a later one for the same key wins) to config text `text` read from
/// `path`, and checks that the result loads. Without assignments this only validates.
pub fn edit(
    text: &str,
    path: &Path,
    sets: &[Assignment],
    separator: &str,
) -> Result<String, EditError> {
    let mut doc = text
        .parse::<DocumentMut>()
        .map_err(|e| crate::toml_error(path, text, &e))?;
    for a in sets {
        let value = typed_value(a, separator)?;
        if a.key == RUNTIMES_KEY && value.as_array().is_some_and(|l| l.is_empty()) {
            return Err(EditError::NoRuntimes { key: a.key.clone() });
        }
        let parts: Vec<&str> = a.key.split('.').collect();
        let (last, parents) = parts.split_last().expect("split yields at least one part");
        let table = table_create(doc.as_table_mut(), parents, 0, path, &a.key)?;
        if table
            .get(last)
            .and_then(Item::as_value)
            .is_some_and(|old| same(old, &value))
        {
            continue;
        }
        set_value(table, last, value);
    }
    let out = doc.to_string();
    Config::parse(&out, path).map_err(EditError::Invalid)?;
    Ok(out)
}

/// The table-like at `keys[i..]` below `t`, creating missing steps as implicit tables (a header
/// is printed only once the table holds a value).
fn table_create<'t>(
    t: &'t mut dyn TableLike,
    keys: &[&str],
    i: usize,
    path: &Path,
    full: &str,
) -> Result<&'t mut dyn TableLike, EditError> {
    let Some(k) = keys.get(i) else { return Ok(t) };
    if t.get(k).is_none() {
        let mut n = Table::new();
        n.set_implicit(true);
        t.insert(k, Item::Table(n));
    }
    let child = t
        .get_mut(k)
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| EditError::NotATable {
            path: path.to_path_buf(),
            table: keys[..=i].join("."),
            key: full.to_string(),
        })?;
    table_create(child, keys, i + 1, path, full)
}

/// Equal values, whatever their formatting (so re-setting a value never reformats it).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.value() == y.value(),
        (Value::Boolean(x), Value::Boolean(y)) => x.value() == y.value(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvct_formats::config::DEFAULT_TEXT;

    const P: &str = "/etc/nvidia-container-runtime/config.toml";

    #[test]
    fn default_text_is_the_defaults() {
        assert_eq!(
            Config::parse(DEFAULT_TEXT, Path::new(P)).unwrap(),
            Config::default()
        );
        assert_eq!(
            edit(DEFAULT_TEXT, Path::new(P), &[], ",").unwrap(),
            DEFAULT_TEXT
        );
    }

    /// (name, argument, Some((key, value)) | None for an error)
    type ArgCase = (
        &'static str,
        &'static str,
        Option<(&'static str, Option<&'static str>)>,
    );

    #[test]
    fn assignments() {
        let cases: &[ArgCase] = &[
            ("key=value", "a.b=c", Some(("a.b", Some("c")))),
            ("value with =", "a=b=c", Some(("a", Some("b=c")))),
            ("empty value", "a=", Some(("a", Some("")))),
            ("bare key", "a.b", Some(("a.b", None))),
            ("empty key", "=x", None),
            ("empty path part", "a..b=x", None),
        ];
        for (name, arg, want) in cases {
            let got = Assignment::parse(arg).ok().map(|a| (a.key, a.value));
            let want = want.map(|(k, v)| (k.to_string(), v.map(String::from)));
            assert_eq!(got, want, "case {name}");
        }
    }

    /// (name, input text, --set args, Ok(substring of the result) | Err(substring of the error))
    type Case = (
        &'static str,
        &'static str,
        &'static [&'static str],
        Result<&'static str, &'static str>,
    );

    #[test]
    fn edits() {
        let user = "# mine\n[nvidia-container-cli]\n# the root\nroot = \"\" # inline\n";
        let cases: &[Case] = &[
            (
                "string",
                user,
                &["nvidia-container-cli.root=/run/nvidia/driver"],
                Ok("# mine\n[nvidia-container-cli]\n# the root\nroot = \"/run/nvidia/driver\" # inline\n"),
            ),
            (
                "bool",
                DEFAULT_TEXT,
                &["features.allow-ldconfig-from-container=true"],
                Ok("allow-ldconfig-from-container = true\n"),
            ),
            (
                "bare bool is true",
                DEFAULT_TEXT,
                &["nvidia-container-cli.no-cgroups"],
                Ok("no-cgroups = true\n"),
            ),
            (
                "list",
                DEFAULT_TEXT,
                &["nvidia-container-runtime.modes.cdi.spec-dirs=/a, /b"],
                Ok("spec-dirs = [\"/a\", \"/b\"]\n"),
            ),
            ("empty list", DEFAULT_TEXT, &["nvidia-container-runtime.modes.jit-cdi.nvcdi-disable-hooks="], Ok("nvcdi-disable-hooks = []\n")),
            (
                "no low-level runtime",
                DEFAULT_TEXT,
                &["nvidia-container-runtime.runtimes="],
                Err("would leave no low-level runtime"),
            ),
            ("last wins", "", &["swarm-resource=a", "swarm-resource=b"], Ok("swarm-resource = \"b\"\n")),
            (
                "missing table created",
                "",
                &["nvidia-container-runtime.modes.cdi.default-kind=x.com/y"],
                Ok("[nvidia-container-runtime.modes.cdi]\ndefault-kind = \"x.com/y\"\n"),
            ),
            (
                "unknown key",
                DEFAULT_TEXT,
                &["nvidia-container-cli.rot=/x"],
                Err("unknown config key \"nvidia-container-cli.rot\""),
            ),
            ("unknown table", DEFAULT_TEXT, &["foo.bar=1"], Err("unknown config key \"foo.bar\"")),
            ("table is not a value", DEFAULT_TEXT, &["features=true"], Err("\"features\" is a table")),
            (
                "bad bool",
                DEFAULT_TEXT,
                &["features.ignore-imex-channel-requests=yes"],
                Err("features.ignore-imex-channel-requests: \"yes\" is not a boolean"),
            ),
            (
                "string needs a value",
                DEFAULT_TEXT,
                &["nvidia-container-cli.root"],
                Err("needs a value (a string)"),
            ),
            (
                "container ldconfig refused",
                DEFAULT_TEXT,
                &["nvidia-container-cli.ldconfig=/sbin/ldconfig"],
                Err("nvidia-container-cli.ldconfig = \"/sbin/ldconfig\" is not allowed"),
            ),
            (
                "container ldconfig allowed by feature",
                DEFAULT_TEXT,
                &["nvidia-container-cli.ldconfig=/sbin/ldconfig", "features.allow-ldconfig-from-container"],
                Ok("ldconfig = \"/sbin/ldconfig\""),
            ),
            (
                "not a table",
                "nvidia-container-cli = 1\n",
                &["nvidia-container-cli.root=/x"],
                Err("`nvidia-container-cli` is not a table; cannot set nvidia-container-cli.root"),
            ),
            ("invalid toml", "a = = 1\n", &[], Err(":1: invalid TOML")),
            (
                "a table given twice",
                "[nvidia-container-cli]\nroot = \"/\"\n[nvidia-container-cli]\ndebug = \"x\"\n",
                &[],
                Err(":3: invalid TOML: the table [nvidia-container-cli] is given twice"),
            ),
            (
                "a key given twice",
                "[nvidia-container-cli]\nroot = \"/\"\nroot = \"/x\"\n",
                &[],
                Err(":3: invalid TOML: duplicate key: root = \"/x\""),
            ),
        ];
        for (name, text, sets, want) in cases {
            let sets: Vec<Assignment> =
                sets.iter().map(|s| Assignment::parse(s).unwrap()).collect();
            match (edit(text, Path::new(P), &sets, ","), want) {
                (Ok(out), Ok(sub)) => assert!(out.contains(sub), "case {name}: {out}"),
                (Err(e), Err(sub)) => assert!(e.to_string().contains(sub), "case {name}: {e}"),
                (got, _) => panic!("case {name}: got {got:?}"),
            }
        }
    }

    #[test]
    fn same_value_keeps_bytes() {
        let text = "[nvidia-container-runtime]\nruntimes = [\n  \"runc\",   # first\n  \"crun\",\n]\nlog-level = 'info'\n";
        let sets: Vec<Assignment> = [
            "nvidia-container-runtime.runtimes=runc,crun",
            "nvidia-container-runtime.log-level=info",
        ]
        .iter()
        .map(|s| Assignment::parse(s).unwrap())
        .collect();
        assert_eq!(edit(text, Path::new(P), &sets, ",").unwrap(), text);
    }

    /// `nvidia-ctk config --set ...` over a user's file with the CLI's default separator `:`:
    /// (name, --set args, Ok((from, to) replaced once each in the input) | Err(message part)).
    /// The cases the black-box `set_table` kept need the process (exit code, stdout, the file).
    #[test]
    fn cli_set_table() {
        type Edits = &'static [(&'static str, &'static str)];
        let user = "# my config\ndisable-require = false\n\n[nvidia-container-cli]\n# driver root\nroot = \"\"   # keep me\nldconfig = \"@/sbin/ldconfig\"\n\n[nvidia-container-runtime.modes.cdi]\nspec-dirs = [\"/etc/cdi\"]\n";
        const T: (&str, &str) = ("disable-require = false", "disable-require = true");
        let cases: &[(&str, &[&str], Result<Edits, &str>)] = &[
            ("bool", &["disable-require=true"], Ok(&[T])),
            ("bare bool", &["disable-require"], Ok(&[T])),
            (
                "list, comma-separated",
                &["nvidia-container-runtime.modes.cdi.spec-dirs=/etc/cdi,/var/run/cdi,/x"],
                Ok(&[("[\"/etc/cdi\"]", "[\"/etc/cdi\", \"/var/run/cdi\", \"/x\"]")]),
            ),
            (
                "list split on `:` (upstream's runtimes=runc:crun)",
                &["nvidia-container-runtime.modes.cdi.spec-dirs=/etc/cdi:/var/run/cdi"],
                Ok(&[("[\"/etc/cdi\"]", "[\"/etc/cdi\", \"/var/run/cdi\"]")]),
            ),
            (
                "bool 1 (Go's ParseBool forms)",
                &["disable-require=1"],
                Ok(&[T]),
            ),
            ("bool TRUE", &["disable-require=TRUE"], Ok(&[T])),
            ("bool t", &["disable-require=t"], Ok(&[T])),
            (
                "two keys",
                &["disable-require=true", "nvidia-container-cli.root=/d"],
                Ok(&[T, ("root = \"\"", "root = \"/d\"")]),
            ),
            (
                "same value: the same bytes",
                &[
                    "disable-require=false",
                    "nvidia-container-runtime.modes.cdi.spec-dirs=/etc/cdi",
                ],
                Ok(&[]),
            ),
            (
                "unknown key",
                &["nvidia-container-cli.rooot=/d"],
                Err("unknown config key \"nvidia-container-cli.rooot\""),
            ),
            (
                "bad bool",
                &["disable-require=maybe"],
                Err("disable-require: \"maybe\" is not a boolean"),
            ),
            (
                "container ldconfig",
                &["nvidia-container-cli.ldconfig=/sbin/ldconfig"],
                Err("nvidia-container-cli.ldconfig = \"/sbin/ldconfig\" is not allowed"),
            ),
        ];
        for (name, sets, want) in cases {
            let sets: Vec<Assignment> =
                sets.iter().map(|s| Assignment::parse(s).unwrap()).collect();
            match (edit(user, Path::new(P), &sets, ":"), want) {
                (Ok(out), Ok(edits)) => {
                    let mut expected = user.to_string();
                    for (from, to) in *edits {
                        assert!(expected.contains(from), "case {name}: bad case");
                        expected = expected.replacen(from, to, 1);
                    }
                    assert_eq!(out, expected, "case {name}");
                }
                (Err(e), Err(part)) => {
                    assert!(e.to_string().contains(part), "case {name}: {e}")
                }
                (got, _) => panic!("case {name}: got {got:?}"),
            }
        }
        let e = Assignment::parse("=x").unwrap_err();
        assert!(e.to_string().contains("expected KEY=VALUE"), "{e}");
    }
}
