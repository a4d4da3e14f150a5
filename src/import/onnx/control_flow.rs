//! If (with a condition known at conversion time).

use super::schedule::{node_reads, schedule};
use super::{bad, unsup, Fail, Importer, R};
use crate::import::proto::decode_tensor;
use tract_onnx::pb::NodeProto;

impl<'m> Importer<'m> {
    /// If whose condition is known at conversion time (PyTorch exports `if x.dim() == ...` and
    /// shape tests this way: Silero VAD): the taken branch is imported in place. A condition
    /// computed at run time is unsupported (TFLite's IF would need subgraphs).
    pub(super) fn if_op(&mut self, n: &'m NodeProto) -> R<()> {
        let cond = self.req(n, 0, "cond")?;
        let Some(c) = self.cst(cond) else {
            return unsup(
                "the condition is computed at run time; only an If whose condition is known at \
                 conversion time (a shape test, a constant) converts",
            );
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
        let Some(g) = n
            .attribute
            .iter()
            .find(|a| a.name == take)
            .and_then(|a| a.g.as_ref())
        else {
            return bad(format!("attribute {take} (a graph) is missing"));
        };
        let real: Vec<&str> = n.output.iter().map(|o| o.as_str()).collect();
        if g.output.len() != real.len() {
            return bad(format!(
                "{take} has {} outputs, the node {}",
                g.output.len(),
                real.len()
            ));
        }
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
}
