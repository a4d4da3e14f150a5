//! The command line: thin wrappers over the library.

mod commands;

pub use commands::convert_options;

use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "litecvt",
    version,
    about = "Convert ONNX models to TFLite-compatible FlatBuffers and run them with literun"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per run: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// Convert an ONNX model to a .lite (TFLite-compatible) file.
    #[command(
        after_help = "Examples:\n  litecvt convert fixtures/digits_cnn.onnx -o digits.lite\n  litecvt convert model.onnx -o model.lite --input-shape input=1,3,224,224\n  litecvt convert model.onnx -o model.lite --nhwc-io -v --report report.json\n  litecvt convert model.onnx -o model.lite --passes prune,fold_batchnorm\n  litecvt convert fixtures/digits_cnn.onnx -o digits_int8.lite --quantize int8 --calibration calibration/digits\n  litecvt convert model.onnx -o model_fp16.lite --quantize fp16"
    )]
    Convert(ConvertArgs),
    /// Show a model's inputs, outputs, operators, tensors and memory.
    #[command(
        after_help = "Examples:\n  litecvt inspect digits.lite\n  litecvt inspect digits.lite --json"
    )]
    Inspect {
        model: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Run a model with literun on .npy inputs; writes one .npy per output.
    #[command(
        after_help = "Examples:\n  litecvt run digits.lite --input input=fixtures/digits_cnn.input.npy --output-dir out/\n  litecvt run digits.lite fixtures/digits_cnn.input.npy"
    )]
    Run {
        model: PathBuf,
        /// Positional inputs (in model input order).
        inputs: Vec<PathBuf>,
        /// Named input NAME=file.npy (repeatable).
        #[arg(long = "input", value_name = "NAME=FILE")]
        named: Vec<String>,
        /// Directory for the outputs (default: current directory).
        #[arg(long, default_value = ".")]
        output_dir: PathBuf,
        /// Also write every intermediate tensor to this directory (for debugging).
        #[arg(long, value_name = "DIR")]
        dump_tensors: Option<PathBuf>,
    },
    /// Run the ONNX model (tract) and the converted file (literun) on the same inputs and compare;
    /// the reference may also be another .lite/.tflite file (e.g. float vs int8).
    #[command(
        after_help = "Examples:\n  litecvt compare fixtures/digits_cnn.onnx digits.lite --input input=fixtures/digits_cnn.input.npy\n  litecvt compare digits.lite digits_int8.lite fixtures/digits_cnn.input.npy"
    )]
    Compare {
        onnx: PathBuf,
        lite: PathBuf,
        /// Positional inputs (in model input order).
        inputs: Vec<PathBuf>,
        /// Named input NAME=file.npy (repeatable).
        #[arg(long = "input", value_name = "NAME=FILE")]
        named: Vec<String>,
    },
    /// Measure latency (median, p90) and memory of a model: a .lite with literun, or an .onnx
    /// with tract (for comparison).
    #[command(
        after_help = "Examples:\n  litecvt bench m.lite\n  litecvt bench m.lite --runs 500 --warmup 50 --json\n  litecvt bench fixtures/mobilenetv2_block.onnx --input fixtures/mobilenetv2_block.input.npy"
    )]
    Bench {
        model: PathBuf,
        /// Threads for literun's convolution, dense and depthwise kernels (`Interpreter::with_threads`).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Timed invocations.
        #[arg(long, default_value_t = 100)]
        runs: usize,
        /// Untimed invocations first.
        #[arg(long, default_value_t = 10)]
        warmup: usize,
        /// Input .npy files (positional order; default: deterministic pseudo-random values).
        #[arg(long = "input", value_name = "[NAME=]FILE")]
        inputs: Vec<String>,
        /// Print one JSON object (with every latency) instead of text.
        #[arg(long)]
        json: bool,
        /// Also time every operator and print the totals per operator type.
        #[arg(long)]
        profile: bool,
        /// No Winograd for float 3x3 convolutions (literun::Options::winograd): the direct
        /// convolution only, 1.6-1.9x the time of those layers.
        #[arg(long)]
        no_winograd: bool,
    },
}

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The ONNX model.
    pub model: PathBuf,
    /// Where to write the converted model.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Static shape for an input with dynamic dimensions: NAME=D0,D1,... (repeatable).
    #[arg(long = "input-shape", value_name = "NAME=DIMS")]
    pub input_shapes: Vec<String>,
    /// Freeze an input to constant values: NAME=V or NAME=V0,V1,... (one value fills the input's
    /// shape); it leaves the converted model's inputs and folds into the graph (repeatable).
    #[arg(long = "input-value", value_name = "NAME=VALUES")]
    pub input_values: Vec<String>,
    /// Keep rank-4 inputs and outputs in NHWC instead of the ONNX NCHW layout (no transposes).
    #[arg(long)]
    pub nhwc_io: bool,
    /// Convert a model exported in training mode as its inference form: BatchNormalization
    /// with its running statistics (training-only outputs dropped), Dropout as the identity.
    #[arg(long)]
    pub training_as_inference: bool,
    /// How LSTM nodes are written: unrolled (per-step ops every runtime has; each invoke starts
    /// from the node's initial state) or sequence (one UNIDIRECTIONAL_SEQUENCE_LSTM each: smaller
    /// for long sequences, but its state persists across invokes; reset it between independent
    /// sequences). sequence takes LSTMs with zero initial states whose Y_c is unused.
    #[arg(long, value_name = "MODE", value_parser = ["unrolled", "sequence"], default_value = "unrolled")]
    pub lstm: String,
    /// Print what each optimization pass did and the op histograms.
    #[arg(short, long)]
    pub verbose: bool,
    /// Write a JSON report of the conversion (passes, ops, sizes) to this file.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Run only the passes required for a valid file (layout, lowering); for debugging.
    #[arg(long, conflicts_with = "passes")]
    pub no_optimize: bool,
    /// Run only these optional passes (comma-separated; see `-v` output for names).
    #[arg(long, value_name = "A,B,...")]
    pub passes: Option<String>,
    /// Quantize: fp16 (float16 weights), int8 (int8 weights only; with --calibration, int8
    /// weights and activations), int16x8 (int8 weights, int16 activations; needs --calibration).
    #[arg(long, value_name = "MODE", value_parser = ["fp16", "int8", "int16x8"])]
    pub quantize: Option<String>,
    /// Representative inputs for full int8: a directory of .npy files (one subdirectory per
    /// input for several inputs), a .npy or a .npz.
    #[arg(long, value_name = "DATA", requires = "quantize")]
    pub calibration: Option<PathBuf>,
    /// Image calibration data: per-channel mean subtracted from pixels in [0, 1] (1 or 3 values).
    #[arg(
        long,
        value_name = "M,...",
        value_delimiter = ',',
        default_value = "0",
        requires = "calibration"
    )]
    pub mean: Vec<f32>,
    /// Image calibration data: per-channel divisor after the mean (1 or 3 values).
    #[arg(
        long,
        value_name = "S,...",
        value_delimiter = ',',
        default_value = "1",
        requires = "calibration"
    )]
    pub std: Vec<f32>,
    /// Image calibration data: resize to H,W, then center-crop to the model's input size
    /// (default: resize straight to the input size).
    #[arg(
        long,
        value_name = "H,W",
        value_delimiter = ',',
        num_args = 1,
        requires = "calibration"
    )]
    pub resize: Option<Vec<u32>>,
    /// How activation ranges are chosen: minmax, percentile[:P] (default 99.99), mse, entropy,
    /// or auto (per tensor, the candidate with the least expected error on its histogram).
    /// Without it: whichever of minmax and auto gives the better output on the samples.
    #[arg(long, value_name = "METHOD", requires = "calibration")]
    pub calibration_method: Option<String>,
    /// Element type of the model's inputs and outputs with full int8 (--calibration, or a QDQ
    /// model): int8; with int16x8: int16.
    #[arg(long, value_name = "TYPE", value_parser = ["float", "int8", "int16"], default_value = "float")]
    pub io_type: String,
    /// With full int8: fail if any op has to stay float.
    #[arg(long)]
    pub strict_int8: bool,
    /// With full int8: keep these nodes (ONNX names, comma-separated) in float.
    #[arg(long, value_name = "NODE,...", value_delimiter = ',')]
    pub exclude: Vec<String>,
    /// With full int8: keep the layers that cost the most in int16 or float until every output's
    /// SNR against the float model reaches this many dB (automatic mixed precision), both pooled
    /// over the calibration samples and averaged per sample in dB. If the budget cannot be met
    /// the conversion fails, naming the best SNR reached.
    #[arg(long, value_name = "DB", requires = "calibration")]
    pub min_snr: Option<f64>,
    /// With --min-snr: write the best model found even when it misses the budget.
    #[arg(long, requires = "min_snr")]
    pub accept_snr_miss: bool,
    /// With full int8: skip empirical bias correction (by default each conv/dense layer's bias
    /// absorbs the mean error quantization adds on the calibration data, where that helps).
    #[arg(long, requires = "calibration")]
    pub no_bias_correction: bool,
    /// With full int8: round conv/dense weights to nearest (by default each layer's rounding
    /// errors are compensated in its other weights through the correlations of its inputs on
    /// the calibration data, GPTQ, where that helps).
    #[arg(long, requires = "calibration")]
    pub no_weight_rounding: bool,
    /// With full int8: keep each LayerNorm with int16 activations (its squared difference,
    /// variance and reciprocal square root in float) even where the output's SNR does not
    /// improve (by default they are tried and kept where it improves by 0.5 dB; --strict-int8
    /// keeps them int8).
    #[arg(long, requires = "calibration")]
    pub layernorm_int16: bool,
    /// With full int8: skip cross-layer equalization (by default the channels of a tensor
    /// between two conv/dense layers are balanced in their weights before calibrating).
    #[arg(long, requires = "calibration")]
    pub no_equalize: bool,
    /// With full int8: dense-layer weights per tensor instead of per channel (for TFLite runtimes
    /// older than 2.13, which lack per-channel FULLY_CONNECTED).
    #[arg(long, requires = "calibration")]
    pub per_tensor_dense: bool,
    /// With full int8: keep all ops of these IR types (e.g. Softmax,Add) in float.
    #[arg(long, value_name = "OP,...", value_delimiter = ',')]
    pub exclude_op: Vec<String>,
}

impl ConvertArgs {
    /// The options of `litecvt convert MODEL -o OUTPUT` with every other flag at its default.
    pub fn new(model: PathBuf, output: PathBuf) -> ConvertArgs {
        #[derive(Parser)]
        struct ConvertOnly {
            #[command(flatten)]
            args: ConvertArgs,
        }
        let mut defaults = ConvertOnly::parse_from(["convert", "MODEL", "-o", "OUTPUT"]).args;
        defaults.model = model;
        defaults.output = output;
        defaults
    }
}

/// The `litecvt` command with the process's arguments.
pub fn main() -> ExitCode {
    main_with_args(std::env::args_os())
}

/// The `litecvt` command with `args` (the first is the program name): what the binary runs.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    ExitCode::from(status_with_args(args))
}

/// [`main_with_args`] as a number (0 success, 1 failure, 2 usage error), for callers that exit
/// themselves (the Python package's `litecvt` script). Usage errors, `--help` and `--version`
/// print and return instead of exiting the process.
pub fn status_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    match commands::run(cli.command) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convert_args_new_has_the_command_line_defaults() {
        let a = ConvertArgs::new("m.onnx".into(), "m.lite".into());
        assert_eq!(a.model, PathBuf::from("m.onnx"));
        assert_eq!(a.output, PathBuf::from("m.lite"));
        assert_eq!(a.io_type, "float");
        assert_eq!((a.mean.clone(), a.std.clone()), (vec![0.0], vec![1.0]));
        assert!(a.quantize.is_none() && a.calibration.is_none());
    }

    #[test]
    fn usage_errors_return_instead_of_exiting() {
        assert_eq!(status_with_args(["litecvt", "no-such-command"]), 2);
        assert_eq!(status_with_args(["litecvt", "--version"]), 0);
    }
}
