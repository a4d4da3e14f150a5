//! NCHW → NHWC: rewrites the graph so every image op reads NHWC data and no transpose is left
//! where the math does not need one.
//!
//! Each value carries a permutation `perm` from its logical (ONNX) axes to its physical ones:
//! physical axis i holds logical axis `perm[i]`. Image ops demand NHWC (`[0, 2, 3, 1]`);
//! elementwise and axis ops follow whatever their input has (remapping axes and permuting
//! constants); a Transpose only changes the perm and costs nothing; ops that depend on the
//! logical element order (Reshape, MatMul, FullyConnected) take their input in a perm where
//! the order is unchanged, or fold the permutation into their constant weights. A TRANSPOSE op
//! is emitted only where a value must change layout, and at the graph edges when the model
//! interface keeps the ONNX layout.

use crate::ir::{Graph, Layout, Node, Op, TensorId};
use anyhow::{bail, Result};
use std::collections::HashMap;

mod matmul;
mod reshape;
mod spatial;

/// Options of the layout conversion.
#[derive(Clone, Copy, Debug, Default)]
pub struct LayoutOptions {
    /// Rank-4 model inputs and outputs become NHWC (no transpose at the edges).
    pub nhwc_io: bool,
}

const NHWC: [usize; 4] = [0, 2, 3, 1];

fn identity(rank: usize) -> Vec<usize> {
    (0..rank).collect()
}

fn is_identity(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

fn inverse(perm: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i;
    }
    inv
}

fn permute<T: Copy>(values: &[T], perm: &[usize]) -> Vec<T> {
    perm.iter().map(|&p| values[p]).collect()
}

/// The perm that moves logical axis `channel` to the physical end, others in order.
fn channel_last(rank: usize, channel: usize) -> Vec<usize> {
    let mut p: Vec<usize> = (0..rank).filter(|&a| a != channel).collect();
    p.push(channel);
    p
}

/// A value in the new graph: its tensor and the perm from logical to physical axes.
#[derive(Clone, Debug)]
struct Placed {
    id: TensorId,
    perm: Vec<usize>,
    /// Set on the output of a flatten whose physical element order differs from the logical one:
    /// `col_map[j]` is the logical index of physical element j along the last axis. Only a
    /// FullyConnected consumer can use such a value (it permutes its weight columns).
    col_map: Option<Vec<usize>>,
}

struct Rewriter<'a> {
    old: &'a Graph,
    new: Graph,
    placed: HashMap<TensorId, Placed>,
    /// Constants and transposes already made, keyed by (old tensor, perm).
    cache: HashMap<(TensorId, Vec<usize>), TensorId>,
    consumers: HashMap<TensorId, Vec<usize>>,
    transposes_added: usize,
}

/// Summary of what the conversion did.
#[derive(Clone, Debug, Default)]
pub struct LayoutReport {
    pub transposes_removed: usize,
    pub transposes_added: usize,
}

/// Converts `graph` (ONNX layout) to NHWC in place.
pub fn to_nhwc(graph: &mut Graph, opts: LayoutOptions) -> Result<LayoutReport> {
    let transposes_before = graph
        .nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Transpose { .. }))
        .count();
    let mut consumers: HashMap<TensorId, Vec<usize>> = HashMap::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        for &t in &n.inputs {
            consumers.entry(t).or_default().push(i);
        }
    }
    let mut rw = Rewriter {
        old: graph,
        new: Graph {
            recurrent_nodes: graph.recurrent_nodes.clone(),
            layernorm_nodes: graph.layernorm_nodes.clone(),
            ..Graph::default()
        },
        placed: HashMap::new(),
        cache: HashMap::new(),
        consumers,
        transposes_added: 0,
    };
    for &input in &graph.inputs {
        let t = &graph.tensors[input];
        let perm = if opts.nhwc_io && t.shape.len() == 4 {
            NHWC.to_vec()
        } else {
            identity(t.shape.len())
        };
        let id = rw
            .new
            .add_tensor(t.name.clone(), permute(&t.shape, &perm), t.dtype);
        // Quantization parameters (of a QDQ model) are per tensor: they survive the permutation.
        rw.new.tensors[id].quant = t.quant.clone();
        rw.new.inputs.push(id);
        rw.placed.insert(
            input,
            Placed {
                id,
                perm,
                col_map: None,
            },
        );
    }
    for node in &graph.nodes {
        rw.rewrite(node)?;
    }
    for &output in &graph.outputs {
        let rank = graph.tensors[output].shape.len();
        let want = if opts.nhwc_io && rank == 4 {
            NHWC.to_vec()
        } else {
            identity(rank)
        };
        let mut id = rw.get(output, &want)?;
        let name = graph.tensors[output].name.clone();
        // An output that became a model input (an identity Transpose between them) or another
        // output gets its own tensor, so that renaming it below renames nothing else.
        if rw.new.inputs.contains(&id) || rw.new.outputs.contains(&id) {
            let shape = rw.new.tensors[id].shape.clone();
            let dtype = rw.new.tensors[id].dtype;
            let copy_name = rw.new.fresh_name(&name);
            let copy = rw.new.add_tensor(copy_name, shape.clone(), dtype);
            rw.new.tensors[copy].quant = rw.new.tensors[id].quant.clone();
            rw.new.nodes.push(Node {
                name: name.clone(),
                op: Op::Reshape { shape },
                inputs: vec![id],
                outputs: vec![copy],
            });
            id = copy;
        }
        // The model's outputs keep their ONNX names.
        if rw.new.tensors[id].name != name {
            if let Some(clash) = rw.new.tensors.iter().position(|t| t.name == name) {
                let renamed = rw.new.fresh_name(&format!("{name}_internal"));
                rw.new.tensors[clash].name = renamed;
            }
            rw.new.tensors[id].name = name;
        }
        rw.new.outputs.push(id);
    }
    let transposes_added = rw.transposes_added;
    let mut new = rw.new;
    new.remove_dead();
    *graph = new;
    Ok(LayoutReport {
        transposes_removed: transposes_before,
        transposes_added,
    })
}

impl Rewriter<'_> {
    /// The current placement of an old non-constant tensor.
    fn placed(&self, t: TensorId) -> Result<Placed> {
        match self.placed.get(&t) {
            Some(p) => Ok(p.clone()),
            None => bail!(
                "layout: tensor '{}' is used before it is produced",
                self.old.tensors[t].name
            ),
        }
    }

    fn perm_of(&self, t: TensorId) -> Result<Vec<usize>> {
        if self.old.tensors[t].is_const() {
            return Ok(identity(self.old.tensors[t].shape.len()));
        }
        Ok(self.placed(t)?.perm)
    }

    /// The old tensor `t` in physical order `want`: a permuted constant, the value itself, or the
    /// value through an inserted TRANSPOSE.
    fn get(&mut self, t: TensorId, want: &[usize]) -> Result<TensorId> {
        let old = &self.old.tensors[t];
        if let Some(&id) = self.cache.get(&(t, want.to_vec())) {
            return Ok(id);
        }
        if let Some(data) = &old.data {
            let data = if is_identity(want) {
                data.clone()
            } else {
                data.permute(want).into()
            };
            let name = if is_identity(want) {
                old.name.clone()
            } else {
                format!("{}_nhwc", old.name)
            };
            let quant = old.quant.as_ref().map(|q| q.permuted(want));
            let id = self.new.add_const(name, data);
            self.new.tensors[id].quant = quant;
            self.cache.insert((t, want.to_vec()), id);
            return Ok(id);
        }
        let p = self.placed(t)?;
        if p.col_map.is_some() {
            bail!(
                "layout: '{}' is a flattened NHWC value that only a FullyConnected layer can read",
                old.name
            );
        }
        if p.perm == want {
            return Ok(p.id);
        }
        // physical_want[i] = logical[want[i]] = physical_have[inv_have[want[i]]]
        let inv = inverse(&p.perm);
        let perm: Vec<usize> = want.iter().map(|&w| inv[w]).collect();
        let shape = permute(&old.shape, want);
        let name = self.new.fresh_name(&format!("{}_transposed", old.name));
        let id = self.new.add_tensor(name, shape, old.dtype);
        self.new.nodes.push(Node {
            name: format!("{}_transpose", old.name),
            op: Op::Transpose { perm },
            inputs: vec![p.id],
            outputs: vec![id],
        });
        self.transposes_added += 1;
        self.cache.insert((t, want.to_vec()), id);
        Ok(id)
    }

    /// A constant broadcastable operand expanded to `rank` (leading 1s) and permuted.
    fn const_operand(&mut self, t: TensorId, rank: usize, perm: &[usize]) -> TensorId {
        let old = &self.old.tensors[t];
        let data = old.data.as_ref().expect("constant");
        let mut shape = vec![1; rank - old.shape.len()];
        shape.extend(&old.shape);
        let expanded = data.reshape(&shape);
        let data = if is_identity(perm) {
            expanded
        } else {
            expanded.permute(perm)
        };
        let name = if is_identity(perm) {
            old.name.clone()
        } else {
            format!("{}_nhwc", old.name)
        };
        self.new.add_const(name, data)
    }

    /// Adds the rewritten node; outputs get physical shapes under `out_perms`.
    fn emit(&mut self, node: &Node, op: Op, inputs: Vec<TensorId>, out_perms: Vec<Vec<usize>>) {
        let mut outputs = Vec::new();
        for (&o, perm) in node.outputs.iter().zip(out_perms) {
            let t = &self.old.tensors[o];
            let quant = t.quant.clone();
            let id = self
                .new
                .add_tensor(t.name.clone(), permute(&t.shape, &perm), t.dtype);
            self.new.tensors[id].quant = quant;
            self.placed.insert(
                o,
                Placed {
                    id,
                    perm,
                    col_map: None,
                },
            );
            outputs.push(id);
        }
        self.new.nodes.push(Node {
            name: node.name.clone(),
            op,
            inputs,
            outputs,
        });
    }

    fn rewrite(&mut self, node: &Node) -> Result<()> {
        let x = node.inputs[0];
        let rank = self.old.tensors[x].shape.len();
        let out_rank = |i: usize| self.old.tensors[node.outputs[i]].shape.len();
        match &node.op {
            Op::Conv2d {
                layout: Layout::Nchw,
                ..
            }
            | Op::ConvTranspose2d {
                layout: Layout::Nchw,
                ..
            }
            | Op::Pool2d {
                layout: Layout::Nchw,
                ..
            }
            | Op::Resize {
                layout: Layout::Nchw,
                ..
            }
            | Op::DepthToSpace {
                layout: Layout::Nchw,
                ..
            }
            | Op::SpaceToDepth {
                layout: Layout::Nchw,
                ..
            } => self.rewrite_nchw_spatial(node, x)?,
            Op::CumSum {
                axis,
                exclusive,
                reverse,
            } => {
                let perm = self.perm_of(x)?;
                let data = self.get(x, &perm)?;
                let op = Op::CumSum {
                    axis: inverse(&perm)[*axis],
                    exclusive: *exclusive,
                    reverse: *reverse,
                };
                self.emit(node, op, vec![data], vec![perm]);
            }
            Op::BatchNorm {
                epsilon,
                layout: Layout::Nchw,
            } => {
                let perm = if rank >= 2 {
                    channel_last(rank, 1)
                } else {
                    identity(rank)
                };
                let mut inputs = vec![self.get(x, &perm)?];
                for &p in &node.inputs[1..] {
                    inputs.push(self.get(p, &[0])?);
                }
                self.emit(
                    node,
                    Op::BatchNorm {
                        epsilon: *epsilon,
                        layout: Layout::Nhwc,
                    },
                    inputs,
                    vec![perm],
                );
            }
            Op::Unary(_)
            | Op::Clip { .. }
            | Op::HardSigmoid { .. }
            | Op::Cast { .. }
            | Op::Not
            | Op::Dequantize => {
                let perm = self.perm_of(x)?;
                let data = self.get(x, &perm)?;
                self.emit(node, node.op.clone(), vec![data], vec![perm]);
            }
            Op::Binary { .. } | Op::PRelu | Op::Compare { .. } | Op::Logical { .. } | Op::Where => {
                let r = out_rank(0);
                // Follow the first non-constant full-rank operand that is not in identity order.
                let mut perm = identity(r);
                for &i in &node.inputs {
                    let t = &self.old.tensors[i];
                    if !t.is_const() && t.shape.len() == r {
                        let p = self.perm_of(i)?;
                        if !is_identity(&p) {
                            perm = p;
                            break;
                        }
                    }
                }
                let mut inputs = Vec::new();
                for &i in &node.inputs {
                    let t = &self.old.tensors[i];
                    let id = if t.is_const() {
                        self.const_operand(i, r, &perm)
                    } else if t.shape.len() == r {
                        self.get(i, &perm)?
                    } else if is_identity(&perm) {
                        self.get(i, &identity(t.shape.len()))?
                    } else {
                        // A lower-rank runtime operand: bring it to full rank, then permute.
                        let base = self.get(i, &identity(t.shape.len()))?;
                        let mut shape = vec![1; r - t.shape.len()];
                        shape.extend(&t.shape);
                        let name = self.new.fresh_name(&format!("{}_rank{r}", t.name));
                        let expanded = self.new.add_tensor(name, shape.clone(), t.dtype);
                        self.new.nodes.push(Node {
                            name: format!("{}_expand_rank", node.name),
                            op: Op::Reshape {
                                shape: shape.clone(),
                            },
                            inputs: vec![base],
                            outputs: vec![expanded],
                        });
                        let name = self.new.fresh_name(&format!("{}_transposed", t.name));
                        let out = self.new.add_tensor(name, permute(&shape, &perm), t.dtype);
                        self.new.nodes.push(Node {
                            name: format!("{}_transpose", node.name),
                            op: Op::Transpose { perm: perm.clone() },
                            inputs: vec![expanded],
                            outputs: vec![out],
                        });
                        self.transposes_added += 1;
                        out
                    };
                    inputs.push(id);
                }
                self.emit(node, node.op.clone(), inputs, vec![perm]);
            }
            Op::Softmax { axis } | Op::LogSoftmax { axis } => {
                let mut perm = self.perm_of(x)?;
                if perm.last() != Some(axis) {
                    perm.retain(|a| a != axis);
                    perm.push(*axis);
                }
                let data = self.get(x, &perm)?;
                let op = match node.op {
                    Op::Softmax { .. } => Op::Softmax { axis: rank - 1 },
                    _ => Op::LogSoftmax { axis: rank - 1 },
                };
                self.emit(node, op, vec![data], vec![perm]);
            }
            Op::LayerNorm { axis, epsilon } => {
                let mut perm = self.perm_of(x)?;
                if (*axis..rank).any(|i| perm[i] != i) {
                    perm = identity(rank);
                }
                let mut inputs = vec![self.get(x, &perm)?];
                for &p in &node.inputs[1..] {
                    let r = self.old.tensors[p].shape.len();
                    inputs.push(self.get(p, &identity(r))?);
                }
                self.emit(
                    node,
                    Op::LayerNorm {
                        axis: *axis,
                        epsilon: *epsilon,
                    },
                    inputs,
                    vec![perm],
                );
            }
            Op::Reduce {
                op,
                axes,
                keep_dims,
            } => {
                let perm = self.perm_of(x)?;
                let data = self.get(x, &perm)?;
                let (phys_axes, out_perm) = reduce_axes(&perm, axes, *keep_dims);
                let op = Op::Reduce {
                    op: *op,
                    axes: phys_axes,
                    keep_dims: *keep_dims,
                };
                self.emit(node, op, vec![data], vec![out_perm]);
            }
            Op::ArgMax { axis, keep_dims } | Op::ArgMin { axis, keep_dims } => {
                let perm = self.perm_of(x)?;
                let data = self.get(x, &perm)?;
                let (phys_axes, out_perm) = reduce_axes(&perm, &[*axis], *keep_dims);
                let (axis, keep_dims) = (phys_axes[0], *keep_dims);
                let op = match node.op {
                    Op::ArgMax { .. } => Op::ArgMax { axis, keep_dims },
                    _ => Op::ArgMin { axis, keep_dims },
                };
                self.emit(node, op, vec![data], vec![out_perm]);
            }
            Op::TopK { axis, k } => {
                // TOPK_V2 works on the last physical axis.
                let mut perm = self.perm_of(x)?;
                if perm.last() != Some(axis) {
                    perm.retain(|a| a != axis);
                    perm.push(*axis);
                }
                let data = self.get(x, &perm)?;
                let op = Op::TopK {
                    axis: rank - 1,
                    k: *k,
                };
                self.emit(node, op, vec![data], vec![perm.clone(), perm]);
            }
            Op::Concat { axis } => {
                let perm = self.common_perm(&node.inputs)?;
                let inputs = node
                    .inputs
                    .iter()
                    .map(|&i| self.get(i, &perm))
                    .collect::<Result<Vec<_>>>()?;
                let axis = inverse(&perm)[*axis];
                self.emit(node, Op::Concat { axis }, inputs, vec![perm]);
            }
            Op::Split { axis, sizes } => {
                let perm = self.perm_of(x)?;
                let data = self.get(x, &perm)?;
                let op = Op::Split {
                    axis: inverse(&perm)[*axis],
                    sizes: sizes.clone(),
                };
                self.emit(node, op, vec![data], vec![perm; node.outputs.len()]);
            }
            Op::Slice {
                begins,
                ends,
                steps,
            } => {
                let perm = self.perm_of(x)?;
                let data = self.get(x, &perm)?;
                let op = Op::Slice {
                    begins: permute(begins, &perm),
                    ends: permute(ends, &perm),
                    steps: permute(steps, &perm),
                };
                self.emit(node, op, vec![data], vec![perm]);
            }
            Op::Tile { reps } => {
                let perm = self.perm_of(x)?;
                let data = self.get(x, &perm)?;
                self.emit(
                    node,
                    Op::Tile {
                        reps: permute(reps, &perm),
                    },
                    vec![data],
                    vec![perm],
                );
            }
            Op::Pad {
                before,
                after,
                mode,
                value,
            } => {
                let perm = self.perm_of(x)?;
                let data = self.get(x, &perm)?;
                let op = Op::Pad {
                    before: permute(before, &perm),
                    after: permute(after, &perm),
                    mode: *mode,
                    value: *value,
                };
                self.emit(node, op, vec![data], vec![perm]);
            }
            Op::Expand { shape } => {
                let r = out_rank(0);
                let perm = if r == rank {
                    self.perm_of(x)?
                } else {
                    identity(r)
                };
                let data = if r == rank {
                    self.get(x, &perm)?
                } else {
                    self.get(x, &identity(rank))?
                };
                let op = Op::Expand {
                    shape: permute(shape, &perm),
                };
                self.emit(node, op, vec![data], vec![perm]);
            }
            Op::Gather { axis } => {
                let perm = self.perm_of(x)?;
                let idx_rank = self.old.tensors[node.inputs[1]].shape.len();
                let indices = self.get(node.inputs[1], &identity(idx_rank))?;
                if idx_rank <= 1 {
                    let data = self.get(x, &perm)?;
                    let phys_axis = inverse(&perm)[*axis];
                    let out_perm = if idx_rank == 1 {
                        perm.clone()
                    } else {
                        reduce_axes(&perm, &[*axis], false).1
                    };
                    self.emit(
                        node,
                        Op::Gather { axis: phys_axis },
                        vec![data, indices],
                        vec![out_perm],
                    );
                } else {
                    let data = self.get(x, &identity(rank))?;
                    self.emit(
                        node,
                        node.op.clone(),
                        vec![data, indices],
                        vec![identity(out_rank(0))],
                    );
                }
            }
            Op::Transpose { perm: p } => {
                // Free: the output is the same physical data under a composed perm.
                let placed = self.placed(x)?;
                if placed.col_map.is_some() {
                    self.get(x, &identity(rank))?; // reports the error
                }
                let inv = inverse(p);
                let perm: Vec<usize> = placed.perm.iter().map(|&a| inv[a]).collect();
                self.placed.insert(
                    node.outputs[0],
                    Placed {
                        id: placed.id,
                        perm,
                        col_map: None,
                    },
                );
            }
            Op::Reshape { shape } => self.rewrite_reshape(node, x, shape)?,
            Op::FullyConnected { activation } => {
                self.rewrite_fully_connected(node, x, *activation)?
            }
            Op::MatMul {
                transpose_a,
                transpose_b,
            } => {
                let (a, ta) = self.matmul_operand(node.inputs[0], *transpose_a)?;
                let (b, tb) = self.matmul_operand(node.inputs[1], *transpose_b)?;
                let op = Op::MatMul {
                    transpose_a: ta,
                    transpose_b: tb,
                };
                self.emit(node, op, vec![a, b], vec![identity(out_rank(0))]);
            }
            // Already NHWC (or layout-free ops with an NHWC tag): keep as is, identity perms.
            other => {
                let inputs = node
                    .inputs
                    .iter()
                    .map(|&i| {
                        let r = self.old.tensors[i].shape.len();
                        self.get(i, &identity(r))
                    })
                    .collect::<Result<Vec<_>>>()?;
                let perms = node
                    .outputs
                    .iter()
                    .map(|&o| identity(self.old.tensors[o].shape.len()))
                    .collect();
                self.emit(node, other.clone(), inputs, perms);
            }
        }
        Ok(())
    }

    /// A perm all inputs can share: the first runtime input's (constants are permuted to it).
    fn common_perm(&self, inputs: &[TensorId]) -> Result<Vec<usize>> {
        for &i in inputs {
            if !self.old.tensors[i].is_const() {
                return self.perm_of(i);
            }
        }
        Ok(identity(self.old.tensors[inputs[0]].shape.len()))
    }
}
/// Physical axes of a reduction over logical `axes`, and the output perm.
fn reduce_axes(perm: &[usize], axes: &[usize], keep_dims: bool) -> (Vec<usize>, Vec<usize>) {
    let inv = inverse(perm);
    let mut phys: Vec<usize> = axes.iter().map(|&a| inv[a]).collect();
    phys.sort_unstable();
    let out_perm = if keep_dims {
        perm.to_vec()
    } else {
        perm.iter()
            .filter(|a| !axes.contains(a))
            .map(|&a| a - axes.iter().filter(|&&r| r < a).count())
            .collect()
    };
    (phys, out_perm)
}
