//! Verifying a model file before any generated accessor reads it.
//!
//! literun checks the file with a small table-driven verifier ([`check`]): the same checks, in
//! the same order and with the same limits, as the flatbuffers `Verifier` running the generated
//! verifiers (offsets and vectors in bounds, scalars aligned, strings UTF-8 and 0-terminated,
//! depth, table count and apparent size bounded), for every table literun reads through the
//! generated accessors. It does not follow what literun never reads that way: the operators'
//! builtin options (read with [`crate::model::rawfb::RawTable`], where every access is bounds-checked,
//! as for option tables the union does not list), tensors' sparsity (only its presence is
//! checked) and variant subtypes, custom quantization details. The generated verifiers are one
//! function per table type, with error traces: ~26 KiB on a Cortex-M for the options alone, and
//! ~15 KiB more for the rest; this is ~2 KiB. With the `schema-api` feature the generated
//! verifier checks the whole file too, so `Model::schema` can hand out the generated view.
//! Tests check that [`check`] accepts exactly what the flatbuffers `Verifier` accepts with the
//! same tables left out, on valid models and thousands of corruptions of them.

use flatbuffers::VerifierOptions;

use crate::schema::{self, Model as M, Operator as O, QuantizationParameters as Q, Tensor as T};

/// Verifies `bytes` as a model and returns its root view, or why it is malformed.
pub(crate) fn root<'a>(
    opts: &VerifierOptions,
    bytes: &'a [u8],
) -> Result<schema::Model<'a>, &'static str> {
    check(opts, bytes)?;
    // With `schema-api`, the builtin options too.
    #[cfg(feature = "schema-api")]
    schema::root_as_model_with_opts(opts, bytes).map_err(|_| "generated verifier failed")?;
    // Safety: verified above, except (without `schema-api`) what literun never reads through the
    // generated accessors (and `Model::schema` does not exist then).
    Ok(unsafe { flatbuffers::root_unchecked::<schema::Model<'a>>(bytes) })
}

/// What a field holds.
#[derive(Clone, Copy)]
enum F {
    /// A scalar of this many bytes.
    S(usize),
    /// An offset to a string.
    Str,
    /// An offset to a vector of scalars of this many bytes.
    V(usize),
    /// An offset to a table.
    T(Table),
    /// An offset to a vector of offsets to tables.
    VT(Table),
    /// A union (`visit_union`): the tag at the field's vtable offset is a `u8`; the value at
    /// this vtable offset is not followed. Both present or neither.
    U(u16),
}

/// A table's fields by vtable offset (absent ones are skipped, as in the generated verifiers).
type Table = &'static [(u16, F)];

const OPERATOR_CODE: Table = &[
    (schema::OperatorCode::VT_DEPRECATED_BUILTIN_CODE, F::S(1)),
    (schema::OperatorCode::VT_CUSTOM_CODE, F::Str),
    (schema::OperatorCode::VT_VERSION, F::S(4)),
    (schema::OperatorCode::VT_BUILTIN_CODE, F::S(4)),
];
const QUANT: Table = &[
    (Q::VT_MIN, F::V(4)),
    (Q::VT_MAX, F::V(4)),
    (Q::VT_SCALE, F::V(4)),
    (Q::VT_ZERO_POINT, F::V(8)),
    (Q::VT_DETAILS_TYPE, F::U(Q::VT_DETAILS)),
    (Q::VT_QUANTIZED_DIMENSION, F::S(4)),
];
const TENSOR: Table = &[
    (T::VT_SHAPE, F::V(4)),
    (T::VT_TYPE_, F::S(1)),
    (T::VT_BUFFER, F::S(4)),
    (T::VT_NAME, F::Str),
    (T::VT_QUANTIZATION, F::T(QUANT)),
    (T::VT_IS_VARIABLE, F::S(1)),
    // The offsets themselves only.
    (T::VT_SPARSITY, F::S(4)),
    (T::VT_SHAPE_SIGNATURE, F::V(4)),
    (T::VT_HAS_RANK, F::S(1)),
    (T::VT_VARIANT_TENSORS, F::S(4)),
];
const OPERATOR: Table = &[
    (O::VT_OPCODE_INDEX, F::S(4)),
    (O::VT_INPUTS, F::V(4)),
    (O::VT_OUTPUTS, F::V(4)),
    (O::VT_BUILTIN_OPTIONS_TYPE, F::U(O::VT_BUILTIN_OPTIONS)),
    (O::VT_CUSTOM_OPTIONS, F::V(1)),
    (O::VT_CUSTOM_OPTIONS_FORMAT, F::S(1)),
    (O::VT_MUTATING_VARIABLE_INPUTS, F::V(1)),
    (O::VT_INTERMEDIATES, F::V(4)),
    (O::VT_LARGE_CUSTOM_OPTIONS_OFFSET, F::S(8)),
    (O::VT_LARGE_CUSTOM_OPTIONS_SIZE, F::S(8)),
];
const SUBGRAPH: Table = &[
    (schema::SubGraph::VT_TENSORS, F::VT(TENSOR)),
    (schema::SubGraph::VT_INPUTS, F::V(4)),
    (schema::SubGraph::VT_OUTPUTS, F::V(4)),
    (schema::SubGraph::VT_OPERATORS, F::VT(OPERATOR)),
    (schema::SubGraph::VT_NAME, F::Str),
];
const BUFFER: Table = &[
    (schema::Buffer::VT_DATA, F::V(1)),
    (schema::Buffer::VT_OFFSET, F::S(8)),
    (schema::Buffer::VT_SIZE_, F::S(8)),
];
const METADATA: Table = &[
    (schema::Metadata::VT_NAME, F::Str),
    (schema::Metadata::VT_BUFFER, F::S(4)),
];
const TENSOR_MAP: Table = &[
    (schema::TensorMap::VT_NAME, F::Str),
    (schema::TensorMap::VT_TENSOR_INDEX, F::S(4)),
];
const SIGNATURE_DEF: Table = &[
    (schema::SignatureDef::VT_INPUTS, F::VT(TENSOR_MAP)),
    (schema::SignatureDef::VT_OUTPUTS, F::VT(TENSOR_MAP)),
    (schema::SignatureDef::VT_SIGNATURE_KEY, F::Str),
    (schema::SignatureDef::VT_SUBGRAPH_INDEX, F::S(4)),
];
const MODEL: Table = &[
    (M::VT_VERSION, F::S(4)),
    (M::VT_OPERATOR_CODES, F::VT(OPERATOR_CODE)),
    (M::VT_SUBGRAPHS, F::VT(SUBGRAPH)),
    (M::VT_DESCRIPTION, F::Str),
    (M::VT_BUFFERS, F::VT(BUFFER)),
    (M::VT_METADATA_BUFFER, F::V(4)),
    (M::VT_METADATA, F::VT(METADATA)),
    (M::VT_SIGNATURE_DEFS, F::VT(SIGNATURE_DEF)),
];

type R<T> = Result<T, &'static str>;

/// The verifier's state, as flatbuffers' `Verifier`.
struct Walk<'a> {
    buf: &'a [u8],
    opts: &'a VerifierOptions,
    depth: usize,
    tables: usize,
    apparent: usize,
}

/// Alignment of a scalar of `size` bytes (`align_of` of the same-sized integer).
fn align(size: usize) -> usize {
    match size {
        8 => core::mem::align_of::<u64>(),
        n => n,
    }
}

impl Walk<'_> {
    /// `Verifier::range_in_buffer`.
    fn range(&mut self, pos: usize, size: usize) -> R<()> {
        if pos.saturating_add(size) > self.buf.len() {
            return Err("range out of bounds");
        }
        self.apparent = self.apparent.saturating_add(size);
        if self.apparent > self.opts.max_apparent_size {
            return Err("apparent size too large");
        }
        Ok(())
    }

    /// `Verifier::in_buffer` for a scalar of `size` bytes.
    fn scalar(&mut self, pos: usize, size: usize) -> R<()> {
        if pos & (align(size) - 1) != 0 {
            return Err("unaligned scalar");
        }
        self.range(pos, size)
    }

    fn read<const N: usize>(&mut self, pos: usize) -> R<[u8; N]> {
        self.scalar(pos, N)?;
        let mut b = [0; N];
        b.copy_from_slice(&self.buf[pos..pos + N]);
        Ok(b)
    }

    /// The position an offset field at `pos` points to (`ForwardsUOffset`).
    fn follow(&mut self, pos: usize) -> R<usize> {
        Ok((u32::from_le_bytes(self.read(pos)?) as usize).saturating_add(pos))
    }

    /// `verify_vector_range`: (start, length) of a vector of `size`-byte elements at `pos`.
    fn vector(&mut self, pos: usize, size: usize) -> R<(usize, usize)> {
        let len = u32::from_le_bytes(self.read(pos)?) as usize;
        let start = pos.saturating_add(4);
        if start & (align(size) - 1) != 0 {
            return Err("unaligned vector");
        }
        self.range(start, len.saturating_mul(size))?;
        Ok((start, len))
    }

    /// `Verifier::visit_table` and the field visits of a generated verifier.
    fn table(&mut self, pos: usize, fields: Table) -> R<()> {
        let soff = i32::from_le_bytes(self.read(pos)?);
        let vt = if soff > 0 {
            pos.checked_sub(soff.unsigned_abs() as usize)
        } else {
            pos.checked_add(soff.unsigned_abs() as usize)
        }
        .filter(|&x| x < self.buf.len())
        .ok_or("vtable offset out of bounds")?;
        let vt_len = usize::from(u16::from_le_bytes(self.read(vt)?));
        if vt.saturating_add(vt_len) % 2 != 0 {
            return Err("unaligned vtable");
        }
        self.range(vt, vt_len)?;
        self.tables += 1;
        if self.tables > self.opts.max_tables {
            return Err("too many tables");
        }
        self.depth += 1;
        if self.depth > self.opts.max_depth {
            return Err("nested too deep");
        }
        let field = |w: &mut Self, voff: u16| -> R<Option<usize>> {
            let voff = usize::from(voff);
            if voff >= vt_len {
                return Ok(None);
            }
            let o = u16::from_le_bytes(w.read(vt.saturating_add(voff))?);
            Ok((o > 0).then(|| pos.saturating_add(usize::from(o))))
        };
        for &(voff, kind) in fields {
            if let F::U(value) = kind {
                // `visit_union` (the value first, then the tag).
                match (field(self, value)?, field(self, voff)?) {
                    (None, None) => {}
                    (Some(_), Some(tag)) => self.scalar(tag, 1)?,
                    _ => return Err("union type without value or value without type"),
                }
                continue;
            }
            let Some(p) = field(self, voff)? else {
                continue;
            };
            match kind {
                F::S(n) => self.scalar(p, n)?,
                F::V(n) => {
                    let v = self.follow(p)?;
                    self.vector(v, n)?;
                }
                F::Str => {
                    let v = self.follow(p)?;
                    let (start, len) = self.vector(v, 1)?;
                    let end = start + len;
                    core::str::from_utf8(&self.buf[start..end]).map_err(|_| "string not UTF-8")?;
                    if !self.opts.ignore_missing_null_terminator && self.buf.get(end) != Some(&0) {
                        return Err("string not 0-terminated");
                    }
                }
                F::T(sub) => {
                    let t = self.follow(p)?;
                    self.table(t, sub)?;
                }
                F::VT(sub) => {
                    let v = self.follow(p)?;
                    let (start, len) = self.vector(v, 4)?;
                    for k in 0..len {
                        let t = self.follow(start + 4 * k)?;
                        self.table(t, sub)?;
                    }
                }
                F::U(_) => {}
            }
        }
        self.depth -= 1;
        Ok(())
    }
}

/// Verifies a model file (see the module documentation for what it leaves out).
fn check(opts: &VerifierOptions, bytes: &[u8]) -> R<()> {
    let mut w = Walk {
        buf: bytes,
        opts,
        depth: 0,
        tables: 0,
        apparent: 0,
    };
    let root = w.follow(0)?;
    w.table(root, MODEL)
}

#[cfg(all(test, feature = "std"))]
mod reference {
    //! The same coverage with the flatbuffers `Verifier`: the reference [`super::check`] is
    //! tested against.
    use flatbuffers::{ForwardsUOffset, InvalidFlatbuffer, Vector, Verifiable, Verifier};

    use crate::schema;

    /// `schema::Model`, verified with [`LeanSubGraph`]s.
    pub(super) struct LeanModel;
    /// `schema::SubGraph`, verified with [`LeanOperator`]s.
    struct LeanSubGraph;
    /// `schema::Operator` without following its builtin options.
    struct LeanOperator;
    /// `schema::Tensor` without following `sparsity` and `variant_tensors` (literun only checks
    /// whether `sparsity` is present, through the vtable).
    struct LeanTensor;
    /// `schema::QuantizationParameters` without following the `details` union value (literun only
    /// reads its tag).
    struct LeanQuant;

    type Offsets<'a, T> = ForwardsUOffset<Vector<'a, ForwardsUOffset<T>>>;
    type Ints<'a> = ForwardsUOffset<Vector<'a, i32>>;

    // Same fields, in the same order, as the generated `Verifiable` impls of `schema.rs`.
    impl Verifiable for LeanModel {
        fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
            use schema::Model as M;
            v.visit_table(pos)?
                .visit_field::<u32>("version", M::VT_VERSION, false)?
                .visit_field::<Offsets<schema::OperatorCode>>(
                    "operator_codes",
                    M::VT_OPERATOR_CODES,
                    false,
                )?
                .visit_field::<Offsets<LeanSubGraph>>("subgraphs", M::VT_SUBGRAPHS, false)?
                .visit_field::<ForwardsUOffset<&str>>("description", M::VT_DESCRIPTION, false)?
                .visit_field::<Offsets<schema::Buffer>>("buffers", M::VT_BUFFERS, false)?
                .visit_field::<Ints>("metadata_buffer", M::VT_METADATA_BUFFER, false)?
                .visit_field::<Offsets<schema::Metadata>>("metadata", M::VT_METADATA, false)?
                .visit_field::<Offsets<schema::SignatureDef>>(
                    "signature_defs",
                    M::VT_SIGNATURE_DEFS,
                    false,
                )?
                .finish();
            Ok(())
        }
    }

    impl Verifiable for LeanSubGraph {
        fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
            use schema::SubGraph as S;
            v.visit_table(pos)?
                .visit_field::<Offsets<LeanTensor>>("tensors", S::VT_TENSORS, false)?
                .visit_field::<Ints>("inputs", S::VT_INPUTS, false)?
                .visit_field::<Ints>("outputs", S::VT_OUTPUTS, false)?
                .visit_field::<Offsets<LeanOperator>>("operators", S::VT_OPERATORS, false)?
                .visit_field::<ForwardsUOffset<&str>>("name", S::VT_NAME, false)?
                .finish();
            Ok(())
        }
    }

    impl Verifiable for LeanOperator {
        fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
            use schema::Operator as O;
            v.visit_table(pos)?
                .visit_field::<u32>("opcode_index", O::VT_OPCODE_INDEX, false)?
                .visit_field::<Ints>("inputs", O::VT_INPUTS, false)?
                .visit_field::<Ints>("outputs", O::VT_OUTPUTS, false)?
                // The tag and the offset's presence are checked; the table is read with `RawTable`.
                .visit_union::<schema::BuiltinOptions, _>(
                    "builtin_options_type",
                    O::VT_BUILTIN_OPTIONS_TYPE,
                    "builtin_options",
                    O::VT_BUILTIN_OPTIONS,
                    false,
                    |_, _, _| Ok(()),
                )?
                .visit_field::<ForwardsUOffset<Vector<u8>>>(
                    "custom_options",
                    O::VT_CUSTOM_OPTIONS,
                    false,
                )?
                .visit_field::<schema::CustomOptionsFormat>(
                    "custom_options_format",
                    O::VT_CUSTOM_OPTIONS_FORMAT,
                    false,
                )?
                .visit_field::<ForwardsUOffset<Vector<bool>>>(
                    "mutating_variable_inputs",
                    O::VT_MUTATING_VARIABLE_INPUTS,
                    false,
                )?
                .visit_field::<Ints>("intermediates", O::VT_INTERMEDIATES, false)?
                .visit_field::<u64>(
                    "large_custom_options_offset",
                    O::VT_LARGE_CUSTOM_OPTIONS_OFFSET,
                    false,
                )?
                .visit_field::<u64>(
                    "large_custom_options_size",
                    O::VT_LARGE_CUSTOM_OPTIONS_SIZE,
                    false,
                )?
                .finish();
            Ok(())
        }
    }

    impl Verifiable for LeanTensor {
        fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
            use schema::Tensor as T;
            v.visit_table(pos)?
                .visit_field::<Ints>("shape", T::VT_SHAPE, false)?
                .visit_field::<schema::TensorType>("type_", T::VT_TYPE_, false)?
                .visit_field::<u32>("buffer", T::VT_BUFFER, false)?
                .visit_field::<ForwardsUOffset<&str>>("name", T::VT_NAME, false)?
                .visit_field::<ForwardsUOffset<LeanQuant>>(
                    "quantization",
                    T::VT_QUANTIZATION,
                    false,
                )?
                .visit_field::<bool>("is_variable", T::VT_IS_VARIABLE, false)?
                // The offsets themselves only.
                .visit_field::<u32>("sparsity", T::VT_SPARSITY, false)?
                .visit_field::<Ints>("shape_signature", T::VT_SHAPE_SIGNATURE, false)?
                .visit_field::<bool>("has_rank", T::VT_HAS_RANK, false)?
                .visit_field::<u32>("variant_tensors", T::VT_VARIANT_TENSORS, false)?
                .finish();
            Ok(())
        }
    }

    impl Verifiable for LeanQuant {
        fn run_verifier(v: &mut Verifier, pos: usize) -> Result<(), InvalidFlatbuffer> {
            use schema::QuantizationParameters as Q;
            v.visit_table(pos)?
                .visit_field::<ForwardsUOffset<Vector<f32>>>("min", Q::VT_MIN, false)?
                .visit_field::<ForwardsUOffset<Vector<f32>>>("max", Q::VT_MAX, false)?
                .visit_field::<ForwardsUOffset<Vector<f32>>>("scale", Q::VT_SCALE, false)?
                .visit_field::<ForwardsUOffset<Vector<i64>>>("zero_point", Q::VT_ZERO_POINT, false)?
                .visit_union::<schema::QuantizationDetails, _>(
                    "details_type",
                    Q::VT_DETAILS_TYPE,
                    "details",
                    Q::VT_DETAILS,
                    false,
                    |_, _, _| Ok(()),
                )?
                .visit_field::<i32>("quantized_dimension", Q::VT_QUANTIZED_DIMENSION, false)?
                .finish();
            Ok(())
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use flatbuffers::{ForwardsUOffset, Verifiable, Verifier, VerifierOptions};

    fn models() -> Vec<(String, crate::AlignedBytes)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models");
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "lite") {
                let bytes = crate::AlignedBytes::from_slice(&std::fs::read(&path).unwrap());
                out.push((path.display().to_string(), bytes));
            }
        }
        assert!(out.len() >= 6);
        out
    }

    fn reference(opts: &VerifierOptions, bytes: &[u8]) -> bool {
        let mut v = Verifier::new(opts, bytes);
        <ForwardsUOffset<super::reference::LeanModel>>::run_verifier(&mut v, 0).is_ok()
    }

    #[test]
    fn accepts_the_committed_models() {
        for (name, bytes) in models() {
            let opts = VerifierOptions::default();
            assert!(reference(&opts, &bytes), "{name}");
            assert_eq!(super::check(&opts, &bytes), Ok(()), "{name}");
            // And the generated verifier agrees.
            assert!(crate::schema::root_as_model(&bytes).is_ok(), "{name}");
        }
    }

    /// Accepts exactly what the flatbuffers `Verifier` accepts with the same coverage, on random
    /// corruptions (bytes overwritten near tables, offsets, lengths) and tight limits.
    #[test]
    fn agrees_with_the_flatbuffers_verifier_on_corruptions() {
        let mut seed = 0x1234_5678u64;
        let mut rnd = |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % n.max(1)
        };
        let (mut accepted, mut rejected) = (0, 0);
        for (name, bytes) in models() {
            // Tables and vtables sit outside the big constant buffers: corrupt mostly the first
            // and last few KiB, where the metadata of these small models lives.
            for case in 0..3000 {
                let mut b = bytes.to_vec();
                for _ in 0..1 + rnd(3) {
                    let region = rnd(3);
                    let i = match region {
                        0 => rnd(b.len().min(2048)),
                        1 => b.len() - 1 - rnd(b.len().min(4096)),
                        _ => rnd(b.len()),
                    };
                    b[i] = match rnd(4) {
                        0 => 0,
                        1 => 0xff,
                        2 => b[i].wrapping_add(1 + rnd(8) as u8),
                        _ => rnd(256) as u8,
                    };
                }
                let b = crate::AlignedBytes::from_slice(&b);
                let max_apparent_size = match case % 4 {
                    0 => b.len(),
                    _ => b.len() * 4,
                };
                let opts = VerifierOptions {
                    max_depth: [64, 4, 3][case % 3],
                    max_tables: [1_000_000, 50][case % 2],
                    max_apparent_size,
                    ignore_missing_null_terminator: case % 5 == 0,
                };
                let want = reference(&opts, &b);
                let got = super::check(&opts, &b);
                assert_eq!(got.is_ok(), want, "{name} case {case}: {got:?}");
                if want {
                    accepted += 1;
                } else {
                    rejected += 1;
                }
            }
        }
        assert!(
            accepted > 1000 && rejected > 1000,
            "{accepted} / {rejected}"
        );
    }
}
