//! If: a condition known at conversion time imports the taken branch in place; one computed at
//! run time becomes an IF node whose branches are graphs of their own.

use super::schedule::{node_reads, outer_reads, schedule};
use super::{bad, unsup, Fail, Importer, R};
use crate::import::proto::decode_tensor;
use crate::ir::{ConstData, Graph, Node, Op, TensorId};
use std::collections::HashSet;
use tract_onnx::pb::{GraphProto, NodeProto};

impl<'m> Importer<'m> {
    /// If. A condition known at conversion time (PyTorch exports `if x.dim() == ...` and shape
    /// tests this way: Silero VAD) imports the taken branch in place; one computed at run time
    /// makes an IF node (see [`Importer::if_at_run_time`]).
    pub(super) fn if_op(&mut self, n: &'m NodeProto) -> R<()> {
        let cond = self.req(n, 0, "cond")?;
        let Some(c) = self.cst(cond) else {
            return self.if_at_run_time(n, cond);
        };
        if c.len() != 1 {
            return bad(format!(
                "the condition must have one element, got shape {:?}",
                c.shape()
            ));
        }
        let take = if c.to_f32_vec()[0] != 0.0 {
            "then_branch"
        } else {
            "else_branch"
        };
        let g = branch(n, take)?;
        let real: Vec<&str> = n.output.iter().map(|o| o.as_str()).collect();
        if g.output.len() != real.len() {
            return bad(format!(
                "{take} has {} outputs, the node {}",
                g.output.len(),
                real.len()
            ));
        }
        self.import_branch_nodes(g, take)?;
        for (o, bo) in real.iter().zip(&g.output) {
            if o.is_empty() {
                continue;
            }
            if self.failed.contains(&bo.name) {
                self.failed.insert(o.to_string());
                continue;
            }
            let id = match self.values.get(&bo.name) {
                Some(&id) => id,
                None => {
                    let Some(t) = self.inits.get(bo.name.as_str()) else {
                        return bad(format!("{take} output '{}' is not produced", bo.name));
                    };
                    let data =
                        decode_tensor(t).map_err(|e| Fail::Error(format!("initializer {e}")))?;
                    let id = self.g.add_const(bo.name.clone(), data);
                    self.values.insert(bo.name.clone(), id);
                    id
                }
            };
            self.bind(o, id);
        }
        Ok(())
    }

    /// Imports the nodes of branch `take` (`then_branch` / `else_branch`) of the current If
    /// into the current graph.
    pub(super) fn import_branch_nodes(&mut self, g: &'m GraphProto, take: &str) -> R<()> {
        let order = schedule(g, true).map_err(|e| Fail::Error(format!("{take}: {e}")))?;
        for t in &g.initializer {
            self.inits.insert(t.name.as_str(), t);
        }
        for r in g.node.iter().flat_map(node_reads) {
            *self.node_uses.entry(r).or_default() += 1;
        }
        let here = self.cur.clone();
        for &i in &order {
            // Errors inside the branch name the branch's node, which is what is at fault.
            self.run_node(&g.node[i], i).map_err(|e| {
                let e = e.to_string();
                let prefix = format!("{}: ", self.file);
                Fail::Error(format!(
                    "in {take}: {}",
                    e.strip_prefix(&prefix).unwrap_or(&e)
                ))
            })?;
        }
        self.cur = here;
        Ok(())
    }

    /// If whose condition is computed at run time → TFLite IF. Each branch becomes a graph of
    /// its own; the run-time values of this graph that either branch reads become inputs of
    /// the IF (after the condition) and of both branch graphs, in the same order; constants
    /// they read are copied into the branch.
    fn if_at_run_time(&mut self, n: &'m NodeProto, cond: TensorId) -> R<()> {
        let (cs, cdt) = (self.shape(cond), self.dtype(cond));
        if cdt != crate::ir::DType::Bool || cs.iter().product::<usize>() != 1 {
            return bad(format!(
                "the condition must be one bool, is {} {cs:?}",
                cdt.name()
            ));
        }
        let branches = [branch(n, "then_branch")?, branch(n, "else_branch")?];
        for g in branches {
            if g.output.len() != n.output.len() {
                return bad(format!(
                    "a branch has {} outputs, the node {}",
                    g.output.len(),
                    n.output.len()
                ));
            }
        }
        let mut reads = Vec::new();
        for g in branches {
            outer_reads(g, &mut reads);
        }
        let (captured, constants) = self.outer_values(n, reads)?;
        let mut graphs = Vec::with_capacity(2);
        for (g, take) in branches.into_iter().zip(["then_branch", "else_branch"]) {
            let outer_graph = std::mem::take(&mut self.g);
            let outer_values = std::mem::take(&mut self.values);
            let imported = self.import_branch(g, take, &outer_graph, &captured, &constants);
            self.g = outer_graph;
            self.values = outer_values;
            match imported? {
                Some(graph) => graphs.push(graph),
                None => {
                    // A node of the branch is unsupported: it is listed already.
                    self.failed.extend(n.output.iter().cloned());
                    return Ok(());
                }
            }
        }
        let else_branch = Box::new(graphs.pop().expect("two branches"));
        let then_branch = Box::new(graphs.pop().expect("two branches"));
        let mut inputs = vec![cond];
        inputs.extend(captured.iter().map(|&(_, id)| id));
        let names: Vec<String> = n
            .output
            .iter()
            .map(|o| {
                if o.is_empty() {
                    self.tmp("unused")
                } else {
                    o.clone()
                }
            })
            .collect();
        let op = Op::If {
            then_branch,
            else_branch,
        };
        let ids = self.emit(op, &inputs, names)?;
        for (o, id) in n.output.iter().zip(ids) {
            self.bind(o, id);
        }
        Ok(())
    }

    /// What the subgraphs of `n` read from the enclosing graph (`reads`): its run-time values
    /// (captured: they become inputs) and its constants (copied into the subgraphs); this
    /// graph's initializers are left out (a subgraph reads them as constants itself).
    pub(super) fn outer_values(
        &mut self,
        n: &NodeProto,
        reads: Vec<&'m str>,
    ) -> R<OuterValues<'m>> {
        let mut captured: Vec<(&str, TensorId)> = Vec::new();
        let mut constants: Vec<(&str, ConstData)> = Vec::new();
        for name in reads {
            if self.failed.contains(name) {
                self.failed.extend(n.output.iter().cloned());
                return unsup(format!(
                    "a subgraph reads '{name}', which comes from an unsupported op"
                ));
            }
            let Some(&id) = self.values.get(name) else {
                if self.inits.contains_key(name) {
                    continue;
                }
                return bad(format!("a subgraph reads '{name}', which is not defined"));
            };
            match self.cst(id) {
                Some(d) => constants.push((name, d.clone())),
                None => captured.push((name, id)),
            }
        }
        Ok((captured, constants))
    }

    /// Imports branch graph `g` into the (empty) current graph: its inputs are the `captured`
    /// values of `outer` (in order), the `constants` are copied in. `None` when one of its
    /// nodes is unsupported.
    fn import_branch(
        &mut self,
        g: &'m GraphProto,
        take: &str,
        outer: &Graph,
        captured: &[(&str, TensorId)],
        constants: &[(&str, ConstData)],
    ) -> R<Option<Graph>> {
        if !g.input.is_empty() {
            return bad(format!("{take} declares inputs; an If branch has none"));
        }
        for &(name, id) in captured {
            let t = &outer.tensors[id];
            let input = self.g.add_tensor(name, t.shape.clone(), t.dtype);
            self.g.tensors[input].quant = t.quant.clone();
            self.g.inputs.push(input);
            self.bind(name, input);
        }
        for (name, data) in constants {
            let id = self.g.add_const(*name, data.clone());
            self.bind(name, id);
        }
        let failed_before = self.unsupported.len();
        self.import_branch_nodes(g, take)?;
        if self.unsupported.len() > failed_before
            || g.output.iter().any(|o| self.failed.contains(&o.name))
        {
            return Ok(None);
        }
        let mut seen = HashSet::new();
        for o in &g.output {
            let id = self.subgraph_value(&o.name, take)?;
            let out = self.own_output(id, &o.name, &mut seen);
            self.g.outputs.push(out);
        }
        Ok(Some(std::mem::take(&mut self.g)))
    }
}

impl<'m> Importer<'m> {
    /// The value `name` of the subgraph being imported (an initializer of it becomes a
    /// constant).
    pub(super) fn subgraph_value(&mut self, name: &str, take: &str) -> R<TensorId> {
        if let Some(&id) = self.values.get(name) {
            return Ok(id);
        }
        match self.inits.get(name) {
            Some(t) => {
                let data = decode_tensor(t).map_err(|e| Fail::Error(format!("initializer {e}")))?;
                Ok(self.g.add_const(name.to_string(), data))
            }
            None => bad(format!("{take} output '{name}' is not produced")),
        }
    }

    /// `id` as an output of the subgraph being imported: a graph input, a constant or a value
    /// already output gets its own tensor (through an identity RESHAPE), since an output of a
    /// subgraph is a tensor some operator of it writes.
    pub(super) fn own_output(
        &mut self,
        id: TensorId,
        name: &str,
        seen: &mut HashSet<TensorId>,
    ) -> TensorId {
        let t = &self.g.tensors[id];
        let is_own = !t.is_const() && !self.g.inputs.contains(&id) && !seen.contains(&id);
        seen.insert(id);
        if is_own {
            return id;
        }
        let (shape, dtype) = (t.shape.clone(), t.dtype);
        let out_name = self.fresh(&format!("{name}_out"));
        let out = self.g.add_tensor(out_name.clone(), shape.clone(), dtype);
        self.g.nodes.push(Node {
            name: out_name,
            op: Op::Reshape { shape },
            inputs: vec![id],
            outputs: vec![out],
        });
        out
    }
}

/// The run-time values (name, tensor) and the constants (name, value) that subgraphs read from
/// the enclosing graph.
pub(super) type OuterValues<'m> = (Vec<(&'m str, TensorId)>, Vec<(&'m str, ConstData)>);

/// Branch `name` (a graph attribute) of If node `n`.
pub(super) fn branch<'m>(n: &'m NodeProto, name: &str) -> R<&'m GraphProto> {
    match n
        .attribute
        .iter()
        .find(|a| a.name == name)
        .and_then(|a| a.g.as_ref())
    {
        Some(g) => Ok(g),
        None => bad(format!("attribute {name} (a graph) is missing")),
    }
}
