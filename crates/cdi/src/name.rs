//! CDI names: `vendor/class` kinds and `vendor/class=name` qualified device names, parsed and
//! checked against the CDI charset rules. Pure string work.
//!
//! Rules (as the CDI reference library applies them):
//! - vendor: starts with a letter, ends with a letter or digit, otherwise letters, digits,
//!   `_`, `-` and `.` (a DNS-like name such as `nvidia.com`);
//! - class: the same, without `.`;
//! - device name: starts and ends with a letter or digit, otherwise letters, digits, `_`, `.`,
//!   `:` and `-`. A leading digit needs cdiVersion 0.5.0 (see `version.rs`).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("{what} is empty")]
    Empty { what: &'static str },
    #[error("{what} {value:?} must start with {need}")]
    BadStart {
        what: &'static str,
        value: String,
        need: &'static str,
    },
    #[error("{what} {value:?} must end with a letter or digit")]
    BadEnd { what: &'static str, value: String },
    #[error("{what} {value:?} contains {bad:?}; allowed: letters, digits and {allowed}")]
    BadChar {
        what: &'static str,
        value: String,
        bad: char,
        allowed: &'static str,
    },
    #[error("{value:?} is not a CDI kind: expected vendor/class, e.g. nvidia.com/gpu")]
    NotAKind { value: String },
    #[error("{value:?} is not a qualified CDI device name: expected vendor/class=name, e.g. nvidia.com/gpu=0")]
    NotQualified { value: String },
}

fn check(
    what: &'static str,
    value: &str,
    allowed: &'static str,
    letter_first: bool,
) -> Result<(), NameError> {
    let first = value.chars().next().ok_or(NameError::Empty { what })?;
    let start_ok = if letter_first {
        first.is_ascii_alphabetic()
    } else {
        first.is_ascii_alphanumeric()
    };
    if !start_ok {
        let need = if letter_first {
            "a letter"
        } else {
            "a letter or digit"
        };
        return Err(NameError::BadStart {
            what,
            value: value.into(),
            need,
        });
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !c.is_ascii_alphanumeric() && !allowed.contains(*c))
    {
        return Err(NameError::BadChar {
            what,
            value: value.into(),
            bad,
            allowed,
        });
    }
    if !value.ends_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(NameError::BadEnd {
            what,
            value: value.into(),
        });
    }
    Ok(())
}

pub fn validate_vendor(vendor: &str) -> Result<(), NameError> {
    check("vendor", vendor, "_-.", true)
}

pub fn validate_class(class: &str) -> Result<(), NameError> {
    check("class", class, "_-", true)
}

pub fn validate_device_name(name: &str) -> Result<(), NameError> {
    check("device name", name, "_.:-", false)
}

/// `vendor/class` → (vendor, class), both checked.
pub fn parse_kind(kind: &str) -> Result<(&str, &str), NameError> {
    let (vendor, class) = kind
        .split_once('/')
        .ok_or_else(|| NameError::NotAKind { value: kind.into() })?;
    validate_vendor(vendor)?;
    validate_class(class)?;
    Ok((vendor, class))
}

/// A checked `vendor/class=name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QualifiedName {
    pub vendor: String,
    pub class: String,
    pub name: String,
}

impl QualifiedName {
    pub fn parse(s: &str) -> Result<QualifiedName, NameError> {
        let (kind, name) = s
            .split_once('=')
            .ok_or_else(|| NameError::NotQualified { value: s.into() })?;
        let (vendor, class) = parse_kind(kind)?;
        validate_device_name(name)?;
        Ok(QualifiedName {
            vendor: vendor.into(),
            class: class.into(),
            name: name.into(),
        })
    }

    /// Builds from a spec's kind and a device name (both checked).
    pub fn new(kind: &str, name: &str) -> Result<QualifiedName, NameError> {
        Self::parse(&format!("{kind}={name}"))
    }

    /// `vendor/class`.
    pub fn kind(&self) -> String {
        format!("{}/{}", self.vendor, self.class)
    }
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}={}", self.vendor, self.class, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_name_cases() {
        let ok = |v: &str, c: &str, n: &str| {
            Ok(QualifiedName {
                vendor: v.into(),
                class: c.into(),
                name: n.into(),
            })
        };
        let cases: Vec<(&str, &str, Result<QualifiedName, NameError>)> = vec![
            ("index", "nvidia.com/gpu=0", ok("nvidia.com", "gpu", "0")),
            (
                "mig index",
                "nvidia.com/gpu=1:0",
                ok("nvidia.com", "gpu", "1:0"),
            ),
            (
                "uuid",
                "nvidia.com/gpu=GPU-0a1b-c",
                ok("nvidia.com", "gpu", "GPU-0a1b-c"),
            ),
            ("all", "nvidia.com/gpu=all", ok("nvidia.com", "gpu", "all")),
            (
                "class with dash",
                "vendor.example/my_gpu-2=x.y",
                ok("vendor.example", "my_gpu-2", "x.y"),
            ),
            (
                "no equals",
                "nvidia.com/gpu",
                Err(NameError::NotQualified {
                    value: "nvidia.com/gpu".into(),
                }),
            ),
            (
                "no slash",
                "nvidia.com=0",
                Err(NameError::NotAKind {
                    value: "nvidia.com".into(),
                }),
            ),
            (
                "vendor starts with digit",
                "1nvidia.com/gpu=0",
                Err(NameError::BadStart {
                    what: "vendor",
                    value: "1nvidia.com".into(),
                    need: "a letter",
                }),
            ),
            (
                "dot in class",
                "nvidia.com/g.pu=0",
                Err(NameError::BadChar {
                    what: "class",
                    value: "g.pu".into(),
                    bad: '.',
                    allowed: "_-",
                }),
            ),
            (
                "name with slash",
                "nvidia.com/gpu=a/b",
                Err(NameError::BadChar {
                    what: "device name",
                    value: "a/b".into(),
                    bad: '/',
                    allowed: "_.:-",
                }),
            ),
            (
                "name ends with dash",
                "nvidia.com/gpu=gpu-",
                Err(NameError::BadEnd {
                    what: "device name",
                    value: "gpu-".into(),
                }),
            ),
            (
                "name starts with dot",
                "nvidia.com/gpu=.x",
                Err(NameError::BadStart {
                    what: "device name",
                    value: ".x".into(),
                    need: "a letter or digit",
                }),
            ),
            (
                "empty name",
                "nvidia.com/gpu=",
                Err(NameError::Empty {
                    what: "device name",
                }),
            ),
        ];
        for (case, input, want) in cases {
            assert_eq!(QualifiedName::parse(input), want, "case {case}: {input}");
        }
        assert_eq!(
            QualifiedName::parse("nvidia.com/gpu=1:0")
                .unwrap()
                .to_string(),
            "nvidia.com/gpu=1:0"
        );
    }
}
