//! The model zoo (`fixtures/zoo/`, made by `fixtures/make_zoo.py`): small models with the patterns of
//! exported production models. Each is converted to float and checked against tract running the
//! original ONNX (max relative error ≤ 1e-4), then to full int8 calibrated on `<name>.calib.npz` and
//! checked against the float file on the held-out `<name>.eval.npz` (median output SNR ≥ 20 dB).

use litecvt::convert::{convert_file, Conversion, ConvertOptions};
use litecvt::npy::{self, NpyArray};
use litecvt::quantize::QuantizeMode;
use litecvt::runtime::{error_stats, run_lite, run_onnx_tract};
use std::path::{Path, PathBuf};

const FLOAT_TOLERANCE: f32 = 1e-4;
/// Median over the held-out samples: a typical input.
const INT8_SNR_DB: f64 = 20.0;
/// Any held-out sample: an input whose activations leave the calibrated ranges loses accuracy
/// (as in any min/max-calibrated int8 model), but not all of it.
const WORST_SAMPLE_SNR_DB: f64 = 5.0;

/// Models whose int8 floor differs from `INT8_SNR_DB`, with the reason.
const INT8_SNR_FLOORS: &[(&str, f64, &str)] = &[];

fn zoo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/zoo")
}

fn models() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(zoo_dir())
        .expect("fixtures/zoo")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    assert!(v.len() >= 5, "the zoo has {} models", v.len());
    v
}

fn name_of(model: &Path) -> String {
    model.file_stem().unwrap().to_string_lossy().into_owned()
}

fn convert(model: &Path, quantize: Option<QuantizeMode>) -> Result<Conversion, String> {
    let opts = ConvertOptions {
        quantize,
        calibration: quantize.map(|_| model.with_extension("calib.npz")),
        ..Default::default()
    };
    convert_file(model, &opts).map_err(|e| format!("convert: {e:#}"))
}

/// The model's input names, in order, from the float file.
fn input_names(bytes: &[u8]) -> Vec<String> {
    let aligned = literun::AlignedBytes::from_slice(bytes);
    let model = literun::Model::from_bytes(&aligned).expect("our file loads");
    model.inputs().iter().map(|t| t.name.to_string()).collect()
}

/// Runs `bytes` on one sample; named inputs.
fn run(bytes: &[u8], names: &[String], sample: &[NpyArray]) -> Result<Vec<NpyArray>, String> {
    let feeds: Vec<(Option<String>, NpyArray)> = names
        .iter()
        .cloned()
        .map(Some)
        .zip(sample.iter().cloned())
        .collect();
    let outs = run_lite(bytes, "zoo", &feeds).map_err(|e| format!("literun: {e:#}"))?;
    Ok(outs.into_iter().map(|(_, a)| a).collect())
}

fn check_float(model: &Path) -> Result<(Conversion, f32), String> {
    let conv = convert(model, None)?;
    let names = input_names(&conv.bytes);
    let stem = model.with_extension("");
    let inputs: Vec<NpyArray> = names
        .iter()
        .map(|n| npy::read(&stem.with_extension(format!("{n}.npy"))).map_err(|e| format!("{e:#}")))
        .collect::<Result<_, _>>()?;
    let reference = run_onnx_tract(model, &inputs).map_err(|e| format!("tract: {e:#}"))?;
    let ours = run(&conv.bytes, &names, &inputs)?;
    if ours.len() != reference.len() {
        return Err(format!(
            "{} outputs, tract has {}",
            ours.len(),
            reference.len()
        ));
    }
    let mut worst = 0f32;
    for (i, (a, r)) in ours.iter().zip(&reference).enumerate() {
        if a.shape != r.shape {
            return Err(format!(
                "output {i}: shape {:?}, tract {:?}",
                a.shape, r.shape
            ));
        }
        let s = error_stats(&a.to_f32(), &r.to_f32());
        if s.max_rel.is_nan() || s.max_rel > FLOAT_TOLERANCE {
            return Err(format!(
                "output {i}: max rel error {:.3e} > {FLOAT_TOLERANCE:e}",
                s.max_rel
            ));
        }
        worst = worst.max(s.max_rel);
    }
    Ok((conv, worst))
}

/// Splits each batched array of an `.npz` into samples: result[sample][input].
fn samples(npz: &Path, names: &[String]) -> Result<Vec<Vec<NpyArray>>, String> {
    let arrays = npy::read_npz(npz).map_err(|e| format!("{e:#}"))?;
    let per_input: Vec<&NpyArray> = names
        .iter()
        .map(|n| {
            arrays
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, a)| a)
                .ok_or_else(|| format!("{}: no array for input '{n}'", npz.display()))
        })
        .collect::<Result<_, _>>()?;
    let count = per_input[0].shape[0];
    Ok((0..count)
        .map(|i| per_input.iter().map(|a| a.index_axis0(i)).collect())
        .collect())
}

/// Output SNR (dB) of the int8 file against the float file on each held-out sample, sorted.
fn int8_snrs(model: &Path, float: &Conversion) -> Result<Vec<f64>, String> {
    let q = convert(model, Some(QuantizeMode::Int8Full))?;
    let names = input_names(&float.bytes);
    let mut snrs = Vec::new();
    for sample in samples(&model.with_extension("eval.npz"), &names)? {
        let f = run(&float.bytes, &names, &sample)?;
        let g = run(&q.bytes, &names, &sample)?;
        let (mut signal, mut noise) = (0f64, 0f64);
        for (a, r) in g.iter().zip(&f) {
            for (x, y) in a.to_f32().iter().zip(r.to_f32()) {
                signal += f64::from(y) * f64::from(y);
                noise += f64::from(x - y) * f64::from(x - y);
            }
        }
        snrs.push(10.0 * (signal / noise.max(1e-30)).log10());
    }
    snrs.sort_by(f64::total_cmp);
    Ok(snrs)
}

#[test]
fn zoo_models_convert_to_float_and_full_int8() {
    let mut failures = Vec::new();
    for model in models() {
        let name = name_of(&model);
        let floor = INT8_SNR_FLOORS
            .iter()
            .find(|(n, ..)| *n == name)
            .map_or(INT8_SNR_DB, |f| f.1);
        let result = check_float(&model).and_then(|(float, rel)| {
            let snrs = int8_snrs(&model, &float)?;
            let (median, worst) = (snrs[snrs.len() / 2], snrs[0]);
            println!(
                "{name:24} float max rel err {rel:.2e}, full int8 SNR median {median:.1} dB, \
                 worst {worst:.1} dB ({} held-out samples)",
                snrs.len()
            );
            if median < floor || worst < WORST_SAMPLE_SNR_DB {
                return Err(format!(
                    "full int8 SNR median {median:.1} dB (floor {floor}), worst {worst:.1} dB \
                     (floor {WORST_SAMPLE_SNR_DB})"
                ));
            }
            Ok(())
        });
        if let Err(e) = result {
            failures.push(format!("{name}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "zoo failures:\n{}",
        failures.join("\n")
    );
}

/// A CNN keeps one TRANSPOSE, at its NCHW input (none when the graph input is already NHWC, as
/// tf2onnx writes Keras models); a ViT block keeps the input one plus the four that split and
/// merge attention heads.
#[test]
fn zoo_models_keep_only_the_transposes_the_math_needs() {
    let expected = [
        ("efficientnet_mbconv", 1),
        ("mobilenetv3_block", 1),
        ("resnet_basic", 1),
        ("text_det_decoder", 1),
        ("tf2onnx_cnn", 0),
        ("vit_block", 5),
        ("yolo_block", 1),
    ];
    for (name, transposes) in expected {
        let conv = convert(&zoo_dir().join(format!("{name}.onnx")), None).unwrap();
        let got = conv.ops_after.get("TRANSPOSE").copied().unwrap_or(0);
        assert_eq!(got, transposes, "{name}: {:?}", conv.ops_after);
    }
}
