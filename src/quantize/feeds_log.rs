//! Which conv and dense layers feed a LOG (through elementwise ops and value moves only): a
//! log-mel front-end's filterbank, whose output is a spectrum's energy per band. Weights-only
//! int8 leaves their weights float: a hybrid kernel rounds its input and weights to int8 steps
//! of the row's largest value, and the LOG turns that absolute error on the quiet bands into a
//! large one (openWakeWord's log-mel front-end: 7.2 dB with its filterbank int8, 46.7 with it
//! float, on 16 held-out inputs; the two STFT convolutions before it stay int8).

use super::params::moves_values;
use crate::ir::{Graph, Op, TensorId, UnaryOp};
use std::collections::{HashMap, HashSet};

/// How many elementwise ops may stand between a layer and the LOG.
const MAX_BETWEEN: usize = 8;

/// Indices of the conv / transposed-conv / dense nodes of `g` whose output reaches a LOG.
pub(crate) fn layers_feeding_log(g: &Graph) -> HashSet<usize> {
    let mut readers: HashMap<TensorId, Vec<usize>> = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for &t in &n.inputs {
            readers.entry(t).or_default().push(i);
        }
    }
    let runtime_inputs = |i: usize| {
        g.nodes[i]
            .inputs
            .iter()
            .filter(|&&t| !g.tensors[t].is_const())
            .count()
    };
    let reaches_log = |start: usize| {
        let mut frontier = g.nodes[start].outputs.clone();
        for _ in 0..=MAX_BETWEEN {
            let mut next = Vec::new();
            for t in frontier {
                for &r in readers.get(&t).into_iter().flatten() {
                    let passes = match &g.nodes[r].op {
                        Op::Unary(UnaryOp::Log) => return true,
                        Op::Unary(_) => true,
                        Op::Binary { .. } => runtime_inputs(r) == 1,
                        op => moves_values(op) && runtime_inputs(r) == 1,
                    };
                    if passes {
                        next.extend(g.nodes[r].outputs.iter().copied());
                    }
                }
            }
            frontier = next;
        }
        false
    };
    g.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            matches!(
                n.op,
                Op::Conv2d { .. } | Op::ConvTranspose2d { .. } | Op::FullyConnected { .. }
            )
        })
        .filter(|&(i, _)| reaches_log(i))
        .map(|(i, _)| i)
        .collect()
}
