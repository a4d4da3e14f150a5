//! Calibration data: representative inputs (`.npy` files or images) loaded and fed to the
//! optimized float model (the file the converter is about to quantize, executed by literun's
//! kernels), and the methods that choose a range per tensor; `range_stats` gathers the
//! statistics those methods read.

use crate::npy::{self, NpyArray, NpyData};
use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};

/// How a tensor's range is chosen from its statistics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Method {
    /// The observed min and max.
    MinMax,
    /// Clip to the given percentile (e.g. 99.99) at both ends.
    Percentile(f64),
    /// The clipping range minimising the expected squared quantization error.
    Mse,
    /// The clipping range minimising the KL divergence between the float and quantized
    /// distributions (TensorRT's "entropy" calibration).
    Entropy,
    /// Per tensor, whichever of the min/max, the 99.9 and 99.99 percentiles and the MSE clip
    /// has the least expected squared error (clipping + rounding) on the tensor's histogram:
    /// one tensor's outliers are clipped, another's tail is kept (the default).
    Auto,
}

impl Method {
    /// Parses `minmax`, `percentile`, `percentile:99.9` or `mse`.
    pub fn parse(s: &str) -> Result<Method> {
        match s.split_once(':') {
            None if s == "minmax" => Ok(Method::MinMax),
            None if s == "mse" => Ok(Method::Mse),
            None if s == "entropy" => Ok(Method::Entropy),
            None if s == "auto" => Ok(Method::Auto),
            None if s == "percentile" => Ok(Method::Percentile(99.99)),
            Some(("percentile", p)) => {
                let p: f64 = p
                    .parse()
                    .map_err(|_| anyhow!("--calibration-method percentile:{p}: not a number"))?;
                if !(50.0..=100.0).contains(&p) {
                    bail!("--calibration-method percentile:{p}: must be within [50, 100]");
                }
                Ok(Method::Percentile(p))
            }
            _ => bail!(
                "unknown calibration method '{s}' (auto, minmax, percentile[:P], mse, entropy)"
            ),
        }
    }

    /// The method's `--calibration-method` spelling.
    pub fn name(self) -> String {
        match self {
            Method::MinMax => "minmax".into(),
            Method::Percentile(p) => format!("percentile:{p}"),
            Method::Mse => "mse".into(),
            Method::Entropy => "entropy".into(),
            Method::Auto => "auto".into(),
        }
    }
}

/// One model input as calibration needs it.
#[derive(Clone, Debug)]
pub struct InputSpec {
    pub name: String,
    pub shape: Vec<usize>,
    /// The same input in NCHW when the model takes NHWC (`--nhwc-io`): data in the ONNX layout
    /// is accepted and transposed.
    pub nchw_shape: Option<Vec<usize>>,
    /// What the input holds: integer and bool inputs (token ids, masks) pass through
    /// calibration as data, never as a range to quantize.
    pub kind: InputKind,
}

/// The element type of a model input, as calibration data is read for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InputKind {
    #[default]
    Float,
    /// Token ids (int32 in the converted model): integer `.npy` data is accepted (float too).
    Integer,
    /// Masks and flags: bool `.npy` data (or 0/1 in an integer or float array).
    Bool,
}

/// A calibration sample: one float array per model input, in model input order.
pub type Sample = Vec<Vec<f32>>;

/// Preprocessing of PNG/JPEG calibration images: pixels scaled to [0, 1], optionally resized to
/// `resize` (H, W) and center-cropped to the model's input size (else resized to it), then
/// `(x - mean[c]) / std[c]`.
#[derive(Clone, Debug)]
pub struct ImageOptions {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
    pub resize: Option<[u32; 2]>,
}

impl Default for ImageOptions {
    fn default() -> Self {
        ImageOptions {
            mean: vec![0.0],
            std: vec![1.0],
            resize: None,
        }
    }
}

fn is_image(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
}

/// One image as a sample for a rank-4 input with 1 or 3 channels (NCHW or NHWC).
fn load_image(path: &Path, input: &InputSpec, opts: &ImageOptions) -> Result<Vec<f32>> {
    let label = path.display();
    let s = &input.shape;
    let (nchw, c, h, w) = match s.as_slice() {
        [1, c @ (1 | 3), h, w] => (true, *c, *h, *w),
        [1, h, w, c @ (1 | 3)] => (false, *c, *h, *w),
        _ => bail!(
            "{label}: input '{}' {:?} is not an image input (batch 1, 1 or 3 channels)",
            input.name,
            s
        ),
    };
    for (what, v) in [("--mean", &opts.mean), ("--std", &opts.std)] {
        if v.len() != 1 && v.len() != c {
            bail!(
                "{what} has {} values; input '{}' has {c} channels",
                v.len(),
                input.name
            );
        }
    }
    if opts.std.iter().any(|&x| x == 0.0 || !x.is_finite()) {
        bail!("--std values must be finite and non-zero");
    }
    let mut img = image::open(path).with_context(|| format!("cannot read image {label}"))?;
    let (h32, w32) = (h as u32, w as u32);
    let filter = image::imageops::FilterType::Triangle;
    if let Some([rh, rw]) = opts.resize {
        img = img.resize_exact(rw, rh, filter);
    }
    img = if img.width() >= w32 && img.height() >= h32 && opts.resize.is_some() {
        img.crop_imm((img.width() - w32) / 2, (img.height() - h32) / 2, w32, h32)
    } else {
        img.resize_exact(w32, h32, filter)
    };
    let pixels: Vec<f32> = if c == 3 {
        img.to_rgb32f().into_raw()
    } else {
        img.to_luma32f().into_raw()
    };
    let norm = |v: f32, ch: usize| {
        let pick = |a: &[f32]| a[if a.len() == 1 { 0 } else { ch }];
        (v - pick(&opts.mean)) / pick(&opts.std)
    };
    let mut out = vec![0f32; c * h * w];
    for y in 0..h {
        for x in 0..w {
            for ch in 0..c {
                let v = norm(pixels[(y * w + x) * c + ch], ch);
                let dst = if nchw {
                    (ch * h + y) * w + x
                } else {
                    (y * w + x) * c + ch
                };
                out[dst] = v;
            }
        }
    }
    Ok(out)
}

fn npy_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read calibration directory {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "npy"))
        .collect();
    files.sort();
    Ok(files)
}

fn to_f32(a: &NpyArray, label: &str, kind: InputKind) -> Result<Vec<f32>> {
    let integer = kind == InputKind::Integer;
    match &a.data {
        // Bool inputs travel as 0.0 / 1.0; any other value is an error, not a silent cast.
        _ if kind == InputKind::Bool => {
            let v = a.to_f32();
            if let Some(i) = v.iter().position(|&x| x != 0.0 && x != 1.0) {
                bail!(
                    "{label}: element {i} is {}, not a bool (0 or 1) for a bool input",
                    v[i]
                );
            }
            Ok(v)
        }
        NpyData::F32(v) => Ok(v.clone()),
        // Integer inputs (token ids: int64 in ONNX, int32 in the converted model) travel as
        // float, exact up to 2^24.
        NpyData::I64(_) | NpyData::I32(_) if integer => {
            let v = a.to_f32();
            if let Some(i) = v.iter().position(|x| x.abs() > (1 << 24) as f32) {
                bail!("{label}: integer value at element {i} is too large for calibration data");
            }
            Ok(v)
        }
        _ => bail!(
            "{label}: calibration data must be float32, got {}",
            a.dtype_name()
        ),
    }
}

fn nhwc_from_nchw(v: &[f32], nchw: &[usize]) -> Vec<f32> {
    let (n, c, h, w) = (nchw[0], nchw[1], nchw[2], nchw[3]);
    let mut out = vec![0f32; v.len()];
    for b in 0..n {
        for ch in 0..c {
            for y in 0..h {
                for x in 0..w {
                    out[((b * h + y) * w + x) * c + ch] = v[((b * c + ch) * h + y) * w + x];
                }
            }
        }
    }
    out
}

/// Splits an array into samples for `input`: the input's exact shape (one sample), the shape
/// without its leading 1 (one sample), or a batch of N along the leading axis.
fn split_samples(a: &NpyArray, input: &InputSpec, label: &str) -> Result<Vec<Vec<f32>>> {
    let v = to_f32(a, label, input.kind)?;
    let per = input.shape.iter().product::<usize>();
    let matches = |shape: &[usize]| -> Option<usize> {
        if a.shape == shape {
            return Some(1);
        }
        if shape.first() == Some(&1) {
            let inner = &shape[1..];
            if a.shape == inner {
                return Some(1);
            }
            if a.shape.len() == shape.len() && a.shape[1..] == *inner {
                return Some(a.shape[0]);
            }
        }
        None
    };
    let (n, transpose) = if let Some(n) = matches(&input.shape) {
        (n, None)
    } else if let Some(n) = input.nchw_shape.as_deref().and_then(matches) {
        (n, input.nchw_shape.clone())
    } else {
        bail!(
            "{label}: shape {:?} does not match input '{}' {:?} (one sample, or a batch along the first axis)",
            a.shape,
            input.name,
            input.shape
        );
    };
    let mut out = Vec::with_capacity(n);
    for (k, chunk) in v.chunks(per).enumerate() {
        if let Some(i) = chunk.iter().position(|x| !x.is_finite()) {
            bail!("{label}: sample {k} has a non-finite value at element {i}");
        }
        out.push(match &transpose {
            Some(nchw) => {
                let mut one = nchw.clone();
                one[0] = 1;
                nhwc_from_nchw(chunk, &one)
            }
            None => chunk.to_vec(),
        });
    }
    Ok(out)
}

/// Loads calibration samples from a directory of `.npy` files (one sample or a batch each; for
/// several inputs, one subdirectory per input name, paired by sorted file order), a directory of
/// PNG/JPEG images (single image input), or a `.npz` (one array per input name; a single-input
/// model accepts any one array).
pub fn load(path: &Path, inputs: &[InputSpec], images: &ImageOptions) -> Result<Vec<Sample>> {
    let per_input: Vec<Vec<Vec<f32>>> = if path.extension().is_some_and(|e| e == "npz") {
        let arrays = npy::read_npz(path)?;
        inputs
            .iter()
            .map(|inp| {
                let (key, a) = arrays
                    .iter()
                    .find(|(k, _)| *k == inp.name)
                    .or(if inputs.len() == 1 && arrays.len() == 1 {
                        arrays.first()
                    } else {
                        None
                    })
                    .ok_or_else(|| {
                        anyhow!(
                            "{}: no array named '{}' (arrays: {})",
                            path.display(),
                            inp.name,
                            arrays
                                .iter()
                                .map(|(k, _)| k.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })?;
                split_samples(a, inp, &format!("{}[{key}]", path.display()))
            })
            .collect::<Result<_>>()?
    } else if path.is_dir() {
        inputs
            .iter()
            .map(|inp| {
                let sub = path.join(&inp.name);
                let dir = if inputs.len() > 1 || sub.is_dir() {
                    if !sub.is_dir() {
                        bail!(
                            "{}: the model has {} inputs; expected a subdirectory '{}' of .npy files",
                            path.display(),
                            inputs.len(),
                            inp.name
                        );
                    }
                    sub
                } else {
                    path.to_path_buf()
                };
                let mut samples = Vec::new();
                let mut pictures: Vec<PathBuf> = std::fs::read_dir(&dir)
                    .with_context(|| format!("cannot read calibration directory {}", dir.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| is_image(p))
                    .collect();
                pictures.sort();
                for f in pictures {
                    samples.push(load_image(&f, inp, images)?);
                }
                for f in npy_files(&dir)? {
                    let a = npy::read(&f)?;
                    samples.extend(split_samples(&a, inp, &f.display().to_string())?);
                }
                Ok(samples)
            })
            .collect::<Result<_>>()?
    } else if path.extension().is_some_and(|e| e == "npy") {
        if inputs.len() != 1 {
            bail!(
                "{}: a single .npy can only calibrate a single-input model",
                path.display()
            );
        }
        vec![split_samples(
            &npy::read(path)?,
            &inputs[0],
            &path.display().to_string(),
        )?]
    } else {
        bail!(
            "{}: calibration data must be a directory of .npy files, a .npy or a .npz",
            path.display()
        );
    };
    let n = per_input.first().map_or(0, |v| v.len());
    if n == 0 {
        bail!("{}: the calibration set is empty", path.display());
    }
    if let Some((inp, v)) = inputs.iter().zip(&per_input).find(|(_, v)| v.len() != n) {
        bail!(
            "{}: input '{}' has {} samples, '{}' has {n}",
            path.display(),
            inp.name,
            v.len(),
            inputs[0].name
        );
    }
    Ok((0..n)
        .map(|k| per_input.iter().map(|v| v[k].clone()).collect())
        .collect())
}

/// One in-memory calibration sample (e.g. from the Python API's `representative_dataset`): one
/// array per model input, in model input order or by input name. Each array is one sample or a
/// batch along its first axis, as a `.npy` file would be.
#[derive(Clone, Debug)]
pub enum ArraySample {
    Positional(Vec<NpyArray>),
    Named(Vec<(String, NpyArray)>),
}

/// Where calibration samples come from.
#[derive(Clone, Copy, Debug)]
pub enum CalibrationSource<'a> {
    /// A directory, `.npy` or `.npz` (`--calibration`; see [`load`]).
    Path(&'a Path),
    /// Samples already in memory (see [`from_arrays`]).
    Arrays(&'a [ArraySample]),
}

impl CalibrationSource<'_> {
    /// The samples, checked against the model's inputs.
    pub fn load(&self, inputs: &[InputSpec], images: &ImageOptions) -> Result<Vec<Sample>> {
        match self {
            CalibrationSource::Path(p) => load(p, inputs, images),
            CalibrationSource::Arrays(a) => from_arrays(a, inputs),
        }
    }
}

/// Calibration samples from in-memory arrays: every item must give each model input exactly
/// once (by position or by name); shapes and element types are checked as for `.npy` files.
pub fn from_arrays(items: &[ArraySample], inputs: &[InputSpec]) -> Result<Vec<Sample>> {
    let mut samples = Vec::new();
    for (k, item) in items.iter().enumerate() {
        let arrays: Vec<&NpyArray> = match item {
            ArraySample::Positional(arrays) => {
                if arrays.len() != inputs.len() {
                    bail!(
                        "representative sample {k}: {} array(s) for a model with {} input(s) ({})",
                        arrays.len(),
                        inputs.len(),
                        input_names(inputs)
                    );
                }
                arrays.iter().collect()
            }
            ArraySample::Named(named) => {
                if let Some((name, _)) = named
                    .iter()
                    .find(|(n, _)| !inputs.iter().any(|i| i.name == *n))
                {
                    bail!(
                        "representative sample {k}: the model has no input '{name}' (inputs: {})",
                        input_names(inputs)
                    );
                }
                inputs
                    .iter()
                    .map(|inp| {
                        named
                            .iter()
                            .find(|(n, _)| *n == inp.name)
                            .map(|(_, a)| a)
                            .ok_or_else(|| {
                                anyhow!(
                                    "representative sample {k}: no array for input '{}'",
                                    inp.name
                                )
                            })
                    })
                    .collect::<Result<_>>()?
            }
        };
        let per_input: Vec<Vec<Vec<f32>>> = inputs
            .iter()
            .zip(&arrays)
            .map(|(inp, a)| {
                split_samples(
                    a,
                    inp,
                    &format!("representative sample {k}, input '{}'", inp.name),
                )
            })
            .collect::<Result<_>>()?;
        let n = per_input.first().map_or(0, |v| v.len());
        if let Some((inp, v)) = inputs.iter().zip(&per_input).find(|(_, v)| v.len() != n) {
            bail!(
                "representative sample {k}: input '{}' has a batch of {}, '{}' of {n}",
                inp.name,
                v.len(),
                inputs[0].name
            );
        }
        samples.extend((0..n).map(|s| per_input.iter().map(|v| v[s].clone()).collect::<Sample>()));
    }
    if samples.is_empty() {
        bail!("the representative dataset is empty");
    }
    Ok(samples)
}

fn input_names(inputs: &[InputSpec]) -> String {
    inputs
        .iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `model` keeps state from one invoke to the next (variable tensors: an LSTM written
/// as UNIDIRECTIONAL_SEQUENCE_LSTM). Samples then each run on a fresh interpreter, from zero
/// state, as the ONNX model runs them.
pub(crate) fn keeps_state(model: &literun::Model<'_>) -> bool {
    model.tensors().iter().any(|t| t.variable)
}

/// Sets input `i` of `interp` from a float sample: float32 as is, int32 (token ids; exact
/// integers in float) converted, int8 quantized with the input's parameters.
pub(crate) fn feed_input(
    model: &literun::Model<'_>,
    interp: &mut literun::Interpreter<'_>,
    i: usize,
    values: &[f32],
) -> Result<()> {
    let info = &model.inputs()[i];
    let qparams = model.tensors()[info.tensor].qparams.clone();
    let mut t = interp
        .input_mut(i)
        .map_err(|e| anyhow!("input '{}': {e}", info.name))?;
    let have = t.bytes_mut().len() / t.dtype().size().max(1);
    if have != values.len() {
        bail!(
            "input '{}': the sample has {} values, the input {}",
            info.name,
            values.len(),
            have
        );
    }
    match t.dtype() {
        literun::DType::F32 => t
            .copy_from_f32(values)
            .map_err(|e| anyhow!("input '{}': {e}", info.name))?,
        literun::DType::I32 => {
            for (d, &x) in t.bytes_mut().chunks_exact_mut(4).zip(values) {
                d.copy_from_slice(&(x as i32).to_le_bytes());
            }
        }
        literun::DType::Bool => {
            for (d, &x) in t.bytes_mut().iter_mut().zip(values) {
                *d = u8::from(x != 0.0);
            }
        }
        literun::DType::I8 => {
            let q = qparams
                .ok_or_else(|| anyhow!("input '{}': int8 input without quantization", info.name))?;
            let (s, z) = q.channel(0);
            for (d, &x) in t.bytes_mut().iter_mut().zip(values) {
                *d = ((x / s).round() as i64 + z).clamp(-128, 127) as i8 as u8;
            }
        }
        literun::DType::I16 => {
            let q = qparams.ok_or_else(|| {
                anyhow!("input '{}': int16 input without quantization", info.name)
            })?;
            let (s, z) = q.channel(0);
            for (d, &x) in t.bytes_mut().chunks_exact_mut(2).zip(values) {
                let v = ((x / s).round() as i64 + z).clamp(-32768, 32767) as i16;
                d.copy_from_slice(&v.to_le_bytes());
            }
        }
        other => bail!(
            "input '{}': {} inputs cannot be fed from calibration data",
            info.name,
            other.name()
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_memory_samples_by_position_or_name_split_batches() {
        let spec = |name: &str, shape: Vec<usize>| InputSpec {
            name: name.into(),
            shape,
            nchw_shape: None,
            kind: InputKind::Float,
        };
        let inputs = [spec("a", vec![1, 2]), spec("b", vec![1, 1])];
        let items = [
            ArraySample::Positional(vec![
                NpyArray::f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]),
                NpyArray::f32(vec![2, 1], vec![5.0, 6.0]),
            ]),
            ArraySample::Named(vec![
                ("b".into(), NpyArray::f32(vec![1, 1], vec![8.0])),
                ("a".into(), NpyArray::f32(vec![1, 2], vec![7.0, 7.5])),
            ]),
        ];
        let samples = from_arrays(&items, &inputs).unwrap();
        assert_eq!(
            samples,
            vec![
                vec![vec![1.0, 2.0], vec![5.0]],
                vec![vec![3.0, 4.0], vec![6.0]],
                vec![vec![7.0, 7.5], vec![8.0]],
            ]
        );
        let unknown = [ArraySample::Named(vec![(
            "c".into(),
            NpyArray::f32(vec![1, 2], vec![0.0; 2]),
        )])];
        let e = from_arrays(&unknown, &inputs).unwrap_err().to_string();
        assert!(e.contains("no input 'c'"), "{e}");
        let short = [ArraySample::Positional(vec![NpyArray::f32(
            vec![1, 2],
            vec![0.0; 2],
        )])];
        assert!(from_arrays(&short, &inputs).is_err());
        assert!(from_arrays(&[], &inputs).is_err());
    }

    #[test]
    fn images_are_resized_normalized_and_laid_out_for_the_input() {
        let dir = tempfile::tempdir().unwrap();
        // 4x2 RGB image: left half red, right half blue.
        let img = image::RgbImage::from_fn(4, 2, |x, _| {
            if x < 2 {
                image::Rgb([255, 0, 0])
            } else {
                image::Rgb([0, 0, 255])
            }
        });
        let path = dir.path().join("a.png");
        img.save(&path).unwrap();
        let opts = ImageOptions {
            mean: vec![0.5],
            std: vec![0.5],
            resize: None,
        };
        let nchw = InputSpec {
            name: "x".into(),
            shape: vec![1, 3, 2, 4],
            nchw_shape: None,
            kind: InputKind::Float,
        };
        let v = load_image(&path, &nchw, &opts).unwrap();
        // Channel 0 (red) row 0: 1, 1, -1, -1 after (x - 0.5) / 0.5.
        assert_eq!(&v[0..4], &[1.0, 1.0, -1.0, -1.0]);
        // Channel 2 (blue) row 0.
        assert_eq!(&v[16..20], &[-1.0, -1.0, 1.0, 1.0]);
        let nhwc = InputSpec {
            shape: vec![1, 2, 4, 3],
            ..nchw.clone()
        };
        let v = load_image(&path, &nhwc, &opts).unwrap();
        assert_eq!(&v[0..3], &[1.0, -1.0, -1.0]);
        // Not an image input: a clear error naming the file and input.
        let flat = InputSpec {
            shape: vec![1, 24],
            ..nchw
        };
        let e = load_image(&path, &flat, &opts).unwrap_err().to_string();
        assert!(e.contains("a.png") && e.contains("'x'"), "{e}");
        // The directory loader picks images up.
        let samples = load(dir.path(), std::slice::from_ref(&nhwc), &opts).unwrap();
        assert_eq!(samples.len(), 1);
    }

    #[test]
    fn method_names_parse() {
        assert_eq!(Method::parse("minmax").unwrap(), Method::MinMax);
        assert_eq!(
            Method::parse("percentile:99.9").unwrap(),
            Method::Percentile(99.9)
        );
        assert!(Method::parse("percentile:5").is_err());
        assert!(Method::parse("kl").is_err());
    }

    #[test]
    fn samples_split_by_batch_and_reject_wrong_shapes_and_nan() {
        let inp = InputSpec {
            name: "x".into(),
            shape: vec![1, 2],
            nchw_shape: None,
            kind: InputKind::Float,
        };
        let a = NpyArray::f32(vec![3, 2], vec![0.0; 6]);
        assert_eq!(split_samples(&a, &inp, "f").unwrap().len(), 3);
        let bad = NpyArray::f32(vec![3], vec![0.0; 3]);
        let e = split_samples(&bad, &inp, "f.npy").unwrap_err().to_string();
        assert!(e.contains("f.npy") && e.contains("'x'"), "{e}");
        let nan = NpyArray::f32(vec![1, 2], vec![0.0, f32::NAN]);
        let e = split_samples(&nan, &inp, "f.npy").unwrap_err().to_string();
        assert!(e.contains("sample 0"), "{e}");
    }
}
