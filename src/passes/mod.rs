//! Graph passes and the pipeline that runs them.
//!
//! Optimizations are `fn(&mut Graph) -> usize` (how many rewrites they made) and can be turned
//! off (`--no-optimize`, `--passes a,b`); `gelu` (TFLite has no Erf), `layout` and `lower` are
//! required to produce a valid file and always run. Each group runs to a fixed point, and every run is recorded in the
//! [`PipelineReport`] that `litecvt convert -v` / `--report` show.

pub mod centered_variance;
pub mod dedup_constants;
pub mod fold_batchnorm;
pub mod fold_channel_gather;
pub mod fold_channel_scale;
pub mod fold_constants;
pub mod fold_input_affine;
pub mod fuse_activation;
pub mod fuse_bias;
pub mod fuse_pad;
pub mod gelu;
pub mod layernorm;
pub mod layout;
pub mod lower;
pub mod simplify;
pub mod swish;
pub mod transpose_chains;

use crate::ir::Graph;
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// An optional optimization.
pub struct Optimization {
    pub name: &'static str,
    pub about: &'static str,
    pub run: fn(&mut Graph) -> usize,
}

fn prune(g: &mut Graph) -> usize {
    let (nodes, tensors) = g.remove_dead();
    nodes + tensors
}

/// Run on the ONNX-layout graph, in this order, until none of them changes anything.
pub const BEFORE_LAYOUT: &[Optimization] = &[
    Optimization {
        name: "prune",
        about: "remove nodes and tensors no output depends on",
        run: prune,
    },
    Optimization {
        name: "fold_constants",
        about: "evaluate nodes whose inputs are all constant",
        run: fold_constants::fold_constants,
    },
    Optimization {
        name: "simplify",
        about: "algebraic identities, like terms, chains of constant Mul/Add, Reshape/Transpose",
        run: simplify::simplify,
    },
    Optimization {
        name: "layernorm",
        about: "recognise LayerNorm written out as ReduceMean/Sub/Pow/Sqrt/Div (+ gamma, beta)",
        run: layernorm::fuse_layernorm,
    },
    Optimization {
        name: "swish",
        about:
            "recognise x*Sigmoid(x) as SiLU and x*HardSigmoid(x), x*Clip(x+3,0,6)/6 as HardSwish",
        run: swish::fuse_swish,
    },
    Optimization {
        name: "fold_batchnorm",
        about: "fold BatchNorm into the preceding conv/dense layer",
        run: fold_batchnorm::fold_batchnorm,
    },
    Optimization {
        name: "fuse_bias",
        about: "fold bias Add and per-channel Mul/Add into conv/dense weights",
        run: fuse_bias::fuse_bias,
    },
    Optimization {
        name: "fuse_pad",
        about: "fold a constant Pad of H/W into the conv or max pool reading it (SAME/VALID)",
        run: fuse_pad::fuse_pad,
    },
    Optimization {
        name: "layernorm_affine",
        about: "fold a LayerNorm's gamma/beta into the dense layers that read it",
        run: layernorm::fold_layernorm_affine,
    },
    Optimization {
        name: "dedup_constants",
        about: "share identical constant tensors",
        run: dedup_constants::dedup_constants,
    },
];

/// Run after the pattern recognizers (LayerNorm, swish, GELU) are done, so folding a constant
/// Mul or Add into a layer never takes a piece out of a pattern (GELU's final `* 0.5` is read by
/// the next dense layer), nor does rewriting a variance the LayerNorm recognizer would take:
/// until none of them changes anything.
pub const FOLD_INTO_LAYERS: &[Optimization] = &[
    Optimization {
        name: "center_variance",
        about: "compute a variance written as E[x²] - E[x]² as the mean squared deviation E[(x - E[x])²]",
        run: centered_variance::center_variance,
    },
    Optimization {
        name: "fold_channel_scale",
        about: "fold a per-channel Mul after a conv/dense (also across ReLU, or a BN after ReLU) into its weights",
        run: fold_channel_scale::fold_channel_scale,
    },
    Optimization {
        name: "fold_input_affine",
        about: "fold a per-channel Mul (and, without padding, Add) that a conv/dense reads into its weights and bias",
        run: fold_input_affine::fold_input_affine,
    },
    Optimization {
        name: "fuse_bias",
        about: "fold bias Add and per-channel Mul/Add into conv/dense weights",
        run: fuse_bias::fuse_bias,
    },
    Optimization {
        name: "fold_channel_gather",
        about: "fold a permutation of a conv's output channels (DepthToSpace CRD's GATHER) into its weights",
        run: fold_channel_gather::fold_channel_gather,
    },
    Optimization {
        name: "prune",
        about: "remove nodes and tensors no output depends on",
        run: prune,
    },
];

/// Run on the lowered NHWC graph (TFLite ops) until none of them changes anything.
pub const AFTER_LOWERING: &[Optimization] = &[
    Optimization {
        name: "fuse_activation",
        about: "fuse Relu/Relu6/ReluN1To1/Tanh into the producer's fused activation",
        run: fuse_activation::fuse_activations,
    },
    Optimization {
        name: "transpose_chains",
        about: "RESHAPE/TRANSPOSE chains that keep the element order become one RESHAPE",
        run: transpose_chains::simplify_transposes,
    },
    Optimization {
        name: "prune",
        about: "remove nodes and tensors no output depends on",
        run: prune,
    },
];

/// Which optimizations run.
#[derive(Clone, Debug, Default)]
pub enum PassSelection {
    #[default]
    All,
    None,
    Only(BTreeSet<String>),
}

impl PassSelection {
    /// Parses `--passes a,b,c`; unknown names are an error listing the known ones.
    pub fn parse_list(list: &str) -> Result<PassSelection> {
        let known = optimization_names();
        let mut set = BTreeSet::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if !known.contains(&name) {
                bail!(
                    "unknown pass '{name}'; known passes: {}",
                    known.into_iter().collect::<Vec<_>>().join(", ")
                );
            }
            set.insert(name.to_string());
        }
        Ok(PassSelection::Only(set))
    }

    fn enabled(&self, name: &str) -> bool {
        match self {
            PassSelection::All => true,
            PassSelection::None => false,
            PassSelection::Only(s) => s.contains(name),
        }
    }
}

/// Names of all optional passes, sorted.
pub fn optimization_names() -> BTreeSet<&'static str> {
    BEFORE_LAYOUT
        .iter()
        .chain(FOLD_INTO_LAYERS)
        .chain(AFTER_LOWERING)
        .map(|o| o.name)
        .collect()
}

/// What one pass did over all its runs.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PassRecord {
    pub pass: String,
    pub runs: usize,
    pub rewrites: usize,
    /// Change in node count (negative: removed).
    pub nodes_delta: i64,
    /// Change in constant bytes.
    pub const_bytes_delta: i64,
    pub millis: f64,
}

/// What the pipeline did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PipelineReport {
    pub passes: Vec<PassRecord>,
    /// IR op histogram right after import and after the last pass.
    pub ir_ops_before: BTreeMap<String, usize>,
    pub ir_ops_after: BTreeMap<String, usize>,
    pub nodes_before: usize,
    pub nodes_after: usize,
    pub const_bytes_before: usize,
    pub const_bytes_after: usize,
    /// Transposes the layout pass could not remove.
    pub transposes_left: usize,
}

impl PipelineReport {
    fn record(
        &mut self,
        name: &str,
        g: &mut Graph,
        f: impl FnOnce(&mut Graph) -> Result<usize>,
    ) -> Result<usize> {
        let (n0, b0) = (g.nodes.len() as i64, g.const_bytes() as i64);
        let t = Instant::now();
        let rewrites = f(g)?;
        let millis = t.elapsed().as_secs_f64() * 1e3;
        let rec = match self.passes.iter().position(|r| r.pass == name) {
            Some(i) => &mut self.passes[i],
            None => {
                self.passes.push(PassRecord {
                    pass: name.to_string(),
                    ..Default::default()
                });
                self.passes.last_mut().expect("just pushed")
            }
        };
        rec.runs += 1;
        rec.rewrites += rewrites;
        rec.nodes_delta += g.nodes.len() as i64 - n0;
        rec.const_bytes_delta += g.const_bytes() as i64 - b0;
        rec.millis += millis;
        Ok(rewrites)
    }

    fn fixed_point(
        &mut self,
        g: &mut Graph,
        group: &[Optimization],
        sel: &PassSelection,
    ) -> Result<()> {
        // Each rewrite shrinks or canonicalises the graph; the cap only guards against a pair of
        // passes undoing each other.
        for _ in 0..16 {
            let mut changed = 0;
            for o in group.iter().filter(|o| sel.enabled(o.name)) {
                changed += self.record(o.name, g, |g| Ok((o.run)(g)))?;
            }
            if changed == 0 {
                break;
            }
        }
        Ok(())
    }
}

/// Options of the pipeline.
#[derive(Clone, Debug, Default)]
pub struct PipelineOptions {
    pub passes: PassSelection,
    pub layout: layout::LayoutOptions,
}

fn histogram(g: &Graph) -> BTreeMap<String, usize> {
    g.op_histogram()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// Runs the optimizations and the required layout and lowering passes.
pub fn run_pipeline(g: &mut Graph, opts: &PipelineOptions) -> Result<PipelineReport> {
    // The subgraphs of IF and WHILE nodes go through the passes on their own; their edges keep
    // the logical layout, which the op's inputs and outputs have too.
    let sub_opts = PipelineOptions {
        passes: opts.passes.clone(),
        layout: layout::LayoutOptions { nhwc_io: false },
    };
    for n in &mut g.nodes {
        let op_name = n.op.name();
        for (which, sub) in n.op.subgraphs_mut() {
            run_pipeline(sub, &sub_opts)
                .map_err(|e| anyhow::anyhow!("node '{}' ({op_name}), {which}: {e:#}", n.name))?;
        }
    }
    let mut r = PipelineReport {
        ir_ops_before: histogram(g),
        nodes_before: g.nodes.len(),
        const_bytes_before: g.const_bytes(),
        ..Default::default()
    };
    r.fixed_point(g, BEFORE_LAYOUT, &opts.passes)?;
    // Required: TFLite has no Erf, so GELU must be recognised for the model to be expressible.
    r.record("gelu", g, |g| Ok(gelu::fuse_gelu(g)))?;
    r.fixed_point(g, FOLD_INTO_LAYERS, &opts.passes)?;
    let layout_opts = opts.layout;
    r.record("layout", g, |g| {
        let lr = layout::to_nhwc(g, layout_opts)?;
        Ok(lr.transposes_removed + lr.transposes_added)
    })?;
    r.record("lower", g, lower::lower)?;
    r.fixed_point(g, AFTER_LOWERING, &opts.passes)?;
    // Dead code is removed even with --no-optimize: the writer needs a clean graph.
    g.remove_dead();
    check_no_empty_tensors(g)?;
    r.transposes_left = g
        .nodes
        .iter()
        .filter(|n| matches!(n.op, crate::ir::Op::Transpose { .. }))
        .count();
    r.ir_ops_after = histogram(g);
    r.nodes_after = g.nodes.len();
    r.const_bytes_after = g.const_bytes();
    Ok(r)
}

/// Zero-element tensors may appear while importing (an empty Split piece, an empty shape
/// vector) but no node of the converted model may read one, and no output be one: TFLite
/// runtimes reject zero-length buffers and most kernels such shapes.
fn check_no_empty_tensors(g: &Graph) -> Result<()> {
    for &o in &g.outputs {
        let t = &g.tensors[o];
        if t.shape.contains(&0) {
            bail!(
                "graph output '{}' has no elements (shape {:?}); zero-element tensors are not \
                 supported",
                t.name,
                t.shape
            );
        }
    }
    // Read by a node: an unread piece of a Split may be empty.
    for n in &g.nodes {
        for &t in &n.inputs {
            let t = &g.tensors[t];
            if t.shape.contains(&0) {
                bail!(
                    "node '{}' ({}): tensor '{}' has no elements (shape {:?}); zero-element \
                     tensors are not supported",
                    n.name,
                    n.op.name(),
                    t.name,
                    t.shape
                );
            }
        }
    }
    Ok(())
}

/// Constants holding NaN or infinity, one warning each (they are legal, but usually a sign of
/// a broken export; -inf attention masks are the common legitimate case).
pub fn nonfinite_constant_warnings(g: &Graph) -> Vec<String> {
    g.tensors
        .iter()
        .filter(|t| t.data.as_ref().is_some_and(|d| !d.all_finite()))
        .map(|t| format!("constant '{}' contains NaN or infinite values", t.name))
        .collect()
}
