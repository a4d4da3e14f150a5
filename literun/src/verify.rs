//! Verifying a model file before any generated accessor reads it.
//!
//! This module checks the tables of the file with the flatbuffers `Verifier`, as the generated
//! verifier does, except the operators' `builtin_options` union values: literun never follows those with generated
//! accessors but reads them with [`crate::rawfb::RawTable`], where every access is bounds-checked
//! (as it already does for option tables the union does not list). That leaves out the
//! generated verifier's one function per options table type (~26 KiB on a Cortex-M). Likewise
//! tensors' sparsity, variant subtypes and custom quantization details, which literun rejects or
//! ignores without reading. With the
//! `schema-api` feature the generated verifier checks the whole file too, so
//! `Model::schema` can hand out the generated view.

use flatbuffers::{
    ForwardsUOffset, InvalidFlatbuffer, Vector, Verifiable, Verifier, VerifierOptions,
};

use crate::schema;

/// Verifies `bytes` as a model and returns its root view. Everything the generated accessors of
/// literun read is verified (with `schema-api`, everything).
pub(crate) fn root<'a>(
    opts: &VerifierOptions,
    bytes: &'a [u8],
) -> Result<schema::Model<'a>, InvalidFlatbuffer> {
    let mut v = Verifier::new(opts, bytes);
    <ForwardsUOffset<LeanModel>>::run_verifier(&mut v, 0)?;
    // With `schema-api`, the builtin options too (the lean pass runs in every build, so the
    // corruption tests exercise what firmware builds use).
    #[cfg(feature = "schema-api")]
    schema::root_as_model_with_opts(opts, bytes)?;
    // Safety: verified above, except (without `schema-api`) builtin-options union values, which
    // literun never reads through the generated accessors (and `Model::schema` does not exist).
    Ok(unsafe { flatbuffers::root_unchecked::<schema::Model<'a>>(bytes) })
}

/// `schema::Model`, verified with [`LeanSubGraph`]s.
struct LeanModel;
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
            .visit_field::<ForwardsUOffset<LeanQuant>>("quantization", T::VT_QUANTIZATION, false)?
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

#[cfg(all(test, feature = "std"))]
mod tests {
    /// The lean verifier accepts the committed models (corrupt files: `tests/untrusted.rs`).
    #[test]
    fn lean_agrees_with_generated_on_valid_models() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/models");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_none_or(|x| x != "lite") {
                continue;
            }
            let name = path.display();
            let bytes = std::fs::read(&path).unwrap();
            n += 1;
            let bytes = crate::AlignedBytes::from_slice(&bytes);
            let opts = flatbuffers::VerifierOptions::default();
            let mut v = flatbuffers::Verifier::new(&opts, &bytes);
            let lean = <flatbuffers::ForwardsUOffset<super::LeanModel> as flatbuffers::Verifiable>::run_verifier(&mut v, 0);
            assert!(lean.is_ok(), "{name}: {lean:?}");
        }
        assert!(n >= 6);
    }
}
