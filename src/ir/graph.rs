//! The graph: tensors, nodes in execution order, inputs and outputs, and rewiring helpers.

use super::{ConstData, DType, Op};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub type TensorId = usize;
pub type NodeId = usize;

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Present for constants (weights, folded values). Shared between clones of a graph (the
    /// quantizer's attempts each clone the float graph: ResNet18's weights are 45 MB) and
    /// copied on write (`Arc::make_mut`) where a pass changes a clone's values.
    pub data: Option<Arc<ConstData>>,
    /// Affine quantization of an integer tensor (`real = scale * (q - zero_point)`).
    pub quant: Option<QuantParams>,
}

/// Quantization parameters: one scale and zero point per tensor, or one per index of `axis`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantParams {
    pub scale: Vec<f32>,
    pub zero_point: Vec<i64>,
    /// The channel axis of per-channel parameters (0 for per-tensor).
    pub axis: usize,
}

impl QuantParams {
    pub fn per_tensor(scale: f32, zero_point: i64) -> QuantParams {
        QuantParams {
            scale: vec![scale],
            zero_point: vec![zero_point],
            axis: 0,
        }
    }

    pub fn is_per_channel(&self) -> bool {
        self.scale.len() > 1
    }

    /// The same parameters for the tensor permuted by `perm` (output axis i is input axis
    /// `perm[i]`): the per-channel axis moves with its data.
    pub fn permuted(&self, perm: &[usize]) -> QuantParams {
        let mut q = self.clone();
        if let Some(i) = perm.iter().position(|&p| p == self.axis) {
            if self.is_per_channel() {
                q.axis = i;
            }
        }
        q
    }
}

impl Tensor {
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_const(&self) -> bool {
        self.data.is_some()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The ONNX node name (or a derived one for nodes a pass creates), for reports and errors.
    pub name: String,
    pub op: Op,
    pub inputs: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    pub tensors: Vec<Tensor>,
    /// In a valid execution (topological) order.
    pub nodes: Vec<Node>,
    pub inputs: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
    /// Names (each once) of the nodes an LSTM or GRU was unrolled into: full int8 runs them with int16
    /// activations, as TFLite's integer LSTM kernel keeps its gates and cell state in int16.
    pub recurrent_nodes: Vec<String>,
    /// Names of the nodes LayerNorms were lowered into (mean, variance, reciprocal square root,
    /// normalization, affine): full int8 may run them with int16 activations.
    pub layernorm_nodes: Vec<String>,
}

impl Graph {
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        shape: Vec<usize>,
        dtype: DType,
    ) -> TensorId {
        self.tensors.push(Tensor {
            name: name.into(),
            shape,
            dtype,
            data: None,
            quant: None,
        });
        self.tensors.len() - 1
    }

    pub fn add_const(
        &mut self,
        name: impl Into<String>,
        data: impl Into<Arc<ConstData>>,
    ) -> TensorId {
        let data = data.into();
        self.tensors.push(Tensor {
            name: name.into(),
            shape: data.shape(),
            dtype: data.dtype(),
            data: Some(data),
            quant: None,
        });
        self.tensors.len() - 1
    }

    pub fn tensor(&self, id: TensorId) -> &Tensor {
        &self.tensors[id]
    }

    pub fn shape(&self, id: TensorId) -> &[usize] {
        &self.tensors[id].shape
    }

    pub fn const_data(&self, id: TensorId) -> Option<&ConstData> {
        self.tensors[id].data.as_deref()
    }

    /// Which node produces each tensor.
    pub fn producers(&self) -> HashMap<TensorId, NodeId> {
        let mut map = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for &o in &n.outputs {
                map.insert(o, i);
            }
        }
        map
    }

    /// How many times each tensor is read (by nodes and as a graph output).
    pub fn use_counts(&self) -> HashMap<TensorId, usize> {
        let mut map = HashMap::new();
        for n in &self.nodes {
            for &i in &n.inputs {
                *map.entry(i).or_insert(0) += 1;
            }
        }
        for &o in &self.outputs {
            *map.entry(o).or_insert(0) += 1;
        }
        map
    }

    /// Every read of `old` (node inputs and graph outputs) now reads `new`.
    pub fn replace_uses(&mut self, old: TensorId, new: TensorId) {
        for n in &mut self.nodes {
            for i in &mut n.inputs {
                if *i == old {
                    *i = new;
                }
            }
        }
        for o in &mut self.outputs {
            if *o == old {
                *o = new;
            }
        }
    }

    /// Removes nodes no graph output depends on, then tensors nothing refers to
    /// (renumbering tensor ids). Returns (nodes removed, tensors removed).
    pub fn remove_dead(&mut self) -> (usize, usize) {
        let producers = self.producers();
        let mut live_nodes = HashSet::new();
        let mut stack: Vec<TensorId> = self.outputs.clone();
        let mut seen = HashSet::new();
        while let Some(t) = stack.pop() {
            if !seen.insert(t) {
                continue;
            }
            if let Some(&n) = producers.get(&t) {
                if live_nodes.insert(n) {
                    stack.extend(self.nodes[n].inputs.iter().copied());
                }
            }
        }
        let before_nodes = self.nodes.len();
        let mut idx = 0;
        self.nodes.retain(|_| {
            let keep = live_nodes.contains(&idx);
            idx += 1;
            keep
        });
        let nodes_removed = before_nodes - self.nodes.len();

        let mut used = vec![false; self.tensors.len()];
        for n in &self.nodes {
            for &t in n.inputs.iter().chain(&n.outputs) {
                used[t] = true;
            }
        }
        for &t in self.inputs.iter().chain(&self.outputs) {
            used[t] = true;
        }
        let mut remap = vec![usize::MAX; self.tensors.len()];
        let mut kept = Vec::with_capacity(self.tensors.len());
        for (i, t) in std::mem::take(&mut self.tensors).into_iter().enumerate() {
            if used[i] {
                remap[i] = kept.len();
                kept.push(t);
            }
        }
        let tensors_removed = used.len() - kept.len();
        self.tensors = kept;
        for n in &mut self.nodes {
            for t in n.inputs.iter_mut().chain(n.outputs.iter_mut()) {
                *t = remap[*t];
            }
        }
        for t in self.inputs.iter_mut().chain(self.outputs.iter_mut()) {
            *t = remap[*t];
        }
        (nodes_removed, tensors_removed)
    }

    /// A histogram of op names, for reports.
    pub fn op_histogram(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut h = std::collections::BTreeMap::new();
        for n in &self.nodes {
            *h.entry(n.op.name()).or_insert(0) += 1;
        }
        h
    }

    /// Total bytes of constant data.
    pub fn const_bytes(&self) -> usize {
        self.tensors
            .iter()
            .filter_map(|t| t.data.as_ref().map(|d| d.len() * d.dtype().size()))
            .sum()
    }

    /// A tensor name not used yet, derived from `base`.
    pub fn fresh_name(&self, base: &str) -> String {
        let names: HashSet<&str> = self.tensors.iter().map(|t| t.name.as_str()).collect();
        if !names.contains(base) {
            return base.to_string();
        }
        (1..)
            .map(|i| format!("{base}_{i}"))
            .find(|n| !names.contains(n.as_str()))
            .expect("some name is free")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clone shares its constants with the graph it came from; changing a clone's constant
    /// copies it and leaves the original's values alone.
    #[test]
    fn clones_share_constants_and_copy_them_on_write() {
        let mut g = Graph::default();
        let t = g.add_const("w", ConstData::from_f32(&[2], vec![1.0, 2.0]));
        let mut c = g.clone();
        let (a, b) = (g.tensors[t].data.as_ref(), c.tensors[t].data.as_ref());
        assert!(Arc::ptr_eq(a.unwrap(), b.unwrap()));
        let d = Arc::make_mut(c.tensors[t].data.as_mut().unwrap());
        *d = ConstData::from_f32(&[2], vec![3.0, 4.0]);
        let before = g.tensors[t].data.as_ref().unwrap().as_f32().unwrap();
        assert_eq!(before.as_slice().unwrap(), &[1.0, 2.0]);
        let after = c.tensors[t].data.as_ref().unwrap().as_f32().unwrap();
        assert_eq!(after.as_slice().unwrap(), &[3.0, 4.0]);
    }
}
