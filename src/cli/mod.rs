//! The command line: thin wrappers over the library.

mod commands;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

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

#[derive(Subcommand)]
pub enum Command {
    /// Convert an ONNX model to a .lite (TFLite-compatible) file.
    #[command(
        after_help = "Examples:\n  litecvt convert fixtures/digits_cnn.onnx -o digits.lite\n  litecvt convert model.onnx -o model.lite --input-shape input=1,3,224,224\n  litecvt convert model.onnx -o model.lite --nhwc-io -v --report report.json\n  litecvt convert model.onnx -o model.lite --passes prune,fold_batchnorm"
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
    },
    /// Run the ONNX model (tract) and the converted file (literun) on the same inputs and compare.
    #[command(
        after_help = "Examples:\n  litecvt compare fixtures/digits_cnn.onnx digits.lite --input input=fixtures/digits_cnn.input.npy"
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
    /// Keep rank-4 inputs and outputs in NHWC instead of the ONNX NCHW layout (no transposes).
    #[arg(long)]
    pub nhwc_io: bool,
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
}

pub fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match commands::run(cli.command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
