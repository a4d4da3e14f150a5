//! Loop → TFLite WHILE. A scan output (a value stacked per iteration) needs the number of
//! iterations at conversion: the WHILE then carries a `[M, ...]` buffer per scan output and
//! writes each iteration's value at row `i` (DYNAMIC_UPDATE_SLICE).

use super::control_flow::branch;
use super::schedule::outer_reads;
use super::{bad, unsup, Fail, Importer, R};
use crate::ir::eval::EVAL_MAX_ELEMENTS;
use crate::ir::TensorId;
use crate::ir::{shape, Activation, BinaryOp, CompareOp, ConstData, DType, Graph, Node, Op};
use ndarray::{ArrayD, IxDyn};
use std::collections::HashSet;
use tract_onnx::pb::{GraphProto, NodeProto};

/// Where each kind of value sits in a WHILE's loop values
/// `[v..., i, c, M?, captured..., scan buffers...]`.
struct LoopLayout {
    /// Loop-carried values (ONNX's `v_initial`), first: the node's outputs are theirs.
    carried: usize,
    /// Whether the trip count `M` is a loop value (after the iteration and the condition).
    trip: bool,
    /// Whether the Loop has a condition input (without one, the body's condition is ignored).
    cond: bool,
    /// The scan outputs' number of rows (the trip count, known at conversion), when the Loop
    /// has scan outputs.
    scan_rows: Option<usize>,
}

impl LoopLayout {
    fn iteration(&self) -> usize {
        self.carried
    }
    fn condition(&self) -> usize {
        self.carried + 1
    }
    fn trip_count(&self) -> Option<usize> {
        self.trip.then_some(self.carried + 2)
    }
    fn captured(&self) -> usize {
        self.carried + 2 + usize::from(self.trip)
    }
}

impl<'m> Importer<'m> {
    /// Loop → WHILE. The loop values are the loop-carried values, the iteration count (from 0),
    /// the condition, the trip count `M` (when given) and the run-time values of this graph the
    /// body reads; WHILE's condition subgraph computes `i < M and c`, its body is ONNX's body
    /// plus `i + 1` and the values that pass through unchanged.
    pub(super) fn loop_op(&mut self, n: &'m NodeProto) -> R<()> {
        let body = branch(n, "body")?;
        let trip = self.inp(n, 0)?;
        let cond = self.inp(n, 1)?;
        let carried = (2..n.input.len())
            .map(|i| self.req(n, i, "v_initial"))
            .collect::<R<Vec<TensorId>>>()?;
        let count = carried.len();
        if body.input.len() != count + 2 {
            return bad(format!(
                "the body has {} inputs; {count} loop-carried values need {}",
                body.input.len(),
                count + 2
            ));
        }
        if body.output.len() < count + 1 {
            return bad(format!(
                "the body has {} outputs; {count} loop-carried values need at least {}",
                body.output.len(),
                count + 1
            ));
        }
        let scans = body.output.len() - count - 1;
        if n.output.len() > count + scans {
            return bad(format!(
                "the node has {} outputs; the body gives {count} loop-carried values and {scans} \
                 scan outputs",
                n.output.len()
            ));
        }
        let one_element = |s: &[usize]| s.iter().product::<usize>() == 1;
        if let Some(m) = trip {
            if !matches!(self.dtype(m), DType::I64 | DType::I32) || !one_element(&self.shape(m)) {
                return bad("the trip count M must be one integer");
            }
        }
        if let Some(c) = cond {
            if self.dtype(c) != DType::Bool || !one_element(&self.shape(c)) {
                return bad("the condition must be one bool");
            }
        }
        if trip.is_none() && cond.is_none() {
            return unsup("neither a trip count nor a condition: the loop never ends");
        }
        let scan_rows = match scans {
            0 => None,
            _ => Some(self.scan_rows(scans, trip, cond)?),
        };
        let mut reads = Vec::new();
        outer_reads(body, &mut reads);
        let (captured, constants) = self.outer_values(n, reads)?;
        let layout = LoopLayout {
            carried: count,
            trip: trip.is_some(),
            cond: cond.is_some(),
            scan_rows,
        };
        let iteration = self.add_const(
            &format!("{}/iteration", self.cur),
            ConstData::from_i64(&[], vec![0]),
        );
        let cond0 = match cond {
            Some(c) => c,
            None => self.add_const(
                &format!("{}/always", self.cur),
                ConstData::Bool(ArrayD::from_elem(IxDyn(&[]), true)),
            ),
        };
        let mut values = carried;
        values.extend([iteration, cond0]);
        values.extend(trip);
        values.extend(captured.iter().map(|&(_, id)| id));

        let outer_graph = std::mem::take(&mut self.g);
        let outer_values = std::mem::take(&mut self.values);
        let imported =
            self.import_loop_body(body, &outer_graph, &values, &layout, &captured, &constants);
        self.g = outer_graph;
        self.values = outer_values;
        let Some((body_graph, buffers)) = imported? else {
            // A node of the body is unsupported: it is listed already.
            self.failed.extend(n.output.iter().cloned());
            return Ok(());
        };
        // Every row of a buffer is written before the loop ends: zeros are as good as any start.
        let first_buffer = values.len();
        for (shape, dtype) in buffers {
            let zeros = ConstData::from_f32(&shape, vec![0.0; shape.iter().product()]);
            let name = format!("{}/scan_buffer", self.cur);
            values.push(self.add_const(&name, zeros.cast(dtype)));
        }
        let cond_graph = self.loop_condition(&values, &layout)?;
        let names: Vec<String> = (0..values.len())
            .map(|k| {
                let output = match k {
                    _ if k < count => Some(k),
                    _ if k >= first_buffer => Some(count + k - first_buffer),
                    _ => None,
                };
                match output
                    .and_then(|o| n.output.get(o))
                    .filter(|o| !o.is_empty())
                {
                    Some(o) => o.clone(),
                    None => self.tmp("loop_value"),
                }
            })
            .collect();
        let op = Op::While {
            cond: Box::new(cond_graph),
            body: Box::new(body_graph),
        };
        let ids = self.emit(op, &values, names)?;
        for (o, id) in n
            .output
            .iter()
            .zip(ids[..count].iter().chain(&ids[first_buffer..]))
        {
            if !o.is_empty() {
                self.bind(o, *id);
            }
        }
        Ok(())
    }

    /// The number of iterations of a Loop with `scans` scan outputs, which their shape needs
    /// at conversion: a constant trip count, and a condition input (if any) that is constant
    /// true (the body's condition is checked when the body is imported).
    fn scan_rows(&self, scans: usize, trip: Option<TensorId>, cond: Option<TensorId>) -> R<usize> {
        let what = format!(
            "{scans} scan output(s) (values stacked per iteration) need the number of \
             iterations at conversion"
        );
        let Some(m) = trip.and_then(|m| self.cst(m)) else {
            return unsup(format!("{what}: the trip count M is not a constant"));
        };
        let m = m.to_i64_vec()[0];
        if m < 1 {
            return unsup(format!(
                "{what}: with trip count {m} they would be empty, which is not supported"
            ));
        }
        if let Some(c) = cond {
            if !self.cst(c).is_some_and(|c| c.to_f32_vec()[0] != 0.0) {
                return unsup(format!(
                    "{what}: the condition input is not the constant true, so the loop may end \
                     before M iterations"
                ));
            }
        }
        usize::try_from(m)
            .ok()
            .filter(|&m| i32::try_from(m).is_ok())
            .ok_or_else(|| Fail::Unsupported(format!("{what}: trip count {m} is too large")))
    }

    /// WHILE's condition subgraph: `i < M and c` (or the one of them the Loop has).
    fn loop_condition(&mut self, values: &[TensorId], layout: &LoopLayout) -> R<Graph> {
        let mut g = Graph::default();
        for &v in values {
            let t = &self.g.tensors[v];
            let name = g.fresh_name(&format!("{}/{}", self.cur, t.name));
            let id = g.add_tensor(name, t.shape.clone(), t.dtype);
            g.inputs.push(id);
        }
        let (i, c) = (g.inputs[layout.iteration()], g.inputs[layout.condition()]);
        let name = format!("{}/condition", self.cur);
        let out = match (layout.trip_count(), layout.cond) {
            (Some(m), with_cond) => {
                let m = g.inputs[m];
                let less = push(
                    &mut g,
                    Op::Compare {
                        op: CompareOp::Less,
                    },
                    &[i, m],
                    &name,
                )?;
                if with_cond {
                    push(&mut g, Op::Logical { and: true }, &[less, c], &name)?
                } else {
                    less
                }
            }
            (None, _) => {
                let shape = g.tensors[c].shape.clone();
                push(&mut g, Op::Reshape { shape }, &[c], &name)?
            }
        };
        g.outputs.push(out);
        Ok(g)
    }

    /// Imports the Loop's body into the (empty) current graph as WHILE's body: inputs are the
    /// loop values, outputs their next values, and after them one buffer per scan output
    /// (their shapes and types are returned with the graph). `None` when one of its nodes is
    /// unsupported.
    fn import_loop_body(
        &mut self,
        body: &'m GraphProto,
        outer: &Graph,
        values: &[TensorId],
        layout: &LoopLayout,
        captured: &[(&str, TensorId)],
        constants: &[(&str, ConstData)],
    ) -> R<Option<(Graph, Vec<ScanBuffer>)>> {
        for (k, &v) in values.iter().enumerate() {
            let name = if k < layout.carried {
                body.input[k + 2].name.clone()
            } else if k == layout.iteration() {
                body.input[0].name.clone()
            } else if k == layout.condition() {
                body.input[1].name.clone()
            } else if Some(k) == layout.trip_count() {
                self.tmp("trip_count")
            } else {
                captured[k - layout.captured()].0.to_string()
            };
            let t = &outer.tensors[v];
            let id = self.g.add_tensor(name.clone(), t.shape.clone(), t.dtype);
            self.g.tensors[id].quant = t.quant.clone();
            self.g.inputs.push(id);
            self.bind(&name, id);
        }
        for (name, data) in constants {
            let id = self.g.add_const(*name, data.clone());
            self.bind(name, id);
        }
        let failed_before = self.unsupported.len();
        self.import_branch_nodes(body, "body")?;
        if self.unsupported.len() > failed_before
            || body.output.iter().any(|o| self.failed.contains(&o.name))
        {
            return Ok(None);
        }
        let inputs = self.g.inputs.clone();
        let mut seen = HashSet::new();
        let mut outputs = Vec::with_capacity(values.len());
        for (k, &input) in inputs[..layout.carried].iter().enumerate() {
            let o = &body.output[k + 1].name;
            let id = self.subgraph_value(o, "body")?;
            let (want, got) = (&self.g.tensors[input], &self.g.tensors[id]);
            if (&want.shape, want.dtype) != (&got.shape, got.dtype) {
                return unsup(format!(
                    "loop-carried value {k} changes from {} {:?} to {} {:?} in an iteration; \
                     WHILE needs it to keep its shape and type",
                    want.dtype.name(),
                    want.shape,
                    got.dtype.name(),
                    got.shape
                ));
            }
            outputs.push(self.own_output(id, o, &mut seen));
        }
        let one = self.add_const(
            &format!("{}/one", self.cur),
            ConstData::from_i64(&[], vec![1]),
        );
        let add = Op::Binary {
            op: BinaryOp::Add,
            activation: Activation::None,
        };
        let next = self.emit_tmp(add, &[inputs[layout.iteration()], one], "next_iteration")?;
        outputs.push(next);
        let cond_name = &body.output[0].name;
        let mut cond_out = self.subgraph_value(cond_name, "body")?;
        let keeps_going = cond_out == inputs[layout.condition()]
            || self.cst(cond_out).is_some_and(|c| c.to_f32_vec()[0] != 0.0);
        if layout.scan_rows.is_some() && layout.cond && !keeps_going {
            return unsup(
                "scan outputs (values stacked per iteration) need the number of iterations at \
                 conversion: the body computes its condition, so the loop may end before M \
                 iterations",
            );
        }
        let cond_in = &self.g.tensors[inputs[layout.condition()]];
        let (cond_shape, cond_out_t) = (cond_in.shape.clone(), &self.g.tensors[cond_out]);
        if cond_out_t.dtype != DType::Bool || cond_out_t.elements() != 1 {
            return bad(format!(
                "the body's condition output '{cond_name}' must be one bool, is {} {:?}",
                cond_out_t.dtype.name(),
                cond_out_t.shape
            ));
        }
        if cond_out_t.shape != cond_shape {
            let shape = cond_shape;
            cond_out = self.emit_tmp(Op::Reshape { shape }, &[cond_out], "condition")?;
        }
        outputs.push(self.own_output(cond_out, cond_name, &mut seen));
        for &input in &inputs[layout.condition() + 1..] {
            let name = self.g.tensors[input].name.clone();
            outputs.push(self.own_output(input, &name, &mut seen));
        }
        let mut buffers = Vec::new();
        if let Some(rows) = layout.scan_rows {
            let scanned = &body.output[layout.carried + 1..];
            for o in scanned {
                let (buffer, next) = self.scan_buffer(&o.name, rows, inputs[layout.iteration()])?;
                buffers.push(buffer);
                outputs.push(next);
            }
        }
        self.g.outputs = outputs;
        Ok(Some((std::mem::take(&mut self.g), buffers)))
    }

    /// Adds the buffer of scan output `name` (`rows` rows of its value) to the body being
    /// imported as a new input, and writes this iteration's value at row `iteration` of it.
    /// Returns the buffer's shape and type and the updated buffer (the body's output for it).
    fn scan_buffer(
        &mut self,
        name: &str,
        rows: usize,
        iteration: TensorId,
    ) -> R<(ScanBuffer, TensorId)> {
        let value = self.subgraph_value(name, "body")?;
        let (shape, dtype) = (
            self.g.tensors[value].shape.clone(),
            self.g.tensors[value].dtype,
        );
        let buffer_shape: Vec<usize> = std::iter::once(rows).chain(shape.clone()).collect();
        let elements = buffer_shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d));
        if elements.is_none_or(|e| e > EVAL_MAX_ELEMENTS) {
            return unsup(format!(
                "scan output '{name}' would stack {rows} values of shape {shape:?}: too large"
            ));
        }
        let buffer_name = self.tmp(&format!("{name}_buffer"));
        let buffer = self
            .g
            .add_tensor(buffer_name.clone(), buffer_shape.clone(), dtype);
        self.g.inputs.push(buffer);
        let mut row_shape = vec![1];
        row_shape.extend(&shape);
        let row = Op::Reshape { shape: row_shape };
        let row = self.emit_tmp(row, &[value], &format!("{name}_row"))?;
        let at = Op::Reshape { shape: vec![1] };
        let mut start = self.emit_tmp(at, &[iteration], &format!("{name}_start"))?;
        if !shape.is_empty() {
            let zeros = ConstData::from_i64(&[shape.len()], vec![0; shape.len()]);
            let zeros = self.add_const(&format!("{}/zeros", self.cur), zeros);
            let concat = Op::Concat { axis: 0 };
            start = self.emit_tmp(concat, &[start, zeros], &format!("{name}_start"))?;
        }
        let update = Op::DynamicUpdateSlice;
        let next_name = self.fresh(&format!("{buffer_name}_next"));
        let next = self.emit(update, &[buffer, row, start], vec![next_name])?[0];
        Ok(((buffer_shape, dtype), next))
    }
}

/// The shape and type of a scan output's buffer: `[M, ...]`, M rows of the per-iteration value.
type ScanBuffer = (Vec<usize>, DType);

/// Adds `op(inputs)` to `g` with an output named after `name`; returns the output.
fn push(g: &mut Graph, op: Op, inputs: &[TensorId], name: &str) -> R<TensorId> {
    let ins: Vec<&crate::ir::Tensor> = inputs.iter().map(|&i| &g.tensors[i]).collect();
    let (s, dt) = shape::infer(&op, &ins)?.remove(0);
    let out_name = g.fresh_name(name);
    let out = g.add_tensor(out_name.clone(), s, dt);
    g.nodes.push(Node {
        name: out_name,
        op,
        inputs: inputs.to_vec(),
        outputs: vec![out],
    });
    Ok(out)
}
