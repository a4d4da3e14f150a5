//! Automatic mixed precision (`--min-snr`): which layers may go back to float when the quantized
//! model misses its error budget. The search itself (sensitivity of the output to each layer,
//! then the most sensitive layers back to float until the budget is met) is in `convert`.

use super::params::{int8_rule, OutputRule};
use crate::ir::Graph;

/// Names of the nodes worth keeping in float: those that compute (a conv, an add, a softmax…),
/// not those that only move values, whose int8 form adds no error.
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
