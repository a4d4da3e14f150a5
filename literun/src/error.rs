//! Errors returned by literun. Every failure on model input is an `Err`, never a panic.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// One operator the interpreter does not support.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedOp {
    /// Index of the operator in subgraph 0's execution order.
    pub index: usize,
    /// Builtin name (e.g. `"LSTM"`), or `"CUSTOM(<code>)"`, or `"UNKNOWN(<n>)"`; for an operator
    /// literun supports but this build leaves out (Cargo features), the name and the feature it
    /// needs, e.g. `"SOFTMAX (feature ops-softmax is off)"`.
    pub op: String,
}

/// A literun error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The bytes are not a valid model (flatbuffer verification or a semantic check failed).
    InvalidModel(String),
    /// Constant data in the model is not aligned for its element type.
    Misaligned,
    /// The model uses operators literun does not implement (all of them are listed).
    Unsupported(Vec<UnsupportedOp>),
    /// An operator is malformed (bad shapes, types, parameters) or failed at run time.
    Op {
        /// Index of the operator in execution order.
        index: usize,
        /// Builtin name of the operator.
        op: String,
        /// What went wrong.
        reason: String,
    },
    /// Misuse of the tensor API (wrong index, name, element type or length).
    Tensor(String),
    /// An I/O error (only with the `std` feature).
    Io(String),
}

/// `core::result::Result` with literun's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidModel(m) => write!(f, "invalid model: {m}"),
            Error::Misaligned => f.write_str(
                "model data must be 16-byte aligned; load it with literun::AlignedBytes",
            ),
            Error::Unsupported(ops) => {
                f.write_str("unsupported operators: ")?;
                for (i, o) in ops.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "#{} {}", o.index, o.op)?;
                }
                Ok(())
            }
            Error::Op { index, op, reason } => write!(f, "operator #{index} ({op}): {reason}"),
            Error::Tensor(m) => write!(f, "tensor access: {m}"),
            Error::Io(m) => write!(f, "i/o error: {m}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

/// Shorthand for `Error::InvalidModel(format!(..))`.
macro_rules! invalid {
    ($($arg:tt)*) => { $crate::error::Error::InvalidModel($crate::error::format!($($arg)*)) };
}
pub(crate) use invalid;

/// `v` in decimal without `core::fmt` (names and message prefixes built in every build).
pub(crate) fn decimal(v: i64) -> String {
    let mut digits = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut s = String::new();
    if v < 0 {
        s.push('-');
    }
    s.extend(digits[i..].iter().map(|&d| char::from(d)));
    s
}

/// `alloc::format!` for error messages. Without the `error-details` feature, the format string's
/// text alone (placeholders left as written, arguments evaluated but not formatted): a build
/// then carries no float or `Debug` formatting code for messages nobody reads (firmware).
#[cfg(feature = "error-details")]
pub(crate) use alloc::format;

#[cfg(not(feature = "error-details"))]
macro_rules! format {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{
        $(let _ = &$arg;)*
        alloc::string::String::from($fmt)
    }};
}
#[cfg(not(feature = "error-details"))]
pub(crate) use format;

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;

    #[test]
    fn decimal_matches_display() {
        for v in [0i64, 7, -7, 10, 99, 100, -1234567, i64::MAX, i64::MIN] {
            assert_eq!(decimal(v), v.to_string());
        }
    }

    #[test]
    fn display_names_op_index_and_name() {
        let e = Error::Op {
            index: 3,
            op: "CONV_2D".into(),
            reason: "bad filter".into(),
        };
        assert_eq!(e.to_string(), "operator #3 (CONV_2D): bad filter");
        let e = Error::Unsupported(vec![
            UnsupportedOp {
                index: 1,
                op: "LSTM".into(),
            },
            UnsupportedOp {
                index: 4,
                op: "CUSTOM(Foo)".into(),
            },
        ]);
        assert_eq!(
            e.to_string(),
            "unsupported operators: #1 LSTM, #4 CUSTOM(Foo)"
        );
        assert!(Error::Misaligned.to_string().contains("AlignedBytes"));
    }
}
