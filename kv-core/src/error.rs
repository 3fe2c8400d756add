//! Errors: byte arithmetic that overflows, declarations with invalid values,
//! config lookups that fail, declarers that fail during collection.

use core::fmt;

/// Byte arithmetic overflowed `u64`. Returned by the `const fn` byte math, so it
/// carries only static text; [`KvError::Overflow`] adds the declaration's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// Which product or sum overflowed, e.g. `"bytes per row"`.
    pub step: &'static str,
}

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} overflows u64", self.step)
    }
}

impl std::error::Error for Overflow {}

/// The steps of a declaration's byte math, as literals: the one source of the
/// texts that [`Overflow`]s carry at run time and that the derive's
/// compile-time checks print (inside `concat!`).
#[doc(hidden)]
#[macro_export]
macro_rules! __kv_step_v0_1 {
    (position) => {
        "bytes per position (layers x kv_heads x (head_dim + v_head_dim) x dtype)"
    };
    (row) => {
        "bytes per row (bytes per position x positions)"
    };
    (peak) => {
        "peak bytes (rows x bytes per row)"
    };
}

impl Overflow {
    /// Bytes per position of an attention geometry.
    pub(crate) const PER_POSITION: Overflow = Overflow {
        step: crate::__kv_step_v0_1!(position),
    };
    /// Bytes per position times positions.
    pub(crate) const PER_ROW: Overflow = Overflow {
        step: crate::__kv_step_v0_1!(row),
    };
    /// Bytes per row times rows.
    pub(crate) const PEAK: Overflow = Overflow {
        step: crate::__kv_step_v0_1!(peak),
    };
}

/// An overflow raised before its declaration is known: the name is filled in
/// by [`KvError::in_declaration`].
impl From<Overflow> for KvError {
    fn from(overflow: Overflow) -> KvError {
        KvError::Overflow {
            declaration: String::new(),
            step: overflow.step,
        }
    }
}

/// Every error kv reports at run time. Messages name what failed and how to fix it.
///
/// A `declaration` field is always `Type.name`: the declaring type's name as
/// written, without its module path or `r#`, a dot, and the declaration's
/// name (`Talker.cache`). Where a bare [`KvSpec`](crate::KvSpec) is handled
/// without its owner (a chart row, a single-spec comparison), it is the label
/// the caller gave it. Where in the model tree the declaration was found is
/// the report's and [`Skipped`](crate::collection::Skipped)'s business, not the error's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KvError {
    /// Byte arithmetic for a declaration overflowed `u64`.
    Overflow {
        /// `Type.declaration`.
        declaration: String,
        /// Which product or sum overflowed.
        step: &'static str,
    },
    /// A declaration carries a value that cannot be right: a zero or negative
    /// count, a blank reason or name.
    InvalidValue {
        /// `Type.declaration`.
        declaration: String,
        /// The key, e.g. `"layers"` or `"rows"`.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A `max_model_len` given above the model's own, refused as vLLM
    /// refuses it unless a longer length is allowed
    /// (`EstimateSettings::allow_long_max_model_len`, vLLM's
    /// `VLLM_ALLOW_LONG_MAX_MODEL_LEN`).
    LongerThanModel {
        /// The length given.
        given: u64,
        /// The model's own length.
        model: u64,
        /// Where the model's length came from (the config key, or the rule).
        source: String,
    },
    /// Geometry could not be read from a config: a key is missing, has the
    /// wrong type, or holds a value that is not a positive integer.
    Config {
        /// What was wanted, e.g. `"layers"`.
        what: &'static str,
        /// Why it could not be read; names every key tried.
        problem: String,
    },
    /// Several problems found in one pass (every missing config key at once),
    /// in the order found; each is one line of the message.
    Several(Vec<KvError>),
    /// A config file could not be read or parsed.
    ConfigFile {
        /// The file, as given.
        path: String,
        /// The I/O or JSON error.
        problem: String,
    },
    /// A declarer panicked while the collector asked it for its declarations.
    DeclarerPanicked {
        /// The owner's path in the model tree.
        path: String,
        /// The panic's message, where it had one.
        message: String,
    },
    /// A child the collector could not read without waiting or panicking: a
    /// lock held elsewhere, a cell already borrowed mutably. What it holds is
    /// not counted; the collector never waits for a lock.
    Unreachable {
        /// The child's path in the model tree.
        path: String,
        /// The container, e.g. `"Mutex"`.
        container: &'static str,
        /// Why it could not be read, e.g. `"is locked elsewhere"`.
        why: &'static str,
    },
    /// A parallel layout is invalid, or a declaration cannot be divided by it
    /// the way engines divide it.
    Parallel {
        /// `Type.name`, or empty for a problem with the layout itself.
        declaration: String,
        /// What is wrong, naming the numbers.
        problem: String,
    },
    /// Reports cannot be merged into one cluster view.
    Merge {
        /// The label of the report at fault (a file name, as given to
        /// `ClusterReport::merge_labelled`), or `None` for a problem of the
        /// whole set (a missing rank) or of unlabelled reports.
        report: Option<String>,
        /// What differs, naming the ranks (and the other report's label).
        problem: String,
    },
    /// A planner's input cannot be planned with.
    Plan {
        /// What is wrong, naming the numbers.
        problem: String,
    },
    /// A budget's ceiling was exceeded.
    OverBudget {
        /// Bytes declared at peak.
        declared: u64,
        /// The ceiling.
        ceiling: u64,
        /// The `max_num_seqs` the peak was computed at.
        max_num_seqs: u64,
    },
}

impl KvError {
    /// The problem of a [`KvError::Parallel`], for re-raising it under a
    /// declaration's name; the whole message for any other error.
    pub(crate) fn problem(self) -> String {
        match self {
            KvError::Parallel { problem, .. } => problem,
            other => other.to_string(),
        }
    }

    /// Adds the declaration's name to an error raised before it was known.
    pub fn in_declaration(self, declaration: &str) -> KvError {
        match self {
            KvError::Overflow {
                declaration: d,
                step,
            } if d.is_empty() => KvError::Overflow {
                declaration: declaration.to_owned(),
                step,
            },
            KvError::InvalidValue {
                declaration: d,
                field,
                problem,
            } if d.is_empty() => KvError::InvalidValue {
                declaration: declaration.to_owned(),
                field,
                problem,
            },
            other => other,
        }
    }

    /// The problems as one error: `None` for none, the one itself, or
    /// [`KvError::Several`]; the same problem found twice is kept once.
    pub fn from_all(errors: Vec<KvError>) -> Option<KvError> {
        let mut distinct: Vec<KvError> = Vec::new();
        for error in errors.into_iter().flat_map(KvError::into_problems) {
            if !distinct.contains(&error) {
                distinct.push(error);
            }
        }
        match distinct.len() {
            0 => None,
            1 => distinct.pop(),
            _ => Some(KvError::Several(distinct)),
        }
    }

    /// Each problem on its own: the parts of [`KvError::Several`], else itself.
    pub fn into_problems(self) -> Vec<KvError> {
        match self {
            KvError::Several(errors) => errors
                .into_iter()
                .flat_map(KvError::into_problems)
                .collect(),
            other => vec![other],
        }
    }
}

impl fmt::Display for KvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KvError::Overflow { declaration, step } => {
                write!(
                    f,
                    "kv: `{declaration}`: {step} overflows u64; check the geometry"
                )
            }
            KvError::InvalidValue {
                declaration,
                field,
                problem,
            } if declaration.is_empty() => write!(f, "kv: `{field}` {problem}"),
            KvError::InvalidValue {
                declaration,
                field,
                problem,
            } => write!(f, "kv: `{declaration}`: `{field}` {problem}"),
            KvError::Config { what, problem } => {
                write!(f, "kv: cannot read {what} from the config: {problem}")
            }
            KvError::LongerThanModel {
                given,
                model,
                source,
            } => write!(
                f,
                "kv: max_model_len {given} is greater than the model's {model} ({source}); \
                 vLLM refuses it (VLLM_ALLOW_LONG_MAX_MODEL_LEN), and so does kv unless a \
                 longer length is allowed"
            ),
            KvError::Several(errors) => {
                for (i, error) in errors.iter().enumerate() {
                    if i > 0 {
                        f.write_str("\n")?;
                    }
                    write!(f, "{error}")?;
                }
                Ok(())
            }
            KvError::ConfigFile { path, problem } => {
                write!(f, "kv: cannot read config `{path}`: {problem}")
            }
            KvError::DeclarerPanicked { path, message } => {
                let path = if path.is_empty() { "<root>" } else { path };
                write!(f, "kv: the declarer at `{path}` panicked: {message}")
            }
            KvError::Unreachable {
                path,
                container,
                why,
            } => {
                let path = if path.is_empty() { "<root>" } else { path };
                write!(
                    f,
                    "kv: `{path}` could not be read: its {container} {why}, and kv never waits \
                     or panics while collecting; the declarations inside are not counted \
                     (collect when the model is not in use, e.g. right after load)"
                )
            }
            KvError::Parallel {
                declaration,
                problem,
            } => {
                if declaration.is_empty() {
                    write!(f, "kv: parallel layout: {problem}")
                } else {
                    write!(f, "kv: `{declaration}`: {problem}")
                }
            }
            KvError::Merge {
                report: None,
                problem,
            } => write!(f, "kv: cannot merge reports: {problem}"),
            KvError::Merge {
                report: Some(report),
                problem,
            } => write!(f, "kv: cannot merge reports: {report}: {problem}"),
            KvError::Plan { problem } => write!(f, "kv: cannot plan: {problem}"),
            KvError::OverBudget {
                declared,
                ceiling,
                max_num_seqs,
            } => write!(
                f,
                "kv: model-local KV over budget: {declared} device bytes declared at \
                 max_num_seqs={max_num_seqs}, ceiling {ceiling} bytes"
            ),
        }
    }
}

impl std::error::Error for KvError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_problems_are_one_error_with_one_line_each_and_no_repeats() {
        let missing = |what| KvError::Config {
            what,
            problem: "none is set".into(),
        };
        assert_eq!(KvError::from_all(Vec::new()), None);
        assert_eq!(
            KvError::from_all(vec![missing("layers")]),
            Some(missing("layers"))
        );
        let both = KvError::from_all(vec![
            missing("layers"),
            missing("dtype"),
            KvError::Several(vec![missing("layers"), missing("head_dim")]),
        ])
        .unwrap();
        assert_eq!(
            both.to_string(),
            "kv: cannot read layers from the config: none is set\n\
             kv: cannot read dtype from the config: none is set\n\
             kv: cannot read head_dim from the config: none is set"
        );
        assert_eq!(both.into_problems().len(), 3);
    }

    #[test]
    fn in_declaration_fills_a_missing_name_only() {
        let err = KvError::InvalidValue {
            declaration: String::new(),
            field: "layers",
            problem: "is 0".into(),
        }
        .in_declaration("Talker.cache");
        assert_eq!(err.to_string(), "kv: `Talker.cache`: `layers` is 0");
        let named = err.clone().in_declaration("Other.x");
        assert_eq!(named, err);

        let overflow = KvError::Overflow {
            declaration: String::new(),
            step: "bytes per row",
        }
        .in_declaration("Talker.cache");
        assert_eq!(
            overflow,
            KvError::Overflow {
                declaration: "Talker.cache".into(),
                step: "bytes per row",
            }
        );
        assert_eq!(overflow.clone().in_declaration("Other.x"), overflow);
    }

    #[test]
    fn an_overflow_becomes_an_error_named_by_its_declaration() {
        let err = KvError::from(Overflow::PER_ROW).in_declaration("Talker.cache");
        assert_eq!(
            err.to_string(),
            "kv: `Talker.cache`: bytes per row (bytes per position x positions) overflows u64; \
             check the geometry"
        );
        assert_eq!(
            KvError::from(Overflow::PEAK),
            KvError::Overflow {
                declaration: String::new(),
                step: "peak bytes (rows x bytes per row)",
            }
        );
        assert_eq!(
            Overflow::PER_POSITION.step,
            "bytes per position (layers x kv_heads x (head_dim + v_head_dim) x dtype)"
        );
    }

    #[test]
    fn a_value_read_outside_a_declaration_is_named_by_its_key_alone() {
        let err = KvError::InvalidValue {
            declaration: String::new(),
            field: "layers",
            problem: "is 0".into(),
        };
        assert_eq!(err.to_string(), "kv: `layers` is 0");
        let err = KvError::InvalidValue {
            declaration: "Talker.cache".into(),
            field: "layers",
            problem: "is 0".into(),
        };
        assert_eq!(err.to_string(), "kv: `Talker.cache`: `layers` is 0");
    }

    #[test]
    fn panicked_root_is_named_root() {
        let err = KvError::DeclarerPanicked {
            path: String::new(),
            message: "boom".into(),
        };
        assert_eq!(
            err.to_string(),
            "kv: the declarer at `<root>` panicked: boom"
        );
    }
}
