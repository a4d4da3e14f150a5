//! Quantized versions of one calibrated float graph: what the range choice, bias correction,
//! weight rounding and the precision search vary and compare ([`Quantizer::attempt`]).

use super::calibrate::Sample;
use super::float_islands;
use super::observe::KeptInterpreters;
use super::pipeline::{budget_snr, worst_snr};
use super::report::{self, FloatOutputs, LayerError};
use super::{FullInt8Options, QuantSummary, Ranges};
use crate::export;
use crate::ir::{ConstData, Graph};
use anyhow::{Context, Result};
use std::collections::HashMap;

/// Tensors of a quantized file (by index) and what receives their values, sample after sample:
/// `f(tensor index, values)`.
pub type AlsoObserved<'o> = (Vec<bool>, Box<dyn FnMut(usize, &[f32]) + 'o>);

/// One quantized version of the float graph and what it measured.
#[derive(Clone)]
pub struct Attempt {
    pub graph: Graph,
    pub summary: QuantSummary,
    pub bytes: Vec<u8>,
    /// Error of each output against the float file.
    pub outputs: Vec<LayerError>,
    /// Which nodes left the default activation type.
    pub precision: Precision,
}

/// Per-node departures from the default activation type (mixed precision).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Precision {
    /// Nodes kept in float (beyond `--exclude`), in the order they were chosen.
    pub float: Vec<String>,
    /// Nodes run with int16 activations, in the order they were chosen.
    pub int16: Vec<String>,
}

impl Attempt {
    pub fn worst_snr(&self) -> f64 {
        worst_snr(&self.outputs)
    }

    /// What `--min-snr` compares with its budget ([`budget_snr`]).
    pub fn budget_snr(&self) -> f64 {
        budget_snr(&self.outputs)
    }
}

/// Makes quantized versions of one calibrated float graph: what the precision search and bias
/// correction vary.
pub struct Quantizer<'a> {
    pub label: &'a str,
    pub float_graph: Graph,
    /// The float graph as a file (what calibration and the error measurements run)...
    pub float_bytes: &'a [u8],
    /// ...and its interpreters, kept for every measurement that runs it.
    pub float_runs: &'a KeptInterpreters<'a>,
    pub ranges: Ranges,
    pub int8: FullInt8Options,
    pub reference: FloatOutputs,
    /// The samples errors are measured on.
    pub samples: &'a [Sample],
    /// Useful intervals of clipped tensors, by name (what layer errors are measured within).
    pub bounded: HashMap<String, (f32, f32)>,
    /// Quantizations measured so far (and layer-error measurements, which cost about as much).
    pub attempts: std::cell::Cell<usize>,
    /// How many `attempts` the `--min-snr` search may reach: a count, not a clock, so the same
    /// model converts to the same file on any machine under any load.
    pub attempt_limit: Option<usize>,
    /// The float graph before weight rounding and bias correction changed constants for int8
    /// (the same nodes): a layer kept in float gets its own weights and bias back.
    pub original: Option<Graph>,
}

impl Quantizer<'_> {
    /// Makes `changed` (the same nodes, other constants) the float graph, remembering the
    /// model's own.
    pub(super) fn replace_float_graph(&mut self, changed: Graph) {
        let before = std::mem::replace(&mut self.float_graph, changed);
        self.original.get_or_insert(before);
    }

    /// Whether a search should stop trying.
    pub fn out_of_time(&self) -> bool {
        self.attempt_limit
            .is_some_and(|limit| self.attempts.get() >= limit)
    }

    /// Counts one measurement against the search's limit.
    pub fn count_attempt(&self) {
        self.attempts.set(self.attempts.get() + 1);
    }

    /// The graph quantized with the nodes `precision` names in float or int16.
    pub fn attempt(&self, precision: &Precision) -> Result<Attempt> {
        self.attempt_with(&self.float_graph, precision)
    }

    /// [`Self::attempt`] from another float graph (the same tensors, other constants).
    pub fn attempt_with(&self, float_graph: &Graph, precision: &Precision) -> Result<Attempt> {
        self.attempt_observing(float_graph, precision, |_| Ok(None))
    }

    /// [`Self::attempt_with`], where `also(file)` may name tensors of the quantized file (by
    /// index) whose values on the error samples' runs go, sample after sample, to the function
    /// it gives with them.
    pub fn attempt_observing<'o>(
        &self,
        float_graph: &Graph,
        precision: &Precision,
        also: impl FnOnce(&[u8]) -> Result<Option<AlsoObserved<'o>>>,
    ) -> Result<Attempt> {
        self.count_attempt();
        let float_nodes = |name: &String| {
            precision.float.contains(name)
                || self.int8.exclude_nodes.contains(name)
                || self.int8.between_float.contains(name)
        };
        // Copied only where a layer kept in float gets its own constants back.
        let mut g0 = std::borrow::Cow::Borrowed(float_graph);
        if let Some(original) = &self.original {
            let mut restore = Vec::new();
            for (n, o) in float_graph.nodes.iter().zip(&original.nodes) {
                if o.name != n.name || !float_nodes(&n.name) {
                    continue;
                }
                for (k, &t) in n.inputs.iter().enumerate() {
                    let Some(now) = &float_graph.tensors[t].data else {
                        continue;
                    };
                    // A bias that bias correction added where the layer had none was zero.
                    let was = match o.inputs.get(k) {
                        Some(&ot) => original.tensors[ot].data.clone(),
                        None => now.as_f32().map(|b| ConstData::F32(b.mapv(|_| 0.0)).into()),
                    };
                    restore.extend(was.map(|d| (t, d)));
                }
            }
            if !restore.is_empty() {
                let g = g0.to_mut();
                for (t, d) in restore {
                    g.tensors[t].data = Some(d);
                }
            }
        }
        let mut int8 = self.int8.clone();
        int8.exclude_nodes.extend(precision.float.iter().cloned());
        int8.int16_nodes.extend(precision.int16.iter().cloned());
        let quantize = |int8: &FullInt8Options| -> Result<(Graph, QuantSummary)> {
            let mut q = Graph::clone(&g0);
            let summary = super::full_int8(&mut q, &self.ranges, int8)
                .with_context(|| self.label.to_string())?;
            Ok((q, summary))
        };
        let (mut g, mut summary) = quantize(&int8)?;
        // Ops that only move values between float ops stay float: in int8 they would add
        // nothing but a QUANTIZE, a DEQUANTIZE and rounding (a layer kept in float feeding a
        // float op through a transpose).
        let movers = float_islands::movers_between_float_ops(&g0, &summary);
        if !movers.is_empty() {
            int8.between_float.extend(movers);
            (g, summary) = quantize(&int8)?;
        }
        let bytes = export::planned_tflite(&g, self.label)?;
        let outputs = match also(&bytes)? {
            Some((observed, f)) => {
                report::output_errors_observing(&self.reference, &bytes, self.samples, &observed, f)
            }
            None => report::output_errors(&self.reference, &bytes, self.samples),
        }
        .with_context(|| format!("{}: measuring quantization error", self.label))?;
        Ok(Attempt {
            graph: g,
            summary,
            bytes,
            outputs,
            precision: precision.clone(),
        })
    }
}
