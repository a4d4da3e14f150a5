//! Automatic mixed precision (`--min-snr`): which layers leave int8 when the quantized model
//! misses its error budget, and for what: int16 activations (TFLite's 16x8 kernels) where the
//! op has one, float where it has not or int16 was not enough.
//!
//! A small model (up to `EXHAUSTIVE_CANDIDATES` candidate layers) measures each layer's
//! sensitivity directly: the output SNR with that layer alone in float, one quantization per
//! layer; the layers that help most then go to float one by one until the budget is met.
//!
//! A larger one reads sensitivity from one per-layer error measurement of the current file: a
//! layer's *local damage* is how far its output's SNR falls below its inputs' (error it adds, not
//! error it inherits). The most damaging layers move a few at a time; a step is kept only if the
//! output SNR improves, so each round costs one quantization and two measurements on the error
//! samples, not one conversion per layer. Moving a layer to int16 moves the tensor it writes:
//! its readers run in int16 too where they can, so the value never passes through int8 (a
//! precision change costs a DEQUANTIZE → QUANTIZE pair).

use super::params::{int16_rule, int8_rule, OutputRule};
use super::pipeline::{Attempt, Precision, Quantizer};
use super::report;
use super::weights::Activations;
use crate::ir::{Graph, Op};
use anyhow::Result;
use std::collections::{HashMap, HashSet};

/// Further than this below the budget (dB), the search starts from int16 everywhere it can.
const FAR_FROM_BUDGET_DB: f64 = 6.0;

/// Up to this many candidates, each layer's sensitivity is measured on its own.
const EXHAUSTIVE_CANDIDATES: usize = 32;

/// The attempts an exhaustive search makes at most: each candidate alone, then in turn.
pub const EXHAUSTIVE_ATTEMPTS: usize = 2 * EXHAUSTIVE_CANDIDATES + 1;

/// Rounds of the search (each one quantization and measurement).
const MAX_ROUNDS: usize = 12;

/// Layers moved per round: this fraction of the candidates (at least one).
const STEP_FRACTION: usize = 24;

/// A move to float that costs less than this (dB) is noise, not a loss.
const NO_WORSE_DB: f64 = 0.05;

/// Local damage below this (dB) is noise, not a reason to leave int8.
const MIN_DAMAGE_DB: f64 = 0.5;

/// SNR of a layer whose input SNR is not measured (a float input): what int8 alone could give.
const UNMEASURED_INPUT_DB: f64 = 60.0;

/// Multiply-adds (elementwise operations counted as one) one sample costs in `g`, roughly:
/// what sets the cost of an attempt.
pub fn work_per_sample(g: &Graph) -> f64 {
    let elements = |t: usize| g.tensors[t].shape.iter().product::<usize>() as f64;
    g.nodes
        .iter()
        .filter_map(|n| {
            let out = *n.outputs.first()?;
            let out_elems = elements(out);
            let per_output = match &n.op {
                // A weight tensor's values per output channel (the output's last dimension).
                Op::Conv2d { .. } | Op::ConvTranspose2d { .. } | Op::FullyConnected { .. } => {
                    let w = *n.inputs.get(1)?;
                    let channels = (*g.tensors[out].shape.last()?).max(1) as f64;
                    elements(w) / channels
                }
                // The contracted dimension.
                Op::MatMul { .. } => *g.tensors[n.inputs[0]].shape.last()? as f64,
                _ => 1.0,
            };
            Some(out_elems * per_output)
        })
        .sum()
}

/// Names of the nodes worth moving: those that compute (a conv, an add, a softmax…), not those
/// that only move values, whose int8 form adds no error.
pub fn candidates(g: &Graph) -> Vec<String> {
    let mut names: Vec<String> = g
        .nodes
        .iter()
        .filter(|n| {
            matches!(
                int8_rule(g, n),
                Some(OutputRule::Calibrated | OutputRule::Fixed(_))
            )
        })
        .map(|n| n.name.clone())
        .collect();
    names.dedup();
    names
}

/// Each candidate node's local damage in `attempt` (dB), most damaging first.
fn damage(g: &Graph, layers: &[report::LayerError], candidates: &[String]) -> Vec<(f64, String)> {
    let snr: HashMap<&str, f64> = layers
        .iter()
        .map(|l| (report::float_name(&l.tensor), l.snr_db))
        .collect();
    let wanted: HashSet<&str> = candidates.iter().map(String::as_str).collect();
    let mut out: Vec<(f64, String)> = g
        .nodes
        .iter()
        .filter(|n| wanted.contains(n.name.as_str()))
        .filter_map(|n| {
            let out = *snr.get(g.tensors[n.outputs[0]].name.as_str())?;
            let inputs = n
                .inputs
                .iter()
                .filter(|&&t| !g.tensors[t].is_const())
                .map(|&t| {
                    snr.get(g.tensors[t].name.as_str())
                        .copied()
                        .unwrap_or(UNMEASURED_INPUT_DB)
                })
                .fold(UNMEASURED_INPUT_DB, f64::min);
            Some((inputs - out, n.name.clone()))
        })
        .filter(|(d, _)| *d >= MIN_DAMAGE_DB)
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0));
    out
}

/// The nodes that run in int16 when `name` moves there: it and the readers of its output that
/// have a 16x8 kernel.
fn int16_island(g: &Graph, name: &str) -> Vec<String> {
    let Some(n) = g.nodes.iter().find(|n| n.name == name) else {
        return vec![];
    };
    if int16_rule(g, n).is_none() {
        return vec![];
    }
    let mut island = vec![n.name.clone()];
    island.extend(
        g.nodes
            .iter()
            .filter(|r| r.inputs.iter().any(|t| n.outputs.contains(t)))
            .filter(|r| int16_rule(g, r).is_some())
            .map(|r| r.name.clone()),
    );
    island
}

/// Biases corrected again for an attempt's precision ([`super::bias_correction::correct_for_precision`]):
/// the corrected float graph, the layers corrected and the attempt they give, when that is better.
pub type Rebias<'r> =
    dyn Fn(&Quantizer<'_>, &Attempt) -> Result<Option<(Graph, Vec<String>, Attempt)>> + 'r;

/// Layers whose biases the search corrected again, and the precision they were corrected for.
pub type Rebiased = (Vec<String>, Precision);

/// A float graph with biases corrected again, and the layers corrected.
type Corrected = (Graph, Vec<String>);

/// Moves layers out of int8 until the model's SNR ([`Attempt::budget_snr`]) reaches `budget`
/// or no step helps; returns the best attempt found (which may still miss the budget) and, when
/// the search started from int16 everywhere with biases corrected for that start (`rebias`), the
/// layers corrected and the precision they were corrected for (`q`'s float graph then has those
/// biases).
pub fn search(
    q: &mut Quantizer<'_>,
    best: Attempt,
    budget: f64,
    rebias: &Rebias<'_>,
) -> Result<(Attempt, Option<Rebiased>)> {
    let all = candidates(&q.float_graph);
    if best.budget_snr() >= budget {
        return Ok((best, None));
    }
    // Far from the budget, errors that many layers add a little each dominate: start from every
    // layer with a 16x8 kernel in int16 (the rest of the computing layers in float, as
    // whole-model int16x8 runs them) if that is better.
    let plain = best;
    let mut best = plain.clone();
    let mut rebiased = None;
    let far = budget - best.budget_snr() > FAR_FROM_BUDGET_DB;
    let can_widen = q.int8.activations == Activations::Int8;
    let widened = wide(&q.float_graph, &plain.precision, &all);
    // The biases were corrected for the plain file's int8 activations: an int16 start that
    // reads no better than the plain file with them is judged again with biases corrected for
    // it, or it is passed over where it is far better (those corrections make up for clipped
    // int8 tails that int16 tensors, on min/max ranges, do not have). One that reads better
    // starts with them: the biases are corrected for the precision the search ends at anyway,
    // and correcting them for the start as well ended PP-OCRv4 rec's search just past the
    // budget with a file that did worse on held-out inputs (28.1 dB against 30.2).
    let wide_start = |q: &Quantizer<'_>| -> Result<(Attempt, Option<Corrected>)> {
        let trial = q.attempt(&widened)?;
        if trial.budget_snr() > plain.budget_snr() {
            return Ok((trial, None));
        }
        Ok(match rebias(q, &trial)? {
            Some((graph, layers, attempt)) => (attempt, Some((graph, layers))),
            None => (trial, None),
        })
    };
    if far && can_widen {
        let (trial, corrected) = wide_start(q)?;
        if trial.budget_snr() > best.budget_snr() {
            best = trial;
            if let Some((graph, layers)) = corrected {
                q.replace_float_graph(graph);
                rebiased = Some((layers, widened.clone()));
            }
        }
    }
    let moves = |q: &Quantizer<'_>, best: Attempt| {
        if best.budget_snr() >= budget {
            Ok(best)
        } else if all.len() <= EXHAUSTIVE_CANDIDATES {
            exhaustive(q, best, budget, &all)
        } else {
            by_local_damage(q, best, budget, &all)
        }
    };
    let found = moves(q, best)?;
    if found.budget_snr() >= budget || far || !can_widen {
        return Ok((found, rebiased));
    }
    // Close to the budget, moving layers one at a time fell short where many layers each add a
    // little (PP-OCR cls once its HardSwish chains became several ops each): search again from
    // int16 everywhere, as far from the budget, where the moves then take layers to float.
    let (trial, corrected) = wide_start(q)?;
    // (Constants are shared, so the clone kept for a restore is cheap.)
    let previous = corrected.map(|(graph, layers)| {
        let previous = q.float_graph.clone();
        q.replace_float_graph(graph);
        (previous, layers)
    });
    let again = moves(q, trial)?;
    Ok(if again.budget_snr() > found.budget_snr() {
        (again, previous.map(|(_, layers)| (layers, widened.clone())))
    } else {
        if let Some((graph, _)) = previous {
            q.float_graph = graph;
        }
        (found, None)
    })
}

/// `precision` with every node that has a 16x8 kernel in int16 (those that only move values
/// too, so no value passes through int8) and the other candidates in float.
fn wide(g: &Graph, precision: &Precision, all: &[String]) -> Precision {
    let mut wide = precision.clone();
    for n in &g.nodes {
        if wide.float.contains(&n.name) || wide.int16.contains(&n.name) {
            continue;
        }
        if int16_rule(g, n).is_some() {
            wide.int16.push(n.name.clone());
        } else if all.contains(&n.name) {
            wide.float.push(n.name.clone());
        }
    }
    wide
}

/// Sensitivity of every candidate measured alone (in float), then the most helpful ones to
/// float in turn until the budget is met.
fn exhaustive(
    q: &Quantizer<'_>,
    mut best: Attempt,
    budget: f64,
    all: &[String],
) -> Result<Attempt> {
    let mut gains = Vec::new();
    for name in all {
        if q.out_of_time() {
            break;
        }
        let mut p = best.precision.clone();
        p.float.push(name.clone());
        gains.push((q.attempt(&p)?.budget_snr(), name.clone()));
    }
    gains.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, name) in gains {
        if best.budget_snr() >= budget || q.out_of_time() {
            break;
        }
        let mut p = best.precision.clone();
        p.float.push(name);
        let trial = q.attempt(&p)?;
        // A layer that does not help on its own may once the layers hiding its error are float
        // too: a move is kept unless it makes the output measurably worse.
        if trial.budget_snr() > best.budget_snr() - NO_WORSE_DB {
            best = trial;
        }
    }
    Ok(best)
}

/// Rounds of: per-layer errors of the current file, the most locally damaging layers to int16
/// (or float), kept if the output improves.
fn by_local_damage(
    q: &Quantizer<'_>,
    mut best: Attempt,
    budget: f64,
    all: &[String],
) -> Result<Attempt> {
    let step = all.len().div_ceil(STEP_FRACTION).max(1);
    let can_widen = q.int8.activations == Activations::Int8;
    // Nodes already moved to float, and those tried in int16.
    let mut tried_float: HashSet<String> = best.precision.float.iter().cloned().collect();
    let mut tried_int16: HashSet<String> = best.precision.int16.iter().cloned().collect();
    for _ in 0..MAX_ROUNDS {
        if best.budget_snr() >= budget || q.out_of_time() {
            break;
        }
        let layers = report::layer_errors(q.float_runs, &best.bytes, q.samples, &q.bounded)?;
        q.count_attempt();
        let mut trial = best.precision.clone();
        let mut moved = 0;
        for (_, name) in damage(&q.float_graph, &layers, all) {
            if moved == step {
                break;
            }
            if tried_float.contains(&name) {
                continue;
            }
            // int16 first (smaller and faster than float), float if that was not enough.
            let island = if can_widen && !tried_int16.contains(&name) {
                int16_island(&q.float_graph, &name)
            } else {
                vec![]
            };
            if island.is_empty() {
                tried_float.insert(name.clone());
                trial.int16.retain(|n| *n != name);
                trial.float.push(name);
            } else {
                tried_int16.insert(name);
                for n in island {
                    if !trial.int16.contains(&n) && !trial.float.contains(&n) {
                        trial.int16.push(n);
                    }
                }
            }
            moved += 1;
        }
        if moved == 0 {
            break;
        }
        let attempt = q.attempt(&trial)?;
        if attempt.budget_snr() > best.budget_snr() {
            best = attempt;
        }
    }
    Ok(best)
}
